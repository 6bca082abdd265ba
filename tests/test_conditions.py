"""R-CHAIN-12: a middleware declares when it has work; the runner passes over the others without an invocation."""

from __future__ import annotations

import pytest

from orchestrator import ArgsValidationError, ConfigurationError, Event, Manager

pytestmark = pytest.mark.anyio


def started(events: list[Event]) -> list[str]:
    return [e.tool for e in events if e.kind == "invoke.start"]


async def test_r_chain_12_a_python_tool_runs_only_the_builtins_with_work(write, tools):
    write("tools/noop.py", "async def main(ctx):\n    return 1\n")
    events: list[Event] = []
    assert await Manager([tools], on_event=events.append).invoke("noop") == 1
    assert started(events) == ["noop"]  # was 8 invocations: every built-in of the default pipeline


async def test_r_chain_12_builtins_with_work_still_run(write, tools):
    write(
        "tools/page.md",
        "---\nmetadata:\n  params: {type: object, required: [name]}\n  returns: {type: string}\n---\n"
        "Hi {{ args.name }} :shout[x]\n",
    )
    write("tools/shout.py", "def main(ctx):\n    return 'HEY'\n")
    events: list[Event] = []
    manager = Manager([tools], on_event=events.append)
    assert await manager.invoke("page", {"name": "Ada"}) == "Hi Ada HEY"
    ran = started(events)
    for name in ("validate-args", "directives", "shout", "execute", "validate-returns"):
        assert name in ran
    assert "agent-execute" not in ran and "validate-allowed-tools" not in ran
    with pytest.raises(ArgsValidationError):
        await manager.invoke("page", {})


async def test_r_chain_12_conditions_are_checked_when_the_entry_is_reached(write, tools):
    """A middleware that adds params to the target's metadata at run time still gets them validated."""
    write(
        "tools/strict.py",
        "async def main(ctx):\n"
        "    ctx.target.meta['params'] = {'type': 'object', 'required': ['name']}\n"
        "    return await ctx.target.manager.next()\n",
    )
    write("tools/loose.py", "frontmatter = {'metadata': {'strict': {}}}\nasync def main(ctx):\n    return 'ran'\n")
    with pytest.raises(ArgsValidationError) as error:
        await Manager([tools]).invoke("loose", {})
    assert [pointer for pointer, _ in error.value.errors] == [""] and "name" in error.value.errors[0][1]


async def test_r_chain_12_user_middleware_may_declare_when(write, tools):
    write(
        "tools/mark.py",
        "frontmatter = {'when': {'kind': 'markdown'}}\n"
        "async def main(ctx):\n    return '[' + str(await ctx.target.manager.next()) + ']'\n",
    )
    write("tools/page.md", "---\nmetadata:\n  mark: {}\n---\nmd\n")
    write("tools/code.py", "frontmatter = {'metadata': {'mark': {}}}\nasync def main(ctx):\n    return 'py'\n")
    manager = Manager([tools])
    assert await manager.invoke("page") == "[md]"
    assert await manager.invoke("code") == "py"
    chain = {e.name: e for e in manager.explain("code").chain}
    assert chain["mark"].when == "kind markdown" and chain["mark"].needed is False
    assert chain["execute"].when == "entries after it" and chain["execute"].needed is False
    assert chain["trust"].when == "args that narrow the trust" and chain["trust"].needed is False


async def test_r_chain_12_a_malformed_when_names_the_middleware(write, tools):
    write("tools/odd.py", "frontmatter = {'when': {'colour': 'red'}}\nasync def main(ctx):\n    return 1\n")
    write("tools/page.md", "---\nmetadata:\n  odd: {}\n---\nx\n")
    with pytest.raises(ConfigurationError, match="unknown condition 'colour' in when"):
        await Manager([tools]).invoke("page")


async def test_r_chain_12_trust_runs_only_when_its_args_narrow_the_targets_trust(write, tools):
    write("tools/report.py", "async def main(ctx):\n    return dict(ctx.trust)\n")
    write(
        "tools/sealed.py",
        "frontmatter = {'metadata': {'trust': {'files': False}}}\nasync def main(ctx):\n    return dict(ctx.trust)\n",
    )
    write(
        "tools/odd.py", "frontmatter = {'metadata': {'trust': {'files': 'no'}}}\nasync def main(ctx):\n    return 1\n"
    )
    events: list[Event] = []
    manager = Manager([tools], on_event=events.append)
    assert await manager.invoke("report") == {"env": False, "files": True}
    assert "trust" not in started(events)  # nothing to narrow: no invocation, the same trust
    events.clear()
    assert await manager.invoke("sealed") == {"env": False, "files": False}
    assert "trust" in started(events)
    with pytest.raises((ConfigurationError, ArgsValidationError), match="files"):
        await manager.invoke("odd")  # malformed args still reach trust, which reports them
    assert {e.name: e.needed for e in manager.explain("sealed").chain}["trust"] is True


CHAIN_OF_TARGET = "async def main(ctx):\n    return [e.name for e in ctx.chain]\n"
# Brackets the target's result, when the target's metadata or locals hold `flag`.
MARK = (
    "frontmatter = {'when': {'meta': 'flag'}}\n"
    "async def main(ctx):\n    return '[' + str(await ctx.target.manager.next()) + ']'\n"
)


async def test_r_chain_12_the_plan_leaves_out_the_leading_entries_without_work(write, tools):
    """Decided once per plan: the chain a python tool runs holds none of the built-ins, yet show lists them."""
    write("tools/bare.py", CHAIN_OF_TARGET)
    write("tools/checked.py", "frontmatter = {'metadata': {'params': {'type': 'object'}}}\n" + CHAIN_OF_TARGET)
    manager = Manager([tools])
    assert await manager.invoke("bare") == []
    ran = await manager.invoke("checked", {})
    assert "validate-args" in ran and "trust" not in ran  # idle entries before the first with work are out
    assert "execute" in ran and "validate-returns" in ran  # after an entry with work: checked when reached
    shown = {e.name: e.needed for e in manager.explain("bare").chain}
    assert shown["validate-args"] is False and shown["trust"] is False and shown["execute"] is False


async def test_r_chain_12_seeded_locals_count_when_the_plan_decides(write, tools):
    """A `meta` condition holds through the caller's locals: the entry is not left out for this call."""
    write("tools/mark.py", MARK)
    write("tools/code.py", "frontmatter = {'metadata': {'mark': {}}}\nasync def main(ctx):\n    return 'py'\n")
    manager = Manager([tools])
    assert await manager.invoke("code") == "py"
    assert await manager.invoke("code", {"$context": {"locals": {"flag": True}}}) == "[py]"
    assert await manager.invoke("code", overrides={"flag": 1}) == "[py]"
    assert await manager.invoke("code") == "py"  # the cached plan is untouched by the calls above


async def test_r_chain_12_a_middleware_that_runs_first_still_wakes_later_entries(write, tools):
    """Only the prefix before the first entry with work is decided early: later ones see run-time changes."""
    write(
        "tools/flagger.py",
        "frontmatter = {'metadata': {'$order': {'flagger': {'before': ['mark']}}}}\n"
        "async def main(ctx):\n    ctx.target.meta['flag'] = True\n    return await ctx.target.manager.next()\n",
    )
    write("tools/mark.py", MARK)
    write(
        "tools/code.py",
        "frontmatter = {'metadata': {'flagger': {}, 'mark': {}, '$order': {'flagger': {'before': ['mark']}}}}\n"
        "async def main(ctx):\n    return 'py'\n",
    )
    assert await Manager([tools]).invoke("code") == "[py]"


async def test_r_chain_12_a_templated_tool_leaves_out_its_idle_leading_entries_on_every_call(write, tools):
    """Templates render values, never keys or nulls: the idle prefix of a templated plan is the plan's."""
    write(
        "tools/mark.py",
        "frontmatter = {'when': {'meta': 'flag'}}\n"
        "async def main(ctx):\n    return ['mark', *await ctx.target.manager.next()]\n",
    )
    write(
        "tools/code.py",
        "frontmatter = {'metadata': {'label': '{{ args.who }}', 'mark': {}}}\n"
        "async def main(ctx):\n    return [ctx.meta['label'], *(e.name for e in ctx.chain)]\n",
    )
    manager = Manager([tools])
    for who in ("Ada", "Bob"):
        ran = await manager.invoke("code", {"who": who})
        assert ran[0] == who and "mark" not in ran and "trust" not in ran
    seeded = await manager.invoke("code", {"who": "Cy", "$context": {"locals": {"flag": True}}})
    assert seeded[0] == "mark" and seeded[1] == "Cy"  # the caller's locals wake it for this call
    assert "mark" not in await manager.invoke("code", {"who": "Di"})
    assert {e.name: e.needed for e in manager.explain("code", {"who": "Ed"}).chain}["mark"] is False


async def test_r_chain_12_a_templated_key_a_condition_reads_holds_on_every_call(write, tools):
    """A rendered value is never null, so a `meta` condition on a templated key holds whatever the args."""
    write("tools/mark.py", MARK)
    write(
        "tools/code.py",
        "frontmatter = {'metadata': {'flag': '{{ args.on }}', 'mark': {}}}\nasync def main(ctx):\n    return 'py'\n",
    )
    manager = Manager([tools])
    assert await manager.invoke("code", {"on": ""}) == "[py]"
    assert await manager.invoke("code", {"on": "yes"}) == "[py]"


async def test_r_chain_12_params_runs_only_for_a_schema_that_declares_a_default(write, tools):
    """`params` fills defaults in; a schema without one leaves args as they are, so the entry is left out."""
    write("tools/plain.py", "frontmatter = {'metadata': {'params': {'type': 'object'}}}\n" + CHAIN_OF_TARGET)
    write(
        "tools/filled.py",
        "frontmatter = {'metadata': {'params': {'type': 'object', 'properties': {'n': {'default': 3}}}}}\n"
        "async def main(ctx):\n    return ctx.args\n",
    )
    events: list[Event] = []
    manager = Manager([tools], on_event=events.append)
    assert "params" not in await manager.invoke("plain", {})
    assert "params" not in started(events)
    assert await manager.invoke("filled", {}) == {"n": 3}
    assert "params" in started(events)
    shown = {e.name: e for e in manager.explain("plain", {}).chain}["params"]
    assert shown.when == "args that declare a default" and shown.needed is False
    assert {e.name: e.needed for e in manager.explain("filled", {}).chain}["params"] is True


async def test_r_chain_12_entries_the_tool_itself_rules_out_are_left_out_wherever_they_sit(write, tools):
    """A tool's kind and its own prompt never change at run time: such entries are out even after one with work."""
    write(
        "tools/checked.py",
        "frontmatter = {'metadata': {'params': {'type': 'object'}, 'returns': {'type': 'array'}}}\n" + CHAIN_OF_TARGET,
    )
    write(
        "tools/mark.py",
        "frontmatter = {'when': {'kind': 'markdown'}}\n"
        "async def main(ctx):\n    return '[' + str(await ctx.target.manager.next()) + ']'\n",
    )
    order = "  $order: {mark: {after: [validate-args]}}\n"
    write("tools/page.md", "---\nmetadata:\n  params: {type: object}\n  mark: {}\n" + order + "---\nplain\n")
    write("tools/code.py", "frontmatter = {'metadata': {'params': {'type': 'object'}, 'mark': {}}}\n" + CHAIN_OF_TARGET)
    manager = Manager([tools])
    ran = await manager.invoke("checked", {})
    assert "directives" not in ran and "agent-execute" not in ran  # a python tool: never markdown
    assert "validate-returns" in ran and "execute" in ran  # a `meta` condition may still wake at run time
    assert "mark" not in await manager.invoke("code", {})
    assert await manager.invoke("page", {}) == "[plain]"  # after validate-args, which has work: still runs
    shown = {e.name: e for e in manager.explain("checked", {}).chain}
    assert shown["directives"].needed is False and shown["agent-execute"].needed is False


async def test_r_chain_12_a_markdown_prompt_without_a_directive_leaves_directives_out(write, tools):
    write(
        "tools/spy.py",
        "async def main(ctx):\n"
        "    ctx.target.locals['seen'] = [e.name for e in ctx.target.chain]\n"
        "    return await ctx.target.manager.next()\n",
    )
    write("tools/shout.py", "def main(ctx):\n    return 'HEY'\n")
    spy = "  spy: {}\n  $order: {spy: {after: [validate-args]}}\n"
    write(
        "tools/plain.md", "---\nmetadata:\n  params: {type: object}\n" + spy + "---\nno directive {{ locals.seen }}\n"
    )
    write("tools/loud.md", "---\nmetadata:\n  params: {type: object}\n" + spy + "---\n:shout[x] {{ locals.seen }}\n")
    manager = Manager([tools])
    assert "directives" not in await manager.invoke("plain", {})
    loud = await manager.invoke("loud", {})
    assert loud.startswith("HEY") and "directives" in loud


async def test_r_chain_12_a_middleware_names_its_own_check_and_show_says_its_docstring(write, tools):
    """The core knows no built-in by name: a python middleware says when it has work with a function of its own."""
    write(
        "tools/loud.py",
        "frontmatter = {'when': {'check': 'wanted'}}\n"
        "def wanted(target, args):\n"
        "    '''args that ask for capitals.'''\n"
        "    return bool(args and args.get('caps')) and target.meta.get('loud') is not None\n"
        "async def main(ctx):\n    return str(await ctx.target.manager.next()).upper()\n",
    )
    write(
        "tools/quiet.py",
        "frontmatter = {'metadata': {'loud': {'caps': False}}}\nasync def main(ctx):\n    return 'hi'\n",
    )
    write(
        "tools/shout.py",
        "frontmatter = {'metadata': {'loud': {'caps': True}}}\nasync def main(ctx):\n    return 'hi'\n",
    )
    events: list[Event] = []
    manager = Manager([tools], on_event=events.append)
    assert await manager.invoke("quiet") == "hi"
    assert "loud" not in started(events)  # no work: no invocation
    assert await manager.invoke("shout") == "HI"
    shown = {e.name: e for e in manager.explain("quiet").chain}["loud"]
    assert shown.when == "args that ask for capitals" and shown.needed is False


@pytest.mark.parametrize(
    ("middleware", "said"),
    [
        ("tools/odd.py", "'absent', which is not a function of this middleware's file"),
        ("tools/odd.md", "only a python middleware has functions"),
    ],
)
async def test_r_chain_12_a_check_that_names_no_function_is_a_configuration_error(write, tools, middleware, said):
    if middleware.endswith(".py"):
        write(middleware, "frontmatter = {'when': {'check': 'absent'}}\nasync def main(ctx):\n    return 1\n")
    else:
        write(middleware, "---\nwhen: {check: absent}\n---\nodd\n")
    write("tools/page.md", "---\nmetadata:\n  odd: {}\n---\nx\n")
    with pytest.raises(ConfigurationError, match=said) as caught:
        await Manager([tools]).invoke("page")
    assert caught.value.tool == "odd" and caught.value.key == "when"
