"""A model server's answer over HTTP, read as untrusted input: bounded while it arrives, checked field by field.

A model server, or a gateway in front of it, may answer anything with
status 200: an HTML error page, ``null``, server-sent events to an
unstreamed request, a chunk cut in half, fields of the wrong type, or more
bytes than memory holds. The HTTP providers (``openai``, ``anthropic``) read
every successful answer through ``Answer``:

- at most ``Limits.model_answer`` bytes, counted as they arrive: past it
  the read stops at once (the server is hung up on), so memory stays
  bounded whatever the server sends. ``bounded`` sets the limit for the
  model requests made inside it (``model-call`` sets its manager's);
  elsewhere it is the default's.
- every value is decoded and type-checked (``decode``, ``field``); the
  providers raise ``BadAnswer`` for anything out of shape, and ``Answer``
  turns it into a ``ModelError`` naming the URL, the HTTP status and a
  short excerpt of what came back.

Whether ``retry`` may send the request again (``ModelError.retryable``):

- yes for an answer that is not JSON (an HTML page or text from a gateway or
  proxy, a body or chunk cut off in transit) and for an error the server put
  in a 200 answer: another try may get through;
- no for JSON of the wrong shape, server-sent events to an unstreamed
  request, an unstreamed JSON answer to a streamed one and an answer past
  the limit: the server speaks another protocol, or answers this request
  this way, and will again. ``fallback`` takes over either way.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import anyio

from ..errors import ModelError
from ..limits import DEFAULT_LIMITS
from .protocol import Setting, label

T = TypeVar("T")
EXCERPT = 160
"""Characters of an answer an error shows."""
_HEAD = 4 * EXCERPT
_LIMIT: ContextVar[int] = ContextVar("model_answer", default=DEFAULT_LIMITS.model_answer)
_KINDS = {dict: "an object", list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def bounded(limit: int) -> Setting[int]:
    """``with bounded(limit):`` model answers read inside the block may have at most ``limit`` bytes
    (``Limits.model_answer``)."""
    return Setting(_LIMIT, limit)


class BadAnswer(Exception):
    """Raised by a provider's parsing for an answer out of shape; ``Answer`` reports it as a ``ModelError``.

    ``excerpt`` is the piece to show (a stream chunk); without it the answer's first bytes are shown.
    """

    def __init__(self, why: str, *, retryable: bool, excerpt: str | bytes | None = None) -> None:
        self.why = why
        self.retryable = retryable
        self.excerpt = excerpt
        super().__init__(why)

    def showing(self, excerpt: str | bytes) -> BadAnswer:
        """This problem, shown with ``excerpt`` unless it already has its own."""
        if self.excerpt is not None:
            return self
        return BadAnswer(self.why, retryable=self.retryable, excerpt=excerpt)


def kind(value: Any) -> str:
    """A JSON value's type, as errors name it (``an object``, ``null`` ...)."""
    return "null" if value is None else _KINDS.get(type(value), type(value).__name__)


def decode(data: str | bytes) -> Any:
    """The JSON value in ``data``.

    Raises:
        BadAnswer: not JSON (retryable: cut off or replaced in transit), or nested too deep (not retryable).
    """
    try:
        return json.loads(data)
    except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
        raise BadAnswer("the answer is not JSON", retryable=True, excerpt=data) from None
    except RecursionError:
        raise BadAnswer("the answer's JSON is nested too deep", retryable=False, excerpt=data) from None


def mapping(value: Any, what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object.

    Raises:
        BadAnswer: it is not (not retryable).
    """
    if not isinstance(value, dict):
        raise BadAnswer(f"{what} is {kind(value)}, not an object", retryable=False)
    return value


def field(obj: Mapping[str, Any], key: str, *types: type, required: bool = False) -> Any:
    """``obj[key]`` when it is one of ``types``; None when absent or null and not ``required``.

    Raises:
        BadAnswer: a value of another type, or a required one missing (not retryable).
    """
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        wanted = " or ".join(dict.fromkeys(_KINDS.get(t, t.__name__) for t in types))
        raise BadAnswer(f"{key!r} is {kind(value)}, not {wanted}", retryable=False)
    return value


def server_error(error: Any) -> str:
    """The message of an error object a server put in its answer (``{message}`` or text)."""
    if isinstance(error, Mapping):
        message = error.get("message")
        return str(message if message is not None else error)
    return str(error)


class Answer:
    """One successful HTTP response of a model server, read within ``Limits.model_answer`` bytes.

    ``json(parse)`` reads an unstreamed answer, ``events(feed, finish)`` a
    streamed one; both return what the provider's functions build, and
    turn a ``BadAnswer`` they raise into a ``ModelError`` naming the model,
    the URL, the status and an excerpt.
    """

    def __init__(self, spec: Mapping[str, Any], response: Any) -> None:
        self.spec = spec
        self.response = response
        self.limit = _LIMIT.get()
        self.head = bytearray()
        self.size = 0

    async def json(self, parse: Callable[[Any], T]) -> T:
        """Read the whole answer and return ``parse(its JSON value)``.

        Raises:
            ModelError: past the limit, server-sent events, not JSON, or what ``parse`` refuses.
        """
        parts: list[bytes] = []
        await self._read(parts.append)
        body = b"".join(parts)
        with self.checking():
            if body.lstrip()[:6] in (b"data: ", b"data:{", b"event:"):
                raise BadAnswer(
                    "the server answered an unstreamed request with server-sent events; "
                    "it ignores options.stream: false, so remove that option",
                    retryable=False,
                )
            return parse(decode(body))

    async def events(self, feed: Callable[[str | None, str], None], finish: Callable[[], T]) -> T:
        """Read a streamed answer's server-sent events into ``feed(event, data)``, then return ``finish()``.

        Raises:
            ModelError: past the limit, no event at all, or what ``feed`` or ``finish`` refuses.
        """
        events = _Events(feed)
        await self._read(events.feed)
        with self.checking():
            events.close()
            if not events.seen:
                if "json" in self.response.headers.get("content-type", ""):
                    raise BadAnswer(
                        "the server answered a streamed request with one JSON answer; "
                        "set options: {stream: false} in the model spec",
                        retryable=False,
                    )
                raise BadAnswer("the answer holds no server-sent event", retryable=True)
            return finish()

    @contextmanager
    def checking(self) -> Iterator[None]:
        """Inside, a ``BadAnswer`` becomes this answer's ``ModelError``."""
        try:
            yield
        except BadAnswer as bad:
            raise self.error(bad) from None

    def error(self, bad: BadAnswer) -> ModelError:
        """The ``ModelError`` for a problem with this answer."""
        shown = bytes(self.head) if bad.excerpt is None else bad.excerpt
        status = int(self.response.status_code)
        url = self.response.url  # without user info or query, where a key might be
        where = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{url.path}"
        kind_ = self.response.headers.get("content-type") or "no content type"
        return ModelError(
            f"model {label(self.spec)} at {where}: HTTP {status} ({kind_}): {bad.why}: {excerpt(shown)}",
            retryable=bad.retryable,
            status=status,
        )

    async def _read(self, take: Callable[[bytes], None]) -> None:
        """Hand ``take`` the body's bytes as they arrive; stop at the limit or at the first problem.

        Stopping cancels the read in progress rather than leaving the loop:
        the HTTP library's generators then end by that cancellation, each
        closing what it holds, instead of being left open behind us.

        Raises:
            ModelError: past the limit, or a ``BadAnswer`` from ``take``.
        """
        problem: BaseException | None = None
        with anyio.CancelScope() as scope:
            async for data in self.response.aiter_bytes():
                if problem is not None:
                    continue  # cancelled: the next read raises inside the HTTP library
                self.size += len(data)
                if len(self.head) < _HEAD:
                    self.head += data[: _HEAD - len(self.head)]
                try:
                    if self.size > self.limit:
                        raise BadAnswer(
                            f"the answer passed Limits.model_answer ({self.limit:,} bytes) and was cut off; "
                            "ask for a shorter answer, lower max-tokens or raise the limit",
                            retryable=False,
                        )
                    take(data)
                except Exception as exc:  # what take raised ends the read, then goes on as it is
                    problem = exc
                    scope.cancel()
        if isinstance(problem, BadAnswer):
            raise self.error(problem) from None
        if problem is not None:
            raise problem


def excerpt(data: str | bytes) -> str:
    """The first ``EXCERPT`` characters of ``data``, whitespace runs as one space, quoted."""
    text = data[: EXCERPT * 8].decode("utf-8", "replace") if isinstance(data, bytes) else data[: EXCERPT * 4]
    short = " ".join(text.split())
    return repr(short[:EXCERPT] + ("..." if len(short) > EXCERPT else ""))


class _Events:
    """Server-sent events from chunks of bytes: ``feed(event, data)`` for each complete event."""

    def __init__(self, feed: Callable[[str | None, str], None]) -> None:
        self.handle = feed
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.partial: list[str] = []  # the line in progress, in pieces: never copied until it ends
        self.event: str | None = None
        self.data: list[str] = []
        self.seen = False

    def feed(self, chunk: bytes) -> None:
        text = self.decoder.decode(chunk)
        start = 0
        while (end := text.find("\n", start)) >= 0:
            self.partial.append(text[start:end])
            line = "".join(self.partial)
            self.partial.clear()
            self._line(line[:-1] if line.endswith("\r") else line)
            start = end + 1
        if start < len(text):
            self.partial.append(text[start:])

    def close(self) -> None:
        """The last line and event, when the body ended without a blank line."""
        tail = "".join(self.partial) + self.decoder.decode(b"", final=True)
        self.partial.clear()
        if tail:
            self._line(tail)
        self._dispatch()

    def _line(self, line: str) -> None:
        if not line:
            self._dispatch()
            return
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "event":
            self.event = value
        elif name == "data":
            self.data.append(value)

    def _dispatch(self) -> None:
        if self.data:
            self.seen = True
            self.handle(self.event, "\n".join(self.data))
        self.event, self.data = None, []
