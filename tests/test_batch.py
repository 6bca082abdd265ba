"""``toolcascade batch`` and its runner (issue 16), in process: order, errors, resuming, bounded memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from orchestrator import Manager
from orchestrator.batch import count_lines, done_lines, run_batch
from orchestrator.cli import cli
from orchestrator.executor import InProcessExecutor, unit_for

PLUS = """
    import anyio

    frontmatter = {"metadata": {"params": {"type": "object", "properties": {"i": {"type": "integer"}}}}}

    async def main(ctx):
        await anyio.sleep(ctx.args.get("wait", 0))
        return ctx.args["i"] + ctx.meta.get("step", 1)
    """


@pytest.fixture
def folder(write: Any, tmp_path: Path) -> Path:
    write("tools/plus.py", PLUS)
    return tmp_path


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def batch(folder: Path, *extra: str) -> Any:
    return CliRunner().invoke(
        cli,
        [
            "batch",
            "plus",
            str(folder / "args.jsonl"),
            "-o",
            str(folder / "out.jsonl"),
            "--path",
            str(folder / "tools"),
            *extra,
        ],
    )


def test_one_line_out_per_line_in_in_order_errors_included(folder: Path) -> None:
    lines = [json.dumps({"i": i, "wait": 0.05 if i == 0 else 0}) for i in range(50)]
    lines[10], lines[20], lines[30] = "{not json", "", json.dumps({"i": "x"})
    (folder / "args.jsonl").write_text("\n".join(lines) + "\n")
    done = batch(folder, "--concurrency", "8")
    assert done.exit_code == 1  # some lines failed; all are written
    out = records(folder / "out.jsonl")
    assert [r["line"] for r in out] == list(range(1, 51))
    assert out[0] == {"line": 1, "result": 1} and out[49] == {"line": 50, "result": 50}
    assert out[10]["error"]["type"] == "InvocationError" and "not JSON" in out[10]["error"]["message"]
    assert "empty" in out[20]["error"]["message"]
    assert out[30]["error"]["type"] == "ArgsValidationError" and "/i" in out[30]["error"]["message"]
    assert "50 lines: 47 results, 3 errors, 0 already done" in done.stderr


def test_overrides_apply_to_every_line(folder: Path) -> None:
    (folder / "args.jsonl").write_text('{"i": 1}\n{"i": 2}')  # no newline at the end: still a line
    assert batch(folder, "--set", "step=10").exit_code == 0
    assert [r["result"] for r in records(folder / "out.jsonl")] == [11, 12]


def test_resume_skips_written_lines_and_cuts_a_torn_one(folder: Path) -> None:
    (folder / "args.jsonl").write_text("".join(json.dumps({"i": i}) + "\n" for i in range(20)))
    (folder / "out.jsonl").write_text('{"line": 1, "result": 1}\n{"line": 2, "result": 2}\n{"line": 3, "res')
    assert done_lines(folder / "out.jsonl") == {1, 2}
    done = batch(folder)
    assert done.exit_code == 0 and "2 already done" in done.stderr
    assert [r["line"] for r in records(folder / "out.jsonl")] == list(range(1, 21))
    again = batch(folder)  # nothing left: nothing written twice
    assert again.exit_code == 0 and len(records(folder / "out.jsonl")) == 20


def test_bad_invocations_fail_in_one_line(folder: Path) -> None:
    (folder / "args.jsonl").write_text('{"i": 1}\n')
    same = CliRunner().invoke(cli, ["batch", "plus", str(folder / "args.jsonl"), "-o", str(folder / "args.jsonl")])
    assert same.exit_code == 1 and "must not be the args file" in same.stderr
    missing = CliRunner().invoke(
        cli,
        ["batch", "nope", str(folder / "args.jsonl"), "-o", str(folder / "o.jsonl"), "--path", str(folder / "tools")],
    )
    assert missing.exit_code == 1 and "ToolNotFoundError" in missing.stderr
    assert batch(folder, "--executor", "spark").exit_code == 1
    assert "--pool" in batch(folder, "--pool", "2").stderr


@pytest.mark.anyio
async def test_memory_is_bounded_by_the_reorder_window(folder: Path) -> None:
    """A slow first line never lets more than the window of finished lines pile up behind it."""
    source, output = folder / "args.jsonl", folder / "out.jsonl"
    source.write_text("".join(json.dumps({"i": i, "wait": 0.3 if i == 0 else 0}) + "\n" for i in range(400)))
    inner = InProcessExecutor()
    submitted = 0
    most = 0

    class Counting:
        async def submit(self, unit: dict[str, Any]) -> Any:
            nonlocal submitted, most
            submitted += 1
            written = count_lines(output) if output.exists() else 0
            most = max(most, submitted - written)
            return await inner.submit(unit)

    base = unit_for(Manager([folder / "tools"]), "plus")
    with anyio.fail_after(60):
        summary = await run_batch(Counting(), base, source, output, concurrency=4, window=16)
    assert summary.results == 400 and [r["line"] for r in records(output)] == list(range(1, 401))
    assert most <= 16 + 4


def test_count_lines_counts_a_last_line_without_newline(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"1\n2\n3")
    (tmp_path / "b").write_bytes(b"")
    assert (count_lines(tmp_path / "a"), count_lines(tmp_path / "b")) == (3, 0)


def test_batch_reads_only_the_formats_asked_for(folder: Path) -> None:
    """--format (from path_option) reaches batch's Manager: with `none`, a Prompty file is not a tool."""
    (folder / "tools" / "card.prompty").write_text("---\nname: card\n---\nsystem:\nHello.\n")
    (folder / "args.jsonl").write_text("{}\n")
    out = ["-o", str(folder / "o.jsonl"), "--path", str(folder / "tools")]
    assert CliRunner().invoke(cli, ["batch", "card", str(folder / "args.jsonl"), *out]).exit_code == 0
    ours = CliRunner().invoke(cli, ["batch", "card", str(folder / "args.jsonl"), *out, "--format", "none"])
    assert ours.exit_code == 1 and "ToolNotFoundError" in ours.stderr


HOLD = """
    from orchestrator.approval import take_decision
    from orchestrator.errors import ApprovalRequired
    frontmatter = {"role": "middleware", "metadata": {"params": {"type": "object"}}}
    async def main(ctx):
        if take_decision() is None:
            raise ApprovalRequired("held", request={"tool": ctx.target.tool.name, "args": dict(ctx.target.args)})
        return await ctx.target.manager.next()
    """

SEND = """
    frontmatter = {"metadata": {"hold": {}, "params": {"type": "object", "properties": {"to": {"type": "string"}}}}}
    def main(ctx):
        return "sent to " + ctx.args["to"]
    """


def test_lines_waiting_for_a_decision_are_counted_and_exit_suspended(
    folder: Path, write: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestrator.cli import SUSPENDED

    monkeypatch.setenv("TOOLCASCADE_SESSIONS", str(folder / "sessions.db"))
    write("tools/hold.py", HOLD)
    write("tools/send.py", SEND)
    (folder / "args.jsonl").write_text('{"to": "ann"}\n{"to": "bo"}\n')
    held = CliRunner().invoke(
        cli,
        ["batch", "send", str(folder / "args.jsonl"), "-o", str(folder / "out.jsonl"), "--path", str(folder / "tools")],
    )
    assert held.exit_code == SUSPENDED, held.output  # nothing failed: two calls wait for a decision
    assert [r["error"]["type"] for r in records(folder / "out.jsonl")] == ["Interrupted", "Interrupted"]
    assert "0 errors, 2 waiting for a decision" in held.stderr
    (folder / "more.jsonl").write_text('{"to": "cy"}\n{not json\n')
    failed = CliRunner().invoke(
        cli,
        [
            "batch",
            "send",
            str(folder / "more.jsonl"),
            "-o",
            str(folder / "more-out.jsonl"),
            "--path",
            str(folder / "tools"),
        ],
    )
    assert failed.exit_code == 1  # a failed line outweighs a waiting one
    assert "1 errors, 1 waiting for a decision" in failed.stderr
