"""Media parts: the one shape of an image, audio or file in toolcascade, read from a value and described.

A media part is ``{type: media, kind, media_type, data (base64) | url, name}``
(``kind``: ``image``, ``audio`` or ``file``). Media args (``agent.media``),
media a prompt places (``orchestrator.placing``) and media a tool returns
all take this shape; each provider turns it into its own content parts,
``mcp`` into image, audio or embedded-resource content, and ``toolcascade
run -o FILE`` writes its bytes.

Reading a value: a path names a file inside the run's folder (``ctx.cwd``,
symlinks resolved; a path outside is a ``SecurityError``, as a file read
here goes to a model's provider or an MCP client); ``{data: <base64>,
media-type}``, a media part itself and ``data:`` URLs carry the bytes; an ``http(s)`` URL is
taken only when the tool's metadata says ``media-urls: true`` (the provider
fetches it). The media type is sniffed from the bytes (``filetype``, the
``media`` extra), never taken from a name a caller gives; one value may have
at most the manager's ``Limits.media_bytes`` (a ``MediaLimitError`` past it,
naming the tool and the limit), base64 judged by its length before it is
decoded (``check_encoded``; a remote tool's media too, ``orchestrator.remotes``).
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Mapping
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError, MediaLimitError, SecurityError
from .limits import DEFAULT_LIMITS

if TYPE_CHECKING:
    from .context import Context

KINDS = ("image", "audio", "file")


def media_limit(ctx: Context | None) -> int:
    """The bytes one media value of ctx's run may have: its manager's ``Limits.media_bytes``."""
    return ctx.owner.limits.media_bytes if ctx is not None else DEFAULT_LIMITS.media_bytes


def media_part(
    source: bytes | str | PathLike[str],
    ctx: Context | None = None,
    *,
    media_type: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A media result a tool returns: ``{type: media, kind, media_type, data (base64), name}``.

    ``source`` is the bytes themselves, or a path to a file inside the run's
    folder (``ctx.cwd``; without ``ctx``, the process's working folder; a
    path outside it is a ``SecurityError``, symlinks followed). The media
    type is sniffed from the bytes; ``media_type``, then the name's
    extension, is used only when the bytes tell nothing (text, CSV ...).

    Raises:
        SecurityError: a path outside the folder.
        MediaLimitError: more than ``Limits.media_bytes`` (ctx's manager's; without ctx, the default).
        ConfigurationError: an unreadable file, or ``filetype`` is missing.
    """
    where: dict[str, Any] = {"tool": ctx.tool.name} if ctx is not None else {}
    limit = media_limit(ctx)
    if isinstance(source, bytes | bytearray):
        data = bytes(source)
        if len(data) > limit:
            raise MediaLimitError("a media result", limit, **where)
        label = name or "result"
    else:
        folder = Path(ctx.cwd) if ctx is not None else Path.cwd()
        path = _confined(folder, source, "a media result", where)
        data = _read(path, "a media result", where, limit)
        label = name or path.name
    found = sniffed(data) or media_type or mimetypes.guess_type(label)[0] or "application/octet-stream"
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "media", "kind": kind_of(found), "media_type": found, "data": encoded, "name": label}


def is_media(value: Any) -> bool:
    """Whether ``value`` is a media part: ``{type: media, kind, media_type, data}`` (or ``url`` for a link)."""
    return (
        isinstance(value, Mapping)
        and value.get("type") == "media"
        and value.get("kind") in KINDS
        and (isinstance(value.get("data"), str) or isinstance(value.get("url"), str))
    )


def media_pieces(result: Any) -> list[Any] | None:
    """A media result's pieces (a part, or a list holding one with text and other values), or None for any other.

    So a tool returns one part, or a list mixing text and parts (as an MCP
    server's content comes back, ``orchestrator.remotes``).
    """
    if is_media(result):
        return [result]
    if isinstance(result, list) and any(is_media(item) for item in result):
        return list(result)
    return None


def described(part: Mapping[str, Any]) -> str:
    """A media part in a few words: ``image/png, 1,234 bytes (chart.png)``; a link names its URL."""
    name = f" ({part['name']})" if part.get("name") else ""
    if part.get("url"):
        return f"{part['kind']} at {part['url']}{name}"
    size = len(part["data"]) * 3 // 4 - str(part["data"]).count("=", -2)
    return f"{part.get('media_type') or part['kind']}, {size:,} bytes{name}"


def placed_part(ctx: Context, value: Any, kind: str | None) -> dict[str, Any]:
    """The part ``{{ media(value) }}`` places in ctx's prompt: read as a media arg is (``orchestrator.placing``).

    Without ``kind`` the media type decides it (``image/...``, ``audio/...``, else a file).

    Raises:
        SecurityError: a path outside the run's folder, or a URL the tool does not allow.
        MediaLimitError: more than ``Limits.media_bytes``.
        ConfigurationError: a value that is no media, unreadable, or of another kind.
    """
    tool = ctx.tool
    where = {"tool": tool.name, "level": "prompt", "path": tool.path, "line": tool.prompt_line}
    return read_part(ctx, "media(...)", "media", kind, value, where)


def read_part(
    ctx: Context, what: str, name: str, kind: str | None, value: Any, where: dict[str, Any]
) -> dict[str, Any]:
    """A media value (an arg, a placed one) as a media part, read within ctx's ``Limits.media_bytes``.

    Raises:
        SecurityError: a path outside the run's folder, or a URL the tool does not allow.
        MediaLimitError: more than ``Limits.media_bytes``.
        ConfigurationError: a value that is no media, unreadable, or of another kind.
    """
    tool = ctx.tool.name
    limit = media_limit(ctx)
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        if ctx.meta.get("media-urls") is not True:
            raise SecurityError(
                f"{what} is a URL, which {tool!r} does not accept: give a file or base64 data, "
                "or set media-urls: true in its metadata to let the provider fetch URLs",
                **where,
            )
        return {"type": "media", "kind": kind or _url_kind(value, what, where), "url": value, "name": name}
    if isinstance(value, str) and value.startswith("data:"):
        head, _, encoded = value.partition(",")
        data, declared = _decode(encoded, what, where, limit), head[5:].removesuffix(";base64")
        label = name
    elif isinstance(value, Mapping) and "data" in value:
        declared = str(value.get("media-type") or value.get("media_type") or "")  # a media part is one too
        data, label = _decode(value.get("data"), what, where, limit), str(value.get("name") or name)
    elif isinstance(value, str):
        path = _confined(Path(ctx.cwd), value, what, where)
        data, declared, label = _read(path, what, where, limit), "", path.name
    else:
        raise ConfigurationError(
            f"{what} ({kind or 'media'}) must be a file path, a data: URL or {{data: base64, media-type}}, "
            f"not {type(value).__name__}",
            **where,
        )
    media_type = sniffed(data) or declared
    if not media_type:
        raise ConfigurationError(f"{what}: the media type of its data is unknown: give media-type", **where)
    if kind in ("image", "audio") and not media_type.startswith(f"{kind}/"):
        raise ConfigurationError(f"{what} must be {kind}, but its data is {media_type}", **where)
    encoded = base64.b64encode(data).decode("ascii")
    return {
        "type": "media",
        "kind": kind or kind_of(media_type),
        "media_type": media_type,
        "data": encoded,
        "name": label,
    }


def _url_kind(url: str, what: str, where: dict[str, Any]) -> str:
    """A URL's kind from its name's extension (there are no bytes to sniff).

    Raises:
        ConfigurationError: the extension tells nothing.
    """
    guessed = mimetypes.guess_type(url.partition("?")[0])[0]
    if guessed is None:
        raise ConfigurationError(f"{what}: say what {url[:200]!r} is: media(url, kind='image')", **where)
    return kind_of(guessed)


def kind_of(media_type: str) -> str:
    """``image``, ``audio`` or ``file`` for a media type."""
    prefix = media_type.partition("/")[0]
    return prefix if prefix in ("image", "audio") else "file"


def sniffed(data: bytes) -> str | None:
    """The media type ``filetype`` reads from the data's first bytes, or None.

    Raises:
        ConfigurationError: ``filetype`` is not installed.
    """
    try:
        import filetype
    except ImportError as exc:
        raise ConfigurationError(
            "media args need the filetype package: install toolcascade with its media extra "
            "(pip install -e '.[media]') or pip install filetype",
            key="params",
        ) from exc
    kind = filetype.guess(data[:8192])
    return str(kind.mime) if kind is not None else None


def _confined(folder: Path, value: str | PathLike[str], what: str, where: dict[str, Any]) -> Path:
    """The file ``value`` names, inside ``folder`` (the run's).

    Raises:
        SecurityError: it resolves outside the folder (symlinks followed).
    """
    root = folder.resolve()
    shown = str(value)[:200]
    try:
        path = (root / value).resolve()
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{what}: {shown!r} is not a path", **where) from exc
    if not path.is_relative_to(root):
        raise SecurityError(f"{what}: {shown!r} is outside the run's folder: a media file must be inside it", **where)
    return path


def _read(path: Path, what: str, where: dict[str, Any], limit: int) -> bytes:
    """A media file's bytes, at most ``limit`` (no more than one byte past it is read).

    Raises:
        ConfigurationError: not a readable file.
        MediaLimitError: too large.
    """
    try:
        if not path.is_file():
            raise ConfigurationError(f"{what}: {path.name!r} is not a file", **where)
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigurationError(f"{what}: cannot read {path.name!r}: {exc.strerror}", **where) from exc
    if len(data) > limit:
        raise MediaLimitError(f"{what}: {path.name!r}", limit, **where)
    return data


def check_encoded(encoded: str, what: str, limit: int, where: Mapping[str, Any]) -> None:
    """Refuse base64 text whose data is over ``limit`` bytes, from its length alone: nothing is decoded.

    Exact for valid base64 (padded, no whitespace); text that is no base64 is
    judged by its length all the same, so a huge one is never decoded.

    Raises:
        MediaLimitError: its data would be more than ``limit`` bytes.
    """
    padding = 2 if encoded.endswith("==") else 1 if encoded.endswith("=") else 0
    if (len(encoded) - padding) * 3 // 4 > limit:
        raise MediaLimitError(what, limit, **where)


def _decode(encoded: Any, what: str, where: dict[str, Any], limit: int) -> bytes:
    """Base64 data, at most ``limit`` bytes once decoded (longer text is refused before decoding).

    Raises:
        ConfigurationError: not base64 text.
        MediaLimitError: too large.
    """
    if not isinstance(encoded, str):
        raise ConfigurationError(f"{what}: data must be base64 text, not {type(encoded).__name__}", **where)
    check_encoded(encoded, f"{what}: its data", limit, where)
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(f"{what}: data is not base64: {exc}", **where) from exc
    if len(data) > limit:
        raise MediaLimitError(f"{what}: its data", limit, **where)
    return data
