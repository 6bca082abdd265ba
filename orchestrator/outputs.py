"""What ``toolcascade run`` does with a result: ``-o FILE`` writes it, and a media result prints as a description.

A media result (``orchestrator.mediaparts``: one media part, or a list of
text and media parts) is never printed as base64: each part shows as one
line (``image/png, 1,234 bytes (chart.png): save it with -o FILE``). With
``-o FILE`` the file holds the media part's bytes, or, for any other
result, the text ``run`` would print (a string as it is, anything else
JSON). A result with several media parts, or one given by URL, has no one
set of bytes to write: ``-o`` refuses it and says why.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import click

from .mediaparts import described, is_media, media_pieces
from .screen import Screen, echo_result


def printable(result: Any) -> Any:
    """``result`` as ``run`` prints it: a media result's parts replaced by lines describing them."""
    pieces = media_pieces(result)
    if pieces is None:
        return result
    lines = [
        f"[{described(p)}: save it with -o FILE]" if is_media(p) else p if isinstance(p, str) else json.dumps(p)
        for p in pieces
    ]
    return "\n".join(lines)


def save_result(result: Any, path: Path) -> str:
    """Write ``result`` to ``path`` (see the module docstring); the line that says what was written.

    Raises:
        click.ClickException: several media parts, a part given by URL, or the file cannot be written.
    """
    pieces = media_pieces(result)
    if pieces is not None:
        parts = [p for p in pieces if is_media(p)]
        if len(parts) > 1:
            raise click.ClickException(
                f"the result holds {len(parts)} media parts ({'; '.join(described(p) for p in parts)}): "
                "-o writes one; save them from code (orchestrator.mediaparts) or over MCP"
            )
        [part] = parts
        if part.get("url"):
            raise click.ClickException(f"the result is a link, not bytes: {part['url']}")
        data = base64.b64decode(part["data"])
        what = described(part)
    else:
        text = result if isinstance(result, str) else json.dumps(result, indent=2, default=str, ensure_ascii=False)
        data = text.encode("utf-8")
        what = f"{len(data):,} bytes of text"
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror}") from exc
    return f"wrote {what} to {path}"


output_option = click.option(
    "--output",
    "-o",
    "output",
    metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the result to FILE: an image's, audio's or file's bytes, else the text run prints.",
)
"""``run``'s ``-o FILE``."""


def show_result(result: Any, screen: Screen | None, output: Path | None) -> None:
    """Print ``result`` as ``run`` does (media described), or write it to ``output`` and say so on stderr.

    Raises:
        click.ClickException: as ``save_result``.
    """
    if output is not None:
        if screen is not None:
            screen.end_line()
        click.echo(save_result(result, output), err=True)
    else:
        echo_result(printable(result), screen)
