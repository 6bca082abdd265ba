"""The README's facts agree with the code (issue 17): its blocks run in tests/test_docs.py, its tables here.

Each test reads one table or list of README.md and compares it with the
thing it documents: the limits' defaults, the CLI's commands, the built-in
tools, the annotations, the frontmatter keys, the invoke options, the error
tree, the public API and the examples. A new command, tool, error, export or
example fails here until the README says what it is.
"""

from __future__ import annotations

import re
from pathlib import Path

import click

import orchestrator
from orchestrator import errors
from orchestrator.cascade import ANNOTATIONS
from orchestrator.cli import cli
from orchestrator.limits import Limits
from orchestrator.loader import KNOWN_KEYS
from orchestrator.options import OPTIONS, SEED_KEYS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
# The README with its fenced blocks blanked out (same offsets): a "# comment" in code is no heading.
PROSE = re.sub(r"^(`{3,}|~{3,}).*?^\1", lambda m: re.sub(r"[^\n]", " ", m.group(0)), README, flags=re.M | re.S)


def section(title: str) -> str:
    """The text of the README section headed ``title``, up to the next heading of its level or above."""
    heading = re.search(rf"^(#+) {re.escape(title)}$", PROSE, re.M)
    assert heading, f"README.md has no section {title!r}"
    end = re.search(rf"^#{{1,{len(heading.group(1))}}} ", PROSE[heading.end() :], re.M)
    return README[heading.end() : heading.end() + end.start()] if end else README[heading.end() :]


def table_rows(text: str) -> list[list[str]]:
    """The cells of every Markdown table row in ``text``, header and separator rows left out."""
    lines = text.splitlines()
    rows = []
    for line, following in zip(lines, [*lines[1:], ""], strict=True):
        if not line.startswith("| ") or re.match(r"^\|\s*-", line) or re.match(r"^\|\s*-", following):
            continue
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def test_quick_start_keeps_its_two_commands():
    quick = section("Quick start")
    assert re.search(r"^make demo    # ", quick, re.M) and re.search(r"^make test    # ", quick, re.M)
    assert "make test" in section("Development")


def test_limits_table_gives_every_limit_its_default():
    rows = {row[0]: row[1] for row in table_rows(section("Security model")) if row[0].startswith("`")}
    documented: dict[str, str] = {}
    for names, default in rows.items():
        values = default.split(" / ")
        for name, value in zip(re.findall(r"`(\w+)`", names), values, strict=True):
            documented[name] = value.split()[0].replace(",", "")
    defaults = Limits()
    assert set(documented) == set(Limits.__dataclass_fields__)
    for name, value in documented.items():
        assert float(value) == getattr(defaults, name), name


def test_every_command_is_in_the_cli_table():
    context = click.Context(cli)
    commands = [name for name in cli.list_commands(context) if cli.get_command(context, name) is not None]
    assert {"run", "list", "show", "check", "serve", "init"} <= set(commands)
    documented = {row[0].strip("`").split()[0] for row in table_rows(section("The command line"))}
    assert set(commands) <= documented, set(commands) - documented
    assert "--version" in documented


def test_every_built_in_tool_is_in_the_built_ins_table():
    builtins = {path.stem for path in (ROOT / "tools").glob("*.py")}
    documented = {re.match(r"`([\w-]+)`", row[0]).group(1) for row in table_rows(section("Built-in tools"))}
    assert builtins == documented


def test_every_annotation_frontmatter_key_and_option_is_documented():
    annotations = {re.match(r"`(\$\w+)", row[0]).group(1) for row in table_rows(section("Annotations"))}
    annotations |= {"$dynamic"}  # shares a row with $static
    assert annotations == set(ANNOTATIONS)
    keys = {re.match(r"`(\w+)", row[0]).group(1) for row in table_rows(section("Frontmatter"))}
    assert keys == set(KNOWN_KEYS)
    rows = table_rows(section("Invoke options and `$NAME`"))
    options = {m.group(1) for row in rows if (m := re.match(r"`\$(\w+)", row[0]))}
    assert options == set(OPTIONS)
    context = next(row for row in rows if row[0].startswith("`$context"))
    for key in SEED_KEYS:
        assert f"`{key}`" in context[2], key


def test_every_error_class_is_in_the_error_tree():
    tree = section("Errors")
    classes = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, errors.OrchestratorError)
    }
    for name in classes:
        assert re.search(rf"(^|[─ ]){name}$", tree, re.M), name


def test_public_api_lists_every_export():
    api = section("Public API")
    for name in orchestrator.__all__:
        assert f"`{name}`" in api, name


def test_every_example_is_in_the_examples_table():
    folders = {p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    linked = set(re.findall(r"\(examples/([\w-]+)\)", section("Examples")))
    assert folders <= linked, folders - linked
    assert linked <= folders, linked - folders  # no link to a folder that is gone (examples/cascade is now authorities)


def test_placeholders_for_the_sections_other_issues_add_are_there():
    for title in ("Conversations and approval", "Bring your own formats", "Past one machine", "Performance"):
        assert section(title)


def test_every_extra_is_named_where_installing_is():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    installing = section("Installing")
    for extra in extras:
        assert f"`{extra}`" in installing, extra


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_point_at_headings_and_files_that_exist():
    anchors = {slug(h) for h in re.findall(r"^#+ (.+)$", PROSE, re.M)}
    for anchor in re.findall(r"\]\(#([\w-]+)\)", README):
        assert anchor in anchors, anchor
    for target in re.findall(r"\]\(((?:examples|tools|bench)/[^)#]*)\)", README):
        assert (ROOT / target).exists(), target


def test_the_per_format_table_is_what_the_formats_say_of_themselves():
    """Each format carries its README row (orchestrator.formats.summary_table): the table cannot drift."""
    from orchestrator.formats import summary_table

    rows = summary_table().splitlines()
    assert len(rows) > 2
    for row in rows:
        assert row in README, row[:80]
