"""Media in an agent's prompt: images, audio and files given as args, sent to the model as content parts.

An arg is media when its ``params`` property says so: ``format: image``,
``format: audio`` or ``format: file``, or a ``contentMediaType`` (its
``image/`` or ``audio/`` prefix tells the kind). Its value is one of:

- a path to a file inside the run's folder (``ctx.cwd``, symlinks resolved):
  a path outside it is a ``SecurityError``, as args come from callers the
  engine does not trust (an MCP client, a model) and a file read here goes
  to the model's provider;
- ``{data: <base64>, media-type: <type>}`` or a ``data:`` URL;
- an ``http(s)`` URL, only when the agent's metadata says ``media-urls: true``
  (the provider fetches it).

A file's media type is sniffed from its bytes (``filetype``, the ``media``
extra), never taken from its name; one value may have at most
``MAX_MEDIA_BYTES``. The prompt's user message then holds the text and one
part per media arg, in the order ``params`` lists them:
``{type: media, kind, media_type, data (base64) | url, name}``. Each provider
turns the parts into its own content parts (``openai.py``, ``anthropic.py``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError, SecurityError

if TYPE_CHECKING:
    from ..context import Context

KINDS = ("image", "audio", "file")
MAX_MEDIA_BYTES = 20_000_000
"""Bytes one media value may have (the providers' own request limits are of this order)."""


def media_params(params: Any) -> dict[str, str]:
    """The media args a ``params`` schema declares: name -> kind (``image``, ``audio``, ``file``)."""
    properties = params.get("properties") if isinstance(params, Mapping) else None
    found: dict[str, str] = {}
    for name, schema in (properties or {}).items():
        if not isinstance(schema, Mapping):
            continue
        if schema.get("format") in KINDS:
            found[name] = str(schema["format"])
        elif isinstance(schema.get("contentMediaType"), str):
            prefix = schema["contentMediaType"].partition("/")[0]
            found[name] = prefix if prefix in ("image", "audio") else "file"
    return found


def prompt_content(ctx: Context, text: str) -> str | list[dict[str, Any]]:
    """The prompt's user message content: the text alone, or the text and a part per media arg given.

    Raises:
        SecurityError: a path outside the run's folder, or a URL the agent does not allow.
        ConfigurationError: a value that is no media, unreadable, too large, or of another kind.
    """
    declared = media_params(ctx.meta.get("params"))
    args = ctx.args if isinstance(ctx.args, Mapping) else {}
    parts = [media_part(ctx, name, kind, args[name]) for name, kind in declared.items() if args.get(name) is not None]
    if not parts:
        return text
    return [{"type": "text", "text": text}, *parts]


def media_part(ctx: Context, name: str, kind: str, value: Any) -> dict[str, Any]:
    """One media arg as a neutral content part (see the module docstring).

    Raises:
        SecurityError: a path outside the run's folder, or a URL the agent does not allow.
        ConfigurationError: a value that is no media, unreadable, too large, or of another kind.
    """
    tool = ctx.tool.name
    where: dict[str, Any] = {"tool": tool, "key": f"params.{name}"}
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        if ctx.meta.get("media-urls") is not True:
            raise SecurityError(
                f"arg {name!r} is a URL, which agent {tool!r} does not accept: give a file or base64 data, "
                "or set media-urls: true in its metadata to let the provider fetch URLs",
                **where,
            )
        return {"type": "media", "kind": kind, "url": value, "name": name}
    if isinstance(value, str) and value.startswith("data:"):
        head, _, encoded = value.partition(",")
        data, declared = _decode(encoded, name, where), head[5:].removesuffix(";base64")
        label = name
    elif isinstance(value, Mapping) and "data" in value:
        data, declared = _decode(value.get("data"), name, where), str(value.get("media-type") or "")
        label = name
    elif isinstance(value, str):
        path = _confined(ctx, value, name, where)
        data, declared, label = _read(path, name, where), "", path.name
    else:
        raise ConfigurationError(
            f"arg {name!r} ({kind}) must be a file path, a data: URL or {{data: base64, media-type}}, "
            f"not {type(value).__name__}",
            **where,
        )
    media_type = sniffed(data) or declared
    if not media_type:
        raise ConfigurationError(f"arg {name!r}: the media type of its data is unknown: give media-type", **where)
    if kind in ("image", "audio") and not media_type.startswith(f"{kind}/"):
        raise ConfigurationError(f"arg {name!r} must be {kind}, but its data is {media_type}", **where)
    encoded = base64.b64encode(data).decode("ascii")
    return {"type": "media", "kind": kind, "media_type": media_type, "data": encoded, "name": label}


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


def _confined(ctx: Context, value: str, name: str, where: dict[str, Any]) -> Path:
    """The file ``value`` names, inside the run's folder.

    Raises:
        SecurityError: it resolves outside the folder (symlinks followed).
    """
    root = Path(ctx.cwd).resolve()
    try:
        path = (root / value).resolve()
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"arg {name!r}: {value[:200]!r} is not a path", **where) from exc
    if not path.is_relative_to(root):
        raise SecurityError(
            f"arg {name!r}: {value[:200]!r} is outside the run's folder: a media file must be inside it", **where
        )
    return path


def _read(path: Path, name: str, where: dict[str, Any]) -> bytes:
    """A media file's bytes, at most ``MAX_MEDIA_BYTES``.

    Raises:
        ConfigurationError: not a readable file, or too large.
    """
    try:
        if not path.is_file():
            raise ConfigurationError(f"arg {name!r}: {path.name!r} is not a file", **where)
        with path.open("rb") as handle:
            data = handle.read(MAX_MEDIA_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"arg {name!r}: cannot read {path.name!r}: {exc.strerror}", **where) from exc
    if len(data) > MAX_MEDIA_BYTES:
        raise ConfigurationError(f"arg {name!r}: {path.name!r} is over {MAX_MEDIA_BYTES:,} bytes", **where)
    return data


def _decode(encoded: Any, name: str, where: dict[str, Any]) -> bytes:
    """Base64 data, at most ``MAX_MEDIA_BYTES`` once decoded.

    Raises:
        ConfigurationError: not base64 text, or too large.
    """
    if not isinstance(encoded, str) or len(encoded) > MAX_MEDIA_BYTES * 4 // 3 + 4:
        raise ConfigurationError(
            f"arg {name!r}: data must be base64 text of at most {MAX_MEDIA_BYTES:,} bytes", **where
        )
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigurationError(f"arg {name!r}: data is not base64: {exc}", **where) from exc
