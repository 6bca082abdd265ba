"""The built-in log middleware."""

from __future__ import annotations

import logging

import pytest

from orchestrator import Manager

pytestmark = pytest.mark.anyio


async def test_log_records_start_end_and_errors(write, tools, caplog):
    write("tools/ok.md", "---\nmetadata: {log: true}\n---\nfine\n")
    write(
        "tools/bad.py",
        "frontmatter = {'metadata': {'log': {'level': 'debug'}}}\ndef main(ctx):\n    raise ValueError('nope')\n",
    )
    manager = Manager([tools])
    with caplog.at_level(logging.DEBUG, logger="orchestrator.log"):
        assert await manager.invoke("ok") == "fine"
        with pytest.raises(ValueError):
            await manager.invoke("bad")
    messages = [r.getMessage() for r in caplog.records if r.name == "orchestrator.log"]
    assert messages[0] == "start ok depth=0"
    assert messages[1].startswith("end ok in ") and messages[1].endswith(" ms")
    assert messages[2] == "start bad depth=0"
    assert messages[3].startswith("error bad after ") and "ValueError: nope" in messages[3]


async def test_log_wraps_the_whole_chain(write, tools):
    write("tools/ok.md", "---\nmetadata: {log: true}\n---\nfine\n")
    assert [e.name for e in Manager([tools]).explain("ok").chain][0] == "log"
