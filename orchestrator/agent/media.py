"""Media to and from a model: args and prompt media as content parts, media tool results per provider.

An arg is media when its ``params`` property says so: ``format: image``,
``format: audio`` or ``format: file``, or a ``contentMediaType`` (its
``image/`` or ``audio/`` prefix tells the kind). Its value is read as
``orchestrator.mediaparts`` reads any (a file inside the run's folder,
base64 data, a ``data:`` URL, a URL only with ``media-urls: true``; sniffed;
at most ``Limits.media_bytes``). The prompt's user message then holds the text,
cut where the prompt placed media (``{{ media(...) }}``,
``orchestrator.placing``), and one part per media arg, in the order
``params`` lists them. Each provider turns the parts into its own content
parts (``openai.py``, ``anthropic.py``).

A tool that returns media (a media part, or a list of text and parts) goes
back to the model as ``result_content``: text parts and media parts. Chat
completions take only text in a tool message, so ``openai_turns`` moves the
media into a user message after the turn's tool results; the Messages API
takes image and document blocks in a ``tool_result`` (``anthropic_tool_result``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..mediaparts import KINDS, described, is_media, media_pieces, read_part
from ..mediaparts import media_part as media_part
from ..mediaparts import sniffed as sniffed
from ..placing import placed_pieces

if TYPE_CHECKING:
    from ..context import Context


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
    parts = [arg_part(ctx, name, kind, args[name]) for name, kind in declared.items() if args.get(name) is not None]
    placed = placed_pieces(ctx, text)
    if not parts and placed is None:
        return text
    pieces = placed if placed is not None else [text]
    content = [{"type": "text", "text": p} if isinstance(p, str) else p for p in pieces if p != ""]
    return [*content, *parts]


def arg_part(ctx: Context, name: str, kind: str, value: Any) -> dict[str, Any]:
    """One media arg as a neutral content part (see the module docstring).

    Raises:
        SecurityError: a path outside the run's folder, or a URL the agent does not allow.
        ConfigurationError: a value that is no media, unreadable, too large, or of another kind.
    """
    return read_part(ctx, f"arg {name!r}", name, kind, value, {"tool": ctx.tool.name, "key": f"params.{name}"})


# -- media results: as a tool message, shaped per provider -------------------------------


def result_content(value: Any) -> str | list[dict[str, Any]]:
    """A tool result as a tool message's content: text, or text parts and media parts for a media result.

    Other values are text as ever (a string as it is, anything else JSON).
    A media result's content starts with text (what it holds, when the tool
    gave no text of its own), so a provider that takes only text in tool
    messages has something to send there (``openai_turns``).
    """
    pieces = media_pieces(value)
    if pieces is None:
        return value if isinstance(value, str) else json.dumps(value, default=str)
    content: list[dict[str, Any]] = []
    for index, piece in enumerate(pieces):
        if is_media(piece):
            content.append({**piece, "name": piece.get("name") or f"result-{index + 1}"})
        else:
            content.append(
                {"type": "text", "text": piece if isinstance(piece, str) else json.dumps(piece, default=str)}
            )
    if not any(part["type"] == "text" for part in content):
        content.insert(0, {"type": "text", "text": "; ".join(described(p) for p in content)})
    return content


def openai_turns(messages: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Messages an OpenAI-compatible server takes: tool results that hold media are split in two.

    Chat completions take only text in a ``tool`` message. So such a tool
    message keeps its text (and says the media follows), and after the run
    of tool messages answering one assistant turn, a ``user`` message
    carries the media parts, each after a line naming the call it comes from.
    Every other message is left as it is (the same object).
    """
    if not any(m.get("role") == "tool" and isinstance(m.get("content"), list) for m in messages):
        return messages
    out: list[Mapping[str, Any]] = []
    held: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") != "tool" and held:
            out.append({"role": "user", "content": held})
            held = []
        content = message.get("content")
        if message.get("role") != "tool" or not isinstance(content, list):
            out.append(message)
            continue
        texts = [str(p.get("text") or "") for p in content if p.get("type") == "text"]
        media = [p for p in content if p.get("type") == "media"]
        said = "\n".join(texts) + f"\n(the {', '.join(described(p) for p in media)} follows in a user message)"
        out.append({**message, "content": said})
        held += [{"type": "text", "text": f"The media returned by tool call {message.get('tool_call_id')}:"}, *media]
    if held:
        out.append({"role": "user", "content": held})
    return out


def anthropic_tool_result(content: Any, block: Callable[[Mapping[str, Any]], dict[str, Any]]) -> Any:
    """A tool message's content as a ``tool_result`` block's: its text, or blocks (``block`` turns a part into one).

    The Messages API takes text, image and document blocks in a tool result.
    """
    if not isinstance(content, list):
        return str(content or "")
    return [block(part) for part in content]
