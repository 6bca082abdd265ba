"""The built-in retry middleware: it runs the rest of the chain again."""

from __future__ import annotations

import pytest

from orchestrator import InvocationTimeout, Manager, ModelError

pytestmark = pytest.mark.anyio

FLAKY = """
from orchestrator import ModelError
frontmatter = {"metadata": {"retry": {"attempts": 3, "backoff": 0}}}
def main(ctx):
    count = ctx.nonlocals["count"] = ctx.nonlocals.get("count", 0) + 1
    if count < 3:
        raise ModelError(f"try {count}")
    return f"ok after {count}"
"""


async def test_retry_reruns_the_body_until_it_succeeds(write, tools):
    write("tools/flaky.py", FLAKY)
    box: dict = {}
    assert await Manager([tools]).invoke("flaky", context={"nonlocals": box}) == "ok after 3"
    assert box["retries"] == ["ModelError: try 1", "ModelError: try 2"]


async def test_retry_gives_up_and_ignores_other_errors(write, tools):
    write("tools/flaky.py", FLAKY.replace("'attempts': 3", "'attempts': 2").replace('"attempts": 3', '"attempts": 2'))
    with pytest.raises(ModelError, match="try 2"):
        await Manager([tools]).invoke("flaky")
    write(
        "tools/broken.py",
        "frontmatter = {'metadata': {'retry': {'backoff': 0}}}\ndef main(ctx):\n    raise KeyError('x')\n",
    )
    box: dict = {}
    with pytest.raises(KeyError):
        await Manager([tools]).invoke("broken", context={"nonlocals": box})
    assert "retries" not in box


async def test_retry_on_named_errors(write, tools):
    write(
        "tools/slow.py",
        "frontmatter = {'metadata': {'retry': {'backoff': 0, 'on': ['InvocationTimeout']}}}\n"
        "from orchestrator import InvocationTimeout\n"
        "def main(ctx):\n    raise InvocationTimeout('slow', tool='slow')\n",
    )
    box: dict = {}
    with pytest.raises(InvocationTimeout):
        await Manager([tools]).invoke("slow", context={"nonlocals": box})
    assert len(box["retries"]) == 2
