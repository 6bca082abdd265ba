"""Loading tool files (R-TOOL-1..5)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from freshness_helpers import refresh

from orchestrator import Manager, ToolDefinitionError, ToolNotFoundError


def test_r_tool_1_markdown_tool_fields(write, tools):
    write(
        "tools/summarize.md",
        """
        ---
        description: Summarizes text.
        metadata:
          model: scripted
          tags: [a, b]
        extra-key: kept
        ---

        Summarize {{ args.text }}.
        """,
    )
    tool = Manager([tools]).find_tool("summarize")
    assert tool.name == "summarize"
    assert tool.kind == "markdown"
    assert tool.description == "Summarizes text."
    assert tool.metadata == {"model": "scripted", "tags": ["a", "b"]}
    assert tool.prompt == "Summarize {{ args.text }}."
    assert tool.frontmatter["extra-key"] == "kept"
    assert tool.authority is None
    assert tool.uri == (tools / "summarize.md").as_uri()
    assert tool.prompt_line == 9


def test_r_tool_1_explicit_name_and_empty_metadata(write, tools):
    write("tools/file.md", "---\nname: other\n---\nbody\n")
    tool = Manager([tools]).find_tool("file")
    assert tool.name == "other"
    assert tool.metadata == {}


def test_r_tool_1_markdown_without_frontmatter_is_a_prompt(write, tools):
    write("tools/plain.md", "Just a prompt.\n")
    tool = Manager([tools]).find_tool("plain")
    assert tool.prompt == "Just a prompt."
    assert tool.metadata == {}


def test_r_tool_2_python_tool(write, tools):
    write(
        "tools/add.py",
        """
        frontmatter = {"description": "Adds.", "metadata": {"params": {"type": "object"}}}

        def main(ctx):
            return ctx.args["a"] + ctx.args["b"]
        """,
    )
    tool = Manager([tools]).find_tool("add")
    assert tool.kind == "python"
    assert tool.description == "Adds."
    assert callable(tool.fn)
    assert tool.prompt is None


def test_r_tool_2_python_tools_are_isolated_modules(write, tools):
    write("tools/a/helper.py", "frontmatter = {'name': 'helper-a'}\nVALUE = 'a'\ndef main(ctx):\n    return VALUE\n")
    write("tools/b/helper.py", "frontmatter = {'name': 'helper-b'}\nVALUE = 'b'\ndef main(ctx):\n    return VALUE\n")
    before = list(sys.path)
    manager = Manager([tools])
    a = manager.find_tool("a/helper")
    b = manager.find_tool("b/helper")
    assert (a.fn.__globals__["VALUE"], b.fn.__globals__["VALUE"]) == ("a", "b")
    assert sys.path == before
    assert "helper" not in sys.modules


def test_r_tool_2_register_function_tool():
    manager = Manager()
    tool = manager.register(
        "double", lambda ctx: ctx.args["n"] * 2, metadata={"visibility": "hidden"}, description="x2"
    )
    assert tool.kind == "function"
    assert manager.find_tool("double") is tool
    assert manager.invoke_sync("double", {"n": 21}) == 42


def test_r_tool_3_tool_is_frozen(write, tools):
    write("tools/t.md", "---\ndescription: d\n---\nx\n")
    tool = Manager([tools]).find_tool("t")
    for field in ("name", "uri", "kind", "frontmatter", "metadata", "prompt", "fn", "authority", "description"):
        assert hasattr(tool, field)
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("name", "text", "line", "needle"),
    [
        ("bad-yaml.md", "---\ndescription: ok\nmetadata: {a: [1, 2}\n---\nx\n", 3, "invalid YAML"),
        ("list.md", "---\n- a\n- b\n---\nx\n", 2, "must be a mapping"),
        ("scalar.md", "---\njust text\n---\nx\n", 2, "must be a mapping"),
        ("meta-list.md", "---\nmetadata: [a, b]\n---\nx\n", 2, "'metadata' must be a mapping"),
        ("slash.md", "---\nname: a/b\n---\nx\n", None, "may not contain"),
        ("backslash.md", "---\nname: 'a\\\\b'\n---\nx\n", None, "may not contain"),
        ("dots.md", "---\nname: a..b\n---\nx\n", None, "may not contain"),
        ("empty-name.md", "---\nname: ''\n---\nx\n", None, "non-empty"),
        ("empty.md", "", None, "file is empty"),
        ("unclosed.md", "---\ndescription: never closed\nbody\n", 1, "never closed"),
        ("onkey.md", "---\nmetadata:\n  on: push\n---\nx\n", 3, "not a string"),
        ("intkey.md", "---\nmetadata:\n  nested:\n    1: one\n---\nx\n", 4, "not a string"),
    ],
)
def test_r_tool_5_malformed_markdown(write, tools, name, text, line, needle):
    path = write(f"tools/{name}", text)
    write("tools/good.md", "---\ndescription: fine\n---\nok\n")
    manager = Manager([tools])
    with pytest.raises(ToolDefinitionError) as info:
        manager.find_tool(name[:-3])
    error = info.value
    assert needle in str(error)
    assert error.path == str(path)
    assert error.line == line
    assert str(path) in str(error)
    assert manager.find_tool("good").description == "fine"


@pytest.mark.parametrize(
    ("name", "text", "line", "needle"),
    [
        ("nomain.py", "frontmatter = {}\n", None, "main(ctx)"),
        ("raises.py", "frontmatter = {}\n\nraise RuntimeError('boom')\n", 3, "RuntimeError: boom"),
        ("syntax.py", "frontmatter = {}\ndef main(ctx)\n    return 1\n", 2, "syntax error"),
        ("badfm.py", "frontmatter = ['x']\ndef main(ctx):\n    return 1\n", None, "must be a mapping"),
        (
            "badmeta.py",
            "frontmatter = {'metadata': 3}\ndef main(ctx):\n    return 1\n",
            None,
            "'metadata' must be a mapping",
        ),
        (
            "intkey.py",
            "frontmatter = {'metadata': {'a': [{1: 2}]}}\ndef main(ctx):\n    return 1\n",
            None,
            "key 1 in frontmatter['metadata']['a'][0] is not a string",
        ),
    ],
)
def test_r_tool_5_malformed_python(write, tools, name, text, line, needle):
    path = write(f"tools/{name}", text)
    write("tools/good.py", "def main(ctx):\n    return 'ok'\n")
    manager = Manager([tools])
    with pytest.raises(ToolDefinitionError) as info:
        manager.find_tool(name[:-3])
    assert needle in str(info.value)
    assert info.value.path == str(path)
    assert info.value.line == line
    assert manager.invoke_sync("good") == "ok"


def test_r_tool_5_yaml_error_line_is_the_file_line(write, tools):
    write("tools/deep.md", "---\ndescription: a\nmetadata:\n  x: 1\n  y: [unclosed\n---\nbody\n")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tools]).find_tool("deep")
    assert info.value.line is not None and info.value.line >= 5
    assert f"deep.md:{info.value.line}:" in str(info.value)


def test_r_tool_5_python_tool_yaml_is_never_unsafe(write, tools):
    write("tools/unsafe.md", "---\nmetadata: !!python/object/apply:os.system ['echo pwned']\n---\nx\n")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tools]).find_tool("unsafe")
    assert "invalid YAML" in str(info.value)


def test_r_tool_5_bad_register_name():
    with pytest.raises(ToolDefinitionError):
        Manager().register("a/b", lambda ctx: 1)
    with pytest.raises(ToolNotFoundError):
        Manager().find_tool("never-registered")


def test_r_tool_5_unreadable_bytes(tools: Path):
    (tools / "binary.md").write_bytes(b"---\nx: \xff\xfe\n---\n")
    with pytest.raises(ToolDefinitionError) as info:
        Manager([tools]).find_tool("binary")
    assert "cannot read" in str(info.value)


def test_r_find_3_a_same_size_edit_within_a_second_runs_the_new_code(tools, monkeypatch):
    """Python's bytecode cache keys on whole-second mtimes and size: tools are compiled from their text."""
    import os
    import sys

    from orchestrator import Manager

    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tools / "which.py"
    manager = Manager([tools])
    path.write_text("def main(ctx):\n    return 'A'\n", encoding="utf-8")
    stamp = os.stat(path).st_mtime_ns
    assert manager.invoke_sync("which") == "A"
    path.write_text("def main(ctx):\n    return 'B'\n", encoding="utf-8")
    os.utime(path, ns=(stamp + 1000, stamp + 1000))  # same second, same size: only the text differs
    refresh(manager)
    assert manager.invoke_sync("which") == "B"
    assert not (tools / "__pycache__").exists()


# -- libyaml's composer for documents that cannot cross a limit (issue 11) --------------------------------------

PLAIN_DOCUMENTS = [
    "",
    "# only a comment\n",
    "description: Fine.\nmetadata:\n  params: {type: object, properties: {a: {type: string}}}\n",
    "a:\n- b\n- c: d\n  e: [1, 2.5, true, null, ~]\n",
    "a:\n-\n b:\n -\n  c:\n  -\n   d\n",
    "text: |\n  two\n  lines\nfolded: >\n  one\n  line\n",
    "<<: {merged: 1}\nown: 2\n",
    "when: 2001-12-14\n",
    "1: one\n",
    "true: yes\n",
    "? [a, b]\n: c\n",
    "a: b\n---\nc: d\n",
    "a: [\n",
    "a: 2001-13-45\n",
    "a: 1\na: 2\n",
    "key: 'quoted: colon'\nurl: http://example.com/a:b\n",
    "deep: " + "[" * 60 + "]" * 60 + "\n",
    "- - - - a\n",
    "a: \x07\n",
]


@pytest.mark.parametrize("text", PLAIN_DOCUMENTS)
def test_plain_documents_parse_as_the_measuring_composer_parses_them(text, monkeypatch):
    import dataclasses

    from orchestrator import documents
    from orchestrator.limits import DEFAULT_LIMITS

    def outcome(limits):
        try:
            data, node = documents.parse_yaml(text, Path("t.md"), 3, limits)
        except ToolDefinitionError as exc:
            return "error", str(exc), exc.line
        return "ok", repr(data), node.start_mark.line if node is not None else None

    for limits in (DEFAULT_LIMITS, dataclasses.replace(DEFAULT_LIMITS, yaml_depth=6, yaml_nodes=12)):
        fast = outcome(limits)
        with monkeypatch.context() as patch:
            patch.setattr(documents, "_plain", lambda _text, _limits: False)
            assert outcome(limits) == fast


def test_documents_with_anchors_deep_nesting_or_tags_take_the_measuring_composer():
    from orchestrator.documents import _plain
    from orchestrator.limits import DEFAULT_LIMITS

    assert _plain("a: 1\nb: [x, y]\n", DEFAULT_LIMITS)
    for text in ("a: &x 1\nb: *x\n", "a: !!str 1\n", "a: " + "[" * 99 + "]" * 99, "x: " * 60):
        assert not _plain(text, DEFAULT_LIMITS)


@pytest.mark.parametrize(
    "document",
    [
        "a: 1\nb: [x, 2.5, true, null, 0x1F, 1_000, .inf, -.Inf, yes, No, ~, '', \"q\"]\nc: {d: e, f: [1, {g: h}]}\n",
        "a: 2024-01-01\nb: 2001-12-14t21:59:43.10-05:00\n",
        "<<: {a: 1}\nb: 2\n",
        "a: 1\na: 2\n",
        "a: 0o17\nb: 1:30\nc: 0b101\nd: 1e3\ne: 6.8523015e+5\nf: -0\ng: +12\n",
        "a: !!binary aGk=\n",
        "a: !!set {x, y}\n",
        "a:\n  - b: 1\n    c: 2\n  - d\n",
        "text: |\n  line one\n  line two\nfolded: >\n  a\n  b\n",
        "",
        "just a string\n",
        "- 1\n- 2\n",
    ],
)
def test_the_fast_yaml_path_builds_what_the_safe_loader_builds(document):
    """Plain documents are built without the constructor's machinery; the values are the safe loader's."""
    import yaml

    from orchestrator.documents import parse_yaml

    got = parse_yaml(document, Path("doc.yaml"))[0]
    want = yaml.safe_load(document)
    assert got == want
    assert type(got) is type(want)
    if isinstance(want, dict):
        assert list(got) == list(want)  # key order, as written
        assert [type(v) for v in got.values()] == [type(v) for v in want.values()]


SCALARS = """\
plain: text
yes-word: yes
off-word: Off
tilde: ~
empty:
hex: 0x1F
octal: 0o17
under: 1_000
float: 6.5e3
inf: -.inf
nan-text: .nan-ish
date: 2001-12-14
quoted: "yes"
list: [1, "2", true, null, 3.0]
nested: {a: [x, {b: no}]}
"""


TAGGED = """\
map: {a: 1, "b": '2', c: [x, "y", !!str 3, ! 4]}
seq: [[1, 2], {k: v}, "quoted", 'single', !!int "5", ! plain]
block:
  - !!map {q: 1}
  - !!seq [1]
  - "yes"
  - no
  - |
    literal
  - >
    folded
explicit: !!str yes
"""


@pytest.mark.parametrize("document", [TAGGED, SCALARS])
def test_every_node_gets_the_tag_the_pure_python_safe_composer_gives_it(document: str) -> None:
    """``_Loader.resolve`` answers mappings, sequences and quoted scalars itself: the tags stay the safe resolver's."""
    import yaml

    from orchestrator.documents import parse_yaml

    def tags(node: yaml.Node) -> list[object]:
        if isinstance(node, yaml.MappingNode):
            return [node.tag, [(tags(key), tags(value)) for key, value in node.value]]
        if isinstance(node, yaml.SequenceNode):
            return [node.tag, [tags(item) for item in node.value]]
        return [node.tag, node.value]

    want = yaml.compose(document, Loader=yaml.SafeLoader)  # PyYAML's own composer and resolver, in Python
    for _ in range(2):  # the second read meets the remembered tags
        node = parse_yaml(document, Path("doc.yaml"))[1]
        assert node is not None and tags(node) == tags(want)


def test_every_scalar_has_the_value_the_safe_loader_gives_it_however_often_it_is_read(tmp_path: Path) -> None:
    import yaml

    from orchestrator.documents import parse_yaml

    want = yaml.safe_load(SCALARS)
    for _ in range(3):  # a scalar's tag is remembered after its first read: the later reads must agree
        for frozen in (False, True):
            data, _node = parse_yaml(SCALARS, tmp_path / "t.md", frozen=frozen)
            assert data == want
            shown = {key: type(value) for key, value in data.items() if key not in ("list", "nested")}
            assert shown == {key: type(value) for key, value in want.items() if key not in ("list", "nested")}
            assert [type(item) for item in data["list"]] == [type(item) for item in want["list"]]


def test_a_markdown_tool_is_read_into_frozen_values_once(write, tools):
    from orchestrator.frozen import FrozenDict, FrozenList

    write(
        "tools/deep.md",
        """
        ---
        description: Deep.
        metadata:
          params: {type: object, properties: {a: {type: array, items: [1, {b: 2}]}}}
          tags: [x, y]
        ---
        Body.
        """,
    )
    tool = Manager([tools]).find_tool("deep")
    params = tool.metadata["params"]
    assert type(tool.metadata) is FrozenDict and type(params) is FrozenDict
    assert type(tool.metadata["tags"]) is FrozenList and type(params["properties"]["a"]["items"][1]) is FrozenDict
    assert tool.frontmatter["metadata"] is tool.metadata
    with pytest.raises(TypeError):
        params["properties"]["a"]["items"][1]["b"] = 3
    assert params == {"type": "object", "properties": {"a": {"type": "array", "items": [1, {"b": 2}]}}}


def exact_depth_bound(text: str, depth_limit: int) -> bool:
    """``_plain``'s depth test measured line by line: what its quick bounds must decide as."""
    depth = text.count("[") + text.count("{") + 2
    deepest = 0
    for line in text.split("\n"):
        rest = line.lstrip(" \t")
        deepest = max(deepest, 2 * (len(line) - len(rest) + rest.count("-") + rest.count("?") + rest.count(":")))
    return depth + deepest <= depth_limit


def test_the_quick_depth_bound_decides_as_the_line_by_line_one():
    """``_plain`` first tries a looser bound (all indicators as if on one line); it must never admit more."""
    import dataclasses

    from orchestrator.documents import _plain
    from orchestrator.limits import DEFAULT_LIMITS

    texts = [
        *(t for t in PLAIN_DOCUMENTS if not any(c in t for c in "&*!")),
        "a:\n  b:\n    c:\n      d:\n        e: 1\n",
        "a: x-y-z\nb: 1:2:3\nc: [1, 2]\n" * 8,
        "- a\n- b:\n    - c: {d: [e]}\n",
        "\t- x\n  ? y\n  : z\n",
    ]
    for text in texts:
        for depth_limit in (4, 8, 12, 20, 40, 100):
            limits = dataclasses.replace(DEFAULT_LIMITS, yaml_depth=depth_limit)
            assert _plain(text, limits) == exact_depth_bound(text, depth_limit), (text, depth_limit)


def test_the_quick_depth_bound_at_its_edge_decides_as_the_line_by_line_one():
    """The deepest indentation is bounded by two substring searches (no tab): one column either side of the bound."""
    import dataclasses

    from orchestrator.documents import _plain
    from orchestrator.limits import DEFAULT_LIMITS

    decided = set()
    for depth_limit in (8, 9, 20, 21, 100):
        limits = dataclasses.replace(DEFAULT_LIMITS, yaml_depth=depth_limit)
        for columns in range(12):
            pad = " " * columns
            for text in (
                f"a:\n{pad}b\n",  # indented continuation on a later line
                f"{pad}a\n",  # on the first line
                f"a: x\nb: y\n{pad}c\n",  # two indicators elsewhere
                f"a:\n\t{pad}b\n",  # a tab: measured line by line
                f"[x]\n{pad}y\n",
                f"{pad}a:\n",  # the indentation and the only indicator on one line: the quick bound is exact
                f"a\n{pad}- b\n",
            ):
                assert _plain(text, limits) == exact_depth_bound(text, depth_limit), (text, depth_limit)
                decided.add(_plain(text, limits))
    assert decided == {True, False}


def test_a_tool_file_is_read_in_two_reads_its_text_and_its_end(tmp_path: Path, monkeypatch) -> None:
    """A listing reads 10,000 files: the read that meets the end is the last (a third read only said it again)."""
    import orchestrator.loader as loader

    file = tmp_path / "t.md"
    file.write_text("---\ndescription: d\n---\nbody\n", encoding="utf-8")
    reads: list[int] = []
    real = os.read

    def counted(fd: int, size: int) -> bytes:
        reads.append(size)
        return real(fd, size)

    monkeypatch.setattr(loader.os, "read", counted)
    assert loader.read_text(file) == "---\ndescription: d\n---\nbody\n"
    assert len(reads) == 2


@pytest.mark.parametrize("told", [0, 5, 30, 10_000])
def test_a_file_that_grew_or_shrank_after_its_stat_is_read_whole_within_the_cap(
    tmp_path: Path, monkeypatch, told: int
) -> None:
    import orchestrator.loader as loader
    from orchestrator.limits import Limits

    file = tmp_path / "t.md"
    text = "---\ndescription: d\n---\n" + "x" * 40 + "\n"
    file.write_text(text, encoding="utf-8")
    real = os.fstat

    def stale(fd: int) -> os.stat_result:  # the size the stat saw, before the file changed
        found = real(fd)
        return os.stat_result((*found[:6], told, *found[7:10]))

    monkeypatch.setattr(loader.os, "fstat", stale)
    assert loader.read_text(file) == text
    with pytest.raises(ToolDefinitionError, match="bigger than the 30 bytes"):
        loader.read_text(file, Limits(file_bytes=30))


@pytest.mark.parametrize(
    ("source", "needle"),
    [  # containers and strings of other types than dict, list and str are walked as theirs are
        ("import types\nfrontmatter = {'metadata': {'x': types.MappingProxyType({1: 'a'})}}\n", "key 1 in"),
        ("import collections\nfrontmatter = {'metadata': collections.UserDict({2: 'b'})}\n", "key 2 in"),
        ("class S(str):\n    pass\nfrontmatter = {'metadata': {'long': S('x' * 5_000_000)}}\n", "4000000 characters"),
        (
            "class L(list):\n    pass\nloop = L()\nloop.append(loop)\nfrontmatter = {'metadata': {'x': loop}}\n",
            "itself",
        ),
    ],
)
def test_python_frontmatter_of_other_mapping_list_and_str_types_is_held_to_the_tree_rules(
    tmp_path: Path, source: str, needle: str
) -> None:
    from orchestrator.loader import load_python

    path = tmp_path / "odd.py"
    path.write_text(source + "\ndef main(ctx):\n    return 'never'\n", encoding="utf-8")
    with pytest.raises(ToolDefinitionError, match=needle):
        load_python(path)
