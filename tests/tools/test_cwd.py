"""The built-in cwd middleware."""

from __future__ import annotations

import pytest

from orchestrator import ConfigurationError, Manager

pytestmark = pytest.mark.anyio


async def test_cwd_is_relative_to_the_tools_folder(write, tools):
    (tools / "data").mkdir()
    write("tools/t.py", "frontmatter = {'metadata': {'cwd': 'data'}}\ndef main(ctx):\n    return str(ctx.cwd)\n")
    write("tools/missing.py", "frontmatter = {'metadata': {'cwd': 'nowhere'}}\ndef main(ctx):\n    return 1\n")
    manager = Manager([tools])
    assert await manager.invoke("t") == str((tools / "data").resolve())
    with pytest.raises(ConfigurationError, match="is not a folder"):
        await manager.invoke("missing")
