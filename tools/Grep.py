"""Grep: Claude Code's Grep tool. Search the project's files for a regular expression.

Args as Claude Code's: ``pattern`` (a Python regular expression), ``path``
(a file or folder; default the project folder), ``glob`` (``*.py``: which
files), ``type`` (``py``, ``js``...: a file extension), ``output_mode``
(``files_with_matches``, the default; ``content``; ``count``), ``-i``,
``-n`` (line numbers in content mode, default true), ``-A``/``-B``/``-C``
(context lines), ``multiline`` and ``head_limit``. Only files inside the
project folder (the run's cwd) are searched; output is bounded.
"""

import re

from orchestrator import ArgsValidationError
from orchestrator.hosttools import MAX_MATCHES, MAX_SEARCHED, bounded, confine, matcher, read_text, shown, walk

frontmatter = {
    "description": (
        "Searches the project's files for a regular expression. output_mode: files_with_matches (default), "
        "content (matching lines), count."
    ),
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "The regular expression to search for."},
                "path": {"type": "string", "description": "A file or folder to search (default: the project)."},
                "glob": {"type": "string", "description": "Only files matching this glob (e.g. *.py)."},
                "type": {"type": "string", "description": "Only files of this type: an extension (py, js, md)."},
                "output_mode": {"enum": ["files_with_matches", "content", "count"]},
                "-i": {"type": "boolean", "description": "Case insensitive."},
                "-n": {"type": "boolean", "description": "Line numbers (content mode; default true)."},
                "-A": {"type": "integer", "minimum": 0, "description": "Lines after each match (content mode)."},
                "-B": {"type": "integer", "minimum": 0, "description": "Lines before each match (content mode)."},
                "-C": {"type": "integer", "minimum": 0, "description": "Lines around each match (content mode)."},
                "multiline": {"type": "boolean", "description": "Let . match newlines and patterns span lines."},
                "head_limit": {"type": "integer", "minimum": 1, "description": "At most this many results."},
            },
            "required": ["pattern"],
            "additionalProperties": False,
        },
    },
}


def main(ctx):
    args = ctx.args
    flags = (re.IGNORECASE if args.get("-i") else 0) | (re.DOTALL | re.MULTILINE if args.get("multiline") else 0)
    try:
        regex = re.compile(args["pattern"], flags)
    except re.error as exc:
        raise ArgsValidationError([("/pattern", f"not a regular expression: {exc}")], tool=ctx.tool.name) from exc
    top = confine(ctx, args.get("path", "."), "path")
    wanted = matcher(args["glob"]) if args.get("glob") else None
    kind = args.get("type")
    mode = args.get("output_mode", "files_with_matches")
    limit = args.get("head_limit", MAX_MATCHES if mode != "content" else 10 * MAX_MATCHES)
    results = []
    searched = 0
    for path in walk(ctx, top):
        relative = path.relative_to(top).as_posix() if path != top else path.name
        if (wanted and not wanted(relative)) or (kind and path.suffix != f".{kind}"):
            continue
        text = read_text(ctx, path, "path")
        searched += len(text)
        if searched > MAX_SEARCHED:
            results.append(f"[stopped after reading {MAX_SEARCHED:,} characters: narrow the path, glob or type]")
            break
        if "\0" in text[:8000]:
            continue  # binary
        results.extend(_found(ctx, path, text, regex, mode, args))
        if len(results) >= limit:
            break
    if not results:
        return "No matches found"
    more = len(results) > limit
    return bounded(
        "\n".join(results[:limit]) + ("\n[more results: narrow the search or raise head_limit]" if more else "")
    )


def _found(ctx, path, text, regex, mode, args):
    name = shown(ctx, path)
    if mode == "files_with_matches":
        return [name] if regex.search(text) else []
    if args.get("multiline"):
        starts = {text.count("\n", 0, m.start()) for m in regex.finditer(text)}
        lines = text.splitlines()
    else:
        lines = text.splitlines()
        starts = {i for i, line in enumerate(lines) if regex.search(line)}
    if mode == "count":
        return [f"{name}:{len(starts)}"] if starts else []
    around = args.get("-C", 0)
    before, after = args.get("-B", around), args.get("-A", around)
    shown_lines = sorted({j for i in starts for j in range(max(0, i - before), min(len(lines), i + after + 1))})
    number = args.get("-n", True)
    return [f"{name}:{i + 1}:{lines[i][:2000]}" if number else f"{name}:{lines[i][:2000]}" for i in shown_lines]
