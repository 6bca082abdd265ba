"""Bounded rendering: templates that ask for too much are refused quickly, in metadata and in prompts.

Every abuse runs through a real ``.md`` tool file and ``await
Manager(...).invoke(...)``, once as a metadata template and once as the
prompt body. Each is refused with an ``InterpolationError`` that names the
tool, the level (and the key, for metadata) and the limit, in well under
two seconds and with a traced memory peak far below what the abuse asked for.
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from orchestrator import InterpolationError, Limits, Manager
from orchestrator.interpolate import compile_template

pytestmark = pytest.mark.anyio

VALUE = "Limits.render_value"
LOOPS = "Limits.render_loops"
OUTPUT = "Limits.render_output"
DIGITS = "more than 4300 digits"

# name -> (template, what the refusal names)
ABUSES = {
    "string-repeat": ("{{ 'x' * 10**9 }}", VALUE),
    "list-repeat": ("{{ [1] * 10**9 }}", VALUE),
    "empty-lists-repeat": ("{{ [[]] * 10**9 }}", VALUE),
    "range-list": ("{{ range(10**9) | list }}", VALUE),
    "ljust": ("{{ 'x'.ljust(10**9) }}", VALUE),
    "percent-width": ("{{ '%1000000000s' % 'x' }}", VALUE),
    "percent-star": ("{{ '%*s' % (10**9, 'x') }}", VALUE),
    "format-filter": ("{{ '%*d' | format(10**9, 7) }}", VALUE),
    "str-format": ("{{ '{:>1000000000}'.format('x') }}", VALUE),
    "huge-power": ("{{ 10 ** (10 ** 8) }}", DIGITS),
    "huge-product": ("{{ (10 ** 4000) * (10 ** 4000) }}", DIGITS),
    "concat-huge": ("{{ 'a' ~ ('b' * 999999) ~ 'cc' }}", VALUE),
    "join-separator": ("{{ range(1000000) | join('x' * 100) }}", VALUE),
    "replace": ("{{ ('a' * 1000) | replace('a', 'b' * 10000) }}", VALUE),
    "center": ("{{ 'x' | center(10**9) }}", VALUE),
    "indent": ("{{ 'x\ny' | indent(10**9) }}", VALUE),
    "wordwrap": ("{{ ('a ' * 1000) | wordwrap(1, wrapstring='x' * 10000) }}", VALUE),
    "to-bytes": ("{{ (1).to_bytes(10**9, 'big') }}", VALUE),
    "fromkeys": ("{{ {}.fromkeys(range(1000000), 'x' * 1000) }}", VALUE),
    "nested-references": (
        "{% set ns = namespace(a=[1]) %}{% for i in range(60) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}{{ ns.a }}",
        VALUE,
    ),
    "doubling-string": (
        "{% set ns = namespace(a='x') %}{% for i in range(60) %}{% set ns.a = ns.a ~ ns.a %}{% endfor %}{{ ns.a }}",
        VALUE,
    ),
    "set-block": (
        "{% set b %}{% for i in range(100000) %}{{ 'z' * 50 }}{% endfor %}{% endset %}{{ b | length }}",
        VALUE,
    ),
    "block-call": (
        "{% if false %}{% block a %}{% for i in range(50000) %}{{ 'x' * 100 }}{% endfor %}{% endblock %}{% endif %}"
        "{{ self.a() | length }}",
        VALUE,
    ),
    "nested-loops-silent": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        LOOPS,
    ),
    "nested-loops-output": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}",
        LOOPS,
    ),
    "loop-filter-only": ("{% for i in range(10**6) if i < 0 %}{% endfor %}", LOOPS),
    "macro-recursion": (
        "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(40) }}",
        LOOPS,
    ),
    "long-loop-body": ("{% for i in range(1000) %}" + "y" * 2000 + "{% endfor %}", OUTPUT),
}


# tracemalloc slows its 100,000 calls down to ~20 s, and it builds nothing: only its time is checked.
UNTRACED = {"macro-recursion"}

# A render is synchronous code inside the invocation (no await, no thread between two of its steps), and its
# budget counts steps and bytes, so an abuse is refused the same way on either backend: the abuses run on one.
# What does touch the loop, the clock stopping a render (render_seconds), runs on both below.
ONE_BACKEND = pytest.mark.parametrize("anyio_backend", ["asyncio"])


def metadata_tool(write, template: str) -> Path:
    body = "\n".join("    " + line for line in template.split("\n"))
    return write("tools/t.md", f"---\nmetadata:\n  ok: 1\n  v: |-\n{body}\n---\nbody\n")


def prompt_tool(write, template: str) -> Path:
    return write("tools/t.md", f"---\ndescription: abuse\n---\n{template}\n")


async def refusal(manager: Manager) -> tuple[InterpolationError, float]:
    """The refusal and the CPU seconds it took: a render's bounds are about work, and a loaded machine's wall
    clock is not (a render past ``render_seconds`` of wall time is refused too, by its own test)."""
    start = time.process_time()
    with pytest.raises(InterpolationError) as info:
        await manager.invoke("t")
    return info.value, time.process_time() - start


async def traced_peak(manager: Manager) -> int:
    tracemalloc.start()
    try:
        with pytest.raises(InterpolationError):
            await manager.invoke("t")
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@ONE_BACKEND
@pytest.mark.parametrize("name", list(ABUSES))
async def test_abuse_in_metadata_is_refused_naming_tool_level_key_and_limit(write, tools, name):
    template, limit = ABUSES[name]
    path = metadata_tool(write, template)
    manager = Manager([tools], limits=Limits(render_seconds=60))  # the bound named, not a loaded machine's clock
    error, seconds = await refusal(manager)
    assert (error.tool, error.level, error.key, error.path) == ("t", "t", "v", str(path))
    assert limit in str(error)
    assert seconds < 5  # CPU seconds: about 1 s alone, more in a suite worker; unbounded, these run for hours
    assert name in UNTRACED or await traced_peak(manager) < 100_000_000


@ONE_BACKEND
@pytest.mark.parametrize("name", list(ABUSES))
async def test_abuse_in_the_prompt_is_refused_naming_tool_level_and_limit(write, tools, name):
    template, limit = ABUSES[name]
    path = prompt_tool(write, template)
    manager = Manager([tools], limits=Limits(render_seconds=60))  # the bound named, not a loaded machine's clock
    error, seconds = await refusal(manager)
    assert (error.tool, error.level, error.path) == ("t", "prompt", str(path))
    assert limit in str(error)
    assert seconds < 5  # CPU seconds: about 1 s alone, more in a suite worker; unbounded, these run for hours
    assert name in UNTRACED or await traced_peak(manager) < 100_000_000


async def test_refusal_message_says_which_limit_and_its_value(write, tools):
    prompt_tool(write, "{% for i in range(1000) %}" + "y" * 2000 + "{% endfor %}")
    error, _ = await refusal(Manager([tools]))
    assert error.detail == "template output exceeds 1000000 characters (Limits.render_output)"
    prompt_tool(write, "{{ 'x' * 10**9 }}")
    error, _ = await refusal(Manager([tools]))
    assert error.detail == "template builds a value of more than 1000000 characters or items (Limits.render_value)"
    prompt_tool(write, "{% for i in range(200000) %}{% endfor %}")
    error, _ = await refusal(Manager([tools]))
    assert error.detail == "template runs more than 100000 loop iterations and calls (Limits.render_loops)"


async def test_rebuilding_a_big_value_in_a_loop_is_refused_by_the_total(write, tools):
    prompt_tool(write, "{% for i in range(100000) %}{% set y = 'x' * 1000000 %}{% endfor %}done")
    error, seconds = await refusal(Manager([tools]))
    assert "in all (10 x Limits.render_value)" in str(error)
    assert seconds < 5  # CPU seconds: about 1 s alone, more in a suite worker; unbounded, these run for hours


async def test_ordinary_templates_render_as_before(write, tools):
    prompt_tool(
        write,
        "{{ [1, 2, 3] | join(',') }} {{ 'abc' | upper }} {{ [1, 2] + [3] }} {{ (1, 2) }} {{ {'a': 1} }} "
        "{{ 'a' ~ 1 }} {{ '%05d' % 42 }} {{ '{:>4}'.format(1) }} {{ 2 ** 10 }} {{ [[1], [2]] | sum(start=[]) }} "
        "{{ range(3) | list }} {{ 'a,b'.split(',') }} {{ 'x' * 3 }} {{ 'ab'.center(6, '-') }} {{ ['x'] | batch(2, 0) | list }}"
        "{% for x in [[1, [2]], [3]] recursive %}[{% if x is iterable %}{{ loop(x) }}{% else %}{{ x }}{% endif %}]{% endfor %}"
        "{% macro m(n) %}<{{ n }}>{% endmacro %}{{ m(5) }}{% set b %}in {{ 'set' }}{% endset %} {{ b }}",
    )
    assert await Manager([tools]).invoke("t") == (
        "1,2,3 ABC [1, 2, 3] (1, 2) {'a': 1} a1 00042    1 1024 [1, 2] [0, 1, 2] ['a', 'b'] xxx --ab-- [['x', 0]]"
        "[[1][[2]]][[3]]<5> in set"
    )


async def test_a_smaller_output_limit_refuses_what_the_default_allows(write, tools):
    prompt_tool(write, "{{ 'x' * 60 }}")
    assert await Manager([tools]).invoke("t") == "x" * 60
    error, _ = await refusal(Manager([tools], limits=Limits(render_output=50)))
    assert error.detail == "template output exceeds 50 characters (Limits.render_output)"


async def test_larger_limits_allow_what_the_default_refuses(write, tools):
    prompt_tool(write, "{{ 'x' * 1500000 }}")
    await refusal(Manager([tools]))
    roomy = Limits(render_value=2_000_000, render_output=2_000_000)
    assert await Manager([tools], limits=roomy).invoke("t") == "x" * 1_500_000


async def test_limits_apply_to_metadata_templates_per_manager(write, tools):
    metadata_tool(write, "{% for i in range(6) %}{{ i }}{% endfor %}")
    assert (await Manager([tools]).invoke("t")) == "body"
    error, _ = await refusal(Manager([tools], limits=Limits(render_loops=5)))
    assert (error.key, error.detail) == (
        "v",
        "template runs more than 5 loop iterations and calls (Limits.render_loops)",
    )


async def test_value_limit_counts_items_through_nested_containers(write, tools):
    prompt_tool(write, "{% set a = range(100) | list %}{{ ([a] * 100) | length }}")
    assert await Manager([tools]).invoke("t") == "100"
    error, _ = await refusal(Manager([tools], limits=Limits(render_value=5_000)))
    assert VALUE in str(error)


async def test_compiled_templates_are_shared_by_managers_with_different_limits(write, tools):
    prompt_tool(write, "Hello, {{ args.name }}!")
    assert await Manager([tools]).invoke("t", {"name": "Ada"}) == "Hello, Ada!"
    before = compile_template.cache_info()
    small = Manager([tools], limits=Limits(render_output=5))
    await refusal(small)
    after = compile_template.cache_info()
    assert after.misses == before.misses and after.hits > before.hits


# -- env says why it is empty ----------------------------------------------------------


@pytest.mark.parametrize("read", ["{{ env.TOOLCASCADE_SECRET }}", "{{ env['TOOLCASCADE_SECRET'] }}"])
async def test_env_without_trust_says_the_tool_has_no_trust(write, tools, monkeypatch, read):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    prompt_tool(write, read)
    error, _ = await refusal(Manager([tools]))
    assert error.detail == "env is empty: this tool has no trust: {env: true}"
    assert (error.tool, error.level) == ("t", "prompt")


async def test_env_without_trust_in_metadata_names_the_key(write, tools, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    metadata_tool(write, "{{ env.TOOLCASCADE_SECRET }}")
    error, _ = await refusal(Manager([tools]))
    assert (error.key, error.detail) == ("v", "env is empty: this tool has no trust: {env: true}")


async def test_env_with_trust_is_the_environment(write, tools, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    write(
        "tools/t.md",
        "---\nmetadata: {trust: {env: true}}\n---\n{{ env.TOOLCASCADE_SECRET }} {{ env['TOOLCASCADE_SECRET'] }}\n",
    )
    assert await Manager([tools]).invoke("t") == "s3cret s3cret"


async def test_env_fallbacks_still_work_without_trust(write, tools, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    prompt_tool(
        write,
        "{{ env.TOOLCASCADE_SECRET | default('none') }} {{ env.TOOLCASCADE_SECRET is defined }} "
        "{{ 'TOOLCASCADE_SECRET' in env }} {{ env | length }}",
    )
    assert await Manager([tools]).invoke("t") == "none False False 0"


async def test_env_in_a_tool_from_an_untrusted_folder_says_why(write, tmp_path, monkeypatch):
    monkeypatch.setenv("TOOLCASCADE_SECRET", "s3cret")
    write("extra/open.md", "---\nmetadata: {trust: {env: true}}\n---\n[{{ env.TOOLCASCADE_SECRET }}]\n")
    write(
        "tools/caller.py",
        "frontmatter = {'metadata': {'paths': '../extra'}}\nasync def main(ctx):\n    return await ctx.manager.invoke('open')\n",
    )
    with pytest.raises(InterpolationError) as info:
        await Manager([tmp_path / "tools"]).invoke("caller")
    assert info.value.tool == "open"
    assert info.value.detail == ("env is empty: tools from untrusted folders never see env, whatever their trust says")


@pytest.mark.anyio
async def test_a_loop_repeating_a_bounded_scan_is_stopped_by_the_clock(write, tools):
    write(
        "tools/scan.md",
        "---\ndescription: scans\n---\n"
        "{% set big = range(1000000)|list %}{% for i in range(100000) %}{{ big.count(-1) }}{% endfor %}\n",
    )
    manager = Manager([tools], limits=Limits(render_seconds=0.5))
    started = time.monotonic()
    with pytest.raises(InterpolationError, match=r"longer than 0.5 s \(Limits.render_seconds\)"):
        await manager.invoke("scan")
    assert time.monotonic() - started < 15  # unstopped, the loop would scan for minutes; generous for a loaded machine
