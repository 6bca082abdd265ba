"""check: every problem of every tool and authority file, as path:line: message (SPEC section 8)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from orchestrator import Manager
from orchestrator.check import Problem, check, one_edit_apart

GOOD = """
---
description: Fine.
metadata:
  params: {type: object, properties: {name: {type: string}}}
  shout: {times: 2}
---
Hello, {{ args.name }}!
"""

SHOUT = """
frontmatter = {"metadata": {"params": {"type": "object"}}}

async def main(ctx):
    return await ctx.target.manager.next()
"""


def lines(manager: Manager) -> list[str]:
    return [str(problem) for problem in check(manager)]


@pytest.fixture
def manager(tmp_path, tools, write):
    write("tools/good.md", GOOD)
    write("tools/shout.py", SHOUT)
    return Manager([tools], cwd=tmp_path)


def test_check_a_clean_folder_has_no_problems(manager):
    assert check(manager) == []


def test_check_skips_the_builtin_tools(tmp_path):
    assert check(Manager([], cwd=tmp_path)) == []


def test_check_problem_line_format():
    assert str(Problem("tools/a.md", 3, "bad")) == "tools/a.md:3: bad"
    assert str(Problem("tools/a.md", None, "bad")) == "tools/a.md: bad"
    assert str(Problem("tools/a.md", 4, "odd", "warning")) == "tools/a.md:4: warning: odd"
    assert str(Problem(None, None, "bad")) == "bad"


def test_check_reports_bad_yaml_with_its_line(manager, write):
    write("tools/bad.md", "---\ndescription: x\nmetadata:\n  params: {type: object\n---\nhi\n")
    [problem] = check(manager)
    assert problem.path == os.path.join("tools", "bad.md")
    assert problem.line == 4  # the unclosed '{', not where the parser gave up
    assert problem.message.startswith("invalid YAML in frontmatter")
    assert problem.severity == "error"


def test_check_reports_a_python_tool_that_does_not_import(manager, write):
    write("tools/broken.py", "frontmatter = {}\ndef main(ctx:\n    pass\n")
    assert lines(manager) == [f"{os.path.join('tools', 'broken.py')}:2: syntax error: '(' was never closed"]


def test_check_reports_an_unknown_authority_at_its_key(manager, write):
    write("tools/ruled.md", "---\ndescription: x\nauthority: nowhere\n---\nhi\n")
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "ruled.md"), 3)
    assert problem.message.startswith("unknown authority 'nowhere'")


def test_check_reports_an_order_cycle_with_the_cycle(manager, write):
    write(
        "tools/loop.md",
        """
        ---
        metadata:
          log: {}
          cwd: .
          $order:
            log: {before: [cwd]}
            cwd: {before: [log]}
        ---
        hi
        """,
    )
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "loop.md"), 5)
    assert "cycle: log -> cwd -> log" in problem.message


def test_check_compiles_metadata_templates_without_rendering_them(manager, write):
    write(
        "tools/tpl.md",
        """
        ---
        metadata:
          fine: '{{ args.name }}'
          nested: {deeper: ['{{ args.name ']}
        ---
        hi
        """,
    )
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "tpl.md"), 4)
    assert problem.message.startswith("template syntax error in metadata key 'nested': ")


def test_check_reports_a_prompt_template_error_at_its_file_line(manager, write):
    write("tools/tpl.md", "---\ndescription: x\n---\n\nfirst line\nsecond {% if %}\n")
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "tpl.md"), 6)
    assert problem.message.startswith("template syntax error in the prompt: ")


def test_check_warns_about_unknown_frontmatter_keys_with_a_suggestion(manager, write):
    write("tools/typo.md", "---\ndescripton: x\nmetdata: {}\ncolour: red\n---\nhi\n")
    assert lines(manager) == [
        f"{os.path.join('tools', 'typo.md')}:2: warning: unknown frontmatter key 'descripton' is ignored; "
        "did you mean 'description'?",
        f"{os.path.join('tools', 'typo.md')}:3: warning: unknown frontmatter key 'metdata' is ignored; "
        "did you mean 'metadata'?",
        f"{os.path.join('tools', 'typo.md')}:4: warning: unknown frontmatter key 'colour' is ignored "
        "(known: name, description, authority, metadata, role, when, evals)",
    ]


def test_check_warns_about_metadata_keys_one_edit_from_a_tool(manager, write):
    write("tools/near.md", "---\nmetadata:\n  paramz: {type: object}\n  shoutt: {}\n  colour: red\n---\nhi\n")
    assert lines(manager) == [
        f"{os.path.join('tools', 'near.md')}:3: warning: metadata key 'paramz' is not a tool; did you mean 'params'?",
        f"{os.path.join('tools', 'near.md')}:4: warning: metadata key 'shoutt' is not a tool; did you mean 'shout'?",
    ]


def test_check_near_miss_spares_static_keys_and_short_keys(manager, write):
    write("tools/data.md", "---\nmetadata:\n  path: data/\n  logs: 1\n  lag: 2\n  $static: [path, logs]\n---\nhi\n")
    assert check(manager) == []


def test_check_one_edit_apart():
    assert one_edit_apart("paramz", "params")  # substitution
    assert one_edit_apart("shoutt", "shout")  # insertion
    assert one_edit_apart("shot", "shout")  # deletion
    assert one_edit_apart("parmas", "params")  # neighbours swapped
    assert not one_edit_apart("params", "params")
    assert not one_edit_apart("pram", "params")
    assert not one_edit_apart("apsram", "params")


def test_check_reports_an_invalid_params_schema(manager, write):
    write("tools/schema.md", "---\nmetadata:\n  params: {type: nonsense}\n---\nhi\n")
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "schema.md"), 3)
    assert problem.message.startswith("'params' is not a valid JSON schema: ")


def test_check_reports_authority_problems_once_in_their_own_files(manager, write):
    write("authorities/loop-a.md", "---\ninherit: loop-b\n---\n")
    write("authorities/loop-b.md", "---\ninherit: loop-a\n---\n")
    write("authorities/tpl.md", "---\nmetadata:\n  greeting: '{{ oops'\n  validate-arg: {}\n  $locked: 3\n---\n")
    write("tools/team/AUTHORITY.md", "---\ninherit: missing\n---\n")
    write("tools/team/one.md", "one")
    write("tools/team/two.md", "two")
    assert lines(manager) == [
        f"{os.path.join('authorities', 'loop-a.md')}:2: authority inheritance forms a cycle: loop-a -> loop-b -> loop-a",
        f"{os.path.join('authorities', 'loop-b.md')}:2: authority inheritance forms a cycle: loop-b -> loop-a -> loop-b",
        f"{os.path.join('authorities', 'tpl.md')}:3: template syntax error in metadata key 'greeting': "
        "unexpected end of template, expected 'end of print statement'.",
        f"{os.path.join('authorities', 'tpl.md')}:4: warning: metadata key 'validate-arg' is not a tool; "
        "did you mean 'validate-args'?",
        f"{os.path.join('authorities', 'tpl.md')}:5: $locked must be a name or a list of names, not 3 (level 'tpl', key '$locked')",
        f"{os.path.join('tools', 'team', 'AUTHORITY.md')}:2: authority 'team/AUTHORITY.md' inherits unknown authority "
        "'missing'",
    ]


def test_check_one_broken_file_never_hides_the_others(manager, write):
    write("tools/a.md", "---\nmetadata: [1\n---\n")
    write("tools/b.md", "---\nauthority: nowhere\n---\nb")
    write("tools/c.md", "c {{ oops")
    assert [p.path for p in check(manager)] == [os.path.join("tools", n) for n in ("a.md", "b.md", "c.md")]


SEVERAL = {
    "tools/badyaml.md": "---\ndescription: x\nmetadata:\n  params: {type: object\n---\nhi\n",
    "tools/ruled.md": "---\nauthority: nowhere\n---\nhi\n",
    "tools/loop.md": "---\nmetadata:\n  log: {}\n  cwd: .\n  $order:\n    log: {before: [cwd]}\n    cwd: {before: [log]}\n---\nhi\n",
    "tools/tpl.md": "---\nmetdata: {}\nmetadata:\n  who: '{{ args.name '\n  paramz: {}\n---\n\nHi {% if %}\n",
    "tools/shout.py": SHOUT,
}


def reported(out: subprocess.CompletedProcess[str]) -> tuple[list[str], str]:
    """The problem lines and the summary line ``check`` printed, on whichever streams (issue 25 moves them)."""
    printed = (out.stdout + out.stderr).splitlines()
    summary = [line for line in printed if line.startswith("checked ")]
    assert len(summary) == 1, printed
    return [line for line in printed if not line.startswith("checked ")], summary[0]


def run_check(tmp_path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", "check", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )


def test_check_cli_reports_every_problem_as_path_line_message_and_exits_1(tmp_path, write):
    for name, text in SEVERAL.items():
        write(name, text)
    out = run_check(tmp_path)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    tools = "tools" + os.sep
    # Where a line quotes PyYAML or jinja2, only our part of it is compared: their wording is theirs.
    quoting = {4: "template syntax error in metadata key 'who': ", 6: "template syntax error in the prompt: "}
    expected = [
        f"{tools}badyaml.md:4: invalid YAML in frontmatter: the bracket {{ opened here is never closed: "
        "add the closing } on this line (or quote the whole value)",
        f"{tools}loop.md:5: $order constraints form a cycle: log -> cwd -> log (tool 'loop')",
        f"{tools}ruled.md:2: unknown authority 'nowhere'; looked in {tmp_path / 'authorities'}, "
        f"{Manager().authorities.builtin} (tool 'ruled')",
        f"{tools}tpl.md:2: warning: unknown frontmatter key 'metdata' is ignored; did you mean 'metadata'?",
        f"{tools}tpl.md:4: ",
        f"{tools}tpl.md:5: warning: metadata key 'paramz' is not a tool; did you mean 'params'?",
        f"{tools}tpl.md:8: ",
    ]
    found, summary = reported(out)
    assert len(found) == len(expected)
    for index, (line, want) in enumerate(zip(found, expected, strict=True)):
        if index in quoting:
            assert line.startswith(want + quoting[index]) and len(line) > len(want + quoting[index]), line
        else:
            assert line == want
    assert summary == "checked 5 tools in tools: 5 errors, 2 warnings"


def test_check_cli_clean_folder_exits_0_with_a_summary(tmp_path, write):
    write("tools/good.md", GOOD)
    write("tools/shout.py", SHOUT)
    out = run_check(tmp_path)
    assert out.returncode == 0
    assert reported(out) == ([], "checked 2 tools in tools: ok")


def test_check_cli_warnings_alone_exit_0(tmp_path, write):
    write("tools/typo.md", "---\ndescripton: x\n---\nhi\n")
    out = run_check(tmp_path, "--path", "tools")
    assert out.returncode == 0
    assert reported(out) == (
        [
            f"tools{os.sep}typo.md:2: warning: unknown frontmatter key 'descripton' is ignored; did you mean 'description'?"
        ],
        "checked 1 tool in tools: 1 warning",
    )


def test_check_reports_a_python_tool_with_non_string_keys(manager, write):
    write("tools/odd.py", "frontmatter = {1: 2, 'metadata': {3: '{{ x', 'paramz': {}}}\ndef main(ctx):\n    return 1\n")
    found = lines(manager)
    assert f"{os.path.join('tools', 'odd.py')}: key 1 in frontmatter is not a string" in found


# -- strict where a typo changes behaviour (issue 12) -------------------------------


def test_check_reports_an_unknown_annotation_with_the_nearest_one(manager, write):
    write("tools/typo.md", "---\nmetadata:\n  $inhert: good\n---\nx\n")
    assert "tools/typo.md:3: unknown annotation '$inhert'; did you mean '$inherit'? (level 'typo', key '$inhert')" in (
        lines(manager)
    )


def test_check_reports_an_unknown_order_field(manager, write):
    write("tools/field.md", "---\nmetadata:\n  shout: {}\n  $order:\n    shout: {afterr: [$pre-execute]}\n---\nx\n")
    found = [line for line in lines(manager) if "field.md" in line]
    assert found == [
        "tools/field.md:4: unknown field 'afterr' in the order of 'shout'; did you mean 'after'? "
        "(level 'field', key '$order')"
    ]


def test_check_warns_about_order_names_that_match_nothing(manager, write):
    write(
        "tools/stray.md",
        "---\nmetadata:\n  shout: {}\n  $order:\n    shout: {after: [shuot, $pre-exeucte]}\n  $static: [tone]\n---\nx\n",
    )
    found = [line for line in lines(manager) if "stray.md" in line]
    assert (
        "tools/stray.md:4: warning: $order of 'shout' names 'shuot', which is neither a key, a tool nor a phase "
        "(the constraint is ignored); did you mean 'shout'?" in found
    )
    assert any("names the phase '$pre-exeucte'" in line and "did you mean '$pre-execute'?" in line for line in found)
    assert "tools/stray.md:6: warning: $static names 'tone', which is neither a key nor a tool" in found


def test_check_reports_middleware_args_that_fail_the_middlewares_params(manager, write):
    write("tools/data.md", "---\nmetadata:\n  cache: false\n  retry: {attempts: many}\n---\nx\n")
    found = [line for line in lines(manager) if "data.md" in line]
    assert found[0].startswith("tools/data.md:3: 'cache' runs the middleware built-in cache.py with args that fail")
    assert found[0].endswith("if 'cache' is meant as data, list it in $static")
    assert found[1].startswith("tools/data.md:4: 'retry' runs the middleware built-in retry.py")
    assert "/attempts: " in found[1]


def test_run_time_warns_once_per_plan_about_stray_order_names(tools, write, caplog):
    write("tools/stray.md", "---\nmetadata:\n  $order:\n    log: {after: [shuot]}\n---\nx\n")
    manager = Manager([tools])
    with caplog.at_level("WARNING", logger="orchestrator"):
        for _ in range(3):
            assert manager.invoke_sync("stray") == "x"
    warned = [r.getMessage() for r in caplog.records if "shuot" in r.getMessage()]
    assert warned == [
        f"{tools / 'stray.md'}:3: $order of 'log' names 'shuot', which is neither a key, a tool nor a phase: "
        "the constraint is ignored"
    ]


# -- scale (issue 11): near misses through an index, misses looked at once per check ---------------------------


def test_near_names_finds_exactly_what_comparing_all_pairs_finds():
    import random

    from orchestrator.check import NearNames

    rng = random.Random(11)
    names = sorted({"".join(rng.choice("abcde") for _ in range(rng.randint(1, 7))) for _ in range(400)})
    index = NearNames(names)
    keys = [*names[:80], *("".join(rng.choice("abcdef") for _ in range(rng.randint(1, 8))) for _ in range(300))]
    for key in keys:
        assert index.near(key) == sorted(name for name in names if one_edit_apart(key, name))
    # Candidates come from the key's deletion neighbourhood, not from every name.
    assert index.compared < len(keys) * len(names) // 10


def test_check_of_a_catalog_compares_few_names_and_scans_each_missed_folder_once(tmp_path, monkeypatch):
    from bench.toolsets import write_catalog
    from orchestrator import check as check_module
    from orchestrator.registry import Registry

    catalog = write_catalog(tmp_path / "catalog", 300, 3)
    (catalog / "group00" / "typo.md").write_text("---\nmetadata:\n  group00/tool01: {}\n---\nA typo.\n")
    indexes: list[check_module.NearNames] = []
    real_index = check_module.NearNames

    def recording(names):
        index = real_index(names)
        indexes.append(index)
        return index

    listings = []
    real_listing = Registry._listing

    def listing(self, folder):
        listings.append(folder)
        return real_listing(self, folder)

    monkeypatch.setattr(check_module, "NearNames", recording)
    monkeypatch.setattr(Registry, "_listing", listing)
    found = [str(p) for p in check(Manager([catalog], cwd=tmp_path))]
    assert found == [
        "catalog/group00/typo.md:3: warning: metadata key 'group00/tool01' is not a tool; "
        "did you mean 'group00/tool001'?"
    ]
    assert sum(index.compared for index in indexes) < 20 * 300
    # A key missed by every tool (``params``, ``topic``) is looked for once, not once per tool.
    assert len(listings) <= 10


def test_check_reports_the_same_with_and_without_the_index(tmp_path, tools, write, monkeypatch):
    from orchestrator import check as check_module

    write("tools/summarize.md", "---\ndescription: Sums.\n---\nSum.\n")
    write("tools/team/shout.md", "---\nmetadata:\n  sumarize: {}\n  summarise: {}\n---\nShout.\n")
    write("tools/AUTHORITY.md", "---\nmetadata:\n  sumarize: {}\n---\n")
    write("tools/two.md", "---\nname: one\n---\nTwo.\n")
    write("tools/one.md", "---\nname: one\n---\nOne.\n")
    write("tools/broken.md", "---\nmetadata: [\n---\nBroken.\n")
    fast = lines(Manager([tools], cwd=tmp_path))

    class AllPairs:
        def __init__(self, names):
            self.names = sorted(names)

        def near(self, key):
            return [name for name in self.names if one_edit_apart(key, name)]

    monkeypatch.setattr(check_module, "NearNames", AllPairs)
    assert lines(Manager([tools], cwd=tmp_path)) == fast
    assert any("did you mean 'summarize'" in line for line in fast)


def test_check_leaves_the_garbage_collector_as_it_found_it(manager, write):
    import gc

    write("tools/a.md", "---\ndescription: A.\n---\nA.\n")
    assert gc.isenabled()
    check(manager)
    assert gc.isenabled()
    gc.disable()
    try:
        check(manager)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_check_validates_shared_middleware_args_once_and_reports_each_tools_own(tmp_path, tools, write, monkeypatch):
    """An authority's middleware args are one object for every tool under it: checked once, not once per tool."""
    from orchestrator import collisions as check_module

    write("tools/AUTHORITY.md", "---\nmetadata:\n  retry: {attempts: 2}\n---\n")
    for n in range(20):
        write(f"tools/t{n}.md", f"---\ndescription: Tool {n}.\n---\nHi.\n")
    write("tools/bad1.md", "---\nmetadata:\n  retry: {attempts: many}\n---\nx\n")
    write("tools/bad2.md", "---\nmetadata:\n  retry: {attempts: lots}\n---\nx\n")
    calls = []
    real = check_module.check_schema
    monkeypatch.setattr(check_module, "check_schema", lambda *a, **k: calls.append(a[1]) or real(*a, **k))
    found = lines(Manager([tools], cwd=tmp_path))
    retries = [args for args in calls if isinstance(args, dict) and "attempts" in args]
    assert sorted(str(args["attempts"]) for args in retries) == ["2", "lots", "many"]
    assert any(line.startswith("tools/bad1.md:3: 'retry' runs the middleware") for line in found)
    assert any(line.startswith("tools/bad2.md:3: 'retry' runs the middleware") for line in found)


def test_check_warns_of_a_model_that_names_no_model_with_the_aliases(manager, write):
    write("tools/namer.md", "---\nmetadata:\n  model: sonet\n---\nName it.\n")
    write("tools/fine.md", "---\nmetadata:\n  model: sonnet\n---\nName it.\n")
    found = [p for p in check(manager) if "namer.md" in str(p.path) or "fine.md" in str(p.path)]
    assert [(p.path, p.line, p.severity) for p in found] == [("tools/namer.md", 3, "warning")]
    assert "model 'sonet' names no model, so a run fails" in found[0].message
    assert "did you mean 'sonnet'?" in found[0].message and "haiku, opus, sonnet" in found[0].message


def test_check_knows_the_aliases_metadata_defines(manager, write):
    write("tools/AUTHORITY.md", "---\nmetadata:\n  model-aliases: {fast: 'openai:gpt-4o-mini'}\n---\n")
    write("tools/quick.md", "---\nmetadata:\n  model: fast\n---\nName it.\n")
    write("tools/slow.md", "---\nmetadata:\n  model: fastt\n---\nName it.\n")
    found = [p for p in check(manager) if "quick.md" in str(p.path) or "slow.md" in str(p.path)]
    assert [(p.path, p.severity) for p in found] == [("tools/slow.md", "warning")]
    assert "did you mean 'fast'?" in found[0].message


# -- shorthand schemas, partials and Prompty's leniency (issues 28 and 30) ----------------------------------


def test_check_cli_reports_each_malformed_shorthand_at_the_line_of_its_bad_part(tmp_path, write):
    write(
        "tools/two.md",
        "---\ndescription: x\nmetadata:\n  params:\n    when(aray): string\n  returns:\n    ok: bolean\n---\nx\n",
    )
    write("tools/fine.md", "---\ndescription: x\nmetadata:\n  params: {name: string}\n---\n{{ args.name }}\n")
    out = run_check(tmp_path)
    found, summary = reported(out)
    assert out.returncode == 1 and summary == "checked 2 tools in tools: 2 errors"
    where = os.path.join("tools", "two.md")
    assert [line.split(": ", 1)[0] for line in found] == [f"{where}:5", f"{where}:7"]  # each once, at its own line
    assert found[0].startswith(f"{where}:5: params shorthand") and "did you mean 'array'?" in found[0]
    assert found[1].startswith(f"{where}:7: returns shorthand") and "did you mean 'boolean'?" in found[1]


def test_check_reads_args_against_a_shorthands_properties(manager, write):
    write("tools/post.md", "---\ndescription: x\nmetadata:\n  params:\n    title?: string\n---\n\n{{ args.titel }}\n")
    [problem] = check(manager)
    assert (problem.path, problem.line) == (os.path.join("tools", "post.md"), 8)
    assert "reads args.titel, which params does not declare" in problem.message
    assert "did you mean 'args.title'?" in problem.message


def test_check_leaves_args_a_wildcard_shorthand_allows(manager, write):
    write(
        "tools/open.md",
        "---\ndescription: x\nmetadata:\n  params:\n    title: string\n    (*): string\n---\n{{ args.other }}\n",
    )
    assert check(manager) == []


def test_check_reports_a_missing_partial_with_did_you_mean_and_a_refused_name(manager, write):
    write("tools/shared/macros.jinja", "{% macro shout(x) %}{{ x | upper }}{% endmacro %}")
    write("tools/inc.md", '---\ndescription: x\n---\nx\n{% include "shared/macro" %}\n{% include "../x" %}\n')
    found = [p for p in check(manager) if p.path == os.path.join("tools", "inc.md")]
    assert [(p.line, p.severity) for p in found] == [(5, "error"), (6, "error")]
    assert "'shared/macro'" in found[0].message and "did you mean 'shared/macros'?" in found[0].message
    assert "'../x'" in found[1].message and "refused" in found[1].message


def test_check_notes_that_a_prompty_file_renders_leniently(manager, write):
    from orchestrator.formats.rendering import NOTE

    write("tools/pet.prompty", "---\nname: pet\ndescription: x\n---\nuser:\nHi {{ pet.name }}\n")
    assert lines(manager) == [f"{os.path.join('tools', 'pet.prompty')}: warning: prompty: {NOTE}"]
