"""The built-in directives middleware (R-DIR-1, R-DIR-2), end to end from real .md files."""

from __future__ import annotations

import logging

import pytest
from freshness_helpers import refresh

from orchestrator import InterpolationError, Manager

pytestmark = pytest.mark.anyio

UPPER = "def main(ctx):\n    return (ctx.args['label'] or '').upper()\n"
ECHO_ARGS = "def main(ctx):\n    return repr(sorted(ctx.args.items()))\n"


@pytest.fixture
def manager(write, tools):
    write("tools/upper.py", UPPER)
    write("tools/echo-args.py", ECHO_ARGS)
    write("tools/nothing.py", "def main(ctx):\n    return None\n")
    return Manager([tools])


async def test_r_dir_1_text_directive_output_replaces_its_text(write, manager):
    write("tools/page.md", "---\n---\nSay :upper[hello] to {{ args.who }}.\n")
    assert await manager.invoke("page", {"who": "Ada"}) == "Say HELLO to Ada."


async def test_r_dir_1_every_form_gets_name_label_attributes_content_index(write, manager):
    write(
        "tools/page.md",
        """
        ---
        ---
        A :echo-args[one]{k=v flag #id .c}

        ::echo-args[two]{n="2"}

        :::echo-args[three]
        inner **text**
        :::
        """,
    )
    text = await manager.invoke("page")
    lines = [line for line in text.splitlines() if line]
    assert lines[0] == (
        "A [('attributes', {'k': 'v', 'flag': True, 'id': 'id', 'class': 'c'}), ('content', None), "
        "('index', 0), ('label', 'one'), ('name', 'echo-args')]"
    )
    assert "('index', 1)" in lines[1] and "{'n': '2'}" in lines[1]
    assert "('content', 'inner **text**')" in lines[2] and "('index', 2)" in lines[2]


async def test_r_dir_1_document_order_and_after_metadata_middleware(write, manager, tools):
    write(
        "tools/trace.py",
        "def main(ctx):\n    ctx.target.nonlocals.setdefault('order', []).append(ctx.args['label'])\n    return ctx.args['label']\n",
    )
    write(
        "tools/meta-mw.py",
        "async def main(ctx):\n    ctx.target.nonlocals.setdefault('order', []).append('metadata')\n    return await ctx.target.manager.next()\n",
    )
    write(
        "tools/page.md",
        "---\nmetadata: {meta-mw: {}}\n---\n:::trace[c]\nx\n:::\n\n:trace[a] then ::trace[b] no\n\n::trace[d]\n",
    )
    box: dict = {}
    await manager.invoke("page", context={"nonlocals": box})
    assert box["order"] == ["metadata", "c", "a", "d"]


async def test_r_dir_1_none_removes_the_directive(write, manager):
    write("tools/page.md", "---\n---\nbefore:nothing[x] :nothing[gone] after\n")
    assert await manager.invoke("page") == "before:nothing[x]  after"


async def test_r_dir_1_unknown_names_stay_literal(write, manager):
    write("tools/page.md", "---\n---\nTime 10:30, :unknown[x]{a=1} and :upper[yes]\n")
    assert await manager.invoke("page") == "Time 10:30, :unknown[x]{a=1} and YES"


async def test_r_dir_1_attribute_templates_render_with_args_as_data(write, manager):
    write("tools/page.md", '---\n---\n:echo-args{city="{{ args.city }}"}\n')
    text = await manager.invoke("page", {"city": "{{ 7*7 }} :upper[pwn]"})
    assert "'city': '{{ 7*7 }} :upper[pwn]'" in text


async def test_r_dir_2_args_come_back_literally(write, manager):
    write("tools/page.md", "---\n---\nYou said: {{ args.text }} and :upper[ok]\n")
    assert await manager.invoke("page", {"text": ":upper[pwn] {{ 6*7 }} ::upper[x]"}) == (
        "You said: :upper[pwn] {{ 6*7 }} ::upper[x] and OK"
    )


async def test_r_dir_2_directive_output_is_never_parsed_or_rendered(write, manager):
    write("tools/sneaky.py", "def main(ctx):\n    return ':upper[pwn] {{ 6*7 }} {% if true %}x{% endif %}'\n")
    write("tools/page.md", "---\n---\n[:sneaky]\n")
    assert await manager.invoke("page") == "[:upper[pwn] {{ 6*7 }} {% if true %}x{% endif %}]"


async def test_r_dir_2_code_is_not_directives(write, manager):
    write("tools/page.md", "---\n---\n`:upper[no]` and\n\n```\n::upper[no]\n```\n\n:upper[yes]\n")
    assert await manager.invoke("page") == "`:upper[no]` and\n\n```\n::upper[no]\n```\n\nYES"


async def test_r_dir_1_a_directive_configures_its_target(write, manager):
    write("tools/set-tone.py", "def main(ctx):\n    ctx.target.locals['tone'] = ctx.args['attributes']['tone']\n")
    write("tools/page.md", "---\n---\n:set-tone{tone=warm}Tone: {{ locals.tone | default('none') }}\n")
    assert await manager.invoke("page") == "Tone: warm"


async def test_r_dir_1_a_directive_naming_its_own_tool_is_skipped(write, manager, caplog):
    write("tools/loop.md", "---\n---\nstart :loop[again] end\n")
    with caplog.at_level(logging.WARNING, logger="orchestrator"):
        assert await manager.invoke("loop") == "start :loop[again] end"
    assert any("skipping middleware 'loop'" in r.getMessage() for r in caplog.records)


async def test_r_dir_1_mutual_directives_end(write, manager):
    write("tools/ping.md", "---\n---\nping(:pong)\n")
    write("tools/pong.md", "---\n---\npong(:ping)\n")
    assert await manager.invoke("ping") == "ping(pong(:ping))"


async def test_r_dir_1_markdown_tool_as_directive_and_as_middleware(write, manager):
    write("tools/snippet.md", "---\n---\n*{{ args.label }}*\n")
    write("tools/page.md", "---\n---\nA :snippet[note].\n")
    assert await manager.invoke("page") == "A *note*."
    # As a chain entry with no model, a markdown tool returns its rendered prompt, which ends the target's chain.
    write("tools/banner.md", "---\n---\nBANNER for {{ args.who }}\n")
    write(
        "tools/wrapped.py",
        "frontmatter = {'metadata': {'banner': {'who': 'x'}}}\ndef main(ctx):\n    return 'body ran'\n",
    )
    refresh(manager)
    assert await manager.invoke("wrapped") == "BANNER for x"


async def test_r_dir_1_bad_attribute_template_names_the_line(write, manager):
    path = write("tools/page.md", '---\ndescription: d\n---\nline one\n\n:echo-args{x="{{ args.missing.deeper }}"}\n')
    with pytest.raises(InterpolationError) as info:
        await manager.invoke("page")
    assert (info.value.path, info.value.line, info.value.level) == (str(path), 6, "directive :echo-args")


async def test_r_dir_1_directives_are_parsed_once_per_source(write, manager):
    from orchestrator.prompt import _layout

    write("tools/page.md", "---\n---\n:upper[a] :upper[b]\n")
    assert await manager.invoke("page") == "A B"
    info = _layout.cache_info()
    assert await manager.invoke("page") == "A B"
    assert _layout.cache_info().hits == info.hits + 1  # laid out (placeholders and all) once per source
    assert _layout.cache_info().misses == info.misses


RECORD = (
    "def main(ctx):\n"
    "    ctx.target.nonlocals.setdefault('calls', []).append(ctx.args['label'])\n"
    "    return '<' + ctx.args['label'] + '>'\n"
)


async def calls_of(manager, ref, args=None):
    box: dict = {}
    result = await manager.invoke(ref, args, context={"nonlocals": box})
    return result, box.get("calls", [])


async def test_r_dir_1_a_prompt_set_by_an_earlier_middleware_is_kept_and_never_expanded(write, manager):
    write("tools/record.py", RECORD)
    write(
        "tools/set-prompt.py",
        "async def main(ctx):\n"
        "    ctx.target.locals['prompt'] = 'Replaced: ' + ctx.target.args['text']\n"
        "    return await ctx.target.manager.next()\n",
    )
    write(
        "tools/page.md",
        "---\nmetadata:\n  set-prompt: {}\n  $order: {set-prompt: {before: [directives]}}\n---\nOwn :record[own]\n",
    )
    assert await calls_of(manager, "page", {"text": ":record[pwn] ::record[pwn]"}) == (
        "Replaced: :record[pwn] ::record[pwn]",
        [],
    )


async def test_r_dir_1_directives_run_again_after_a_rewind_to_before_them(write, manager):
    write("tools/record.py", RECORD)
    write(
        "tools/twice.py",
        "async def main(ctx):\n"
        "    mark = ctx.target.manager.checkpoint()\n"
        "    await ctx.target.manager.next()\n"
        "    ctx.target.manager.rewind(mark)\n"
        "    return await ctx.target.manager.next()\n",
    )
    write("tools/page.md", "---\nmetadata: {twice: {}}\n---\nA :record[a] {{ 'B' }}\n")
    assert await calls_of(manager, "page") == ("A <a> B", ["a", "a"])


async def test_r_dir_1_a_directive_in_a_false_branch_does_not_run(write, manager):
    write("tools/record.py", RECORD)
    write(
        "tools/page.md",
        "---\n---\n{% if args.flag %}:record[yes]{% else %}:record[no]{% endif %} "
        "{% for x in args.things %}:record[item]{% endfor %}.\n",
    )
    assert await calls_of(manager, "page", {"flag": True, "things": []}) == ("<yes> .", ["yes"])
    assert await calls_of(manager, "page", {"flag": False, "things": [1, 2]}) == ("<no> <item><item>.", ["no", "item"])


async def test_r_dir_1_a_hidden_directive_label_template_is_not_rendered(write, manager):
    write("tools/record.py", RECORD)
    write("tools/page.md", "---\n---\n{% if args.deep %}:record[{{ args.deep.er }}]{% endif %}done\n")
    assert await calls_of(manager, "page", {"deep": None}) == ("done", [])


async def test_r_dir_1_which_directives_run_is_decided_before_any_of_them_runs(write, manager):
    write("tools/record.py", RECORD)
    write("tools/set-flag.py", "def main(ctx):\n    ctx.target.locals['flag'] = True\n")
    # The flag reads as false before :set-flag runs: :record is hidden then, so it never runs,
    # and where the final render shows it there is nothing.
    write(
        "tools/page.md",
        "---\n---\n:set-flag [{% if locals.flag | default(false) %}:record[late]{% endif %}]"
        " flag={{ locals.flag | default(false) }}\n",
    )
    assert await calls_of(manager, "page") == (" [] flag=True", [])


async def test_r_dir_1_every_directive_runs_when_the_first_render_needs_what_they_set(write, manager):
    write("tools/record.py", RECORD)
    write("tools/set-flag.py", "def main(ctx):\n    ctx.target.locals['flag'] = ctx.args['attributes']['to'] == 'on'\n")
    # locals.flag is undefined until :set-flag runs, so the first render fails: all run, the final render shows.
    write("tools/page.md", "---\n---\n:set-flag{to=on}{% if locals.flag %}:record[shown]{% endif %}\n")
    assert await calls_of(manager, "page") == ("<shown>", ["shown"])
    write("tools/page.md", "---\n---\n:set-flag{to=off}{% if locals.flag %}:record[hidden]{% endif %}\n")
    refresh(manager)
    assert await calls_of(manager, "page") == ("", ["hidden"])


async def test_r_dir_2_a_prompt_without_tool_directives_renders_once(write, manager, monkeypatch):
    import orchestrator.prompt as prompt

    renders: list[str] = []
    real = prompt.render

    def counting(source, variables, **where):
        renders.append(source)
        return real(source, variables, **where)

    monkeypatch.setattr(prompt, "render", counting)
    write("tools/page.md", "---\n---\nNo :unknown[tool] here, {{ args.x }}.\n")
    assert await manager.invoke("page", {"x": 1}) == "No :unknown[tool] here, 1."
    assert len(renders) == 1
    write("tools/page.md", "---\n---\n:upper[a] {{ args.x }}\n")
    refresh(manager)
    assert await manager.invoke("page", {"x": 2}) == "A 2"
    assert len(renders) == 2  # no block or comment can hide its placeholder: no render to see which show
    write("tools/page.md", "---\n---\n{% if args.x %}:upper[a]{% endif %} {{ args.x }}\n")
    refresh(manager)
    assert await manager.invoke("page", {"x": 3}) == "A 3"
    assert len(renders) == 4  # a block may hide it: one render to see, one for the text


@pytest.mark.anyio
async def test_r_dir_2_a_prompt_a_middleware_set_is_never_rendered_as_a_template(write, tools):
    write(
        "tools/from-args.py",
        "async def main(ctx):\n"
        "    ctx.target.locals['prompt'] = 'You said: ' + ctx.target.args['text']\n"
        "    return await ctx.target.manager.next()\n",
    )
    write("tools/echo.md", "---\nmetadata:\n  from-args: {}\n---\nauthored {{ args.text }}\n")
    result = await Manager([tools]).invoke("echo", {"text": "{{ 6 * 7 }} :echo[x]"})
    assert result == "You said: {{ 6 * 7 }} :echo[x]"


GRAB = """\
def main(ctx):
    refused = []
    for change in (lambda: ctx.args.update(label="changed"), lambda: ctx.args["attributes"].update(k="changed")):
        try:
            change()
        except TypeError:
            refused.append("refused")
    copy = dict(ctx.args)  # a copy is the tool's own
    copy["label"] = "mine"
    return f"{ctx.args['label']}/{ctx.args['attributes']['k']} {' '.join(refused)} {copy['label']}"
"""


async def test_r_dir_1_a_directive_tools_args_are_read_only_and_the_same_every_call(write, manager):
    # A directive's args are a value of the author's source, shared as a metadata middleware's are (R-INV-4).
    write("tools/grab.py", GRAB)
    write("tools/page.md", "---\n---\n:grab[one]{k=v} and :grab[two]{k=w}\n")
    for _ in range(3):
        assert await manager.invoke("page") == "one/v refused refused mine and two/w refused refused mine"


async def test_r_dir_1_templated_directive_args_render_per_call(write, manager):
    write("tools/page.md", '---\n---\n:echo-args[{{ args.who }}]{k="{{ args.n }}"} :upper[fixed]\n')
    first = await manager.invoke("page", {"who": "Ada", "n": 1})
    second = await manager.invoke("page", {"who": "Bob", "n": 2})
    assert "('label', 'Ada')" in first and "'k': '1'" in first and first.endswith(" FIXED")
    assert "('label', 'Bob')" in second and "'k': '2'" in second and second.endswith(" FIXED")


async def test_r_dir_2_an_output_holding_a_placeholder_goes_in_as_it_is(write, manager):
    # Outputs are inserted in one pass: a placeholder a directive tool returns (here the target's prompt,
    # placeholders and all) is never replaced by another directive's output.
    write("tools/quote.py", "def main(ctx):\n    return ctx.target.locals['prompt']\n")
    write("tools/page.md", "---\n---\n:quote and :upper[x]\n")
    result = await manager.invoke("page")
    assert result.endswith(" and X") and result.count("X") == 1 and "\x02" in result
    write("tools/other.md", "---\n---\n:upper[a] :control :upper[b]\n")
    write("tools/control.py", "def main(ctx):\n    return 'c\\x02d'\n")
    assert await manager.invoke("other") == "A c\x02d B"
