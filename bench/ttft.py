"""Time to first token through an agent beside the raw SDK client reused, against fakellm on 127.0.0.1 (issue 29).

One run starts fakellm (a local OpenAI- and Anthropic-compatible streaming
server), then, turn about, asks the same question through a toolcascade
agent (``manager.invoke``; the first ``model.delta`` with text) and through
the SDK's own client built once (``create(stream=True)``; the first chunk
with text). For each provider it prints the median time to first token of
both and their ratio (target: at most 1.2x), the spread of each (the middle
half of the requests, p25-p75), and, for scale, the raw client rebuilt for
every request (what toolcascade did before it kept its clients). On a
loaded machine one run's ratio moves by a few tenths: ``--runs K`` repeats
the measurement K times with the same server and prints each run's ratios
and their median and range.

    .venv/bin/python -m bench.ttft [--rounds N] [--runs K]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from orchestrator import Event, Manager

TARGET = 1.2
QUESTION = "Say hello"
RULES = "rules:\n  - name: hello\n    respond: {content: 'Hello there, friend.'}\n"
KEY_ENV = "TTFT_BENCH_KEY"


def start_fakellm(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """fakellm serving ``RULES`` on a free port of 127.0.0.1; the process and its base URL."""
    import socket

    (folder / "rules.yaml").write_text(RULES)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    exe = Path(sys.executable).parent / "fakellm"
    command = [str(exe), "serve", "--host", "127.0.0.1", "--port", str(port), "--config", "rules.yaml"]
    process = subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"{base}/_fakellm/stats", timeout=2):
                return process, base
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("fakellm did not start") from None
            time.sleep(0.1)


def write_agents(tools: Path, base: str) -> None:
    """``hello-openai`` and ``hello-anthropic``: agents asking fakellm the question."""
    for provider, url in (("openai", f"{base}/v1"), ("anthropic", base)):
        model = {"provider": provider, "name": "bench", "base-url": url, "api-key-env": KEY_ENV}
        front = json.dumps({"metadata": {"model": model}})
        (tools / f"hello-{provider}.md").write_text(f"---\n{front}\n---\n{QUESTION}\n")


class Agent:
    """Time to first token through ``manager.invoke``: the first text ``model.delta`` event."""

    def __init__(self, tools: Path, ref: str) -> None:
        self.manager = Manager([tools], on_event=self.on_event)
        self.ref = ref
        self.started = 0.0
        self.first: float | None = None

    def on_event(self, event: Event) -> None:
        if event.kind == "model.delta" and self.first is None and event.data.get("text"):
            self.first = time.perf_counter()

    async def __call__(self) -> float:
        self.first = None
        self.started = time.perf_counter()
        await self.manager.invoke(self.ref)
        assert self.first is not None, "the agent streamed no text"
        return self.first - self.started


def raw_openai(base: str, reuse: bool) -> Callable[[], Awaitable[float]]:
    """Time to first token of ``AsyncOpenAI``: one client for every request, or one per request."""
    import openai

    def make() -> Any:
        return openai.AsyncOpenAI(base_url=f"{base}/v1", api_key="sk-bench", max_retries=0)

    kept = make() if reuse else None

    async def ask() -> float:
        client = kept or make()
        started = time.perf_counter()
        first = None
        stream = await client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter()
        if kept is None:
            await client.close()
        assert first is not None
        return first - started

    return ask


def raw_anthropic(base: str, reuse: bool) -> Callable[[], Awaitable[float]]:
    """Time to first token of ``AsyncAnthropic``: one client for every request, or one per request."""
    import anthropic

    def make() -> Any:
        return anthropic.AsyncAnthropic(base_url=base, api_key="sk-bench", max_retries=0)

    kept = make() if reuse else None

    async def ask() -> float:
        client = kept or make()
        started = time.perf_counter()
        first = None
        stream = await client.messages.create(
            model="bench", max_tokens=64, messages=[{"role": "user", "content": QUESTION}], stream=True
        )
        async for event in stream:
            if first is None and event.type == "content_block_delta" and getattr(event.delta, "text", ""):
                first = time.perf_counter()
        if kept is None:
            await client.close()
        assert first is not None
        return first - started

    return ask


Spread = tuple[float, float, float]
"""A call's times: (p25, median, p75) seconds."""
Row = tuple[str, Spread, Spread, float]
"""(provider, agent, raw client reused, raw client rebuilt's median)."""


def spread(values: list[float]) -> Spread:
    low, mid, high = statistics.quantiles(values, n=4) if len(values) > 1 else (values[0],) * 3
    return low, mid, high


async def together(calls: dict[str, Callable[[], Awaitable[float]]], rounds: int) -> dict[str, Spread]:
    """Each call's times (p25, median, p75), the calls taken turn about, in alternating order (after a warm-up)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        await call()  # warm-up: imports, first connection
    order = list(calls.items())
    for _ in range(rounds):
        for name, call in order:
            times[name].append(await call())
        order.reverse()  # neither goes first every time
    return {name: spread(values) for name, values in times.items()}


async def bench(rounds: int, runs: int = 1) -> list[list[Row]]:
    """``runs`` measurements with one server; each, per provider: the agent's, the raw client's and the rebuilt's."""
    os.environ.setdefault(KEY_ENV, "sk-bench")
    with tempfile.TemporaryDirectory() as folder:
        process, base = start_fakellm(Path(folder))
        try:
            tools = Path(folder) / "tools"
            tools.mkdir()
            write_agents(tools, base)
            measured = []
            for _ in range(runs):
                rows = []
                for provider, raw in (("openai", raw_openai), ("anthropic", raw_anthropic)):
                    agent = Agent(tools, f"hello-{provider}")
                    async with agent.manager:
                        found = await together({"agent": agent, "raw": raw(base, True)}, rounds)
                        rebuilt = await together({"rebuilt": raw(base, False)}, max(3, rounds // 5))
                    rows.append((provider, found["agent"], found["raw"], rebuilt["rebuilt"][1]))
                measured.append(rows)
            return measured
        finally:
            process.terminate()
            process.wait(timeout=10)


def table(rows: list[Row]) -> str:
    lines = [
        "| provider | agent (toolcascade) | raw client reused | ratio | target | raw client rebuilt per request |",
        "| --- | ---: | ---: | ---: | --- | ---: |",
    ]
    for provider, agent, raw, rebuilt in rows:
        ratio = agent[1] / raw[1]
        verdict = "met" if ratio <= TARGET else "missed"
        lines.append(
            f"| {provider} | {shown(agent)} | {shown(raw)} | {ratio:.2f}x | "
            f"<= {TARGET}x: {verdict} | {rebuilt * 1e3:.2f} ms |"
        )
    return "\n".join(lines)


def shown(times: Spread) -> str:
    """A median and the middle half of the times around it: ``4.70 ms (4.0-12.9)``."""
    return f"{times[1] * 1e3:.2f} ms ({times[0] * 1e3:.1f}-{times[2] * 1e3:.1f})"


def summary(measured: list[list[Row]]) -> str:
    """Each provider's ratio in every run, and their median and range."""
    lines = []
    for index, (provider, *_rest) in enumerate(measured[0]):
        ratios = [rows[index][1][1] / rows[index][2][1] for rows in measured]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        lines.append(
            f"{provider}: ratio median {statistics.median(ratios):.2f}x over {len(ratios)} runs "
            f"(range {min(ratios):.2f}-{max(ratios):.2f}: {each})"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ttft", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="requests per client (default 30)")
    parser.add_argument("--runs", type=int, default=1, help="measurements with the same server (default 1)")
    args = parser.parse_args(argv)
    measured = anyio.run(bench, args.rounds, args.runs)
    for rows in measured:
        print(table(rows))
    if len(measured) > 1:
        print(summary(measured))


if __name__ == "__main__":
    main()
