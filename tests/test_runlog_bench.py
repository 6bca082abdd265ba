"""bench/runlog.py runs (issue 31): a small batch and a few MCP calls, on and off; the figures, never their speed."""

from __future__ import annotations

from bench.runlog import markdown, run


def test_the_bench_measures_batch_and_mcp_with_the_run_log_on_and_off() -> None:
    found = run(lines=40, calls=5, rounds=1)  # recording, every batch line must be in the log, or it raises
    for key in ("batch_off", "batch_on", "mcp_off", "mcp_on", "batch_ratio", "mcp_ratio", "mcp_cpu_ratio"):
        assert found[key] > 0
    table = markdown(found)
    assert "| batch, 40 lines (lines/s) |" in table and "| MCP call, sequential (ms/call) |" in table
    assert "| MCP call, process CPU (ms/call) |" in table
