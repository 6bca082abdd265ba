"""Finding tools and the caches that follow edits (R-FIND-1..3)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from freshness_helpers import refresh

from orchestrator import Manager, ToolDefinitionError, ToolNotFoundError, registry
from orchestrator.registry import builtin_folder


def bump(path: Path, text: str) -> None:
    """Rewrite a file so that its mtime surely changes."""
    stat = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))


def test_r_find_1_first_match_wins(write, tmp_path):
    write("one/t.md", "---\ndescription: one\n---\nx\n")
    write("two/t.md", "---\ndescription: two\n---\nx\n")
    write("two/only.md", "---\ndescription: only two\n---\nx\n")
    manager = Manager([tmp_path / "one", tmp_path / "two"])
    assert manager.find_tool("t").description == "one"
    assert manager.find_tool("only").description == "only two"
    assert manager.find_tool("t", paths=[tmp_path / "two"]).description == "two"


def test_r_find_1_nested_refs(write, tools):
    write("tools/team/summarize.md", "---\ndescription: team\n---\nx\n")
    manager = Manager([tools])
    assert manager.find_tool("team/summarize").description == "team"
    with pytest.raises(ToolNotFoundError):
        manager.find_tool("summarize")


def test_r_find_1_builtins_are_searched_last(write, tools):
    assert Manager([tools]).find_tool("execute").path.parent == builtin_folder("tools")
    write("tools/execute.md", "---\ndescription: mine\n---\nx\n")
    assert Manager([tools]).find_tool("execute").description == "mine"


def test_r_find_1_not_found_lists_searched_paths(tools):
    with pytest.raises(ToolNotFoundError) as info:
        Manager([tools]).find_tool("nope")
    assert info.value.ref == "nope"
    assert str(tools.resolve()) in info.value.searched
    assert str(builtin_folder("tools").resolve()) in info.value.searched
    assert "nope" in str(info.value)


@pytest.mark.parametrize("ref", ["../secret", "/etc/passwd", "a/../../secret", "./x", "a//b", "", "a\\b", "team/.."])
def test_r_find_2_escaping_refs_are_refused(write, tools, ref):
    write("secret.md", "---\ndescription: outside\n---\nx\n")
    with pytest.raises(ToolNotFoundError):
        Manager([tools]).find_tool(ref)


def test_r_find_2_symlink_out_of_the_path_is_refused(write, tools, tmp_path):
    outside = write("outside/secret.md", "---\ndescription: secret\n---\nx\n")
    (tools / "link.md").symlink_to(outside)
    (tools / "dir").symlink_to(outside.parent, target_is_directory=True)
    manager = Manager([tools])
    with pytest.raises(ToolNotFoundError) as info:
        manager.find_tool("link")
    assert "outside its search path" in str(info.value)
    with pytest.raises(ToolNotFoundError):
        manager.find_tool("dir/secret")


def test_r_find_2_symlink_inside_the_path_is_fine(write, tools):
    real = write("tools/real.md", "---\ndescription: real\n---\nx\n")
    (tools / "alias.md").symlink_to(real)
    assert Manager([tools]).find_tool("alias").description == "real"


def test_r_find_3_parsed_tools_are_cached(write, tools):
    write("tools/t.md", "---\ndescription: a\n---\nx\n")
    manager = Manager([tools])
    assert manager.find_tool("t") is manager.find_tool("t")


def test_r_find_3_edit_invalidates(write, tools):
    path = write("tools/t.md", "---\ndescription: a\n---\nx\n")
    manager = Manager([tools])
    assert manager.find_tool("t").description == "a"
    bump(path, "---\ndescription: b\n---\nx\n")
    refresh(manager)
    assert manager.find_tool("t").description == "b"


def test_r_find_3_new_file_earlier_in_the_path_is_seen(write, tmp_path):
    write("two/t.md", "---\ndescription: two\n---\nx\n")
    (tmp_path / "one").mkdir()
    manager = Manager([tmp_path / "one", tmp_path / "two"])
    assert manager.find_tool("t").description == "two"
    write("one/t.md", "---\ndescription: one\n---\nx\n")
    os.utime(tmp_path / "one", ns=(0, (tmp_path / "one").stat().st_mtime_ns + 10_000_000))
    refresh(manager)
    assert manager.find_tool("t").description == "one"


def test_r_find_3_clear_cache(write, tools):
    write("tools/t.md", "---\ndescription: a\n---\nx\n")
    manager = Manager([tools])
    first = manager.find_tool("t")
    manager.clear_cache()
    assert manager.find_tool("t") is not first


def test_r_find_3_python_tool_is_really_reimported(write, tools):
    path = write("tools/v.py", "def main(ctx):\n    return 1\n")
    manager = Manager([tools])
    assert manager.invoke_sync("v") == 1
    bump(path, "def main(ctx):\n    return 2\n")
    refresh(manager)
    assert manager.invoke_sync("v") == 2


def test_r_find_3_fixing_a_broken_file_recovers(write, tools):
    path = write("tools/t.md", "---\nmetadata: [\n---\nx\n")
    manager = Manager([tools])
    with pytest.raises(ToolDefinitionError):
        manager.find_tool("t")
    bump(path, "---\ndescription: fixed\n---\nx\n")
    refresh(manager)
    assert manager.find_tool("t").description == "fixed"


def test_r_find_3_discovery_parses_nothing(write, tools, monkeypatch):
    write("tools/broken.md", "---\nmetadata: [\n---\n")
    write("tools/fine.md", "---\ndescription: fine\n---\nx\n")
    write("tools/team/deep.py", "def main(ctx):\n    return 1\n")
    write("tools/README.md", "# not a tool\n")
    write("tools/AUTHORITY.md", "---\nmetadata: {}\n---\n")
    manager = Manager([tools])
    loaded = []
    monkeypatch.setattr("orchestrator.folders.load_tool", lambda *a: loaded.append(a) or None)
    refs = [ref for ref, _path, _sp in manager.registry.discover((manager.paths[0],))]
    assert refs == ["broken", "fine", "team/deep"]
    assert loaded == []


def test_r_find_3_untrusted_paths_hold_no_python(write, tmp_path):
    write("extra/code.py", "def main(ctx):\n    return 'ran'\n")
    write("extra/text.md", "---\ndescription: md\n---\nx\n")
    manager = Manager()
    with pytest.raises(ToolNotFoundError):
        manager.find_tool("code", paths=[tmp_path / "extra"])
    assert manager.find_tool("text", paths=[tmp_path / "extra"]).description == "md"
    trusting = Manager(trusted_paths=[tmp_path / "extra"])
    assert trusting.find_tool("code", paths=[tmp_path / "extra"]).kind == "python"


def test_r_find_3_installed_builtins_are_not_watched(write, tools, monkeypatch):
    write("tools/t.py", "def main(ctx):\n    return 1\n")
    seen: list[str] = []
    real = __import__("orchestrator.searchpath", fromlist=["signature"]).signature

    def spy(path):
        seen.append(path)
        return real(path)

    monkeypatch.setattr("orchestrator.searchpath.signature", spy)
    builtin = str(builtin_folder("tools"))
    Manager([tools], watch_builtins=True).invoke_sync("t")
    assert any(p.startswith(builtin) for p in seen)
    seen.clear()
    Manager([tools], watch_builtins=False).invoke_sync("t")
    assert seen and not any(p.startswith(builtin) for p in seen)
    assert str(tools / "t.py") in seen  # the user's own files are still watched


def test_r_find_1_a_single_folder_string_is_one_path(write, tools):
    write("tools/t.md", "---\ndescription: one\n---\nx\n")
    assert Manager(str(tools)).find_tool("t").description == "one"
    assert Manager(tools).find_tool("t").description == "one"


# -- one tool per search root: the same file keeps the root and trust of the path it was found through

PROBE = """\
async def main(ctx):
    target = ctx.target
    await target.manager.next()
    tool = target.tool
    return {"root": tool.root.name, "trusted": tool.trusted, "files": target.trust["files"], "origin": target.meta.get("origin")}
"""
CALLER = """\
frontmatter = {"metadata": {"paths": "sub"}}

async def main(ctx):
    return await ctx.manager.invoke(ctx.args["ref"])
"""


@pytest.fixture
def two_roots(write, tools):
    """tools/sub/t.md reachable as 'sub/t' (root tools, trusted) and as 't' through `paths: sub` (untrusted)."""
    write("tools/AUTHORITY.md", "---\nmetadata: {origin: tools}\n---\n")
    write("tools/probe.py", PROBE)
    write("tools/caller.py", CALLER)
    write("tools/sub/t.md", "---\nmetadata: {probe: {}}\n---\nbody\n")
    return tools


DIRECT = {"root": "tools", "trusted": True, "files": True, "origin": "tools"}
THROUGH_PATHS = {"root": "sub", "trusted": False, "files": False, "origin": None}


@pytest.mark.parametrize("direct_first", [True, False])
def test_r_find_3_a_file_keeps_the_root_and_trust_of_each_search_path(two_roots, direct_first):
    manager = Manager([two_roots])
    calls = [("sub/t", None, DIRECT), ("caller", {"ref": "t"}, THROUGH_PATHS)]
    for ref, args, expected in (calls if direct_first else calls[::-1]) * 2:
        assert manager.invoke_sync(ref, args) == expected, ref


@pytest.mark.parametrize("direct_first", [True, False])
def test_r_find_3_find_tool_gives_each_search_path_its_own_tool(two_roots, direct_first):
    manager = Manager([two_roots])
    lookups = [
        (lambda: manager.find_tool("sub/t"), (two_roots.resolve(), True)),
        (lambda: manager.find_tool("t", paths=[two_roots / "sub"]), ((two_roots / "sub").resolve(), False)),
    ]
    for find, (root, trusted) in (lookups if direct_first else lookups[::-1]) * 2:
        tool = find()
        assert (tool.root, tool.trusted) == (root, trusted)
    assert manager.find_tool("sub/t") is manager.find_tool("sub/t")


@pytest.mark.parametrize("direct_first", [True, False])
def test_r_find_3_a_malformed_file_fails_through_every_search_path(two_roots, write, direct_first):
    bad = write("tools/sub/bad.md", "---\nmetadata: [\n---\nx\n")
    manager = Manager([two_roots])
    calls = [("sub/bad", None), ("caller", {"ref": "bad"})]
    for ref, args in (calls if direct_first else calls[::-1]) * 2:
        with pytest.raises(ToolDefinitionError) as info:
            manager.invoke_sync(ref, args)
        assert info.value.path == str(bad)
    bump(bad, "---\nmetadata: {probe: {}}\n---\nfixed\n")
    refresh(manager)
    assert manager.invoke_sync("caller", {"ref": "bad"}) == THROUGH_PATHS
    assert manager.invoke_sync("sub/bad") == DIRECT


# -- refs are checked before any file is touched


def test_r_find_2_long_refs_are_refused_before_any_stat(tools, monkeypatch):
    manager = Manager([tools])
    stats = []
    monkeypatch.setattr("orchestrator.searchpath.signature", lambda path: stats.append(path))
    for ref, needle in [
        ("a" * 10_000, r"at most 1024 characters"),
        ("a/" * 600 + "b", r"at most 1024 characters"),
        ("x" * 256, "at most 255 bytes"),
        ("team/" + "é" * 128 + "/t", "at most 255 bytes"),
        ("\ud800", "text a file name can hold"),
        ("a\x00b", "NUL"),
    ]:
        with pytest.raises(ToolNotFoundError, match=needle) as info:
            manager.find_tool(ref)
        assert len(str(info.value)) < 300
    assert stats == []


def test_r_find_2_ref_length_follows_the_limits(write, tools):
    from orchestrator import Limits

    write(f"tools/{'a' * 40}.md", "---\ndescription: long\n---\nx\n")
    assert Manager([tools]).find_tool("a" * 40).description == "long"
    with pytest.raises(ToolNotFoundError, match="at most 32 characters"):
        Manager([tools], limits=Limits(ref_length=32)).find_tool("a" * 40)


@pytest.mark.parametrize("ref", [5, None, ["t"], {"t": 1}, 1.5, True])
def test_r_find_2_refs_that_are_not_strings_are_refused(tools, ref):
    with pytest.raises(ToolNotFoundError, match="a ref must be a non-empty string, not"):
        Manager([tools]).find_tool(ref)


def test_r_find_2_a_search_path_too_long_for_the_os_finds_nothing(write, tools):
    deep = "a" * 250 + "/"
    manager = Manager([tools])
    with pytest.raises(ToolNotFoundError):
        manager.find_tool("t", paths=[tools / (deep * 20)])


def test_r_find_3_a_file_deleted_while_being_read_is_not_found(tmp_path, monkeypatch):
    """A tool (or folder authority) removed between lookup and read: not found, never a definition error."""
    import anyio

    from orchestrator import ToolNotFoundError, registry

    tools = tmp_path / "tools"
    (tools / "team").mkdir(parents=True)
    (tools / "extra.md").write_text("extra\n")
    (tools / "team" / "page.md").write_text("page\n")
    (tools / "team" / "AUTHORITY.md").write_text("---\nmetadata: {tag: a}\n---\n")
    load = registry.Registry.load

    def vanishing(self, path, loader, checked=None, kind="tool"):
        if path.name in ("AUTHORITY.md", "extra.md"):
            path.unlink(missing_ok=True)
        return load(self, path, loader, checked, kind)

    monkeypatch.setattr(registry.Registry, "load", vanishing)
    with pytest.raises(ToolNotFoundError):
        anyio.run(Manager([tools]).invoke, "extra")
    assert anyio.run(Manager([tools]).invoke, "team/page") == "page"


# -- listing at scale (issue 11): what is listed stays what it was; edits are still seen ------------------------


def listed(manager: Manager, hidden: bool = False) -> list[tuple[object, ...]]:
    """A listing as comparable values (errors by type and message)."""
    return [
        (i.ref, i.name, i.kind, i.description, i.hidden, repr(i.params), i.path, i.role, i.format, repr(i.error))
        for i in manager.list_tools(hidden=hidden)
    ]


def write_mixed(write) -> None:
    write("tools/AUTHORITY.md", "---\nmetadata:\n  params: {type: object, properties: {top: {type: string}}}\n---\n")
    write("tools/team/AUTHORITY.md", "---\nmetadata:\n  params: {type: object}\n  color: blue\n---\n")
    for i in range(12):
        write(f"tools/team/t{i}.md", f"---\ndescription: Team tool {i}.\n---\nHi {i}.\n")
    write("tools/team/deep/inner.md", "---\ndescription: Inner.\n---\nInner.\n")
    write("tools/plain.md", "No frontmatter at all.\n")
    write("tools/secret.md", "---\ndescription: Hidden.\nmetadata: {visibility: hidden}\n---\nx\n")
    write("tools/broken.md", "---\nmetadata: [\n---\nx\n")
    write("tools/odd.md", "---\n1: one\n---\nx\n")
    write("tools/anchored.md", "---\ndescription: &d Anchored.\nmetadata: {note: *d}\n---\nx\n")
    write("tools/two.md", "---\nname: one\ndescription: Two.\n---\nx\n")
    write("tools/one.md", "---\nname: one\ndescription: One.\n---\nx\n")
    write("tools/py.py", 'frontmatter = {"description": "A python tool."}\n\n\ndef main(ctx):\n    return 1\n')


def test_listing_is_the_same_through_the_fast_paths(tools, write, monkeypatch):
    from orchestrator import documents
    from orchestrator.authorities import Authorities

    write_mixed(write)
    fast = listed(Manager([tools]), hidden=True)
    monkeypatch.setattr(documents, "_plain", lambda _text, _limits: False)
    monkeypatch.setattr(Authorities, "_cached", lambda self, _name, _key, compute, checked: compute(checked or set()))
    slow = listed(Manager([tools]), hidden=True)
    assert fast == slow
    refs = [row[0] for row in fast]
    assert "team/t11" in refs and "team/deep/inner" in refs and "secret" in refs
    assert any(row[0] == "broken" and "ToolDefinitionError" in str(row[-1]) for row in fast)


def test_folder_authorities_are_read_once_per_folder_per_listing(tools, write, monkeypatch):
    from orchestrator.authorities import Authorities

    write_mixed(write)
    walks = []
    real = Authorities._walk_up

    def counting(self, folder, root, checked):
        walks.append(folder)
        return real(self, folder, root, checked)

    monkeypatch.setattr(Authorities, "_walk_up", counting)
    manager = Manager([tools])
    manager.list_tools()
    # tools/, tools/team, tools/team/deep (and the built-in folder): once each, not once per tool.
    assert len(walks) == len(set(walks)) == 4
    walks.clear()
    manager.list_tools()
    assert walks == []


def test_listing_sees_folder_authority_edits(tools, write):
    write_mixed(write)
    manager = Manager([tools])
    before = listed(manager)

    def same_as_a_new_manager() -> list[tuple[object, ...]]:
        refresh(manager)
        now = listed(manager)
        assert now == listed(Manager([tools]))
        return now

    write("tools/team/AUTHORITY.md", "---\nmetadata:\n  params: {type: object, required: [x]}\n---\n")
    edited = same_as_a_new_manager()
    assert edited != before
    write("tools/team/deep/AUTHORITY.md", "---\nmetadata:\n  params: {type: object, required: [y]}\n---\n")
    deeper = same_as_a_new_manager()
    assert deeper != edited
    (tools / "team" / "AUTHORITY.md").unlink()
    assert same_as_a_new_manager() != deeper


def test_a_run_finds_a_cached_tool_with_one_check_of_what_it_came_from(tools, write):
    import orchestrator.registry as registry_module

    write("tools/team/a.md", "---\ndescription: A.\n---\nA.\n")
    manager = Manager([tools])
    registry = manager.registry
    first = registry.find("team/a", manager.paths, set())
    calls = []
    real = registry._find_file

    def counting(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    registry._find_file = counting  # type: ignore[method-assign]
    for _ in range(5):
        assert registry.find("team/a", manager.paths, set()) is first
    assert calls == []
    write("tools/team/a.md", "---\ndescription: A, edited at more length.\n---\nA.\n")
    refresh(manager)
    assert registry.find("team/a", manager.paths, set()).description == "A, edited at more length."
    assert calls == ["team/a"]
    assert registry_module.Snapshot().missed == {}


@pytest.mark.anyio
async def test_a_cold_chain_stats_each_file_a_bounded_number_of_times(write, tmp_path, monkeypatch):
    """Planning N middleware misses a name per tool; those misses must not stat every file each time (N^2)."""
    count = 60
    for i in range(count):
        write(f"tools/pass{i}.py", "async def main(ctx):\n    return await ctx.target.manager.next()\n")
    entries = ", ".join(f"'pass{i}': {{}}" for i in range(count))
    write("tools/stack.py", f"frontmatter = {{'metadata': {{{entries}}}}}\nasync def main(ctx):\n    return 1\n")
    stats: list[str] = []
    real = registry.signature
    monkeypatch.setattr(registry, "signature", lambda path: stats.append(path) or real(path))
    manager = Manager([tmp_path / "tools"])
    assert await manager.invoke("stack") == 1
    assert len(stats) < 40 * count  # linear; it was about 8 * count * count: every file on every miss


def test_a_warm_listing_reuses_what_it_described_until_a_file_changes(write, tmp_path):
    """describe() is cached with the files it came from: no new objects for an unchanged tool, news for an edit."""
    tool = write("tools/a.md", "---\ndescription: first\n---\nx\n")
    write("tools/b.md", "---\ndescription: other\n---\nx\n")
    manager = Manager([tmp_path / "tools"])
    first = {info.ref: info for info in manager.list_tools()}
    second = {info.ref: info for info in manager.list_tools()}
    assert first["a"] is second["a"] and first["b"] is second["b"]
    bump(tool, "---\ndescription: edited\n---\nx\n")
    refresh(manager)
    third = {info.ref: info for info in manager.list_tools()}
    assert third["a"].description == "edited"
