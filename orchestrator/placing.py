"""Media a prompt places: the template function ``media(...)`` and the placeholders it leaves in the text.

``{{ media("diagram.png") }}`` or ``{{ media(args.photo) }}`` in a markdown
tool's prompt puts an image, audio or file at that place. The value is read
as a media arg's is (``orchestrator.mediaparts``): a file inside the run's
folder (a path outside it is a ``SecurityError``, symlinks followed, whatever
folder the tool comes from), a ``data:`` URL, ``{data, media-type}``, or an
``http(s)`` URL when the tool's metadata says ``media-urls: true``; the type
is sniffed from the bytes. ``kind`` (``image``, ``audio``, ``file``) checks
what the data is; without it the media type decides.

The function works only while ``render_prompt`` renders a prompt: it marks the
render's variables (``interpolate.Scope.placing``, read through the render's
budget, so placing costs no set-up of its own); metadata values are text, and
``media`` in one is an error naming the key. Each call leaves a placeholder carrying a
per-process secret, as directive placeholders do, so text from args can
never forge one; the part it stands for is kept on the context
(``ctx.locals[KEY]``, a ``Placed`` that only this module makes, so a caller
seeding that local places nothing). ``placed_pieces`` cuts a rendered text
at the placeholders into text and parts.

What people read (``show``, ``Manager.explain``, ``str()`` of a template's
result) never holds a part's data: ``described_part`` writes a part as
``[image: photo.png, image/png, 12 KB]``, ``shown`` puts that in place of each
placeholder of a rendered text, and ``marked`` marks each expression of an
unrendered prompt that places media: ``[media: {{ media(args.photo) }}]``.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, SecurityError
from .mediaparts import placed_part

if TYPE_CHECKING:
    from .context import Context

KEY = "media"
"""The ``ctx.locals`` key holding the parts a prompt placed."""

_NONCE = os.urandom(8).hex()  # what secrets.token_hex(8) returns, without importing random at every start-up
_PLACEHOLDER = re.compile("\x02" + _NONCE + r":media:(\d+)\x03")
# A ``{{ ... }}`` expression that calls media(...), in an unrendered prompt.
_CALL = re.compile(r"\{\{(?:(?!\}\}).)*?\bmedia\s*\((?:(?!\}\}).)*\}\}", re.DOTALL)


class Placed(dict):  # type: ignore[type-arg]
    """The parts a context's prompt placed, by index, and each value's index (a value placed twice is one part)."""

    __slots__ = ("index",)

    def __init__(self) -> None:
        super().__init__()
        self.index: dict[str, int] = {}


class Pieces(list):  # type: ignore[type-arg]
    """A template's result when its prompt placed media: text pieces and media parts, in order.

    A list like any other (JSON, ``run``, MCP); ``str()`` gives the text with
    each part described (``described_part``), never its data.
    """

    __slots__ = ()

    def __str__(self) -> str:
        return "".join(piece if isinstance(piece, str) else described_part(piece) for piece in self)


def media(value: Any, kind: str | None = None) -> str:
    """The template function: place ``value`` as a media part here; returns its placeholder.

    Raises:
        ConfigurationError: outside a prompt, a bad ``kind``, or a value that is no media (see ``agent.media``).
        SecurityError: a path outside the run's folder, or a URL the tool does not allow.
    """
    from .budget import BUDGET  # loaded: a template is rendering

    budget = BUDGET.get()
    variables = budget.variables if budget is not None else None
    ctx = getattr(variables, "placing", None)
    if ctx is None:
        raise ConfigurationError("media(...) places media in a markdown tool's prompt only: metadata values are text")
    try:
        return _placed(ctx, value, kind)
    except (ConfigurationError, SecurityError) as exc:
        variables.refused = exc  # type: ignore[union-attr]  # render_prompt raises it as itself
        raise


def _placed(ctx: Context, value: Any, kind: str | None) -> str:
    if kind is not None and kind not in ("image", "audio", "file"):
        tool = ctx.tool
        raise ConfigurationError(
            f"media(..., kind={kind!r}): kind must be image, audio or file",
            tool=tool.name,
            level="prompt",
            path=tool.path,
            line=tool.prompt_line,
        )
    placed = ctx.locals.get(KEY)
    if type(placed) is not Placed:
        placed = ctx.locals[KEY] = Placed()
    key = json.dumps([value, kind], sort_keys=True, default=str)
    index = placed.index.get(key)
    if index is None:
        part = placed_part(ctx, value, kind)
        index = placed.index[key] = len(placed)
        placed[index] = part
    return f"\x02{_NONCE}:media:{index}\x03"


def placed_pieces(ctx: Context, text: str) -> list[str | dict[str, Any]] | None:
    """``text`` cut at its media placeholders: text pieces and media parts in order; None when it places none."""
    if "\x02" not in text:
        return None
    placed = ctx.locals.get(KEY)
    if type(placed) is not Placed:
        return None
    pieces: list[str | dict[str, Any]] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        part = placed.get(int(match.group(1)))
        if part is None:
            continue
        pieces += [text[position : match.start()], part]
        position = match.end()
    if not pieces:
        return None
    pieces.append(text[position:])
    return [piece for piece in pieces if piece != ""]


def described_part(part: Mapping[str, Any]) -> str:
    """A media part as a reader sees it: ``[image: photo.png, image/png, 12 KB]``; a link ``[image: https://...]``."""
    kind = part.get("kind") or "media"
    if part.get("url"):
        return f"[{kind}: {part['url']}]"
    data = str(part.get("data") or "")
    size = len(data) * 3 // 4 - data.count("=", len(data) - 2)
    return f"[{kind}: {part.get('name') or 'unnamed'}, {part.get('media_type') or 'unknown type'}, {_size(size)}]"


def _size(count: int) -> str:
    """``512 bytes``, ``1.5 KB``, ``12 KB``, ``3.4 MB``."""
    if count < 1024:
        return f"{count} bytes"
    value, unit = (count / 1024, "KB") if count < 1024 * 1024 else (count / 1024 / 1024, "MB")
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


def shown(ctx: Context, text: str) -> str:
    """``text``, rendered from ctx's prompt, with each media placeholder as its part described (``described_part``)."""
    if "\x02" not in text:
        return text
    placed = ctx.locals.get(KEY)
    if type(placed) is not Placed:
        return text
    return _PLACEHOLDER.sub(
        lambda m: described_part(placed[int(m.group(1))]) if int(m.group(1)) in placed else "", text
    )


def marked(source: str) -> str:
    """An unrendered prompt with each expression that places media marked: ``[media: {{ media(args.photo) }}]``."""
    return _CALL.sub(lambda m: f"[media: {m.group(0)}]", source) if "media" in source else source
