"""One adaptation of a Prompty file: what its field mappers share.

The adapter (``orchestrator.formats.prompty``) and its mappers (``connections``
for ``model``, ``sections`` for the body) fill one ``Adaptation`` in source
order: the metadata, the mapping notes, the problems (warnings with lines)
and the fields kept as data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import ToolDefinitionError
from . import Mapped, key_line

FORMAT_FIELDS = "format-fields"
HOST_TOOLS = "host-tools"
MIDDLEWARE = "prompty"
"""The metadata key (and built-in middleware) that renders mustache and shapes a model-less result."""

Problems = list[tuple[int | None, str]]


class Adaptation:
    """The state of one adaptation: collects metadata, mapping and problems in source order."""

    def __init__(self, path: Path, front: Mapping[str, Any], body: str, body_line: int) -> None:
        self.path = path
        self.front = front
        self.body = body
        self.body_line = body_line
        self.name = path.name[: -len(".prompty")]
        self.metadata: dict[str, Any] = {}
        self.mapping: list[Mapped] = []
        self.problems: Problems = []
        self.extra: dict[str, Any] = {}
        self.prompt = ""
        self.required: list[str] = []
        self.threads: list[str] = []  # chat-history inputs (``kind: thread``, Prompty 1's ``history``)
        self.placed: set[str] = set()  # the threads a section places alone on a line
        self.read: set[str] = set()  # every name the sections' templates read
        self._text: list[str] | None = None

    def line_of(self, *keys: str) -> int | None:
        """The file line of a nested frontmatter field (``"model", "configuration", "type"``), else its parent's.

        The parsed frontmatter knows only top-level lines, so the file is read
        again (within the default limits) the first time a message needs one.
        """
        line = key_line(self.front, keys[0])
        if line is None or len(keys) == 1:
            return line
        if self._text is None:
            from ..loader import read_text

            try:
                self._text = read_text(self.path).split("\n")
            except ToolDefinitionError:
                self._text = []
        found, indent = line, 0
        for key in keys[1:]:
            pattern = re.compile(r"^([ \t]*)(?:-[ \t]+)?[\"']?" + re.escape(key) + r"[\"']?[ \t]*:")
            for index in range(found, min(len(self._text), self.body_line)):
                match = pattern.match(self._text[index])
                if match and len(match.group(1)) >= indent:
                    found, indent = index + 1, len(match.group(1)) + 1
                    break
            else:
                return found
        return found

    def error(self, message: str, key: str, line: int | None = None) -> ToolDefinitionError:
        """The error for ``key`` of this file, at ``line`` (else the key's own line)."""
        return ToolDefinitionError(
            message, tool=self.name, path=self.path, line=line or key_line(self.front, key), key=key
        )
