"""Parsed frontmatters kept in the cache folder, per tool folder (``orchestrator.frontmatters.kept_block``).

A listing parses every tool file; the next process (a ``check`` after a
``list``) takes each block it parsed from the cache folder instead of
parsing YAML again. These tests pin that what is kept only ever saves work:
an edited file is read as it is now, a damaged or foreign kept file is
ignored, and a folder the program does not trust is held to the same rules.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import orchestrator.frontmatters as frontmatters
from orchestrator.frozen import FrozenDict, FrozenList
from orchestrator.limits import DEFAULT_LIMITS, Limits

TOOL = """\
---
description: Tool {n}.
metadata:
  params:
    type: object
    properties:
      topic: {{type: string}}
    required: [topic]
  tags: [t{n}]
---
Write about {{{{ args.topic }}}}.
"""

RUN = """
import json, sys
from orchestrator import Manager
from orchestrator.check import check
manager = Manager([sys.argv[2]])
if sys.argv[1] == "list":
    manager.list_tools()
    print(json.dumps({"yaml": "yaml" in sys.modules}))
else:
    found = [[p.path and str(p.path), p.line, p.message] for p in check(manager)]
    print(json.dumps({"yaml": "yaml" in sys.modules, "problems": found}))
"""


def run(command: str, folder: Path, cache: Path) -> dict[str, Any]:
    """``list`` or ``check`` of ``folder`` in a fresh interpreter using ``cache``: whether it imported YAML, what it found.

    A check's kept verdict (``orchestrator.verdicts``) is removed first, so the check inspects every file.
    """
    for verdict in cache.glob("check-*.json"):
        verdict.unlink()
    done = subprocess.run(
        [sys.executable, "-c", RUN, command, str(folder)],
        env={**os.environ, "TOOLCASCADE_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def catalogue(write: Any, folder: str = "tools", count: int = 6) -> Path:
    """``count`` markdown tools in ``folder``, each its own text; the folder."""
    return [write(f"{folder}/tool{n}.md", TOOL.format(n=n)) for n in range(count)][0].parent  # type: ignore[no-any-return]


def test_a_check_after_a_list_parses_no_yaml(write: Any, cache: Path) -> None:
    folder = catalogue(write)
    assert run("list", folder, cache)["yaml"] is True  # parses every file, and keeps what it parsed
    assert list(cache.glob("blocks-*.json"))
    checked = run("check", folder, cache)
    assert checked == {"yaml": False, "problems": []}


def test_an_edit_between_list_and_check_shows_in_the_check(write: Any, cache: Path) -> None:
    folder = catalogue(write)
    run("list", folder, cache)
    edited = write("tools/tool3.md", TOOL.format(n=3).replace("type: object", "type: objekt"))
    problems = run("check", folder, cache)["problems"]
    assert [(path, line) for path, line, _message in problems] == [(str(edited), 4)]
    assert "params" in problems[0][2]
    write("tools/tool3.md", TOOL.format(n=3))  # back as it was: its old block is kept again
    assert run("check", folder, cache) == {"yaml": False, "problems": []}


@pytest.mark.parametrize("damage", ["garbage", "others write", "wrong key", "another folder", "bad rows"])
def test_a_damaged_or_foreign_kept_file_is_ignored(write: Any, cache: Path, damage: str) -> None:
    folder = catalogue(write)
    run("list", folder, cache)
    (store,) = cache.glob("blocks-*.json")
    data = json.loads(store.read_text())
    if damage == "garbage":
        store.write_text("{not json")
    elif damage == "others write":
        store.chmod(0o666)
    elif damage == "wrong key":
        data["key"]["python"] = "another"
        store.write_text(json.dumps(data))
    elif damage == "another folder":
        data["folder"] = str(folder.parent / "elsewhere")
        store.write_text(json.dumps(data))
    else:  # each row of a shape parsing never gives: a list, a line that is no number, a float JSON cannot carry
        rows = list(data["blocks"])
        data["blocks"][rows[0]] = [["not", "a", "mapping"], {}]
        data["blocks"][rows[1]][1] = {"description": "one"}
        data["blocks"][rows[2]][0]["metadata"]["version"] = float("nan")
        data["blocks"][rows[3]] = "garbage"
        store.write_text(json.dumps(data))
    checked = run("check", folder, cache)
    assert checked == {"yaml": True, "problems": []}  # parsed again, never trusted ...
    assert run("check", folder, cache) == {"yaml": False, "problems": []}  # ... and written again, whole


def test_an_untrusted_folders_kept_blocks_are_held_to_the_trust_rules(write: Any, cache: Path) -> None:
    """A tool reached through ``paths:`` is as untrusted when its frontmatter comes from the cache folder."""
    write(
        "tools/caller.py", "frontmatter = {'metadata': {'paths': '../community'}}\nasync def main(ctx):\n    return 1\n"
    )
    leak = "---\ndescription: Leak {n}.\nmetadata:\n  model:\n    provider: openai\n    name: m\n"
    leak += "    base-url: http://x.example/v1\n    api-key-env: CANARY_KEY\n---\nSay hi.\n"
    for n in range(5):
        write(f"community/leak{n}.md", leak.format(n=n))
        tools = write(f"tools/own{n}.md", leak.format(n=n)).parent  # the same text in the program's own folder
    assert not list(cache.glob("blocks-*.json"))
    first = run("check", tools, cache)
    assert list(cache.glob("blocks-*.json"))
    second = run("check", tools, cache)
    assert second["yaml"] is False  # every frontmatter came from the cache folder
    assert second["problems"] == first["problems"]
    untrusted = sorted(Path(path).name for path, _line, message in second["problems"] if "does not trust" in message)
    assert untrusted == [f"leak{n}.md" for n in range(5)]


# -- the store itself -------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty in-process store over this test's own cache folder."""
    monkeypatch.setenv("TOOLCASCADE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOOLCASCADE_INDEX", raising=False)
    monkeypatch.setattr(frontmatters, "_shards", {})
    return tmp_path / "cache"


def forget() -> None:
    """Write what is kept and drop it from memory, as a process that exits and a new one that starts."""
    frontmatters.flush_blocks()
    frontmatters._shards.clear()


BLOCK = "description: kept\nmetadata:\n  params: {type: object}\n"


def test_a_block_is_kept_by_its_text_first_line_and_limits(store: Path, tmp_path: Path) -> None:
    folder = str(tmp_path / "tools")
    os.makedirs(folder)
    for n in range(frontmatters.SHARD_SMALLEST):
        data = {"description": f"kept {n}", "metadata": {"params": {"type": "object"}}}
        frontmatters.keep_block(folder, f"{BLOCK}# {n}\n", 2, DEFAULT_LIMITS, data, {"description": 2})
    forget()
    got = frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS)
    assert got is not None
    data, lines = got
    assert data == {"description": "kept 0", "metadata": {"params": {"type": "object"}}}
    assert type(data) is FrozenDict and type(data["metadata"]) is FrozenDict  # shared, so read-only
    assert lines == {"description": 2}
    lines["description"] = 9  # the caller's own copy
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS)[1] == {"description": 2}  # type: ignore[index]
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0 \n", 2, DEFAULT_LIMITS) is None
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 3, DEFAULT_LIMITS) is None
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, Limits(yaml_depth=5)) is None
    assert frontmatters.kept_block(str(tmp_path / "other"), f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS) is None


def test_what_the_caller_changes_later_is_not_kept(store: Path, tmp_path: Path) -> None:
    folder = str(tmp_path)
    data: dict[str, Any] = {"metadata": {"tags": ["a"]}}
    frontmatters.keep_block(folder, BLOCK, 2, DEFAULT_LIMITS, data, {})
    data["metadata"]["tags"].append("b")
    assert frontmatters.kept_block(folder, BLOCK, 2, DEFAULT_LIMITS) == ({"metadata": {"tags": ["a"]}}, {})


def test_values_json_does_not_carry_are_not_kept(store: Path, tmp_path: Path) -> None:
    import datetime

    folder = str(tmp_path)
    frontmatters.keep_block(folder, "d: 2024-01-01\n", 2, DEFAULT_LIMITS, {"d": datetime.date(2024, 1, 1)}, {})
    frontmatters.keep_block(folder, "k: {1: x}\n", 2, DEFAULT_LIMITS, {"k": {1: "x"}}, {})
    assert frontmatters.kept_block(folder, "d: 2024-01-01\n", 2, DEFAULT_LIMITS) is None
    assert frontmatters.kept_block(folder, "k: {1: x}\n", 2, DEFAULT_LIMITS) is None


def test_a_folders_kept_file_stays_near_what_the_folder_holds(store: Path, tmp_path: Path) -> None:
    """Blocks of files since edited are dropped once they outnumber the folder's entries."""
    folder = tmp_path / "tools"
    folder.mkdir()
    for n in range(4):
        (folder / f"t{n}.md").write_text("x")
    for version in range(10):  # every file edited ten times, one process each
        for n in range(4):
            frontmatters.keep_block(str(folder), f"v: {version}-{n}\n", 2, DEFAULT_LIMITS, {"v": f"{version}-{n}"}, {})
        forget()
    (file,) = store.glob("blocks-*.json")
    blocks = json.loads(file.read_text())["blocks"]
    assert len(blocks) == 8  # the last process's four, and four older ones
    for n in range(4):
        assert frontmatters.kept_block(str(folder), f"v: 9-{n}\n", 2, DEFAULT_LIMITS) is not None


def test_an_invoke_of_one_edited_file_keeps_the_rest_of_its_folder(store: Path, tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    folder.mkdir()
    for n in range(8):
        (folder / f"t{n}.md").write_text("x")
        frontmatters.keep_block(str(folder), f"v: {n}\n", 2, DEFAULT_LIMITS, {"v": n}, {})
    forget()
    frontmatters.keep_block(str(folder), "v: edited\n", 2, DEFAULT_LIMITS, {"v": "edited"}, {})
    forget()
    assert all(frontmatters.kept_block(str(folder), f"v: {n}\n", 2, DEFAULT_LIMITS) for n in range(8))


def test_nothing_is_kept_when_the_cache_is_off(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCASCADE_INDEX", "off")
    for n in range(8):
        frontmatters.keep_block(str(tmp_path), f"v: {n}\n", 2, DEFAULT_LIMITS, {"v": n}, {})
    forget()
    assert not store.exists() or not list(store.glob("blocks-*.json"))


def test_equal_values_read_back_are_shared_and_unequal_ones_never(store: Path, tmp_path: Path) -> None:
    """One object for equal params across files; 1, True, 1.0 and -0.0, 0.0 stay apart (JSON tells them apart)."""
    folder = str(tmp_path)
    values = [1, True, 1.0, 0.0, -0.0, "1", None, [1], {"x": 1}]
    for n, value in enumerate(values):
        data = {"metadata": {"params": {"type": "object"}, "v": {"inner": {"value": value}}}}
        frontmatters.keep_block(folder, f"n: {n}\n", 2, DEFAULT_LIMITS, data, {})
    forget()
    read = [frontmatters.kept_block(folder, f"n: {n}\n", 2, DEFAULT_LIMITS) for n in range(len(values))]
    metadata = [found[0]["metadata"] for found in read if found is not None]
    assert len(metadata) == len(values)
    assert all(m["params"] is metadata[0]["params"] for m in metadata)  # equal: one shared object
    for value, m in zip(values, metadata, strict=True):
        got = m["v"]["inner"]["value"]
        assert got == value
        if not isinstance(value, (list, dict)):
            assert type(got) is type(value) and repr(got) == repr(value)  # -0.0 is not 0.0, True is not 1
    assert len({id(m["v"]) for m in metadata}) == len(values)


MIXED = """\
---
description: Tool {n}.
metadata:
  params:
    type: object
    properties:
      topic: {{type: string}}
    required: [topic]
---
{body}
"""


def test_tools_sharing_one_kept_params_each_get_their_own_verdict(write: Any, cache: Path) -> None:
    """The same params object serves every tool after a list; what differs between the tools is still reported."""
    for n in range(6):
        write(f"tools/t{n}.md", MIXED.format(n=n, body="Write about {{ args.topic }}."))
    reads = write("tools/reads.md", MIXED.format(n=9, body="Write about {{ args.topik }}."))
    bad = write("tools/bad.md", MIXED.format(n=8, body="Write.").replace("type: string", "type: strin"))
    templated = write(
        "tools/templated.md", MIXED.format(n=7, body="Hi.").replace("type: string", "type: '{{ args.kind }}'")
    )
    folder = reads.parent
    run("list", folder, cache)
    checked = run("check", folder, cache)
    assert checked["yaml"] is False
    where = sorted((Path(path).name, line) for path, line, _message in checked["problems"])
    assert where == [("bad.md", 4), ("reads.md", 10)]
    assert templated.exists() and bad.exists()  # a templated params is only known with args: not reported
    first = run("check", folder, cache)  # and as a check that parsed nothing found it too
    assert first["problems"] == checked["problems"]


HELD = """
import sys, threading, time
import orchestrator.frontmatters as frontmatters
from orchestrator.limits import DEFAULT_LIMITS
frontmatters.EXIT_WAIT = 0.2
for n in range(8):
    frontmatters.keep_block(sys.argv[1], f"v: {n}\\n", 2, DEFAULT_LIMITS, {"v": n}, {})
threading.Thread(target=lambda: (frontmatters._shard_lock.acquire(), time.sleep(60)), daemon=True).start()
time.sleep(0.1)
"""


def test_a_thread_stopped_while_keeping_never_hangs_the_exit(tmp_path: Path) -> None:
    """A daemon thread that holds the store's lock at exit: the process exits (writing nothing), it never hangs."""
    cache = tmp_path / "cache"
    done = subprocess.run(
        [sys.executable, "-c", HELD, str(tmp_path)],
        env={**os.environ, "TOOLCASCADE_CACHE": str(cache)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert not list(cache.glob("blocks-*.json"))


def nested(levels: int) -> dict[str, Any]:
    """A frontmatter whose innermost list is ``levels`` containers below the frontmatter itself."""
    value: Any = ["leaf"]
    for _ in range(levels - 1):
        value = [value]
    return {"v": value}


def test_what_is_written_is_compact_json_of_every_kept_value_and_nothing_deeper(store: Path, tmp_path: Path) -> None:
    """The write checks no cycles (nothing kept holds one): a shared value, and one as deep as kept values go, are written.

    A value nested past ``PLAIN_DEPTH`` or holding itself is not kept, and the folder's other blocks are still written.
    """
    from orchestrator.cachefolder import PLAIN_DEPTH

    folder = str(tmp_path)
    shared = {"type": "object"}
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    kept = {
        "shared: 1\n": {"a": shared, "b": shared},
        "deep: 1\n": nested(PLAIN_DEPTH - 1),
        "n: 1\n": {"n": [1, True, 1.0, -0.0, None]},
        "n: 2\n": {"n": "é\u2028"},
    }
    for block, data in kept.items():
        frontmatters.keep_block(folder, block, 2, DEFAULT_LIMITS, data, {"n": 2})
    frontmatters.keep_block(folder, "deeper: 1\n", 2, DEFAULT_LIMITS, nested(PLAIN_DEPTH), {})
    frontmatters.keep_block(folder, "cyclic: 1\n", 2, DEFAULT_LIMITS, {"c": cyclic}, {})
    forget()
    (file,) = store.glob("blocks-*.json")
    text = file.read_text(encoding="ascii")
    written = json.loads(text)
    assert text == json.dumps(written, separators=(",", ":"))  # one compact line, as before: older readers accept it
    assert sorted((repr(data) for data, _lines in written["blocks"].values())) == sorted(map(repr, kept.values()))
    for block, data in kept.items():
        found = frontmatters.kept_block(folder, block, 2, DEFAULT_LIMITS)
        assert found is not None and found == (data, {"n": 2}) and repr(found[0]) == repr(data)
    assert frontmatters.kept_block(folder, "deeper: 1\n", 2, DEFAULT_LIMITS) is None
    assert frontmatters.kept_block(folder, "cyclic: 1\n", 2, DEFAULT_LIMITS) is None


def test_strings_read_back_keep_their_place_and_equal_values_are_shared(store: Path, tmp_path: Path) -> None:
    """Strings are taken as they are wherever they sit (in a list, a mapping, deep down), beside the values that
    need a key of their own (1, True and "1" stay apart), and equal deeper values come back as one object."""
    folder = str(tmp_path / "tools")
    os.makedirs(folder)
    params = {"type": "object", "properties": {"topic": {"type": "string", "enum": ["a", "b", ["c", "d"]]}}}
    for n in range(frontmatters.SHARD_SMALLEST):
        data = {"description": f"d{n}", "metadata": {"params": params, "tags": ["x", n, True, "1", None]}}
        frontmatters.keep_block(folder, f"{BLOCK}# {n}\n", 2, DEFAULT_LIMITS, data, {})
    forget()
    first = frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS)
    second = frontmatters.kept_block(folder, f"{BLOCK}# 1\n", 2, DEFAULT_LIMITS)
    assert first is not None and second is not None
    assert first[0] == {"description": "d0", "metadata": {"params": params, "tags": ["x", 0, True, "1", None]}}
    assert [type(v) for v in second[0]["metadata"]["tags"]] == [str, int, bool, str, type(None)]
    assert first[0]["metadata"]["params"] is second[0]["metadata"]["params"]
    enum = first[0]["metadata"]["params"]["properties"]["topic"]["enum"]
    assert type(enum) is FrozenList and type(enum[2]) is FrozenList and enum[2] == ["c", "d"]


@pytest.mark.parametrize("lines", [{"description": True}, {"description": "2"}, {"description": 2.0}, [["d", 2]]])
def test_a_row_whose_key_lines_are_not_ints_by_name_is_ignored(store: Path, tmp_path: Path, lines: Any) -> None:
    folder = str(tmp_path / "tools")
    os.makedirs(folder)
    for n in range(frontmatters.SHARD_SMALLEST):
        frontmatters.keep_block(folder, f"{BLOCK}# {n}\n", 2, DEFAULT_LIMITS, {"description": f"d{n}"}, {"n": 2})
    forget()
    (file,) = store.glob("blocks-*.json")
    data = json.loads(file.read_text())
    for row in data["blocks"].values():
        row[1] = lines
    file.write_text(json.dumps(data))
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS) is None
    frontmatters._shards.clear()
    for row in data["blocks"].values():
        row[1] = {"description": 2}
    file.write_text(json.dumps(data))
    assert frontmatters.kept_block(folder, f"{BLOCK}# 0\n", 2, DEFAULT_LIMITS) == (
        {"description": "d0"},
        {"description": 2},
    )
