"""The on-disk index (orchestrator.index): a new Manager's listing reuses what an earlier one computed.

Every test lists real files twice, through two Managers (two processes'
worth of state), and compares with a listing made with the index off: the
index may only change how much is read, never what is listed. Files are
aged with ``os.utime`` so their entries are not "racy" (changed within 2 s
of the write), except where the racy rule itself is tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cache_helpers import Loads, age

import orchestrator.cachefolder
import orchestrator.folders
import orchestrator.index
from orchestrator import Manager
from orchestrator.cachefolder import cache_folder
from orchestrator.index import Index
from orchestrator.tool import ToolInfo

Write = Callable[[str, str], Path]

TOOL = """\
---
description: Tool {n}, about {{{{ args.topic }}}}.
metadata:
  params:
    type: object
    properties: {{topic: {{type: string}}, depth: {{type: integer, default: 1}}}}
    required: [topic]
---
Write about {{{{ args.topic }}}}.
"""
PY = 'frontmatter = {"description": "A python tool."}\n\n\nasync def main(ctx):\n    return 1\n'


def touch_back(path: Path, seconds: float) -> None:
    """Give ``path`` (a file just edited) an old mtime, different from any it had."""
    when = time.time() - seconds
    os.utime(path, (when, when))


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[Loads]:
    counter = Loads()
    for name in ("load_tool", "read_name", "read_python_name"):
        monkeypatch.setattr(orchestrator.folders, name, counter.wrap(getattr(orchestrator.folders, name)))
    yield counter


@pytest.fixture
def catalog(write: Write, tmp_path: Path) -> Path:
    """Two folders of tools (markdown with params, python, a declared name), aged."""
    for n in range(3):
        write(f"tools/team/t{n}.md", TOOL.format(n=n))
    write("tools/solo.py", PY)
    write("tools/named.md", "---\nname: alpha\ndescription: Named.\n---\nHi.\n")
    age(tmp_path / "tools")
    return tmp_path / "tools"


def listing(folder: Path, **options: Any) -> list[ToolInfo]:
    return Manager([folder], **options).list_tools(hidden=True)


def truth(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[ToolInfo]:
    """The listing with the index off: what every listing must equal."""
    with monkeypatch.context() as patch:
        patch.setenv("TOOLCASCADE_INDEX", "off")
        return listing(folder)


def index_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("index-*.json")) if cache.is_dir() else []


def refs(infos: list[ToolInfo]) -> dict[str, ToolInfo]:
    return {info.ref: info for info in infos}


# -- reuse ---------------------------------------------------------------------


def test_a_warm_index_parses_nothing(catalog: Path, cache: Path, loads: Loads, monkeypatch) -> None:
    first = listing(catalog)
    assert loads.paths  # the first listing read the files ...
    assert len(index_files(cache)) == 1  # ... and wrote the index
    loads.paths.clear()
    second = listing(catalog)
    assert loads.paths == []  # a new Manager: no tool file parsed, no name read
    assert second == first == truth(catalog, monkeypatch)
    assert refs(second)["alpha"].path == catalog / "named.md"


def test_an_installed_packages_builtins_are_kept_and_a_warm_listing_rewrites_nothing(
    catalog: Path, cache: Path, loads: Loads, monkeypatch
) -> None:
    # An installed package's built-ins are never stat-ed (watch_builtins=False): its version and code are the
    # index's key, so their rows are kept without signatures; else each listing re-read them and rewrote the file.
    first = Manager([catalog], watch_builtins=False).list_tools(hidden=True)
    assert any(info.ref == "execute" for info in first)
    (written,) = index_files(cache)
    before = written.stat()
    loads.paths.clear()
    second = Manager([catalog], watch_builtins=False).list_tools(hidden=True)
    assert loads.paths == []  # not even a built-in read again
    assert second == first
    after = written.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)  # not rewritten


def test_served_params_are_frozen_as_computed_ones(catalog: Path, cache: Path) -> None:
    listing(catalog)
    served = refs(listing(catalog))["team/t0"].params
    with pytest.raises(TypeError, match="read-only"):
        served["type"] = "array"
    assert served == {
        "type": "object",
        "properties": {"topic": {"type": "string"}, "depth": {"type": "integer", "default": 1}},
        "required": ["topic"],
    }


def test_the_index_lives_in_the_cache_folder_only(catalog: Path, cache: Path, tmp_path: Path) -> None:
    before = sorted(p.relative_to(tmp_path) for p in catalog.rglob("*"))
    listing(catalog)
    assert sorted(p.relative_to(tmp_path) for p in catalog.rglob("*")) == before
    assert [f.parent for f in index_files(cache)] == [cache]


def test_index_off(catalog: Path, cache: Path, monkeypatch) -> None:
    monkeypatch.setenv("TOOLCASCADE_INDEX", "off")
    listing(catalog)
    assert index_files(cache) == []


def test_clear_cache_removes_the_index(catalog: Path, cache: Path, loads: Loads) -> None:
    manager = Manager([catalog])
    manager.list_tools()
    assert len(index_files(cache)) == 1
    manager.clear_cache()
    assert index_files(cache) == []
    loads.paths.clear()
    listing(catalog)
    assert "t0.md" in loads.paths  # nothing was reused


def test_registered_functions_bypass_the_index(catalog: Path, cache: Path) -> None:
    manager = Manager([catalog])
    manager.register("t9", lambda ctx: 1)
    assert "t9" in refs(manager.list_tools())
    assert index_files(cache) == []


# -- edits ---------------------------------------------------------------------


def test_an_edit_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    listing(catalog)
    edited = catalog / "team" / "t1.md"
    edited.write_text(TOOL.format(n=1).replace("Tool 1", "Edited tool"))
    touch_back(edited, 30)
    assert refs(listing(catalog))["team/t1"].description.startswith("Edited tool")
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_an_edit_with_the_same_size_and_mtime_is_seen_when_racy(write: Write, tmp_path: Path, cache: Path) -> None:
    """Listed within 2 s of its last change, a file's entries are not written: a same-second edit is seen."""
    path = write("fresh/tool.md", "---\ndescription: aaaa\n---\nHi.\n")
    stamp = path.stat().st_mtime_ns
    listing(tmp_path / "fresh")
    path.write_text("---\ndescription: bbbb\n---\nHi.\n")
    os.utime(path, ns=(stamp, stamp))  # same size, same mtime: only the racy rule can tell
    assert refs(listing(tmp_path / "fresh"))["tool"].description == "bbbb"


def test_a_new_file_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    listing(catalog)
    (catalog / "team" / "t7.md").write_text(TOOL.format(n=7))
    assert "team/t7" in refs(listing(catalog))
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_a_deleted_file_is_gone(catalog: Path, cache: Path, monkeypatch) -> None:
    listing(catalog)
    (catalog / "team" / "t2.md").unlink()
    assert "team/t2" not in refs(listing(catalog))
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_a_new_authority_above_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    listing(catalog)
    authority = catalog / "AUTHORITY.md"
    authority.write_text("---\nmetadata:\n  params:\n    properties: {tone: {type: string}}\n---\n")
    touch_back(authority, 30)
    touch_back(catalog, 30)
    params = refs(listing(catalog))["solo"].params
    assert params == {"properties": {"tone": {"type": "string"}}}
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_a_renamed_folder_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    listing(catalog)
    (catalog / "team").rename(catalog / "crew")
    age(catalog)
    listed = refs(listing(catalog))
    assert "crew/t0" in listed and "team/t0" not in listed
    assert listed["crew/t0"].path == catalog / "crew" / "t0.md"
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_a_declared_name_edited_in_place_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    """The folder's signature does not change; the file's does, and the folder's entry depends on it."""
    listing(catalog)
    named = catalog / "named.md"
    folder_stamp = catalog.stat().st_mtime_ns
    named.write_text("---\nname: beta\ndescription: Named.\n---\nHi.\n")
    touch_back(named, 30)
    assert catalog.stat().st_mtime_ns == folder_stamp
    listed = refs(listing(catalog))
    assert "beta" in listed and "alpha" not in listed
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_a_file_claiming_a_stem_in_place_is_seen(catalog: Path, cache: Path, monkeypatch) -> None:
    """``solo`` found by its stem, then another file declares ``name: solo``: the declared name wins."""
    listing(catalog)
    named = catalog / "named.md"
    named.write_text("---\nname: solo\ndescription: Now solo.\n---\nHi.\n")
    touch_back(named, 30)
    assert refs(listing(catalog))["solo"].description == "Now solo."
    assert listing(catalog) == truth(catalog, monkeypatch)


# -- never persisted -----------------------------------------------------------


def test_errors_are_reported_every_time(catalog: Path, cache: Path, loads: Loads) -> None:
    broken = catalog / "team" / "broken.md"
    broken.write_text("---\ndescription: [unclosed\n---\nHi.\n")
    age(catalog)
    first = refs(listing(catalog))["team/broken"]
    assert first.error is not None
    loads.paths.clear()
    second = refs(listing(catalog))["team/broken"]
    assert second.error is not None and str(second.error) == str(first.error)
    assert loads.paths == ["broken.md"]  # the broken file, and only it, is read again


def test_values_json_does_not_carry_are_recomputed(catalog: Path, cache: Path, loads: Loads, monkeypatch) -> None:
    dated = catalog / "dated.md"
    dated.write_text("---\nmetadata:\n  params: {since: 2024-01-01}\n---\nHi.\n")
    age(catalog)
    listing(catalog)
    loads.paths.clear()
    listed = refs(listing(catalog))
    assert loads.paths == ["dated.md"]
    assert listed["dated"] == refs(truth(catalog, monkeypatch))["dated"]
    assert listed["dated"].error is None and type(listed["dated"].params["since"]).__name__ == "date"


# -- a hostile or broken index -------------------------------------------------


def the_index(catalog: Path, cache: Path) -> Path:
    listing(catalog)
    (found,) = index_files(cache)
    return found


@pytest.mark.parametrize(
    "damage",
    [
        "truncated",
        "garbage",
        "empty",
        "wrong version",
        "foreign",
        "bad rows",
        "bad values",
        "deep",
        "others write",
        "member chain",
        "described text",
        "row number a bool",
        "row number negative",
    ],
)
def test_a_damaged_index_is_ignored_and_rewritten(
    catalog: Path, cache: Path, loads: Loads, monkeypatch, damage: str
) -> None:
    path = the_index(catalog, cache)
    data = json.loads(path.read_text())
    text = path.read_text()
    if damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "garbage":
        text = "\x00\xff not json at all"
    elif damage == "empty":
        text = ""
    elif damage == "wrong version":
        text = json.dumps({**data, "version": 999})
    elif damage == "foreign":
        text = json.dumps({**data, "key": {**data["key"], "paths": [["/elsewhere", True]]}})
    elif damage == "bad rows":
        data["paths"] = [[1, "x"]] + data["paths"]
        text = json.dumps(data)
    elif damage == "bad values":
        for name in data["entries"]:
            for row in data["entries"][name].values():
                row[1] = [10**9]  # a row number past the table
        data["values"] = "nope"
        text = json.dumps(data)
    elif damage == "deep":
        text = "[" * 200_000
    elif damage == "member chain":  # every row a member of the one before: no recursion may follow it
        rows = len(data["paths"])
        data["paths"] += [[f"/nowhere/{n}", None] for n in range(5_000)]
        data["members"] = {str(n): [n + 1] for n in range(rows + 4_999)}
        text = json.dumps(data)
    elif damage == "described text":  # a description that is not text
        for row in data["entries"]["described"].values():
            row[0][3] = 5
        text = json.dumps(data)
    elif damage == "row number a bool":  # JSON true is no row number, though Python indexes with it
        for row in data["entries"]["described"].values():
            row[1] = [True, *row[1][1:]]
        text = json.dumps(data)
    elif damage == "row number negative":  # Python indexes from the end with it: no row either
        for row in data["entries"]["described"].values():
            row[1] = [-1, *row[1][1:]]
        text = json.dumps(data)
    path.write_text(text)
    if damage == "others write":
        path.chmod(0o666)
    loads.paths.clear()
    assert listing(catalog) == truth(catalog, monkeypatch)
    if damage != "member chain":  # still an index (its extra members only add checks): entries may be served
        assert "t0.md" in loads.paths  # computed, not taken from the damaged file
    rewritten = json.loads(path.read_text())
    assert rewritten["version"] == orchestrator.index.VERSION and rewritten["entries"]["described"]


def test_the_index_is_readable_and_writable_by_its_user_alone(catalog: Path, cache: Path, monkeypatch) -> None:
    """A value whose paths still match is served as it is: only the user may write (or read) the file."""
    path = the_index(catalog, cache)
    if hasattr(os, "getuid"):
        assert path.stat().st_mode & 0o077 == 0  # readable and writable by the user alone
        assert (path.parent.stat().st_mode & 0o077) == 0


def test_a_directory_where_the_index_should_be(catalog: Path, cache: Path, monkeypatch) -> None:
    path = the_index(catalog, cache)
    path.unlink()
    path.mkdir()
    assert listing(catalog) == truth(catalog, monkeypatch)
    assert listing(catalog) == truth(catalog, monkeypatch)
    assert path.is_dir()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_where_the_index_should_be_never_hangs(catalog: Path, cache: Path, monkeypatch) -> None:
    path = the_index(catalog, cache)
    path.unlink()
    os.mkfifo(path)
    start = time.monotonic()
    assert listing(catalog) == truth(catalog, monkeypatch)
    assert time.monotonic() - start < 30  # a blocking open would never return


def test_an_unwritable_cache_folder(catalog: Path, tmp_path: Path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TOOLCASCADE_CACHE", str(blocker / "cache"))
    assert listing(catalog) == truth(catalog, monkeypatch)
    assert listing(catalog) == truth(catalog, monkeypatch)


def test_an_index_over_the_size_bound_is_not_written(catalog: Path, cache: Path, monkeypatch) -> None:
    monkeypatch.setattr(orchestrator.index, "INDEX_BYTES", 100)
    assert listing(catalog) == truth(catalog, monkeypatch)
    assert index_files(cache) == []


def test_old_index_files_are_pruned(write: Write, tmp_path: Path, cache: Path, monkeypatch) -> None:
    monkeypatch.setattr(orchestrator.index, "INDEX_FILES", 2)
    for n in range(4):
        folder = write(f"set{n}/tool.md", "---\ndescription: x\n---\nHi.\n").parent
        age(folder)
        listing(folder)
    assert len(index_files(cache)) == 2


def test_two_processes_listing_at_once_leave_a_whole_file(catalog: Path, cache: Path) -> None:
    code = "import sys; from orchestrator import Manager; print(len(Manager([sys.argv[1]]).list_tools()))"
    env = {**os.environ, "TOOLCASCADE_CACHE": str(cache)}
    runs = [
        subprocess.Popen([sys.executable, "-c", code, str(catalog)], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [run.communicate(timeout=120)[0].strip() for run in runs]
    assert len(set(outputs)) == 1
    (path,) = index_files(cache)
    assert json.loads(path.read_text())["version"] == orchestrator.index.VERSION
    assert not list(cache.glob(".index-*"))  # no temporary file left behind


# -- where ---------------------------------------------------------------------


def test_the_cache_folder(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOOLCASCADE_CACHE", str(tmp_path / "a"))
    assert cache_folder() == tmp_path / "a"
    monkeypatch.delenv("TOOLCASCADE_CACHE")
    if sys.platform != "win32":
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cache_folder() == tmp_path / "xdg" / "toolcascade"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert cache_folder() == tmp_path / "home" / ".cache" / "toolcascade"


def test_one_index_per_set_of_search_paths_and_options(catalog: Path, write: Write, cache: Path) -> None:
    other = write("other/tool.md", "---\ndescription: x\n---\nHi.\n").parent
    keys = {
        Index.open(Manager([catalog]).registry).file,  # type: ignore[union-attr]
        Index.open(Manager([other]).registry).file,  # type: ignore[union-attr]
        Index.open(Manager([catalog], formats=["claude"]).registry).file,  # type: ignore[union-attr]
        Index.open(Manager([catalog], trusted_paths=[other]).registry).file,  # type: ignore[union-attr]
    }
    from orchestrator.limits import Limits

    keys.add(Index.open(Manager([catalog], limits=Limits(yaml_depth=50)).registry).file)  # type: ignore[union-attr]
    assert len(keys) == 4  # trusted_paths does not change what a listing of these paths computes


def test_a_tool_shadowed_in_an_earlier_search_path_is_seen(
    write: Write, tmp_path: Path, cache: Path, monkeypatch
) -> None:
    """Values reused inside a listing bring their paths along.

    Listing ``x`` looks ``b`` up (its metadata key) before ``b`` itself is
    described; ``b``'s row must still depend on the first folder, where a new
    ``b.md`` now wins.
    """
    write("first/x.md", "---\nmetadata:\n  b: {}\n---\nX.\n")
    write("second/b.md", "---\ndescription: second\n---\nB.\n")
    first, second = tmp_path / "first", tmp_path / "second"
    age(first, second)
    Manager([first, second]).list_tools()
    write("first/b.md", "---\ndescription: first\n---\nB.\n")
    age(first)
    listed = refs(Manager([first, second]).list_tools())
    assert (listed["b"].description, listed["b"].path) == ("first", first / "b.md")


# -- the package's own frontmatters, for a first invoke ------------------------------

FIRST = (
    "import sys, orchestrator; orchestrator.Manager([sys.argv[1]]).invoke_sync('noop'); print('yaml' in sys.modules)"
)


def first_invoke(folder: Path, cache: Path, **env: str) -> str:
    """Whether a fresh interpreter's first invoke of a python tool imported YAML ("True"/"False")."""
    run = subprocess.run(
        [sys.executable, "-c", FIRST, str(folder)],
        env={**os.environ, "TOOLCASCADE_CACHE": str(cache), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_a_first_invoke_parses_no_yaml_once_the_builtins_are_kept(write: Write, tmp_path: Path, cache: Path) -> None:
    folder = write("first/noop.py", "async def main(ctx):\n    return 1\n").parent
    assert first_invoke(folder, cache) == "True"  # parses the built-in tools and authority, and keeps them
    assert first_invoke(folder, cache) == "False"  # the next process reuses them: no YAML at all
    assert first_invoke(folder, cache, TOOLCASCADE_INDEX="off") == "True"


@pytest.mark.parametrize("damage", ["garbage", "others write", "wrong key"])
def test_damaged_kept_frontmatters_are_ignored(write: Write, tmp_path: Path, cache: Path, damage: str) -> None:
    folder = write("first/noop.py", "async def main(ctx):\n    return 1\n").parent
    first_invoke(folder, cache)
    (store,) = cache.glob("frontmatters-*.json")
    if damage == "garbage":
        store.write_text("{not json")
    elif damage == "others write":
        store.chmod(0o666)
    else:
        data = json.loads(store.read_text())
        data["key"]["python"] = "another"
        store.write_text(json.dumps(data))
    assert first_invoke(folder, cache) == "True"  # parsed again, never trusted ...
    assert first_invoke(folder, cache) == "False"  # ... and written again, whole and the user's own


def test_kept_frontmatters_are_keyed_by_content(tmp_path: Path, monkeypatch) -> None:
    from orchestrator.limits import DEFAULT_LIMITS, Limits

    monkeypatch.setenv("TOOLCASCADE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(orchestrator.cachefolder, "_blocks", None)
    monkeypatch.setattr(orchestrator.cachefolder, "_blocks_file", None)
    block = "description: kept\nmetadata:\n  params: {type: object}\n"
    orchestrator.cachefolder.keep_frontmatter(block, 2, DEFAULT_LIMITS, {"description": "kept"}, {"description": 2})
    got = orchestrator.cachefolder.kept_frontmatter(block, 2, DEFAULT_LIMITS)
    assert got == ({"description": "kept"}, {"description": 2})
    got[0]["description"] = "changed"  # the caller's own copy
    assert orchestrator.cachefolder.kept_frontmatter(block, 2, DEFAULT_LIMITS)[0] == {"description": "kept"}  # type: ignore[index]
    assert orchestrator.cachefolder.kept_frontmatter(block + " ", 2, DEFAULT_LIMITS) is None
    assert orchestrator.cachefolder.kept_frontmatter(block, 3, DEFAULT_LIMITS) is None
    assert orchestrator.cachefolder.kept_frontmatter(block, 2, Limits(yaml_depth=5)) is None
    import datetime

    orchestrator.cachefolder.keep_frontmatter(
        "d: 2024-01-01\n", 2, DEFAULT_LIMITS, {"d": datetime.date(2024, 1, 1)}, {}
    )
    assert orchestrator.cachefolder.kept_frontmatter("d: 2024-01-01\n", 2, DEFAULT_LIMITS) is None


def test_a_check_after_an_edit_keeps_the_rest_of_what_a_listing_wrote(
    catalog: Path, cache: Path, loads: Loads, monkeypatch
) -> None:
    """``check`` computes names, not rows: writing the index, it keeps the rows still valid."""
    from orchestrator.check import check

    listing(catalog)
    added = catalog / "team" / "t9.md"
    added.write_text(TOOL.format(n=9))
    age(catalog / "team")
    assert check(Manager([catalog])) == check(Manager([catalog]))
    loads.paths.clear()
    listed = listing(catalog)
    assert "solo.py" not in loads.paths and "named.md" not in loads.paths  # their rows were kept
    assert "t9.md" in loads.paths  # the edited folder's were not
    assert listed == truth(catalog, monkeypatch)


@pytest.mark.parametrize(
    "text",
    ["/a/b/c.md", "a/b", "/", "//x/y", "///x/y", "a/./b", "a/../b", "a//b", "/a/b/", ".", "..", "a/.", "./a", "x"],
)
def test_a_path_read_from_the_index_is_the_path_of_its_text(text: str) -> None:
    # Paths are made from their folder's (one per folder): the same Path, whatever the text holds.
    decoder = orchestrator.index.Decoder([])
    decoder.path("/a/b/other.md")  # a folder made before
    made = decoder.path(text)
    assert made == Path(text) and str(made) == str(Path(text)) and made.parts == Path(text).parts
    assert decoder.path(text) is made


def test_params_share_a_number_exactly_when_their_json_texts_are_equal() -> None:
    # Numbered by repr (cheaper than encoding): it must part and join values as their JSON texts do.
    from orchestrator.frozen import freeze
    from orchestrator.indexcodec import Encoder

    values: list[Any] = [
        1,
        1.0,
        True,
        "1",
        None,
        "None",
        -0.0,
        0.0,
        0,
        1e16,
        float("nan"),
        [1, "2"],
        ["1", 2],
        {"a": 1, "b": [True]},
        {"b": [True], "a": 1},  # key order shows in listings: apart
        {"a": 1, "b": [1]},
        {"a": "x'y", "b": 'x"y'},
        {"a": 'x"y', "b": "x'y"},
        {"a": {"b": None}},
        {"a": {"b": "None"}},
        "\ud800",  # a lone surrogate, as JSON text read back may hold
    ]
    for frozen in (False, True):
        encoder = Encoder()
        numbers = [encoder.number(freeze(v) if frozen else v, frozen) for v in values]
        texts = [json.dumps(v, ensure_ascii=False) for v in values]
        for i, a in enumerate(texts):
            for j, b in enumerate(texts):
                assert (numbers[i] == numbers[j]) == (a == b), (values[i], values[j])
    encoder = Encoder()
    kept = {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}
    read_back = json.loads(json.dumps(kept))  # a value of the old file, carried: plain dicts
    assert encoder.number(freeze(kept), True) == encoder.number(read_back, True) != encoder.number(read_back, False)


def test_equal_params_are_written_once_as_written_and_unequal_ones_apart() -> None:
    # The index numbers each params value by its JSON text (non-ASCII kept as written): equal values share one.
    from orchestrator.frozen import freeze
    from orchestrator.indexcodec import Encoder

    def row(params: Any) -> ToolInfo:
        return ToolInfo("t", "t", "markdown", "café ☕", False, freeze(params), Path("/x/t.md"))

    encoder = Encoder()
    first = encoder.encode("described", row({"type": "object", "title": "Thé ☕"}))
    again = encoder.encode("described", row({"type": "object", "title": "Thé ☕"}))
    other = encoder.encode("described", row({"type": "object", "title": "The"}))
    assert first[5] == again[5] != other[5]
    assert encoder.values == [[{"type": "object", "title": "Thé ☕"}, True], [{"type": "object", "title": "The"}, True]]
    assert first[3] == "café ☕"
    for texts in (("d", 1, None), ("d", None, ["f"])):  # a description, role or format JSON would not carry as text
        bad = ToolInfo("t", "t", "markdown", texts[0], False, None, None, None, texts[1], texts[2])  # type: ignore[arg-type]
        assert encoder.encode("described", bad) is orchestrator.index.MISS
