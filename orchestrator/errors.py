"""The exception tree of toolcascade.

Every error the engine raises on purpose derives from ``OrchestratorError``::

    OrchestratorError
    ├── ToolNotFoundError
    ├── ToolDefinitionError
    ├── ConfigurationError
    │   ├── FolderLimitError
    │   └── OrderCycleError
    ├── InterpolationError
    ├── ValidationError
    │   ├── ArgsValidationError
    │   ├── AnswerValidationError
    │   └── ReturnsValidationError
    ├── InvocationError
    │   ├── ModelError
    │   │   └── RefusedAnswerError
    │   ├── ApprovalRequired
    │   ├── ApprovalDenied
    │   ├── ApproverError
    │   ├── RemoteToolError
    │   └── Termination
    ├── InvocationTimeout
    ├── Interrupted
    └── SecurityError

Each class carries structured fields (``tool``, ``path``, ``line``, ``level``,
``key`` ...) and builds its one-line message from them, so a caller can print
``str(error)`` to a user or read the fields in code.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any


class OrchestratorError(Exception):
    """Raised when the engine reports any failure on purpose: the base of every other error.

    ``where`` renders as ``file:line`` (or just ``file``) in front of the
    message; ``tool``, ``level`` and ``key`` are named inside it.
    """

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        path: str | Path | None = None,
        line: int | None = None,
        level: str | None = None,
        key: str | None = None,
    ) -> None:
        self.detail = message
        self.tool = tool
        self.path = str(path) if path is not None else None
        self.line = line
        self.level = level
        self.key = key
        super().__init__(self._render())

    @property
    def where(self) -> str | None:
        """``file:line`` where the problem is, when known."""
        if self.path is None:
            return None
        return f"{self.path}:{self.line}" if self.line else self.path

    def _render(self) -> str:
        parts = []
        if self.tool:
            parts.append(f"tool {self.tool!r}")
        if self.level:
            parts.append(f"level {self.level!r}")
        if self.key:
            parts.append(f"key {self.key!r}")
        context = f" ({', '.join(parts)})" if parts else ""
        prefix = f"{self.where}: " if self.where else ""
        return f"{prefix}{self.detail}{context}"


class ToolNotFoundError(OrchestratorError):
    """Raised when a ref names no tool in the search paths, or may not be read.

    ``searched`` lists every folder looked in, in order. The message names
    them relative to the current folder when inside it and leaves out
    ``builtin`` (the package's own tools, always searched last); when no other
    folder was searched it says so. ``near`` returns refs close to ``ref``
    for "did you mean" (``suggestions``); the message is built when first
    read, so a miss the engine handles itself (a metadata key naming no tool)
    never pays for it.
    """

    def __init__(
        self,
        ref: str,
        searched: Sequence[str | Path] = (),
        reason: str = "",
        *,
        builtin: str | Path | None = None,
        near: Callable[[], Iterable[str]] | None = None,
    ) -> None:
        self.ref = ref
        self.searched = [str(p) for p in searched]
        self._reason = reason
        self._builtin = None if builtin is None else str(builtin)
        self._near = near
        self._suggestions: list[str] = []
        super().__init__(f"no tool {ref!r}")
        self._pending = True  # from here on, reading the message builds it

    @property
    def suggestions(self) -> list[str]:
        """Refs close to ``ref``: close spellings, a nested ref with the same last segment (``ops/status``)."""
        self._complete()
        return list(self.__dict__.get("_suggestions", ()))

    @property
    def detail(self) -> str:
        """The message without its ``file:line`` prefix (built on first read)."""
        self._complete()
        return self._detail

    @detail.setter
    def detail(self, value: str) -> None:
        self._detail = value

    def __str__(self) -> str:
        self._complete()
        return super().__str__()

    def __reduce__(self) -> tuple[Any, ...]:
        self._complete()  # the message travels, not the function that makes it
        return _restore, (type(self), self.args, {k: v for k, v in self.__dict__.items() if k != "_near"})

    def _complete(self) -> None:
        """Build the message (once): suggestions asked for, paths shown as people read them."""
        if not self.__dict__.get("_pending"):
            return
        self._pending = False
        near, self._near = self._near, None
        if near is not None:
            try:
                self._suggestions = list(dict.fromkeys(near()))
            except Exception:  # noqa: BLE001 - a failed suggestion must never replace the error being reported
                self._suggestions = []
        cwd = _cwd()  # read with the message: a raise the engine handles itself costs no system call
        mine = [p for p in self.searched if p != self._builtin]
        if mine:
            where = f" in {', '.join(_shown(p, cwd) for p in mine)}"
        elif self.searched and self._builtin is not None:
            here = "" if cwd is None or os.path.isdir(os.path.join(cwd, "tools")) else "no ./tools here; "
            where = f" (only the built-in tools were searched: {here}use --path DIR, or Manager(paths=[...]))"
        else:
            where = f" in {', '.join(self.searched)}" if self.searched else ""
        why = f": {self._reason}" if self._reason else ""
        hint = ""
        if self._suggestions:
            hint = f"; did you mean {' or '.join(repr(s) for s in self._suggestions)}?"
        self._detail = f"no tool {self.ref!r}{where}{why}{hint}"
        self.args = (self._render(),)


def _restore(cls: type[BaseException], args: tuple[Any, ...], state: dict[str, Any]) -> BaseException:
    """An unpickled error: its message and fields as they were, without calling ``__init__`` again."""
    exc = cls.__new__(cls)
    exc.args = args
    exc.__dict__.update(state)
    return exc


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the current folder was deleted
        return None


def _shown(folder: str, cwd: str | None) -> str:
    """``folder`` relative to ``cwd`` when inside it (``tools``, ``.``), else as it is."""
    if cwd is None:
        return folder
    try:
        return str(Path(folder).relative_to(cwd))
    except ValueError:
        return folder


class ToolDefinitionError(OrchestratorError):
    """Raised when a tool or authority file is malformed (bad YAML, wrong shape, import failure)."""


class ConfigurationError(OrchestratorError):
    """Raised when metadata, authorities or the chain are configured inconsistently."""


class FolderLimitError(ConfigurationError):
    """Raised when a search path (or one folder a lookup scans) holds more entries than ``Limits.folder_files``.

    ``folder`` is the folder that was counted, ``limit`` the bound it passed.
    """

    def __init__(self, folder: str, limit: int) -> None:
        self.folder = folder
        self.limit = limit
        super().__init__(
            f"holds more than {limit:,} files and folders, the most Limits.folder_files lets one search path "
            "hold: move files out, serve a smaller folder, or raise it (Manager(limits=Limits(folder_files=...)))",
            path=folder,
        )


class MediaLimitError(ConfigurationError):
    """Raised when one media value has more bytes than ``Limits.media_bytes``; ``limit`` is that bound."""

    def __init__(self, what: str, limit: int, **where: Any) -> None:
        self.limit = limit
        super().__init__(
            f"{what} is over {limit:,} bytes, the most Limits.media_bytes lets one media value have: give a "
            "smaller one, or raise it (Manager(limits=Limits(media_bytes=...)))",
            **where,
        )


class OrderCycleError(ConfigurationError):
    """Raised when ``$order`` constraints form a cycle; ``cycle`` lists its nodes in order."""

    def __init__(self, cycle: Iterable[str], *, tool: str | None = None) -> None:
        self.cycle = list(cycle)
        loop = " -> ".join([*self.cycle, self.cycle[0]]) if self.cycle else "?"
        super().__init__(f"$order constraints form a cycle: {loop}", tool=tool)


class InterpolationError(OrchestratorError):
    """Raised when a metadata or prompt template fails to compile or render."""


class ValidationError(OrchestratorError):
    """Raised when a value does not match its JSON Schema; ``errors`` holds (pointer, message) pairs."""

    what = "value"

    def __init__(self, errors: Sequence[tuple[str, str]], *, tool: str | None = None) -> None:
        self.errors = list(errors)
        listed = "; ".join(f"{pointer or '/'}: {message}" for pointer, message in self.errors)
        super().__init__(f"invalid {self.what}: {listed}", tool=tool)


class ArgsValidationError(ValidationError):
    """Raised when args do not match the tool's ``params`` schema."""

    what = "args"


class AnswerValidationError(ValidationError):
    """Raised when the caller's answer to a question does not match the question's schema.

    ``request`` is the held question (tool, question, schema) when a resumed
    run's answer failed: the run is still held under its token, and whoever
    resumed it may ask again.
    """

    what = "answer"
    request: Mapping[str, Any] | None = None


class ReturnsValidationError(ValidationError):
    """Raised when a result does not match the tool's ``returns`` schema.

    ``answer`` is a model's last answer when an agent's structured answer
    still failed after its retries (the parsed value, or the text when it
    was not JSON); None for any other result.
    """

    what = "result"

    def __init__(self, errors: Sequence[tuple[str, str]], *, tool: str | None = None, answer: Any = None) -> None:
        self.answer = answer
        super().__init__(errors, tool=tool)


class InvocationError(OrchestratorError):
    """Raised when an invocation is malformed or exceeds a limit (unknown ``$`` option, depth)."""


class ModelError(InvocationError):
    """Raised when a model provider fails, answers out of shape, or a scripted model's expectation is not met.

    ``retryable`` says whether sending the same request again can succeed
    (connection failures, timeouts, 429, 5xx) or not (400, 401, 404, a
    truncated answer); ``status`` is the HTTP status when there was one and
    ``retry_after`` the seconds the server asked to wait. ``retry`` reads them.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = True,
        status: int | None = None,
        retry_after: float | None = None,
        **where: Any,
    ) -> None:
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after
        super().__init__(message, **where)


class RefusedAnswerError(ModelError):
    """Raised when a model answered, but not as the request asked (cut off, or without the demanded call).

    ``response`` is the answer (its ``usage`` counts: traces report its tokens).
    """

    def __init__(self, message: str, *, response: Mapping[str, Any], **where: Any) -> None:
        self.response = dict(response)
        super().__init__(message, **where)


class ApprovalRequired(InvocationError):
    """Raised inside a run when a call needs a human decision and no approver can be asked.

    ``request`` is plain JSON describing the pending call (``tool``, ``args``
    and what the approval middleware adds). It does not leave the engine as
    itself: the agent loop, or ``Manager.invoke`` for a top-level call,
    saves the run and raises ``Interrupted`` instead.
    """

    def __init__(self, message: str, *, request: dict[str, Any], **where: Any) -> None:
        self.request = request
        super().__init__(message, **where)


class ApprovalDenied(InvocationError):
    """Raised when an approver denies a call: the message carries the reason; the call did not run.

    ``request`` is the request the approver saw, ``reason`` its reason (or None).
    """

    def __init__(self, message: str, *, request: dict[str, Any], reason: str | None, **where: Any) -> None:
        self.request = request
        self.reason = reason
        super().__init__(message, **where)


class ApproverError(InvocationError):
    """Raised when an approver fails or answers something that is not a decision; the call did not run.

    ``approver`` names the approver that broke.
    """

    def __init__(self, message: str, *, approver: str, **where: Any) -> None:
        self.approver = approver
        super().__init__(message, **where)


class SessionLostError(InvocationError):
    """Raised when another run took a session over from this run (its lease lapsed): the write is refused, the run stops.

    ``session`` names the session. Nothing of the refused write was stored;
    the session holds what the other run wrote. Run again to continue from
    there, or use another session id.
    """

    def __init__(self, message: str, *, session: str, **where: Any) -> None:
        self.session = session
        super().__init__(message, **where)


class Interrupted(OrchestratorError):
    """Raised when a run suspends for a decision: ``manager.resume(token, decision)`` continues it.

    ``token`` names the saved state in the session store; ``request`` is the
    pending decision (the ``ApprovalRequired.request`` that suspended it).
    """

    def __init__(self, message: str, *, token: str, request: dict[str, Any], **where: Any) -> None:
        self.token = token
        self.request = request
        super().__init__(message, **where)


class RemoteToolError(InvocationError):
    """Raised when a remote (MCP) tool fails: its server did not start, timed out, crashed, or answered an error or too much.

    ``server`` and ``remote`` (the tool's name on its server) say which; ``reason`` is one of
    ``start``, ``timeout``, ``crashed``, ``error``, ``protocol``, ``too-large``.
    """

    def __init__(self, message: str, *, server: str, remote: str | None, reason: str, tool: str | None = None) -> None:
        self.server = server
        self.remote = remote
        self.reason = reason
        super().__init__(message, tool=tool or (f"{server}/{remote}" if remote else server))


class Termination(InvocationError):
    """Raised by a ``tool-pipeline`` middleware to end the agent's loop: no further model request is made.

    Microsoft Agent Framework's MiddlewareTermination. The turn's other
    calls finish, every result joins the conversation (and the session),
    and the agent returns ``value`` (validate-returns still checks it). Raise
    it before ``next()`` to skip the call (its result for the model is
    ``value``), or after, with the call's result or anything else. Only the
    nearest agent's loop ends: one that called this agent as a tool gets
    ``value`` as that call's result. Outside an agent's tool call it is an
    error like any other.
    """

    def __init__(self, value: Any = None, *, tool: str | None = None) -> None:
        self.value = value
        super().__init__("a middleware ended the agent loop outside an agent's tool call", tool=tool)


class InvocationTimeout(OrchestratorError):
    """Raised when an invocation runs past its ``timeout``."""


class SecurityError(OrchestratorError):
    """Raised when something tries what its trust or a lock forbids."""


TOOL_MODULES = "_toolcascade_tools."
"""Python tools are imported under this package name (``orchestrator.loader``)."""


def name_tool(exc: BaseException) -> None:
    """Note on a tool code's own exception which tool raised it: ``(tool 'raiser', tools/raiser.py:4)``.

    The tool is the deepest frame of the traceback that runs a python tool's
    file; the note is added once (``add_note``: tracebacks show it, and
    ``describe`` puts it on the one-line message). Engine errors already
    name their tool and are left alone.
    """
    if isinstance(exc, OrchestratorError) or getattr(exc, "__notes__", None):
        return
    tb: TracebackType | None = exc.__traceback__
    found = None
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__", "")
        if isinstance(module, str) and module.startswith(TOOL_MODULES):
            found = tb
        tb = tb.tb_next
    if found is None:
        return
    frame = found.tb_frame
    path = frame.f_code.co_filename
    front = frame.f_globals.get("frontmatter")
    name = front.get("name") if isinstance(front, dict) else None
    try:
        shown = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        shown = path
    shown = os.path.basename(path) if shown.startswith("..") else shown  # never the server's layout
    exc.add_note(f"(tool {name or Path(path).stem!r}, {shown}:{found.tb_lineno})")


def describe(exc: BaseException) -> str:
    """``"<ErrorType>: <message> <notes>"`` on one line, for CLI and MCP error reports."""
    text = " ".join(" ".join([str(exc), *getattr(exc, "__notes__", ())]).split())
    return f"{type(exc).__name__}: {text}"
