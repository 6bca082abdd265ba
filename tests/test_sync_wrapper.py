"""``Manager.invoke_sync`` and ``resume_sync``: the sync wrappers, on a plain asyncio loop unless another backend is asked."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator import Interrupted, InvocationError, InvocationTimeout, Manager
from orchestrator.sessions import MemoryStore


def test_a_first_async_invoke_loads_no_anyio_backend(tmp_path: Path) -> None:
    """anyio's asyncio backend (sockets, TLS, ~15 ms of imports) is left for what asks anyio for it."""
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "plain.py").write_text("async def main(ctx):\n    return ctx.args['n'] + 1\n")
    program = (
        "import sys\n"
        "from orchestrator import Manager\n"
        "assert Manager(['tools']).invoke_sync('plain', {'n': 1}) == 2\n"
        "print('anyio._backends._asyncio' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sync_bodies_timeouts_and_nested_invokes_work_on_either_backend(write, tools, backend) -> None:
    write("tools/slow.py", "import time\n\ndef main(ctx):\n    time.sleep(ctx.args['s'])\n    return 'slept'\n")
    write("tools/outer.py", "async def main(ctx):\n    return await ctx.manager.invoke('slow', {'s': 0})\n")
    manager = Manager([tools])
    assert manager.invoke_sync("slow", {"s": 0}, backend=backend) == "slept"
    assert manager.invoke_sync("outer", backend=backend) == "slept"
    with pytest.raises(InvocationTimeout):
        manager.invoke_sync("slow", {"s": 0.5, "$timeout": 0.1}, backend=backend)
    time.sleep(0.6)  # the abandoned worker thread ends here, not in a later test


@pytest.mark.anyio
async def test_invoke_sync_inside_a_loop_says_to_await(write, tools, anyio_backend) -> None:
    write("tools/plain.py", "async def main(ctx):\n    return 1\n")
    with pytest.raises(Exception, match="await manager.invoke"):
        Manager([tools]).invoke_sync("plain")


HELD = "---\nmetadata:\n  approval: true\n---\nsent to {{ args.to }}\n"  # no approver: every call suspends


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_resume_sync_continues_a_run_invoke_sync_suspended(write, tools, backend) -> None:
    """issue 26: ``resume_sync`` sits beside ``invoke_sync``; the held call runs once, the token works once."""
    write("tools/send.md", HELD)
    manager = Manager([tools], sessions=MemoryStore())
    with pytest.raises(Interrupted) as held:
        manager.invoke_sync("send", {"to": "bob"}, backend=backend)
    assert held.value.request["tool"] == "send"
    assert manager.resume_sync(held.value.token, "approve", backend=backend) == "sent to bob"
    with pytest.raises(InvocationError, match="resumed already"):
        manager.resume_sync(held.value.token, backend=backend)


def test_resume_sync_checks_the_ref_and_keeps_the_token_of_another_tool(write, tools) -> None:
    write("tools/send.md", HELD)
    manager = Manager([tools], sessions=MemoryStore())
    with pytest.raises(Interrupted) as held:
        manager.invoke_sync("send", {"to": "ann"})
    with pytest.raises(InvocationError) as refused:
        manager.resume_sync(held.value.token, ref="other")
    assert refused.value.tool == "other" and refused.value.key == "token"
    assert manager.resume_sync(held.value.token, ref="send") == "sent to ann"


@pytest.mark.anyio
async def test_resume_sync_inside_a_loop_says_to_await_and_spends_nothing(write, tools, anyio_backend) -> None:
    write("tools/send.md", HELD)
    manager = Manager([tools], sessions=MemoryStore())
    with pytest.raises(Interrupted) as held:
        await manager.invoke("send", {"to": "cy"})
    with pytest.raises(InvocationError, match=r"await manager\.resume"):
        manager.resume_sync(held.value.token)
    assert await manager.resume(held.value.token) == "sent to cy"
