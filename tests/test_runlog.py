"""The run log (issue 31): what a Manager with ``runlog=`` records, what never reaches the file, retention, refusal."""

from __future__ import annotations

import gc
import logging
import sqlite3
import time
from pathlib import Path

import pytest
import yaml

import orchestrator.runlog
from orchestrator import ConfigurationError, Manager, ToolNotFoundError
from orchestrator.runlog import KEEP_RUNS, ROWS_PER_INSERT, Call, RunLog, default_runlog

pytestmark = pytest.mark.anyio

GREET = """
---
description: Greets someone.
metadata:
  params:
    type: object
    properties:
      name: {type: string}
      password: {type: string, x-redact: true}
---
Hello {{ args.name }}, your password is {{ args.password | default('') }}.
"""

WEATHER = """
frontmatter = {"description": "Weather for a city.", "metadata": {"params": {
    "type": "object", "properties": {"city": {"type": "string"}, "key": {"type": "string", "x-redact": True}}}}}
def main(ctx):
    return {"city": ctx.args["city"], "temp": 5}
"""

BROKEN = """
def main(ctx):
    raise ValueError("the sky fell")
"""


def agent(write, name: str, script: list, body: str = "Weather in {{ args.city }}?", **meta) -> None:
    metadata = {"model": {"provider": "scripted", "script": script}, **meta}
    front = yaml.safe_dump({"description": f"{name} agent", "metadata": metadata}, sort_keys=False)
    write(f"tools/{name}.md", f"---\n{front}---\n{body}\n")


def file_bytes(path: Path) -> bytes:
    """Every byte SQLite wrote for ``path``: the database, its WAL and shared-memory files."""
    return b"".join(found.read_bytes() for found in path.parent.glob(path.name + "*"))


@pytest.fixture
def folder(write, tools: Path) -> Path:
    write("tools/greet.md", GREET)
    write("tools/weather.py", WEATHER)
    write("tools/broken.py", BROKEN)
    return tools


async def test_a_template_call_is_recorded_with_its_args_result_metadata_hash_and_levels(folder, tmp_path):
    log = tmp_path / "runs.db"
    with Manager([folder], runlog=log) as manager:
        assert await manager.invoke("greet", {"name": "Ada"}) == "Hello Ada, your password is ."
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
        run = manager.runlog.get(info.id)
    assert (info.ref, info.tool, info.status, info.error_type, info.caller, info.model) == (
        "greet",
        "greet",
        "ok",
        None,
        None,
        None,
    )
    assert info.seconds > 0 and abs(info.started - time.time()) < 60
    assert run is not None
    assert run["args"] == {"name": "Ada"}
    assert run["result"] == "Hello Ada, your password is ."
    assert run["meta_hash"].startswith("sha256:")
    assert [level["kind"] for level in run["levels"]] == ["authority", "tool"]
    assert run["levels"][-1]["path"] == str(folder / "greet.md")
    assert run["cost"] is None  # genai-prices is not a dependency: tokens only


async def test_an_agent_run_records_each_model_turn_and_tool_call(folder, write, tmp_path):
    agent(
        write,
        "forecast",
        [
            {"calls": [{"name": "weather", "arguments": {"city": "Paris", "key": "k-4471-secret"}}]},
            "It is 5 in Paris.",
        ],
        tools=["weather"],
    )
    with Manager([folder], runlog=tmp_path / "runs.db") as manager:
        assert await manager.invoke("forecast", {"city": "Paris"}) == "It is 5 in Paris."
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()  # the nested weather and model-call invocations are not runs of their own
        run = manager.runlog.get(info.id)
    assert info.model is not None and info.model.startswith("scripted")
    assert info.tokens is not None and info.tokens > 0
    assert run is not None
    kinds = [(turn["kind"], turn["iteration"]) for turn in run["turns"]]
    assert kinds == [
        ("model.request", 1),
        ("model.response", 1),
        ("tool.start", 1),
        ("tool.end", 1),
        ("model.request", 2),
        ("model.response", 2),
    ]
    first = run["turns"][1]["data"]
    assert first["calls"] == ["weather"] and first["finish_reason"] == "tool_calls"
    assert first["usage"]["total_tokens"] > 0
    # the called tool's x-redact param is redacted in the call's arguments
    assert run["turns"][2]["data"] == {"call": "weather", "arguments": {"city": "Paris", "key": "[redacted]"}}
    assert run["turns"][3]["data"]["error"] is None
    assert run["turns"][-1]["data"]["content"] == "It is 5 in Paris."
    assert run["usage"]["total_tokens"] == info.tokens
    assert b"k-4471-secret" not in file_bytes(tmp_path / "runs.db")


async def test_a_failing_call_is_recorded_with_its_typed_error(folder, tmp_path):
    with Manager([folder], runlog=tmp_path / "runs.db") as manager:
        with pytest.raises(ValueError, match="the sky fell"):
            await manager.invoke("broken")
        with pytest.raises(ToolNotFoundError):  # failed before it had a context: recorded all the same
            await manager.invoke("missing", {"x": 1})
        assert manager.runlog is not None
        missing, broken = manager.runlog.runs()
        run = manager.runlog.get(broken.id)
    assert (broken.status, broken.error_type) == ("error", "ValueError")
    assert run is not None and "the sky fell" in run["error"]["message"] and run["result"] is None
    assert (missing.ref, missing.tool, missing.status, missing.error_type) == (
        "missing",
        None,
        "error",
        "ToolNotFoundError",
    )


async def test_redacted_args_never_reach_the_file_nor_do_secret_environment_values(
    folder, write, tmp_path, monkeypatch
):
    monkeypatch.setenv("SERVICE_API_TOKEN", "tok-93817265-private")
    write(
        "tools/envy.md",
        "---\nmetadata: {trust: {env: true}}\n---\nToken {{ env.SERVICE_API_TOKEN }}, home {{ env.RUNLOG_PLACE }}\n",
    )
    monkeypatch.setenv("RUNLOG_PLACE", "lighthouse-7")
    log = tmp_path / "runs.db"
    with Manager([folder], runlog=log) as manager:
        said = await manager.invoke("greet", {"name": "Ada", "password": "correct-horse-battery"})
        assert "correct-horse-battery" in said  # the call itself is untouched
        shown = await manager.invoke("envy")
        assert "tok-93817265-private" in shown and "lighthouse-7" in shown
        assert manager.runlog is not None
        envy, greet = (manager.runlog.get(info.id) for info in manager.runlog.runs())
    assert greet is not None and envy is not None
    assert greet["args"] == {"name": "Ada", "password": "[redacted]"}
    assert greet["result"] == "Hello Ada, your password is [redacted]."
    assert envy["result"].strip() == "Token [redacted], home [redacted]"
    written = file_bytes(log)
    assert b"Hello Ada" in written  # the file holds the runs...
    for secret in (b"correct-horse-battery", b"tok-93817265-private", b"lighthouse-7"):
        assert secret not in written  # ...and none of these


async def test_a_secret_set_after_the_first_rows_is_cut_from_later_rows(folder, tmp_path, monkeypatch):
    # the environment is read again for each batch of rows; only whether a name looks secret is remembered
    monkeypatch.setenv("LATER_SECRET", "short")
    log = tmp_path / "runs.db"
    with Manager([folder], runlog=log) as manager:
        assert manager.runlog is not None
        await manager.invoke("greet", {"name": "short"})
        manager.runlog.flush()
        monkeypatch.setenv("LATER_SECRET", "hush-5531902")
        monkeypatch.setenv("LATER_PLACE", "harbour-8812")  # not named like a secret: kept
        await manager.invoke("greet", {"name": "hush-5531902"})
        await manager.invoke("greet", {"name": "harbour-8812"})
        later, secret, first = (manager.runlog.get(info.id) for info in manager.runlog.runs())
    assert first is not None and first["args"] == {"name": "short"}  # under 8 characters: not cut
    assert secret is not None and secret["args"] == {"name": "[redacted]"}
    assert later is not None and later["args"] == {"name": "harbour-8812"}
    assert b"hush-5531902" not in file_bytes(log)


def test_the_environment_is_read_again_only_when_it_changed(monkeypatch):
    # each batch of rows looks at the environment; an unchanged one is not decoded again, a changed one is
    from orchestrator.redaction import secret_environment

    monkeypatch.setenv("GLANCE_SECRET", "first-73125590")
    before = secret_environment()
    assert secret_environment() is before and "first-73125590" in before.secrets
    monkeypatch.setenv("GLANCE_SECRET", "second-4418207")
    after = secret_environment()
    assert "second-4418207" in after.secrets and "first-73125590" not in after.secrets
    monkeypatch.delenv("GLANCE_SECRET")
    assert "second-4418207" not in secret_environment().secrets


async def test_what_a_run_lacks_is_null_in_the_file(folder, tmp_path):
    # a row binds "" and -1 for what it lacks (cheaper than None for sqlite3); the file holds NULL
    log = tmp_path / "runs.db"
    with Manager([folder], runlog=log) as manager:
        await manager.invoke("greet", {"name": "Ada"})
        with pytest.raises(ValueError):
            await manager.invoke("broken")
    db = sqlite3.connect(log)
    try:
        found = db.execute(
            "SELECT ref, typeof(tool), typeof(caller), typeof(error), typeof(model), typeof(tokens), error"
            " FROM runs ORDER BY seq"
        ).fetchall()
    finally:
        db.close()
    assert found == [
        ("greet", "text", "null", "null", "null", "null", None),
        ("broken", "text", "null", "text", "null", "null", "ValueError"),
    ]


async def test_a_manager_without_a_run_log_records_nothing_and_listens_to_nothing(folder, tmp_path):
    manager = Manager([folder])
    assert manager.recorder is None and manager.runlog is None
    assert not manager.events  # no listener: calls are not observed for a log
    assert await manager.invoke("greet", {"name": "Ada"}) == "Hello Ada, your password is ."
    manager.close()
    assert list(tmp_path.glob("*.db")) == []


def test_true_means_the_default_file_and_the_environment_turns_it_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_RUNLOG", str(tmp_path / "chosen.db"))
    with Manager(runlog=True) as manager:
        assert manager.runlog is not None and manager.runlog.path == tmp_path / "chosen.db"
    monkeypatch.setenv("TOOLCASCADE_RUNLOG", "off")
    assert default_runlog() is None
    with Manager(runlog=True) as manager:
        assert manager.runlog is None and manager.recorder is None
    monkeypatch.delenv("TOOLCASCADE_RUNLOG")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    found = default_runlog()
    assert found is not None and found.path.name == "runs.db" and found.keep_runs == KEEP_RUNS
    monkeypatch.setenv("TOOLCASCADE_RUNLOG_KEEP", "50,7d")
    found = default_runlog()
    assert found is not None and (found.keep_runs, found.keep_days) == (50, 7.0)
    monkeypatch.setenv("TOOLCASCADE_RUNLOG_KEEP", "lots")
    with pytest.raises(ConfigurationError, match="TOOLCASCADE_RUNLOG_KEEP"):
        default_runlog()
    with pytest.raises(ConfigurationError, match="runlog must be"):
        Manager(runlog=42)
    with pytest.raises(ConfigurationError, match="keep_runs"):
        RunLog(tmp_path / "x.db", keep_runs=0)


async def test_retention_keeps_the_newest_rows_and_drops_old_days(folder, tmp_path):
    log = RunLog(tmp_path / "runs.db", keep_runs=3, keep_days=1)
    with Manager([folder], runlog=log) as manager:
        for number in range(5):
            await manager.invoke("greet", {"name": f"pruned-or-kept-{number}"})
        kept = log.runs(None)
        assert [run.id for run in kept] == [run.id for run in log.runs(3)]
        assert [log.get(run.id)["args"]["name"] for run in kept] == [
            "pruned-or-kept-4",
            "pruned-or-kept-3",
            "pruned-or-kept-2",
        ]  # type: ignore[index]
        assert manager.recorder is not None
        manager.recorder.record("greet", {"name": "old"}, started=time.time() - 3 * 86_400, seconds=0.1, result="x")
        await manager.invoke("greet", {"name": "new"})
        names = [log.get(run.id)["args"]["name"] for run in log.runs(None)]  # type: ignore[index]
    assert names == ["new", "pruned-or-kept-4", "pruned-or-kept-3"]  # the 3-day-old run went as soon as it was written
    log.close()
    # secure_delete: pruned rows are overwritten (a name long enough never to turn up in the file by chance)
    assert b"pruned-or-kept-0" not in file_bytes(tmp_path / "runs.db")


def test_retention_counts_rows_not_ids_when_old_days_left_gaps(tmp_path):
    log = RunLog(tmp_path / "runs.db", keep_runs=4, keep_days=1)
    old = time.time() - 3 * 86_400

    def write(*names: str) -> list[str]:
        for name in names:
            started = old if name.startswith("old") else time.time()
            log.add(Call(id=name, ref="greet", args={"name": name}, started=started, seconds=0.1, result="x"))
        log.flush()
        return [run.id for run in log.runs(None)]

    assert write("new-1", "old-1", "old-2", "new-2", "new-3") == ["new-3", "new-2", "new-1"]  # ids 1 and 4 apart
    assert write("new-4") == ["new-4", "new-3", "new-2", "new-1"]  # 4 rows: all kept, though 6 ids were used
    assert write("new-5") == ["new-5", "new-4", "new-3", "new-2"]
    assert write("new-6", "new-7") == ["new-7", "new-6", "new-5", "new-4"]
    log.close()


async def test_filters_by_tool_status_and_time(folder, tmp_path):
    log = RunLog(tmp_path / "runs.db")
    with Manager([folder], runlog=log) as manager:
        await manager.invoke("greet", {"name": "a"})
        with pytest.raises(ValueError):
            await manager.invoke("broken")
        assert manager.recorder is not None
        manager.recorder.record("greet", {"name": "b"}, started=time.time() - 7_200, seconds=0.1, result="x")
        assert [r.tool for r in log.runs(tool="greet")] == ["greet", "greet"]
        assert [r.tool for r in log.runs(status="error")] == ["broken"]
        assert [r.tool for r in log.runs(since=time.time() - 3_600)] == ["broken", "greet"]
        assert [r.tool for r in log.runs(1)] == ["greet"]
        assert [r["tool"] for r in log.export(status="ok")] == ["greet", "greet"]
        newest = log.runs(1)[0].id
        assert log.get(newest)["id"] == newest  # type: ignore[index]
        with pytest.raises(ConfigurationError, match="more than one"):
            log.get(newest[:8])  # the process's part of the id: every run here starts with it
        assert log.get("no-such-run") is None
    log.close()


@pytest.mark.parametrize(
    "content",
    [b"this is not a database at all" * 200, None],
    ids=["corrupt", "another application's"],
)
async def test_a_corrupt_or_foreign_file_is_refused_and_left_untouched(folder, tmp_path, caplog, content):
    path = tmp_path / "runs.db"
    if content is None:
        with sqlite3.connect(path) as theirs:
            theirs.execute("CREATE TABLE accounts (name TEXT)")
            theirs.execute("INSERT INTO accounts VALUES ('theirs')")
        theirs.close()
    else:
        path.write_bytes(content)
    before = path.read_bytes()
    with pytest.raises(ConfigurationError, match="run log"):
        RunLog(path).runs()
    with caplog.at_level(logging.WARNING, logger="orchestrator.runlog"):
        with Manager([folder], runlog=path) as manager:
            assert await manager.invoke("greet", {"name": "Ada"}) == "Hello Ada, your password is ."  # still runs
    assert any("run log" in record.getMessage() for record in caplog.records)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.glob("runs.db*")) == ["runs.db"]


async def test_an_interrupted_run_is_recorded_without_its_resume_token(write, tools, tmp_path):
    write("tools/send.py", "def main(ctx):\n    return 'sent'\n")
    write("tools/careful.md", "---\nmetadata: {approval: true}\n---\nok\n")
    from orchestrator import Interrupted

    with Manager([tools], runlog=tmp_path / "runs.db", sessions=tmp_path / "s.db") as manager:
        with pytest.raises(Interrupted) as paused:
            await manager.invoke("careful")
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
    assert (info.status, info.error_type) == ("interrupted", "Interrupted")
    assert paused.value.token.encode() not in file_bytes(tmp_path / "runs.db")


async def test_a_secret_in_a_level_path_is_cut_from_the_row_and_the_plan_text_of_later_rows_is_the_same(
    write, tmp_path, monkeypatch
):
    # a row's metadata hash and levels are made once per plan and spliced into each row's text (issue 31)
    monkeypatch.setenv("DEPLOY_SECRET", "hush-48213977")
    write("hush-48213977/tools/greet.md", GREET)
    write("open/tools/hello.md", GREET)
    log = tmp_path / "runs.db"
    with Manager([tmp_path / "hush-48213977" / "tools", tmp_path / "open" / "tools"], runlog=log) as manager:
        for ref in ("greet", "hello", "greet", "hello"):
            await manager.invoke(ref, {"name": "Ada"})
        assert manager.runlog is not None
        runs = [manager.runlog.get(info.id) for info in reversed(manager.runlog.runs())]
    assert all(run is not None for run in runs)
    paths = [run["levels"][-1]["path"] for run in runs if run is not None]
    assert paths[::2] == [str(tmp_path / "[redacted]" / "tools" / "greet.md")] * 2
    assert paths[1::2] == [str(tmp_path / "open" / "tools" / "hello.md")] * 2
    assert len({run["meta_hash"] for run in runs if run is not None}) == 1  # the same metadata: the same hash
    assert b"hush-48213977" not in file_bytes(log)


def test_batches_of_any_length_are_written_whole_and_in_order(tmp_path):
    # the writer inserts a batch in statements of 64, 32, ... or 1 rows (its length in binary), in order
    log = RunLog(tmp_path / "runs.db")
    lengths = (2 * ROWS_PER_INSERT + 3, 7, 1, 50)
    now = time.time()
    names: list[str] = []
    try:
        for length in lengths:
            for _ in range(length):  # added at once: the writer takes them in one batch (up to 256)
                number = len(names)
                names.append(f"run-{number:04d}")
                call = Call(id=names[-1], ref="greet", args={"n": number}, started=now, seconds=0.1)
                call.caller = "cli" if number % 2 else None
                log.add(call)
            log.flush()
        kept = list(reversed(log.runs(None)))
    finally:
        log.close()
    assert [run.id for run in kept] == names
    assert [run.caller for run in kept] == ["cli" if number % 2 else None for number in range(len(names))]


def test_a_backlog_is_written_without_pausing_to_gather(tmp_path, monkeypatch):
    # the writer pauses to let a burst gather, but not while a whole batch already waits: a batch command that
    # outran it would otherwise wait out one pause per 256 runs when it flushes at its end
    monkeypatch.setattr(orchestrator.runlog, "GATHER_SECONDS", 2.0)
    log = RunLog(tmp_path / "runs.db")
    now = time.time()
    count = 6 * orchestrator.runlog.BATCH
    try:
        for number in range(count):
            log.add(Call(id=f"run-{number:05d}", ref="greet", args={"n": number}, started=now, seconds=0.1))
        started = time.monotonic()
        log.flush()
        waited = time.monotonic() - started
        kept = log.runs(None)
    finally:
        log.close()
    assert len(kept) == count
    assert waited < 8.0  # at most the first pause (2 s) and the writes; pausing per batch takes 12 s or more


def test_runs_carried_over_are_written_without_a_flush_when_no_more_come(tmp_path):
    # while runs stream in, the writer writes a power of two of them at once and carries the rest over: when no
    # more come, those are written a pause later, with no flush nor close asking for them
    log = RunLog(tmp_path / "runs.db")
    now = time.time()
    try:
        for number in range(7):  # added at once: taken in one batch, 4 written, 3 carried over
            log.add(Call(id=f"run-{number}", ref="greet", args={"n": number}, started=now, seconds=0.1))
        deadline = time.monotonic() + 20.0
        found: list[str] = []
        while len(found) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
            if (tmp_path / "runs.db").exists():
                db = sqlite3.connect(tmp_path / "runs.db")
                try:
                    found = [seen for (seen,) in db.execute("SELECT id FROM runs ORDER BY seq")]
                except sqlite3.OperationalError:  # the table is being made
                    found = []
                finally:
                    db.close()
        assert found == [f"run-{number}" for number in range(7)]
    finally:
        log.close()


def test_a_log_reopened_keeps_pruning_to_keep_runs(tmp_path):
    # each writer reads where the file's runs begin when it connects: a second log on the same file prunes too
    now = time.time()
    for first in (0, 10):
        log = RunLog(tmp_path / "runs.db", keep_runs=5)
        for number in range(first, first + 10):
            log.add(Call(id=f"run-{number:02d}", ref="greet", args={"n": number}, started=now, seconds=0.1))
            if number % 3 == 0:
                log.flush()
        log.close()
    assert [run.id for run in RunLog(tmp_path / "runs.db").runs(None)] == [f"run-{n:02d}" for n in range(19, 14, -1)]


# A tool that leaves an object in its context's locals and returns a weak reference to it.
MARKED = """
import weakref

class Marker:
    pass

def main(ctx):
    marker = Marker()
    ctx.locals["marker"] = marker
    return weakref.ref(marker)
"""


async def test_a_recorded_call_leaves_its_context_to_be_freed_when_it_returns(write, tools, tmp_path):
    # the recorder takes what the row needs from the context: the context is freed when the call returns, as
    # without a run log, not held until the writer thread writes the row (in a batch, 50 ms later)
    write("tools/marked.py", MARKED)
    with Manager([tools], runlog=tmp_path / "runs.db") as manager:
        marker = await manager.invoke("marked")
        gc.collect()
        assert marker() is None  # the row is not written yet, and the context is gone
        assert manager.runlog is not None
        (info,) = manager.runlog.runs()
    assert (info.tool, info.status) == ("marked", "ok")
