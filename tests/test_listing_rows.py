"""Issue 24: a listing describes each tool without planning it, and its rows equal the full plan's.

A ``list`` row shows the tool's own fields and one cascade key (``params``,
merged through the authority and ``$inherit`` levels, unrendered). The
listing merges only the keys a row shows, and those whose merge or lock can
fail, with the cascade's own functions; it never plans a tool. These tests
count plans during listings over catalogues with authorities, and compare
every row (and every error) with what the tool's full plan gives, over
written and generated catalogues.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from cache_helpers import tools_asked
from hypothesis import given
from hypothesis import strategies as st

import orchestrator.planner as planner_module
from orchestrator import Manager
from orchestrator.descriptions import planned

Write = Callable[[str, str], Path]


@pytest.fixture
def plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tools planned from now on, by name."""
    return tools_asked(monkeypatch, planner_module.Planner, "plan")


def front(data: dict[str, object], body: str = "Say hi.") -> str:
    return f"---\n{yaml.safe_dump(data, sort_keys=False)}---\n{body}\n"


def rows_equal_plans(manager: Manager) -> None:
    """Every row of a listing (hidden ones too) equals its full-plan description; errors name the same thing."""
    for info in manager.list_tools(hidden=True):
        try:
            want = planned(manager, info.ref, manager.paths)
        except Exception as exc:  # the plan refuses the tool: the row carries that very error
            assert info.error is not None, info.ref
            assert (type(info.error), str(info.error)) == (type(exc), str(exc))
            continue
        assert info.error is None, (info.ref, info.error)
        assert info == want


def catalogue(write: Write) -> None:
    """Authorities in folders, a named one, ``$merge`` policies, ``$private``, ``$remove`` and ``$inherit``."""
    write(
        "tools/team/AUTHORITY.md",
        front(
            {
                "metadata": {
                    "params": {"type": "object", "properties": {"team": {"type": "string"}}},
                    "tags": ["team"],
                    "owner": "ops",
                    "$merge": {"tags": "union", "params": "deep"},
                    "$private": ["owner"],
                }
            },
            "The team.",
        ),
    )
    write("tools/team/sub/AUTHORITY.md", front({"metadata": {"tags": ["sub"], "retries": 2}}, "Sub."))
    write("tools/team/plain.md", front({"description": "Team tool."}))
    write(
        "tools/team/sub/deep.md",
        front(
            {
                "description": "Deep {{ args.x }}",
                "metadata": {"params": {"type": "object", "properties": {"x": {"type": "integer"}}}, "tags": ["d"]},
            }
        ),
    )
    write("tools/team/removes.md", front({"metadata": {"$remove": ["params"], "tags": ["r"]}}))
    write("tools/base.md", front({"metadata": {"params": {"who": "string, the person"}, "color": "blue"}}))
    write("tools/child.md", front({"metadata": {"$inherit": "base", "params": {"loud?": "boolean"}}}))
    write("tools/grandchild.md", front({"metadata": {"$inherit": ["child"], "$merge": {"color": "replace"}}}))
    write("tools/named.md", front({"authority": "strict", "metadata": {"params": {"type": "object"}}}))
    write("tools/strict.md", front({"description": "also a tool"}))
    write("tools/hidden.md", front({"metadata": {"visibility": "hidden", "params": {"type": "object"}}}))
    write("tools/mw.md", front({"role": "middleware", "description": "wraps"}))
    write(
        "tools/code.py", 'frontmatter = {"metadata": {"params": {"type": "object"}}}\n\ndef main(ctx):\n    return 1\n'
    )


def test_a_listing_plans_no_tool(tools: Path, write: Write, plans: list[str]) -> None:
    catalogue(write)
    write("authorities/strict.md", front({"metadata": {"params": {"type": "object"}, "tags": ["s"]}}, "Strict."))
    manager = Manager([tools])
    listed = manager.list_tools(hidden=True)
    assert [info.ref for info in listed if info.error is not None] == []
    assert {"team/sub/deep", "child", "grandchild", "named", "code"} <= {info.ref for info in listed}
    assert plans == []
    manager.invoke_sync("team/plain")  # an invocation still plans (the counter sees the planner)
    assert plans


def test_rows_equal_full_plans_under_authorities_and_inherit(tools: Path, write: Write) -> None:
    catalogue(write)
    write("authorities/strict.md", front({"metadata": {"params": {"type": "object"}, "tags": ["s"]}}, "Strict."))
    manager = Manager([tools])
    rows = {info.ref: info for info in manager.list_tools(hidden=True)}
    # The merge a row shows: the team's params deep-merged under the tool's, a removed key gone, inherit chains.
    assert rows["team/sub/deep"].params["properties"] == {"team": {"type": "string"}, "x": {"type": "integer"}}
    assert rows["team/removes"].params is None
    assert rows["grandchild"].params == planned(manager, "grandchild", manager.paths).params
    assert rows["team/sub/deep"].description == "Deep {{ args.x }}"  # unrendered, as the plan holds it
    rows_equal_plans(manager)


def test_broken_cascades_list_the_plans_own_errors(tools: Path, write: Write, plans: list[str]) -> None:
    """A merge a policy refuses, an unknown annotation, a missing parent or authority: the plan's error, verbatim."""
    write("tools/team/AUTHORITY.md", front({"metadata": {"tags": "not a list", "$merge": {"tags": "union"}}}, "Team."))
    write("tools/team/clash.md", front({"metadata": {"tags": ["x"]}}))
    write("tools/typo.md", front({"metadata": {"$inheritt": "base"}}))
    write("tools/orphan.md", front({"metadata": {"$inherit": "nowhere"}}))
    write("tools/lost.md", front({"authority": "nobody"}))
    write("tools/cycle.md", front({"metadata": {"$inherit": "cycle2"}}))
    write("tools/cycle2.md", front({"metadata": {"$inherit": "cycle"}}))
    write("tools/fine.md", front({"description": "fine"}))
    # The tool's own value refused by the chain's policies: a union onto a list, a deep merge of params.
    policies = {"tags": ["t"], "params": {"type": "object"}, "$merge": {"tags": "union", "params": "deep"}}
    write("tools/strict/AUTHORITY.md", front({"metadata": policies}, "Strict."))
    write("tools/strict/tagged.md", front({"metadata": {"tags": "one"}}))
    write("tools/strict/shorthand.md", front({"metadata": {"params": "string, a name"}}))
    write("tools/strict/ok.md", front({"metadata": {"tags": ["u"], "params": {"required": ["x"]}}}))
    manager = Manager([tools])
    errors = {info.ref for info in manager.list_tools(hidden=True) if info.error is not None}
    assert errors == {"team/clash", "typo", "orphan", "lost", "cycle", "cycle2", "strict/tagged", "strict/shorthand"}
    assert "fine" not in plans and "ok" not in plans  # only the broken ones are planned, to word their errors
    rows_equal_plans(manager)


# -- generated catalogues ---------------------------------------------------------

KEYS = ("params", "tags", "color")
POLICIES = ("default", "replace", "deep", "append", "union")
VALUES = st.one_of(
    st.none(),
    st.sampled_from(["red", "string, a name"]),
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=2),
    st.fixed_dictionaries({}, optional={"type": st.just("object"), "who": st.sampled_from(["string", "integer"])}),
)


@st.composite
def metadata(draw: st.DrawFn, names: list[str]) -> dict[str, object]:
    meta: dict[str, object] = {key: draw(VALUES) for key in draw(st.lists(st.sampled_from(KEYS), unique=True))}
    if draw(st.booleans()):
        meta["$merge"] = {draw(st.sampled_from(KEYS)): draw(st.sampled_from(POLICIES))}
    if draw(st.integers(0, 5)) == 0:
        meta["$remove"] = [draw(st.sampled_from(KEYS))]
    if draw(st.integers(0, 5)) == 0:
        meta["$private"] = [draw(st.sampled_from(KEYS))]
    if names and draw(st.integers(0, 3)) == 0:
        meta["$inherit"] = draw(st.sampled_from([*names, "missing"]))
    return meta


@st.composite
def catalogues(draw: st.DrawFn) -> dict[str, str]:
    """Relative path -> text: up to three nested authority folders and a few tools in each."""
    files: dict[str, str] = {}
    names: list[str] = []
    folders = ["", "a", "a/b", "c"]
    for folder in folders:
        if folder and draw(st.booleans()):
            files[f"{folder}/AUTHORITY.md"] = front({"metadata": draw(metadata([]))}, "An authority.")
        for number in range(draw(st.integers(0, 3))):
            name = f"t{len(names)}"
            where = f"{folder}/{name}.md" if folder else f"{name}.md"
            files[where] = front({"description": f"tool {number}", "metadata": draw(metadata(names))})
            if not folder:
                names.append(name)  # $inherit names a ref: top-level tools only
    return files


@given(catalogues())
def test_generated_catalogues_list_what_their_plans_say(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as name:
        root = Path(name) / "tools"
        for rel, text in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        root.mkdir(exist_ok=True)
        with no_index():
            rows_equal_plans(Manager([root]))


@contextlib.contextmanager
def no_index() -> Iterator[None]:
    """``TOOLCASCADE_INDEX=off`` inside: a generated catalogue's rows are computed, never read from an index."""
    before = os.environ.get("TOOLCASCADE_INDEX")
    os.environ["TOOLCASCADE_INDEX"] = "off"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TOOLCASCADE_INDEX", None)
        else:
            os.environ["TOOLCASCADE_INDEX"] = before
