"""Read: Claude Code's Read tool. A file's lines, numbered as ``cat -n`` numbers them.

Args as Claude Code's: ``file_path`` (absolute, or relative to the project
folder), ``offset`` (the first line, 1-based) and ``limit`` (lines, default
2,000). Only files inside the project folder (the run's cwd) are read,
symlinks followed first; lines past 2,000 characters are cut.
"""

from orchestrator.hosttools import MAX_LINE, MAX_LINES, bounded, confine, read_text

frontmatter = {
    "description": (
        "Reads a file of the project. Returns its lines numbered (cat -n); offset and limit read part of a long file."
    ),
    "metadata": {
        "visibility": "hidden",
        "params": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The file to read (absolute or project-relative)."},
                "offset": {"type": "integer", "minimum": 1, "description": "The line to start at (1-based)."},
                "limit": {"type": "integer", "minimum": 1, "description": "How many lines to read (default 2000)."},
            },
            "required": ["file_path"],
            "additionalProperties": False,
        },
    },
}


def main(ctx):
    args = ctx.args
    path = confine(ctx, args["file_path"], "file_path")
    lines = read_text(ctx, path, "file_path").splitlines()
    start = args.get("offset", 1)
    count = args.get("limit", MAX_LINES)
    chosen = lines[start - 1 : start - 1 + count]
    if not chosen:
        return f"(no lines: the file has {len(lines)} line(s))"
    numbered = [f"{start + i:6}\t{line[:MAX_LINE]}" for i, line in enumerate(chosen)]
    rest = len(lines) - (start - 1 + len(chosen))
    tail = f"\n[{rest} more line(s): read on with offset {start + len(chosen)}]" if rest > 0 else ""
    return bounded("\n".join(numbered)) + tail
