"""The run log's costs, the messages a model request sent, and the per-folder switch (issue 31)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from orchestrator import Manager
from orchestrator import costs as costs_module
from orchestrator.cli import cli
from orchestrator.runlog import RunLog

pytestmark = pytest.mark.anyio

# A python tool that tells what an agent tells: a model request with the messages it sent, then the answer.
TALKER = """
frontmatter = {"description": "Talks to a priced model.", "metadata": {"params": {"type": "object"}}}

def main(ctx):
    manager = ctx.owner
    sent = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Summarize: " + ctx.args.get("text", "")},
    ]
    manager.emit("model.request", ctx, 1, model="openai:gpt-4o-mini", messages=sent, tools=[], response_format=False)
    usage = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}
    manager.emit("model.response", ctx, 1, model="gpt-4o-mini", content="Short.", calls=[], finish_reason="stop",
                 usage=usage)
    return "Short."
"""


def file_bytes(path: Path) -> bytes:
    return b"".join(found.read_bytes() for found in path.parent.glob(path.name + "*"))


@pytest.fixture
def talker(write, tools: Path) -> Path:
    write("tools/talker.py", TALKER)
    return tools


def priced(prompt: int, completion: int) -> float:
    from genai_prices import Usage, calc_price

    found = calc_price(
        Usage(input_tokens=prompt, output_tokens=completion), model_ref="gpt-4o-mini", provider_id="openai"
    )
    return float(found.total_price)


async def test_a_priced_answer_records_its_cost_and_the_price_table(talker, tmp_path):
    log = tmp_path / "runs.db"
    with Manager([talker], runlog=log) as manager:
        await manager.invoke("talker", {"text": "a long story"})
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
        run = manager.runlog.get(info.id)
    assert run is not None
    assert info.cost == pytest.approx(priced(1000, 100)) and info.cost > 0
    assert run["cost"] == pytest.approx(info.cost)
    import genai_prices

    assert run["prices"] == f"genai-prices {genai_prices.__version__}"


async def test_without_the_prices_extra_there_is_no_cost_and_no_error(talker, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # import genai_prices now fails, as when not installed
    costs_module.table.cache_clear()
    try:
        log = tmp_path / "runs.db"
        with Manager([talker], runlog=log) as manager:
            assert await manager.invoke("talker", {"text": "x"}) == "Short."
            assert manager.runlog is not None
            (info,) = manager.runlog.runs()
            run = manager.runlog.get(info.id)
        assert info.cost is None and run is not None and run["cost"] is None and run["prices"] is None
        listed = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["logs", "list", "--log", str(log)])
        assert listed.exit_code == 0 and "COST" not in listed.output and "talker" in listed.output
    finally:
        costs_module.table.cache_clear()


def test_costs_of_models_the_table_does_not_know_are_unknown():
    assert costs_module.cost("scripted", {"prompt_tokens": 1, "completion_tokens": 1}) is None
    assert costs_module.cost("openai:no-such-model-xyz", {"prompt_tokens": 1, "completion_tokens": 1}) is None
    assert costs_module.cost("openai:gpt-4o-mini", {"total_tokens": 5}) is None
    turns = [
        {"kind": "model.request", "data": {"model": "openai:gpt-4o-mini"}},
        {"kind": "model.response", "data": {"usage": {"prompt_tokens": 10, "completion_tokens": 2}}},
        {"kind": "model.request", "data": {"model": "openai:gpt-4o-mini"}},
        {"kind": "model.response", "data": {"usage": {"prompt_tokens": 20, "completion_tokens": 4}}},
    ]
    assert costs_module.total(turns) == pytest.approx(priced(10, 2) + priced(20, 4))


async def test_logs_lists_and_shows_the_cost(talker, tmp_path):
    log = tmp_path / "runs.db"
    with Manager([talker], runlog=log) as manager:
        await manager.invoke("talker", {"text": "x"})
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    listed = runner.invoke(cli, ["logs", "list", "--log", str(log)])
    assert listed.exit_code == 0
    heads, row = listed.output.splitlines()[:2]
    assert "COST" in heads.split("\t")
    cell = row.split("\t")[heads.split("\t").index("COST")]
    assert cell == f"${priced(1000, 100):.6f}"
    (info,) = RunLog(log).runs()
    shown = runner.invoke(cli, ["logs", "show", info.id, "--log", str(log)])
    assert f"cost     ${priced(1000, 100):.6f} (genai-prices" in shown.output


async def test_the_messages_a_request_sent_are_recorded_without_environment_secrets(talker, tmp_path, monkeypatch):
    monkeypatch.setenv("VENDOR_API_KEY", "vk-5521-0042-hidden")
    log = tmp_path / "runs.db"
    with Manager([talker], runlog=log) as manager:
        await manager.invoke("talker", {"text": "the key is vk-5521-0042-hidden, keep it"})
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
        run = manager.runlog.get(info.id)
    assert run is not None
    request = run["turns"][0]
    assert request["kind"] == "model.request"
    assert request["data"]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Summarize: the key is [redacted], keep it"},
    ]
    assert b"vk-5521-0042-hidden" not in file_bytes(log)
    shown = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["logs", "show", info.id, "--log", str(log)])
    lines = shown.output.splitlines()
    asks = next(i for i, line in enumerate(lines) if "asks openai:gpt-4o-mini: 2 messages" in line)
    assert lines[asks + 1].strip() == "system: You are terse."
    assert lines[asks + 2].strip() == "user: Summarize: the key is [redacted], keep it"


SILENT_AUTHORITY = "---\nmetadata:\n  runlog: false\n---\n"
NOTE = "---\nmetadata: {params: {type: object}}\n---\nNote {{ args.text }}\n"


async def test_runlog_false_in_an_authority_keeps_its_folders_runs_out_of_the_log(write, tools, tmp_path):
    write("tools/private/AUTHORITY.md", SILENT_AUTHORITY)
    write("tools/private/diary.md", NOTE)
    write("tools/public.md", NOTE)
    log = tmp_path / "runs.db"
    with Manager([tools], runlog=log) as manager:
        assert await manager.invoke("private/diary", {"text": "secret plans"}) == "Note secret plans"
        await manager.invoke("public", {"text": "hello"})
        assert manager.recorder is not None
        manager.recorder.record("private/diary", {"text": "batch line"}, started=0.0, seconds=0.1, result="x")
        manager.recorder.record("public", {"text": "batch line"}, started=0.0, seconds=0.1, result="x")
        assert manager.runlog is not None
        found = [info.ref for info in manager.runlog.runs()]
    assert found == ["public", "public"]
    assert b"secret plans" not in file_bytes(log)


async def test_a_tool_may_keep_itself_out_and_a_lower_level_may_turn_it_back_on(write, tools, tmp_path):
    write("tools/private/AUTHORITY.md", SILENT_AUTHORITY)
    write("tools/private/loud.md", "---\nmetadata: {runlog: true}\n---\nLoud\n")
    write("tools/quiet.md", "---\nmetadata: {runlog: false}\n---\nQuiet\n")
    with Manager([tools], runlog=tmp_path / "runs.db") as manager:
        await manager.invoke("private/loud")
        await manager.invoke("quiet")
        assert manager.runlog is not None
        assert [info.ref for info in manager.runlog.runs()] == ["private/loud"]


async def test_an_agents_requests_are_recorded_with_their_messages_and_shown(write, tools, tmp_path, monkeypatch):
    monkeypatch.setenv("SHOP_API_TOKEN", "tok-7731-4409-private")
    script = [{"calls": [{"name": "stock", "arguments": {"item": "kettle"}}]}, "Three kettles left."]
    write(
        "tools/stock.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'item': {'type': 'string'}}}}}\n"
        "def main(ctx):\n    return {'item': ctx.args['item'], 'left': 3}\n",
    )
    front = yaml.safe_dump({"metadata": {"model": {"provider": "scripted", "script": script}, "tools": ["stock"]}})
    write("tools/clerk.md", f"---\n{front}---\nHow many {{{{ args.item }}}}? (token tok-7731-4409-private)\n")
    log = tmp_path / "runs.db"
    with Manager([tools], runlog=log) as manager:
        assert await manager.invoke("clerk", {"item": "kettles"}) == "Three kettles left."
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
        run = manager.runlog.get(info.id)
    assert run is not None
    first, second = (turn["data"] for turn in run["turns"] if turn["kind"] == "model.request")
    assert [m["role"] for m in first["messages"]] == ["user"] and first["earlier"] == 0
    assert (
        first["messages"][0]["content"] == "How many kettles? (token [redacted])"
    )  # a secret of the environment is cut out
    # the second request sent the first's message again, then what came since: only that is kept again
    assert second["earlier"] == 1 and [m["role"] for m in second["messages"]] == ["assistant", "tool"]
    assert "3" in json.dumps(second["messages"][1])
    assert b"tok-7731-4409-private" not in file_bytes(log)
    shown = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["logs", "show", info.id, "--log", str(log)])
    assert "        user: How many kettles? (token [redacted])" in shown.output
    assert "        tool: " in shown.output
    assert "asks scripted: 3 messages" in shown.output and "        (1 as in the request before)" in shown.output


async def test_an_mcp_server_with_a_run_log_records_each_call_with_its_caller(talker, write, tmp_path):
    import anyio
    from mcp import Client
    from mcp.types import Implementation

    from orchestrator.mcp import build_server

    write("tools/boom.py", "def main(ctx):\n    raise ValueError('boom')\n")
    log = tmp_path / "runs.db"
    with Manager([talker], runlog=log) as manager, anyio.fail_after(20):
        async with Client(build_server(manager), client_info=Implementation(name="pytest", version="1")) as client:
            said = await client.call_tool("talker", {"text": "hi"})
            failed = await client.call_tool("boom", {})
    assert not said.is_error and failed.is_error
    found = {info.tool: info for info in RunLog(log).runs(None)}
    assert sorted(found) == ["boom", "talker"]
    assert found["boom"].status == "error" and found["boom"].error_type == "ValueError"
    assert found["talker"].caller is not None and found["talker"].caller == found["boom"].caller
    assert found["talker"].cost is not None  # the model turns of a served call are kept as well


def test_an_offline_models_runs_never_load_the_price_table(tmp_path):
    import subprocess

    code = (
        "import sys\n"
        "from orchestrator.costs import cost\n"
        "assert cost('scripted', {'prompt_tokens': 3, 'completion_tokens': 1}) is None\n"
        "assert cost('openai:gpt-4o-mini', {'total_tokens': 4}) is None\n"
        "print('genai_prices' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


async def test_the_recorder_listens_from_the_first_invoke_and_a_batch_never_makes_it(write, tools, tmp_path):
    write("tools/public.md", NOTE)
    with Manager([tools], runlog=tmp_path / "runs.db") as manager:
        assert manager.recorder is not None and not manager.events  # no event is built on the log's account yet
        manager.recorder.record("public", {"text": "a batch line"}, started=0.0, seconds=0.1, result="x")
        assert not manager.events  # a batch's lines are recorded without any listener
        await manager.invoke("public", {"text": "hello"})
        assert len(manager.events.quiet) == 1  # the first invoke starts it, once
        await manager.invoke("public", {"text": "again"})
        assert len(manager.events.quiet) == 1
        assert not manager.events.listeners  # a quiet listener: the chains' entries stay unobserved on its account
        assert manager.runlog is not None and len(manager.runlog.runs()) == 3
    assert not manager.events  # closing the manager stops it


async def test_serve_log_records_the_calls_of_a_served_folder_and_serve_alone_records_none(
    talker, tmp_path, monkeypatch
):
    import os

    import anyio
    from mcp import Client, StdioServerParameters

    async def serve_and_call(*flags: str) -> None:
        code = "from orchestrator.cli import main; main()"
        params = StdioServerParameters(
            command=sys.executable,
            args=["-c", code, "serve", "--path", str(talker), *flags],
            env={**os.environ, "TOOLCASCADE_RUNLOG": str(log)},
        )
        with anyio.fail_after(60):
            async with Client(params, mode="auto") as client:
                said = await client.call_tool("talker", {"text": flags[0] if flags else "quiet"})
        assert not said.is_error

    log = tmp_path / "served.db"
    await serve_and_call()
    assert not log.exists() or RunLog(log).runs(None) == []  # a server records nothing unless asked
    await serve_and_call("--log")
    runs = RunLog(log).runs(None)
    assert [run.tool for run in runs] == ["talker"]
    assert runs[0].caller is not None  # the MCP client, as the server saw it


# A tool that puts a plain list, which it keeps changing, into its run's metadata.
TALLY = """
frontmatter = {"description": "Counts.", "metadata": {"params": {"type": "object"}, "colour": "red"}}
SEEN = []

def main(ctx):
    SEEN.append(len(SEEN))
    ctx.meta["seen"] = SEEN
    return len(SEEN)
"""


async def test_the_metadata_hash_follows_the_merged_metadata_call_by_call(write, tools, tmp_path):
    write("tools/public.md", NOTE)
    write("tools/tally.py", TALLY)
    with Manager([tools], runlog=tmp_path / "runs.db") as manager:
        runlog = manager.runlog
        assert runlog is not None

        async def hash_of(ref: str, args: dict) -> str:
            await manager.invoke(ref, args)
            runlog.flush()  # written before the next call changes anything
            found = runlog.get(runlog.runs(1)[0].id)
            assert found is not None
            return found["meta_hash"]

        first = await hash_of("public", {"text": "a"})
        assert await hash_of("public", {"text": "b"}) == first  # the same plan: the same metadata
        red = await hash_of("public", {"text": "c", "$overrides": {"colour": "red"}})
        blue = await hash_of("public", {"text": "c", "$overrides": {"colour": "blue"}})
        assert len({first, red, blue}) == 3  # an override is part of the call's metadata
        assert await hash_of("public", {"text": "d", "$overrides": {"colour": "red"}}) == red
        once, twice = await hash_of("tally", {}), await hash_of("tally", {})
        assert once != twice  # the same list object, changed since: hashed as it is now, never remembered
