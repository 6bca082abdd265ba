"""Hostile tool and authority files (issue 10, R-TOOL-5): bounded to read, refused with file:line, never blocking.

A ~500-byte alias bomb used to make ``list`` spin for minutes and grow the
process past 12 GB; a recursive alias looped forever; a few thousand nested
``[`` crashed libyaml's composer. Each is now a ``ToolDefinitionError`` that
names the file and line, costs milliseconds and kilobytes, and leaves every
other tool working: in ``find_tool``, ``invoke``, ``list``, ``check`` and MCP.
Time bounds here are generous "does not hang" bounds, never benchmarks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from orchestrator import Limits, Manager, OrchestratorError, ToolDefinitionError
from orchestrator.check import check
from orchestrator.cli import cli
from orchestrator.documents import parse_yaml
from orchestrator.loader import file_limit

YAML_DEPTH = Limits().yaml_depth
from orchestrator.mcp import build_server

pytestmark = pytest.mark.anyio

HANG = 5.0  # CPU seconds: the bugs took minutes (or forever), the fix takes milliseconds
STALL = 60.0  # wall seconds: a block on a FIFO or a lock never ends; a loaded 2-core machine only slows
MEMORY = 50 * 1024 * 1024  # bytes of peak traced memory while refusing a bomb (it used to take > 12 GB)


def laughs(levels: int = 9, width: int = 9, indent: str = "  ") -> str:
    """A billion-laughs YAML block: level k is a list of ``width`` aliases of level k-1."""
    names = "abcdefghijklmnopqrstuvwxyz"
    rows = [f"{indent}a: &a [{', '.join(['lol'] * width)}]"]
    for k in range(1, levels):
        rows.append(f"{indent}{names[k]}: &{names[k]} [{', '.join([f'*{names[k - 1]}'] * width)}]")
    return "\n".join(rows) + "\n"


BOMB = "---\ndescription: A billion laughs.\nmetadata:\n" + laughs() + "---\nHello\n"
# 'metadata:' is line 3, so level k (a=0) sits on line 4 + k. With 9 x 9 the node count first passes
# 100,000 at the second *e of level f (a: 10 nodes, b: 91, c: 820, d: 7381, e: 66430 expanded).
BOMB_LINE = 9
GOOD = "---\ndescription: Fine.\n---\nok\n"


@contextmanager
def bounded() -> Iterator[None]:
    """Fail unless the block spends under ``HANG`` CPU seconds and ``MEMORY`` bytes of peak allocation.

    CPU time, not wall time: other work on the machine cannot push a bounded refusal over the bound, and
    a spin is still caught. ``STALL`` wall seconds catch a block that spends no CPU.
    """
    tracemalloc.start()
    started, spent = time.monotonic(), time.process_time()
    try:
        yield
    finally:
        elapsed, cpu = time.monotonic() - started, time.process_time() - spent
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert cpu < HANG, f"took {cpu:.1f} CPU seconds"
    assert elapsed < STALL, f"took {elapsed:.1f} s"
    assert peak < MEMORY, f"peak {peak / 1e6:.1f} MB"


def refused(manager: Manager, ref: str) -> ToolDefinitionError:
    """The ToolDefinitionError ``find_tool(ref)`` raises, within the time and memory bounds."""
    with bounded(), pytest.raises(ToolDefinitionError) as info:
        manager.find_tool(ref)
    return info.value


@pytest.fixture
def bombed(write, tools: Path) -> Path:
    """A tools folder with the 9x9 bomb beside a good tool."""
    write("tools/bomb.md", BOMB)
    write("tools/good.md", GOOD)
    return tools


# -- the billion laughs --------------------------------------------------------------


def test_billion_laughs_is_refused_fast_naming_file_line_and_limit(bombed):
    assert len(BOMB) < 1024
    error = refused(Manager([bombed]), "bomb")
    assert error.path == str(bombed / "bomb.md")
    assert error.line == BOMB_LINE
    assert str(error).startswith(f"{bombed / 'bomb.md'}:{BOMB_LINE}: frontmatter expands to more than 100000 YAML")
    assert "alias *e repeats anchor &e at line 8" in str(error)
    assert "raise Limits.yaml_nodes" in str(error)


def test_deeper_bomb_costs_no_more(write, tools):
    write("tools/bomb.md", "---\nmetadata:\n" + laughs(levels=20, width=20) + "---\nx\n")
    assert "Limits.yaml_nodes" in str(refused(Manager([tools]), "bomb"))


def test_byte_bomb_of_few_nodes_is_refused_by_yaml_bytes(write, tools):
    # 9^5 copies of a 100-byte string: 59049 scalars (under yaml_nodes), 5.9 MB of text (over yaml_bytes).
    write(
        "tools/bomb.md",
        "---\nmetadata:\n  s: &s " + "x" * 100 + "\n" + laughs(levels=5).replace("lol", "*s") + "---\nx\n",
    )
    error = refused(Manager([tools]), "bomb")
    assert "frontmatter expands to more than 4000000 bytes of text through aliases" in str(error)
    assert "raise Limits.yaml_bytes" in str(error)


def test_bomb_is_refused_through_invoke_and_a_good_tool_still_runs(bombed):
    manager = Manager([bombed])
    with bounded(), pytest.raises(ToolDefinitionError, match="yaml_nodes"):
        manager.invoke_sync("bomb")
    assert manager.invoke_sync("good") == "ok"
    with bounded(), pytest.raises(ToolDefinitionError, match="yaml_nodes"):
        manager.invoke_sync("bomb")  # the refusal is cached with the file, and stays a refusal


async def test_bomb_is_refused_through_async_invoke(bombed):
    manager = Manager([bombed])
    with anyio.fail_after(HANG), pytest.raises(ToolDefinitionError, match="yaml_nodes"):
        await manager.invoke("bomb")
    with anyio.fail_after(HANG):
        assert await manager.invoke("good") == "ok"


def test_bomb_is_listed_with_its_error_beside_the_good_tools(bombed):
    with bounded():
        infos = {info.ref: info for info in Manager([bombed]).list_tools()}
    assert isinstance(infos["bomb"].error, ToolDefinitionError)
    assert infos["bomb"].error.line == BOMB_LINE
    assert infos["good"].error is None and infos["good"].description == "Fine."
    assert all(info.error is None for ref, info in infos.items() if ref != "bomb")


def test_cli_list_and_check_report_the_bomb(bombed):
    runner = CliRunner(env={"NO_COLOR": "1", "COLUMNS": "200"})
    started = time.monotonic()
    listed = runner.invoke(cli, ["list", "--json", "--path", str(bombed)])
    checked = runner.invoke(cli, ["check", "--path", str(bombed)])
    assert time.monotonic() - started < 2 * HANG
    rows = {row["ref"]: row for row in json.loads(listed.stdout)}
    assert listed.exit_code == 0
    assert f"bomb.md:{BOMB_LINE}: frontmatter expands" in rows["bomb"]["error"]
    assert rows["good"]["error"] is None
    assert checked.exit_code == 1
    assert f"bomb.md:{BOMB_LINE}: frontmatter expands to more than 100000 YAML nodes" in checked.stdout
    assert "good.md" not in checked.stdout
    assert "1 error" in checked.stdout  # the summary goes with the report


@pytest.mark.slow
def test_cli_subprocess_list_finishes_with_the_bomb(bombed):
    # A real process (python -m orchestrator), capped by the subprocess timeout: before, it ran for minutes.
    out = subprocess.run(
        [sys.executable, "-m", "orchestrator", "list", "--json", "--path", str(bombed)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    rows = {row["ref"]: row for row in json.loads(out.stdout)}
    assert "yaml_nodes" in rows["bomb"]["error"] and rows["good"]["error"] is None


async def test_mcp_skips_the_bomb_and_serves_the_rest(bombed, caplog):
    with anyio.fail_after(HANG):
        async with Client(build_server(Manager([bombed]))) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            result = await client.call_tool("good", {})
    assert "good" in names and "bomb" not in names
    assert result.content[0].text == "ok"
    warnings = [r.getMessage() for r in caplog.records if r.name == "orchestrator.mcp"]
    assert any(w.startswith("tool 'bomb' not served: ") and "yaml_nodes" in w for w in warnings)


# -- the same in authorities ---------------------------------------------------------


def test_bomb_in_a_folder_authority_is_refused_and_other_folders_run(write, tools):
    authority = write("tools/team/AUTHORITY.md", "---\nmetadata:\n" + laughs() + "---\n")
    write("tools/team/member.md", GOOD)
    write("tools/good.md", GOOD)
    manager = Manager([tools])
    with bounded(), pytest.raises(ToolDefinitionError) as info:
        manager.invoke_sync("team/member")
    assert (info.value.path, info.value.line) == (str(authority), 8)
    assert "Limits.yaml_nodes" in str(info.value)
    assert manager.invoke_sync("good") == "ok"
    infos = {i.ref: i for i in manager.list_tools()}
    assert isinstance(infos["team/member"].error, ToolDefinitionError) and infos["good"].error is None
    problems = [str(p) for p in check(manager)]
    assert any("AUTHORITY.md:8: frontmatter expands to more than 100000 YAML nodes" in p for p in problems)


def test_bomb_in_a_named_authority_is_refused(write, tools, tmp_path):
    authority = write("authorities/bombed.md", "---\nmetadata:\n" + laughs() + "---\n")
    write("tools/governed.md", "---\nauthority: bombed\n---\nx\n")
    write("tools/good.md", GOOD)
    manager = Manager([tools])
    with bounded(), pytest.raises(ToolDefinitionError) as info:
        manager.invoke_sync("governed")
    assert info.value.path == str(authority)
    assert manager.invoke_sync("good") == "ok"
    assert any("bombed.md:8:" in str(p) and "yaml_nodes" in str(p) for p in check(manager))


# -- recursive aliases ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "line"),
    [
        ("metadata: {loop: &a [*a]}\n", 2),  # a sequence inside itself
        ("metadata:\n  me: &m\n    self: *m\n", 4),  # a mapping inside itself
        ("metadata:\n  x: &a\n    - y:\n        - {z: [*a]}\n", 5),  # a cycle through lists and mappings
        ("metadata: &top\n  up: *top\n", 3),  # the metadata mapping itself
    ],
)
def test_recursive_alias_is_refused_at_the_alias(write, tools, yaml_text, line):
    path = write("tools/loop.md", f"---\n{yaml_text}---\nx\n")
    write("tools/good.md", GOOD)
    manager = Manager([tools])
    error = refused(manager, "loop")
    assert (error.path, error.line) == (str(path), line)
    assert "recursive aliases are refused" in str(error)
    assert manager.invoke_sync("good") == "ok"
    assert isinstance({i.ref: i for i in manager.list_tools()}["loop"].error, ToolDefinitionError)


def test_recursive_alias_in_an_authority_is_refused(write, tools):
    write("tools/team/AUTHORITY.md", "---\nmetadata: {loop: &a [*a]}\n---\n")
    write("tools/team/member.md", GOOD)
    with bounded(), pytest.raises(ToolDefinitionError, match="recursive aliases are refused"):
        Manager([tools]).invoke_sync("team/member")


# -- within the limits ---------------------------------------------------------------

# 18 nodes with aliases expanded: the document, 'metadata', its mapping, 'a', [x, x, x] (4),
# 'b' and [*a, *a] (1 + 2 * 4); 19 bytes of text: 'metadata', 'a', 'b' and 3 + 2 * 3 x's.
SMALL = "---\nmetadata:\n  a: &a [x, x, x]\n  b: [*a, *a]\n---\nbody\n"


@pytest.mark.parametrize(("field", "exact"), [("yaml_nodes", 18), ("yaml_bytes", 19)])
def test_a_file_at_the_limit_loads_and_one_past_it_is_refused(write, tools, field, exact):
    write("tools/small.md", SMALL)
    tool = Manager([tools], limits=Limits(**{field: exact})).find_tool("small")
    assert tool.metadata == {"a": ["x"] * 3, "b": [["x"] * 3] * 2}
    error = refused(Manager([tools], limits=Limits(**{field: exact - 1})), "small")
    assert f"Limits.{field}" in str(error) and error.line == 4


def test_aliases_come_back_as_copies_so_metadata_is_a_tree(write, tools):
    write("tools/small.md", SMALL)
    metadata = Manager([tools]).find_tool("small").metadata
    assert metadata["b"][0] == metadata["a"] and metadata["b"][0] is not metadata["a"]
    assert metadata["b"][0] is not metadata["b"][1]


def test_a_large_aliased_file_under_the_default_budget_loads(write, tools):
    # Five levels of the bomb: 74,740 nodes and 199,341 bytes of text expanded, under 100,000 and 4,000,000.
    write("tools/big.md", "---\nmetadata:\n" + laughs(levels=5) + "---\nbody\n")
    write("tools/good.md", GOOD)
    manager = Manager([tools])
    started = time.monotonic()
    tool = manager.find_tool("big")
    assert time.monotonic() - started < HANG
    assert len(tool.metadata["e"]) == 9 and tool.metadata["e"][8][8][8][8] == ["lol"] * 9
    assert manager.invoke_sync("good") == "ok"


def test_merge_keys_and_plain_aliases_still_work(write, tools):
    write(
        "tools/merged.md",
        """
        ---
        metadata:
          base: &base {x: 1, y: 2}
          derived: {<<: *base, y: 3}
          again: *base
        ---
        body
        """,
    )
    metadata = Manager([tools]).find_tool("merged").metadata
    assert metadata["derived"] == {"x": 1, "y": 3}
    assert metadata["again"] == {"x": 1, "y": 2}


def test_nesting_is_bounded_and_never_crashes_the_parser(write, tools):
    # 100,000 nested '[' overflowed libyaml's recursive composer (a segfault); now a line-numbered refusal.
    write("tools/deep.md", "---\nmetadata:\n  deep: " + "[" * 100_000 + "]" * 100_000 + "\n---\nx\n")
    # Which parser refuses first is libyaml's business (newer bindings cap nesting themselves, in their own
    # words); the engine's promise is a typed error at the line, not a crash. Our own wording for a depth
    # past Limits.yaml_depth is asserted below, where libyaml has no say.
    error = refused(Manager([tools]), "deep")
    assert error.line == 3 and error.path is not None and error.path.endswith("deep.md")


def test_nesting_to_the_depth_limit_loads_and_runs(write, tools):
    # The top mapping, metadata's mapping and the innermost scalar are three levels; the lists make up the rest.
    inner = YAML_DEPTH - 3
    write("tools/deep.md", "---\nmetadata:\n  deep: " + "[" * inner + "1" + "]" * inner + "\n---\nok\n")
    write("tools/deeper.md", "---\nmetadata:\n  deep: " + "[" * (inner + 1) + "1" + "]" * (inner + 1) + "\n---\nx\n")
    manager = Manager([tools])
    assert manager.invoke_sync("deep") == "ok"
    problems = check(manager)
    assert problems and all(p.path is not None and p.path.endswith("deeper.md") for p in problems)
    assert "levels deep" in str(refused(manager, "deeper"))


def test_aliases_count_toward_the_depth(write, tools):
    # Each level nests the one before inside two more lists: the expansion is deeper than the text.
    rows = ["  l0: &l0 [[1]]"] + [f"  l{k}: &l{k} [[*l{k - 1}]]" for k in range(1, 60)]
    write("tools/deep.md", "---\nmetadata:\n" + "\n".join(rows) + "\n---\nx\n")
    assert "levels deep" in str(refused(Manager([tools]), "deep"))


# -- what no YAML text should be -----------------------------------------------------


@pytest.mark.parametrize(
    ("yaml_text", "needle", "line"),
    [
        ("metadata:\n  day: 2001-13-45\n", "month must be in 1..12", 3),
        ("metadata:\n  n: " + "1" * 5000 + "\n", "Exceeds the limit", 3),
        ("metadata:\n  x: *nowhere\n", "alias *nowhere names no anchor", 3),
        ("metadata:\n  a: &x 1\n  b: &x 2\n", "anchor &x is defined twice (first at line 3)", 4),
        ("metadata: {a: 1}\n...\n--- {b: 2}\n", "second YAML document", 4),
        ("metadata:\n  [a, b]: 1\n", "a mapping key must be a string, not a YAML sequence", 3),
        ("metadata:\n  " + "1" * 100 + ": x\n", "is read by YAML as int", 3),
        ("metadata:\n  bell: \x07\n", "control characters are not allowed", 3),
    ],
)
def test_yaml_python_cannot_hold_is_a_definition_error(write, tools, yaml_text, needle, line):
    path = write("tools/odd.md", f"---\n{yaml_text}---\nx\n")
    error = refused(Manager([tools]), "odd")
    assert needle in str(error)
    assert (error.path, error.line) == (str(path), line)
    assert len(str(error)) < 400  # a 100-digit key is shortened, not echoed whole


# -- bytes that are not a text file --------------------------------------------------


@pytest.mark.parametrize(
    ("data", "needle", "line"),
    [
        (b"---\ndescription: caf\xe9\n---\nx\n", "byte 0xe9 at offset 20 is not UTF-8", 2),
        (b"---\ndescription: ok\n---\nbody \xff\xfe\n", "byte 0xff at offset 29 is not UTF-8", 4),
        (b"---\ndescription: a\x00b\n---\nx\n", "NUL character", 2),
        (b"---\ndescription: ok\n---\nline\n\x00\n", "NUL character", 5),
        (b"\x00" * 64, "NUL character", 1),
    ],
)
def test_non_utf8_and_nul_bytes_are_definition_errors(tools, data, needle, line):
    path = tools / "binary.md"
    path.write_bytes(data)
    (tools / "good.md").write_text(GOOD, encoding="utf-8")
    manager = Manager([tools])
    error = refused(manager, "binary")
    assert needle in str(error)
    assert (error.path, error.line) == (str(path), line)
    assert manager.invoke_sync("good") == "ok"


def test_non_utf8_authority_is_a_definition_error(tools):
    (tools / "team").mkdir()
    (tools / "team" / "AUTHORITY.md").write_bytes(b"---\nmetadata: {x: \xff}\n---\n")
    (tools / "team" / "member.md").write_text(GOOD, encoding="utf-8")
    with pytest.raises(ToolDefinitionError, match="is not UTF-8"):
        Manager([tools]).invoke_sync("team/member")


def test_crlf_and_lone_cr_files_read_as_universal_newlines(tools):
    (tools / "crlf.md").write_bytes(b"---\r\ndescription: Windows.\r\nmetadata:\r\n  x: 1\r\n---\r\nbody\r\n")
    (tools / "cr.md").write_bytes(b"---\rdescription: Old Mac.\r---\rbody\r")
    manager = Manager([tools])
    crlf = manager.find_tool("crlf")
    assert (crlf.description, crlf.metadata, crlf.prompt, crlf.line_of("x")) == ("Windows.", {"x": 1}, "body", 4)
    assert manager.find_tool("cr").description == "Old Mac."


def test_an_oversized_file_is_refused_before_it_is_read(tools):
    path = tools / "huge.md"
    with path.open("wb") as file:
        file.truncate(8 * 1024**3)  # 8 GB, sparse: reading it would take the memory it claims
    error = refused(Manager([tools]), "huge")
    assert error.path == str(path)
    assert f"bigger than the {file_limit(Limits())} bytes" in str(error) and "Limits.file_bytes" in str(error)


def test_the_file_size_limit_is_configurable(tools):
    limits = Limits(file_bytes=4000)
    (tools / "long.md").write_text("---\ndescription: long\n---\n" + "x" * file_limit(limits), encoding="utf-8")
    (tools / "fits.md").write_text("---\ndescription: fits\n---\n" + "x" * 3900, encoding="utf-8")
    manager = Manager([tools], limits=limits)
    assert "bigger than the 4000 bytes" in str(refused(manager, "long"))
    assert manager.find_tool("fits").description == "fits"


def test_a_fifo_is_refused_without_blocking(tools):
    fifo = tools / "AUTHORITY.md"  # check() opens every AUTHORITY.md it walks past, with no is_file() first
    os.mkfifo(fifo)
    (tools / "member.md").write_text(GOOD, encoding="utf-8")
    manager = Manager([tools])
    with bounded():
        problems = check(manager)
    assert any("not a regular file" in str(p) for p in problems)


# -- python tools: the same tree rules -----------------------------------------------


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ("frontmatter = {'metadata': {}}\nfrontmatter['metadata']['me'] = frontmatter\n", "contains itself"),
        ("loop = []\nloop.append(loop)\nfrontmatter = {'metadata': {'x': loop}}\n", "contains itself"),
        ("frontmatter = {'metadata': {'many': list(range(200_000))}}\n", "more than 100000 values"),
        ("frontmatter = {'metadata': {'long': 'x' * 5_000_000}}\n", "more than 4000000 characters"),
    ],
)
def test_python_frontmatter_must_be_a_bounded_tree(write, tools, source, needle):
    path = write("tools/odd.py", source + "\ndef main(ctx):\n    return 'never'\n")
    write("tools/good.md", GOOD)
    manager = Manager([tools])
    error = refused(manager, "odd")
    assert needle in str(error) and error.path == str(path)
    assert manager.invoke_sync("good") == "ok"


def test_python_frontmatter_may_share_a_value(write, tools):
    write(
        "tools/shared.py",
        "common = {'type': 'object'}\nfrontmatter = {'metadata': {'params': common, 'copy': common}}\n"
        "def main(ctx):\n    return 'ok'\n",
    )
    assert Manager([tools]).invoke_sync("shared") == "ok"


# -- properties: any text or bytes loads or is refused, quickly ----------------------

# Fragments that make YAML structure far more often than random text does: anchors, aliases,
# flow and block collections, merge keys, tags, documents markers, annotation keys.
FRAGMENTS = [
    "&a ", "&b ", "*a", "*b", "[", "]", "{", "}", ", ", ": ", "- ", "? ", "\n", "  ", "x", "'q'", '"\\x00"',
    "<<", "1", "2001-13-45", "!!str ", "!!binary ", "!!set ", "!!omap ", "!foo ", "|\n", "...", "---", "#c",
    "metadata", "name", "description", "authority", "$order", "$inherit", "$merge", "params", "type", "null", "~",
]  # fmt: skip
PROPERTY = settings(
    max_examples=100,  # hypothesis' default, as for the suite's other properties (issue 25)
    deadline=timedelta(seconds=30),  # a hang fails it; a loaded machine stalls an example for seconds, never 30
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


def load_everything(folder: Path) -> None:
    """Find, list and check the one tool in ``folder``: only OrchestratorError may come out of find_tool."""
    manager = Manager([folder])
    try:
        manager.find_tool("t")
    except OrchestratorError:
        pass
    for info in manager.list_tools():
        assert info.error is None or isinstance(info.error, OrchestratorError)


def write_tool(folder: Path, data: bytes) -> None:
    (folder / "t.md").write_bytes(data)  # each example loads it with a new Manager: no cache in between


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder for the property tests' one tool.

    A Manager raises the recursion limit when it is made; made here, before
    hypothesis runs, the change never happens inside a test (which hypothesis
    reports as a warning, an error under ``filterwarnings = error``).
    """
    Manager()
    return tmp_path_factory.mktemp("property-tools")


@pytest.mark.slow
@PROPERTY
@given(text=st.text())
def test_property_any_text_as_frontmatter_loads_or_is_refused(scratch, text):
    write_tool(scratch, f"---\n{text}\n---\nbody\n".encode())
    load_everything(scratch)


@pytest.mark.slow
@PROPERTY
@given(text=st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join))
def test_property_yaml_shaped_text_as_frontmatter_loads_or_is_refused(scratch, text):
    write_tool(scratch, f"---\nmetadata:\n  k: {text}\n{text}\n---\nbody\n".encode())
    load_everything(scratch)


@pytest.mark.slow
@PROPERTY
@given(text=st.text())
def test_property_any_text_as_the_whole_file_loads_or_is_refused(scratch, text):
    write_tool(scratch, text.encode())
    load_everything(scratch)


@pytest.mark.slow
@PROPERTY
@given(data=st.binary())
def test_property_any_bytes_as_frontmatter_or_file_load_or_are_refused(scratch, data):
    write_tool(scratch, b"---\n" + data + b"\n---\nbody\n")
    load_everything(scratch)
    write_tool(scratch, data)
    load_everything(scratch)


# Metadata that YAML reads fine but the engine may not like: annotation keys, built-in tool names, any JSON
# values, and one value shared under several keys so the dump carries anchors and aliases.
KEYS = [
    "params", "returns", "$order", "$inherit", "$merge", "$remove", "$private", "$static", "$dynamic", "$locked",
    "log", "cwd", "paths", "delegate", "trust", "visibility", "retry", "cache", "model", "allowed-tools", "x",
]  # fmt: skip
SCALARS = st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.sampled_from([*KEYS, "deep", "append"])
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=5), inner),
    max_leaves=12,
)


@pytest.mark.slow
@settings(PROPERTY, derandomize=True)
@given(data=st.data())
def test_property_any_metadata_values_load_list_or_are_refused(scratch, data):
    shared = data.draw(VALUES)
    metadata = data.draw(st.dictionaries(st.sampled_from(KEYS), VALUES | st.just(shared), max_size=5))
    write_tool(scratch, ("---\n" + yaml.safe_dump({"metadata": metadata}) + "---\nbody\n").encode())
    load_everything(scratch)


def test_a_bad_merge_policy_is_listed_with_its_error_not_a_crash(write, tools):
    # Found by the property above: a policy that is a mapping made `list` itself raise TypeError.
    write("tools/t.md", "---\nmetadata:\n  $merge: {x: {}}\n---\nbody\n")
    write("tools/good.md", GOOD)
    infos = {info.ref: info for info in Manager([tools]).list_tools()}
    assert isinstance(infos["t"].error, OrchestratorError) and "$merge" in str(infos["t"].error)
    assert infos["good"].error is None


def test_parse_yaml_bounds_any_yaml_file_not_only_frontmatter(tmp_path):
    # For other YAML a file brings (a scripted model's turns): the same bounds, named after the document.
    turns, _node = parse_yaml("- {content: hi}\n- &t {content: again}\n- *t\n", tmp_path / "turns.yaml")
    assert turns == [{"content": "hi"}, {"content": "again"}, {"content": "again"}] and turns[1] is not turns[2]
    bomb = "- " + laughs(indent="").replace("\n", "\n  ").rstrip() + "\n"
    with bounded(), pytest.raises(ToolDefinitionError, match="^.*turns.yaml:6: model script expands to more than"):
        parse_yaml(bomb, tmp_path / "turns.yaml", what="model script")
