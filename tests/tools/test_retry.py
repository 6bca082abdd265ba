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


REFUSED = """
from orchestrator import ModelError
frontmatter = {"metadata": {"retry": {"attempts": 3, "backoff": 0, "on": ["ModelError", "ValueError"]}}}
def main(ctx):
    count = ctx.nonlocals["count"] = ctx.nonlocals.get("count", 0) + 1
    error = ModelError(f"HTTP 401 (try {count})")
    error.retryable = False
    raise error
"""


async def test_retry_never_retries_an_error_that_says_it_cannot_succeed(write, tools):
    write("tools/refused.py", REFUSED)
    box: dict = {}
    with pytest.raises(ModelError, match="try 1"):
        await Manager([tools]).invoke("refused", context={"nonlocals": box})
    assert box["count"] == 1 and "retries" not in box


WAITED = """
from orchestrator import ModelError
frontmatter = {"metadata": {"retry": {"attempts": 4, "backoff": 0.001, "factor": 2, "max-delay": 0.05}}}
def main(ctx):
    count = ctx.nonlocals["count"] = ctx.nonlocals.get("count", 0) + 1
    if count == 4:
        return "done"
    error = ModelError("rate limited")
    error.retry_after = {1: 0.02, 2: None, 3: 60}[count]
    raise error
"""


async def test_retry_waits_at_least_retry_after_and_at_most_max_delay(write, tools):
    write("tools/waited.py", WAITED)
    box: dict = {}
    assert await Manager([tools]).invoke("waited", context={"nonlocals": box}) == "done"
    # The server's 0.02 beats the backoff 0.001; then the backoff (0.002); then 60 capped at 0.05.
    assert box["retry-waits"] == [0.02, 0.002, 0.05]


async def test_retry_on_other_error_types_still_works(write, tools):
    write(
        "tools/shaky.py",
        "frontmatter = {'metadata': {'retry': {'backoff': 0, 'on': ['ConnectionError']}}}\n"
        "def main(ctx):\n"
        "    count = ctx.nonlocals['count'] = ctx.nonlocals.get('count', 0) + 1\n"
        "    if count < 3:\n"
        "        raise ConnectionResetError('reset')\n"
        "    return 'up'\n",
    )
    box: dict = {}
    assert await Manager([tools]).invoke("shaky", context={"nonlocals": box}) == "up"
    assert box["retries"] == ["ConnectionResetError: reset"] * 2
