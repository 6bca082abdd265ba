"""Tool: the frozen value object every loader produces."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .frozen import FrozenDict, freeze


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool as loaded: a markdown file, a python module, or a registered function.

    ``metadata`` and ``frontmatter`` are the author's data, frozen
    (``orchestrator.frozen``): they are shared by every invocation through
    the cache, so no invocation can change what the next one sees.
    ``root`` is the search path the tool was found in, ``trusted`` whether
    that path was marked trusted by the program. A tool read from another
    format (``orchestrator.formats``) names it in ``format`` and keeps how each
    of its fields was mapped (``mapping``) and what ``check`` should report
    about it (``problems``: (line, message) pairs).
    """

    name: str
    uri: str
    kind: str  # 'markdown' | 'python' | 'function'
    frontmatter: Mapping[str, Any]
    metadata: Mapping[str, Any]
    prompt: str | None = None
    fn: Callable[..., Any] | None = None
    authority: str | None = None
    description: str | None = None
    path: Path | None = None
    root: Path | None = None
    trusted: bool = True
    prompt_line: int = 1
    lines: Mapping[str, int] = field(default_factory=dict)
    format: str | None = None
    mapping: tuple[Any, ...] = ()
    problems: tuple[tuple[int | None, str], ...] = ()

    def __post_init__(self) -> None:
        metadata = freeze(self.metadata)
        front = {k: metadata if v is self.metadata else freeze(v) for k, v in self.frontmatter.items()}
        object.__setattr__(self, "metadata", metadata)
        object.__setattr__(self, "frontmatter", FrozenDict(front))

    @property
    def hidden(self) -> bool:
        """True when ``visibility: hidden`` keeps the tool out of listings."""
        return self.metadata.get("visibility") == "hidden"

    def line_of(self, key: str) -> int | None:
        """The line of a top-level metadata key in the tool's file, when known."""
        return self.lines.get(key)


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """A line of ``list``: what a tool is, found without running it.

    ``params`` is the merged (unrendered) ``params`` metadata; ``error`` is
    set, and the rest unknown, when the tool cannot be loaded or resolved.
    ``hidden``: ``visibility: hidden`` in the tool's own metadata, or
    ``role: middleware``; neither is inherited.
    """

    ref: str
    name: str
    kind: str
    description: str | None
    hidden: bool
    params: Any
    path: Path | None
    error: Exception | None = None
    role: str | None = None  # 'middleware' for tools written to wrap others (R-TOOL-6)
    format: str | None = None  # the format the file was read from (orchestrator.formats), None for ours


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def wire_name(ref: str) -> str:
    """A ref as tool-calling APIs (MCP, OpenAI functions) accept names: ``team/summarize`` -> ``team__summarize``."""
    return _UNSAFE.sub("_", ref.replace("/", "__"))
