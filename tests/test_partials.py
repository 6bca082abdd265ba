"""Partials: {% include %}, {% import %} and {% from ... import %} in prompts and metadata templates (issue 30).

Partials are ``.jinja`` files found as refs are (the tool's folder, then the
search paths), never outside them, followed when edited, counted by the
render limits, and rendered with the trust of the template that includes them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import InterpolationError, Limits, Manager, SecurityError
from orchestrator.cli import cli
from orchestrator.partials import INCLUDE_DEPTH, problems, roots_of, uses
from orchestrator.prompt import render_prompt
from orchestrator.searchpath import SearchPath

pytestmark = pytest.mark.anyio


def put(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def tool(folder: Path, name: str, prompt: str, front: str = "") -> Path:
    return put(folder / f"{name}.md", f"---\ndescription: a tool\n{front}---\n{prompt}\n")


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    folder = tmp_path / "tools"
    put(folder / "shared" / "preamble.jinja", "You are terse, {{ args.name }}.")
    put(folder / "shared" / "macros.jinja", "{% macro shout(x) %}{{ x | upper }}!{% endmacro %}")
    return folder


# -- include, import, from-import -----------------------------------------------------


async def test_include_renders_the_partial_with_the_including_templates_variables(tools: Path) -> None:
    tool(tools, "hello", '{% include "shared/preamble" %} Hi.')
    assert await Manager([tools]).invoke("hello", {"name": "Ada"}) == "You are terse, Ada. Hi."


async def test_import_and_from_import_share_macros(tools: Path) -> None:
    tool(
        tools,
        "loud",
        '{% import "shared/macros" as m %}{% from "shared/macros" import shout %}{{ m.shout(args.a) }} {{ shout("b") }}',
    )
    assert await Manager([tools]).invoke("loud", {"a": "hey"}) == "HEY! B!"


async def test_a_name_with_its_suffix_and_other_partial_suffixes(tools: Path) -> None:
    put(tools / "sign.j2", "-- the team")
    tool(tools, "mail", '{% include "shared/preamble.jinja" %} {% include "sign.j2" %}')
    assert await Manager([tools]).invoke("mail", {"name": "Bo"}) == "You are terse, Bo. -- the team"


async def test_metadata_templates_include_partials_too(tools: Path) -> None:
    put(tools / "persona.jinja", "a careful {{ args.role }}")
    put(
        tools / "who.py",
        'frontmatter = {"metadata": {"system": "You are {% include \'persona\' %}."}}\n\n'
        "def main(ctx):\n    return ctx.meta['system']\n",
    )
    assert await Manager([tools]).invoke("who", {"role": "editor"}) == "You are a careful editor."


async def test_the_tools_own_folder_first_then_each_search_path_in_order(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    put(first / "team" / "voice.jinja", "team voice")
    put(first / "voice.jinja", "first voice")
    put(second / "voice.jinja", "second voice")
    put(second / "only.jinja", "only in second")
    tool(first / "team", "speak", '{% include "voice" %} / {% include "only" %}')
    tool(first, "plain", '{% include "voice" %}')
    manager = Manager([first, second])
    assert await manager.invoke("team/speak") == "team voice / only in second"
    assert await manager.invoke("plain") == "first voice"


def test_the_cli_runs_a_prompt_with_partials(tools: Path) -> None:
    tool(tools, "hello", '{% include "shared/preamble" %}')
    result = CliRunner(env={"NO_COLOR": "1"}).invoke(cli, ["run", "hello", '{"name": "Cy"}', "--path", str(tools)])
    assert result.exit_code == 0, result.output
    assert "You are terse, Cy." in result.output


# -- a missing partial ----------------------------------------------------------------------


async def test_a_missing_partial_names_the_tool_file_line_and_what_was_meant(tools: Path) -> None:
    path = tool(tools, "typo", 'Line one.\n{% include "shared/preambel" %}')
    with pytest.raises(InterpolationError) as caught:
        await Manager([tools]).invoke("typo", {"name": "x"})
    error = caught.value
    assert error.tool == "typo" and error.path == str(path) and error.line is not None
    assert "'shared/preambel' not found" in error.detail
    assert "did you mean 'shared/preamble'?" in error.detail


async def test_ignore_missing_passes_over_a_missing_partial(tools: Path) -> None:
    tool(tools, "opt", 'A{% include "nowhere" ignore missing %}B')
    assert await Manager([tools]).invoke("opt") == "AB"


# -- followed when edited -----------------------------------------------------------------------


async def test_a_partial_edited_between_two_calls_is_seen_by_the_next(tools: Path) -> None:
    partial = put(tools / "greeting.jinja", "Hello")
    tool(tools, "greet", '{% include "greeting" %}, {{ args.name }}')
    manager = Manager([tools])
    assert await manager.invoke("greet", {"name": "Ada"}) == "Hello, Ada"
    partial.write_text("Good morning", encoding="utf-8")
    later = partial.stat().st_mtime_ns + 5_000_000_000
    os.utime(partial, ns=(later, later))
    assert await manager.invoke("greet", {"name": "Ada"}) == "Good morning, Ada"


async def test_a_partial_added_nearer_is_seen_by_the_next_call(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    put(second / "voice.jinja", "far")
    tool(first, "speak", '{% include "voice" %}')
    manager = Manager([first, second])
    assert await manager.invoke("speak") == "far"
    put(first / "voice.jinja", "near")
    assert await manager.invoke("speak") == "near"


# -- never outside the search paths ------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["../outside", "shared/../../outside", "/etc/hostname", "./shared/preamble", ".secret", "a\\\\b", "shared//x"],
)
async def test_names_that_could_leave_the_folders_are_refused_before_any_read(tools: Path, name: str) -> None:
    put(tools.parent / "outside.jinja", "SECRET")
    tool(tools, "evil", f'{{% include "{name}" %}}')
    with pytest.raises(SecurityError) as caught:
        await Manager([tools]).invoke("evil")
    assert "SECRET" not in str(caught.value) and caught.value.tool == "evil"


async def test_a_symlink_out_of_the_folder_is_refused(tools: Path, tmp_path: Path) -> None:
    secret = put(tmp_path / "private" / "key.jinja", "SECRET")
    (tools / "key.jinja").symlink_to(secret)
    (tools / "linked").symlink_to(secret.parent, target_is_directory=True)
    tool(tools, "peek", '{% include "key" %}')
    tool(tools, "peek2", '{% import "linked/key" as k %}x')
    manager = Manager([tools])
    for name in ("peek", "peek2"):
        with pytest.raises(SecurityError, match="resolves outside"):
            await manager.invoke(name)


async def test_a_symlink_inside_the_folder_is_followed(tools: Path) -> None:
    (tools / "alias.jinja").symlink_to(tools / "shared" / "preamble.jinja")
    tool(tools, "same", '{% include "alias" %}')
    assert await Manager([tools]).invoke("same", {"name": "Di"}) == "You are terse, Di."


async def test_a_name_chosen_by_the_arguments_is_refused(tools: Path) -> None:
    tool(tools, "chooser", "{% include args.which %}")
    with pytest.raises(InterpolationError, match="literal string"):
        await Manager([tools]).invoke("chooser", {"which": "shared/preamble"})


async def test_extends_is_refused(tools: Path) -> None:
    tool(tools, "child", '{% extends "shared/preamble" %}')
    with pytest.raises(InterpolationError, match="extends"):
        await Manager([tools]).invoke("child", {"name": "x"})


async def test_a_tool_with_no_file_finds_partials_in_the_search_paths_only(tools: Path) -> None:
    manager = Manager([tools])
    manager.register("inline", render_prompt, prompt='{% include "shared/preamble" %}')  # its body renders its prompt
    assert await manager.invoke("inline", {"name": "Ed"}) == "You are terse, Ed."


def test_a_trusted_tool_never_includes_from_an_untrusted_folder(tmp_path: Path) -> None:
    trusted, untrusted = SearchPath.of(tmp_path / "a"), SearchPath.of(tmp_path / "b", trusted=False)
    (tmp_path / "a").mkdir()
    path = put(tmp_path / "a" / "t.md", "---\n---\nx\n")
    mine = Manager([tmp_path / "a"]).find_tool("t")
    assert mine.path == path and mine.trusted
    assert [f for f, _ in roots_of(mine, (untrusted, trusted)).folders] == [tmp_path / "a", Path(trusted.folder)]


async def test_partials_from_a_paths_folder_do_not_reach_a_trusted_tool(tmp_path: Path) -> None:
    main, extra = tmp_path / "main", tmp_path / "extra"
    put(extra / "snippet.jinja", "{{ env.HOME }}")
    tool(main, "host", '{% include "snippet" %}', front="metadata:\n  paths: ../extra\n  trust: {env: true}\n")
    with pytest.raises(InterpolationError, match="'snippet' not found"):
        await Manager([main]).invoke("host")


# -- the render limits count across includes ----------------------------------------------------


async def test_a_partial_that_includes_itself_stops_at_the_depth_limit(tools: Path) -> None:
    put(tools / "again.jinja", 'x{% include "again" %}')
    tool(tools, "bomb", '{% include "again" %}')
    with pytest.raises(InterpolationError, match=f"more than {INCLUDE_DEPTH} deep"):
        await Manager([tools]).invoke("bomb")


async def test_an_include_fan_out_hits_the_loop_and_call_limit(tools: Path) -> None:
    for level in range(6):
        inner = f'{{% include "p{level + 1}" %}}' * 10 if level < 5 else "x"
        put(tools / f"p{level}.jinja", inner)
    tool(tools, "fan", '{% include "p0" %}')
    with pytest.raises(InterpolationError, match="Limits.render_loops"):  # each include counts as a call
        await Manager([tools], limits=Limits(render_loops=1_000)).invoke("fan")


async def test_loops_in_partials_count_with_the_includers(tools: Path) -> None:
    put(tools / "loop.jinja", "{% for i in range(60) %}{% endfor %}")
    tool(tools, "alone", '{% include "loop" %}ok')
    tool(tools, "both", '{% for i in range(60) %}{% endfor %}{% include "loop" %}ok')
    manager = Manager([tools], limits=Limits(render_loops=100))
    assert await manager.invoke("alone") == "ok"
    with pytest.raises(InterpolationError, match="Limits.render_loops"):
        await manager.invoke("both")


async def test_output_of_partials_counts_with_the_includers(tools: Path) -> None:
    put(tools / "big.jinja", "y" * 600)
    tool(tools, "out", 'x{% include "big" %}{% include "big" %}')
    with pytest.raises(InterpolationError, match="Limits.render_output"):
        await Manager([tools], limits=Limits(render_output=1_000)).invoke("out")


# -- untrusted by the same rules as the including file --------------------------------------------


async def test_a_partial_sees_env_only_when_its_includer_may(tools: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARTIAL_PROBE", "visible")
    put(tools / "probe.jinja", "{{ env.PARTIAL_PROBE }}")
    tool(tools, "open", '{% include "probe" %}', front="metadata:\n  trust: {env: true}\n")
    tool(tools, "closed", '{% include "probe" %}')
    manager = Manager([tools])
    assert await manager.invoke("open") == "visible"
    with pytest.raises(InterpolationError, match="env is empty"):
        await manager.invoke("closed")


# -- for show and check ------------------------------------------------------------------------------


def test_uses_lists_every_partial_a_tools_templates_name(tools: Path) -> None:
    put(tools / "shared" / "outer.jinja", '{% include "shared/preamble" %}')
    tool(
        tools,
        "many",
        '{% include "shared/outer" %}\n{% import "shared/macros" as m %}',
        front="metadata:\n  system: \"{% include 'shared/preamble' %}\"\n",
    )
    manager = Manager([tools])
    found = uses(manager.find_tool("many"), manager.paths)
    assert [(u.name, u.level, u.via is not None) for u in found] == [
        ("shared/outer", "prompt", False),
        ("shared/preamble", "prompt", True),
        ("shared/macros", "prompt", False),
        ("shared/preamble", "system", False),
    ]
    assert found[0].path == (tools / "shared" / "outer.jinja").resolve() and found[0].line == 6
    assert all(u.error is None for u in found)


def test_problems_reports_a_missing_partial_with_did_you_mean(tools: Path) -> None:
    path = tool(tools, "bad", 'x\n{% include "shared/macro" %}\n{% include "gone" ignore missing %}')
    manager = Manager([tools])
    [problem] = problems(manager.find_tool("bad"), manager.paths)
    assert isinstance(problem, InterpolationError)
    assert problem.path == str(path) and problem.line == 5 and problem.tool == "bad"
    assert "did you mean 'shared/macros'?" in problem.detail
    tool(tools, "escape", '{% include "../x" %}')
    [refused] = problems(manager.find_tool("escape"), manager.paths)
    assert isinstance(refused, SecurityError)


async def test_a_tool_from_a_paths_folder_includes_from_its_own_folder_and_the_trusted_ones(tmp_path: Path) -> None:
    main, extra = tmp_path / "main", tmp_path / "extra"
    put(main / "house.jinja", "house style")
    put(extra / "own.jinja", "own words")
    tool(extra, "guest", '{% include "own" %}, {% include "house" %}')
    put(
        main / "host.py",
        'frontmatter = {"metadata": {"paths": "../extra"}}\n\n'
        "async def main(ctx):\n    return await ctx.manager.invoke('guest')\n",
    )
    put(extra / "probe.jinja", "{{ env.HOME }}")
    tool(extra, "nosy", '{% include "probe" %}', front="metadata:\n  trust: {env: true}\n")
    put(
        main / "host2.py",
        'frontmatter = {"metadata": {"paths": "../extra"}}\n\n'
        "async def main(ctx):\n    return await ctx.manager.invoke('nosy')\n",
    )
    manager = Manager([main])
    assert await manager.invoke("host") == "own words, house style"
    with pytest.raises(InterpolationError, match="untrusted folders never see env"):
        await manager.invoke("host2")  # its partials are as untrusted as it is


async def test_a_named_authoritys_templates_find_the_partials_it_ships_beside_it(tmp_path: Path) -> None:
    """A partial resolves as a ref does across authorities: `authorities/` beside a search path is searched too."""
    tools = tmp_path / "tools"
    put(
        tmp_path / "authorities" / "house.md", "---\nmetadata:\n  system: 'Speak {% include \"house-voice\" %}.'\n---\n"
    )
    put(tmp_path / "authorities" / "house-voice.jinja", "as the house does")
    put(
        tools / "speak.py",
        'frontmatter = {"authority": "house"}\n\ndef main(ctx):\n    return ctx.meta["system"]\n',
    )
    assert await Manager([tools]).invoke("speak") == "Speak as the house does."
    manager = Manager([tools])
    assert roots_of(manager.find_tool("speak"), manager.paths).folders[-1][0] == tmp_path / "authorities"
