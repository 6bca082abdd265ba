"""directives: expand the target's prompt directives that name tools (R-DIR-1).

Each directive becomes a chain entry injected right after this one, in
document order; its tool's return value replaces the directive's text.

Only the author's source is expanded: when a middleware that ran before this
one replaced ``locals['prompt']``, that prompt is left untouched (its text
may come from args, so it is never parsed for directives). A directive whose
placeholder a first render of the prompt hides (a false ``{% if %}``, a loop
over nothing) does not run; see ``orchestrator.prompt`` for the rules.
"""

frontmatter = {
    "when": {"kind": "markdown", "directives": True},  # only a markdown prompt holding a directive has any to run
    "description": "Runs the tools named by :directives in the prompt and puts their output in place.",
    "metadata": {"visibility": "hidden", "params": {"type": "object"}},
}


async def main(ctx):
    # Imported here, not at the top: every plan reads this file's `when`; only prompts with directives run it.
    from orchestrator.prompt import directive_entries

    target = ctx.target
    entries = directive_entries(target)
    if entries:
        target.manager.inject(entries)
    return await target.manager.next()
