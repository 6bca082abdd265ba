"""A finished call as a run log row: redacted, its secrets cut out, its values bounded.

``row`` runs on the run log's writer thread (``orchestrator.runlog``), never
on the event loop. An arg or result part whose ``params`` / ``returns``
schema says ``x-redact: true`` becomes ``[redacted]`` (``redact``), and the
text of what was redacted (4 characters or more) is cut out of every other
string of the run: the result, the error, the model's answers and the tool
calls' arguments (those are redacted by the called tool's own ``params``).
So are the values (8 characters or more) of environment variables whose
names look secret (``*KEY*``, ``*TOKEN*``, ``*SECRET*``, ``*PASSW*`` ...),
every environment value for a tool with ``trust: {env: true}``, the value of
the variable an agent's ``api-key-env`` names, and a paused run's resume
token. The cut reaches the messages a ``model.request`` sent, when its
event carries them: the messages after those the agent's previous request
sent too (``earlier`` counts those), each bounded. A run whose answers ``orchestrator.costs`` can price
keeps its ``cost`` (US dollars) and the price table it came from
(``prices``).
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .costs import table, total
from .errors import ConfigurationError
from .frozen import FrozenDict, FrozenList

if TYPE_CHECKING:
    from .events import Event
    from .runlog import Call

REDACTED = "[redacted]"
_SCHEMAS: dict[int, tuple[Any, Any]] = {}  # id(params or returns) -> (it, its JSON Schema), for the writer threads
# id(a plan's levels) -> (the levels, the metadata last hashed with them, the row text of both): see _plan_text
_PLANS: dict[int, tuple[Sequence[Any], dict[str, Any] | None, str]] = {}
_QUIET = '"error": null, "usage": null, "cost": null, "prices": null, "turns": [], '  # see _body_text
_SECRET_NAMES: dict[str, bool] = {}  # environment variable name -> whether it looks secret (SECRET_NAME)
_UNCHANGING = frozenset({FrozenDict, FrozenList, str, int, float, bool, type(None)})  # read-only metadata values
MAX_TEXT = 200_000  # characters of one arg, result or model answer kept; the rest is cut
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION|DSN", re.IGNORECASE)
_TURN_DATA = {
    "model.request": ("model", "messages", "tools", "response_format"),
    "model.response": ("model", "content", "calls", "finish_reason", "usage"),
    "tool.start": ("call", "arguments"),
    "tool.end": ("call", "error", "held"),
}


def row(call: Call, environment: Environment) -> tuple[Any, ...]:
    """The row of ``call``: redacted, its secrets cut out, its values bounded.

    ``environment`` is ``secret_environment()``, read once per batch of rows.
    A value the row lacks is ``""`` (tool, caller, error type, model) or
    ``-1`` (tokens), never None: the run log's ``INSERT`` stores those as
    NULL (``sqlite3`` binds None through its adapter lookup, a third of a
    row's binding).
    """
    secrets = list(call.secrets)
    args = redact(_plain_args(call.args), _redacting(call.params), secrets)
    result = redact(call.result, _redacting(call.returns), secrets) if call.error is None else None
    status, error = "ok", None
    if call.error is not None:
        status = "interrupted" if type(call.error).__name__ == "Interrupted" else "error"
        token = getattr(call.error, "token", None)
        if isinstance(token, str):
            secrets.append(token)
        notes = getattr(call.error, "__notes__", ())
        error = {"type": type(call.error).__name__, "message": " ".join([str(call.error), *notes])}
    sent: dict[tuple[str, int], list[Any]] = {}  # each agent's last request's messages
    turns = [_turn(event, call.lookup, secrets, sent) for event in call.events] if call.events else []
    usage = dict(call.usage) if call.usage else None
    body = {
        "args": args,
        "result": result,
        "error": error,
        "usage": usage,
        "cost": None,
        "prices": None,
        "turns": turns,
    }
    if turns:
        price = total(turns)
        if price is not None:
            body["cost"], body["prices"] = price, table()
    plan = _plan_text(call)
    text = _body_text(body, plan)
    if len(text) > MAX_TEXT:  # only then can the args or the result be over the bound: cut them, write again
        body["args"], body["result"] = _bounded(body["args"]), _bounded(body["result"])
        text = _body_text(body, plan)
    cut = environment.cut(call.env, secrets)
    if cut is not None and cut[1].search(text):  # a secret is in the row's text: cut it out of every string
        body = _scrub({**body, **json.loads("{" + plan + "}")}, cut[0])
        error = body["error"]
        text = _encode(body)
    model = next((t["data"].get("model") for t in turns if t["data"].get("model")), None) if turns else None
    tokens = usage.get("total_tokens") if usage else None
    return (
        call.id,
        call.started,
        call.seconds,
        call.ref,
        call.tool or "",
        call.caller or "",
        status,
        error["type"] if error else "",
        str(model) if model is not None else "",
        tokens if isinstance(tokens, int) and tokens >= 0 else -1,
        text,
    )


def redact(value: Any, schema: Any, found: list[Any]) -> Any:
    """``value`` with every part its ``schema`` marks ``x-redact: true`` replaced by ``[redacted]``.

    What was replaced is added to ``found`` (to be cut out of the rest of the run).
    """
    if schema is None or not isinstance(schema, Mapping):
        return value
    if schema.get("x-redact") is True:
        found.append(value)
        return REDACTED
    properties = schema.get("properties")
    if isinstance(value, Mapping) and isinstance(properties, Mapping):
        return {key: redact(item, properties.get(key), found) for key, item in value.items()}
    items = schema.get("items")
    if isinstance(value, list) and isinstance(items, Mapping):
        return [redact(item, items, found) for item in value]
    return value


Cut = tuple[re.Pattern[str], re.Pattern[str]]  # a secret's text as it is, and as it is or as JSON writes it


@dataclass(frozen=True, slots=True)
class Environment:
    """The environment's values to cut out of a run: ``secrets`` (named like one) and all ``values``, with
    their patterns (``_cutter``'s), made once for a batch of rows."""

    secrets: tuple[str, ...]
    values: tuple[str, ...]
    secrets_cut: Cut | None = None
    values_cut: Cut | None = None

    def cut(self, env: bool, found: Sequence[Any]) -> Cut | None:
        """The patterns that cut a run's secrets: ``found`` (its own) and the environment's (all its values
        when ``env``: the tool's templates saw the environment), or None when there are none."""
        if found:
            return _cutter([*found, *(self.values if env else self.secrets)])
        return self.values_cut if env else self.secrets_cut


def secret_environment() -> Environment:
    """The environment's values (8 characters or more) to cut out of the runs written now.

    Looked at for each batch of rows (the environment may change): where
    ``os.environ`` keeps its variables as a dict of its own (as CPython
    does), an equal copy of it says nothing changed since the last batch
    and its answer is reused; else the environment is read again (a read
    decodes every name and value in Python: 200k instructions, more than
    a small batch's rows). Whether a name looks secret is found once per
    name, and the patterns once per set of values.
    """
    kept = getattr(os.environ, "_data", None)  # os._Environ's own mapping, changed by every putenv it makes
    last = _LAST_ENVIRONMENT[0]
    if type(kept) is dict and last is not None and last[0] == kept:
        return last[1]
    copy = dict(kept) if type(kept) is dict else None  # taken first: a change while reading is seen next time
    found = _read_environment()
    if copy is not None:
        _LAST_ENVIRONMENT[0] = (copy, found)  # one tuple: another writer thread reads both or neither
    return found


_LAST_ENVIRONMENT: list[tuple[dict[Any, Any], Environment] | None] = [None]


def _read_environment() -> Environment:
    names = _SECRET_NAMES
    secrets: list[str] = []
    values: list[str] = []
    for name, value in os.environ.items():
        if len(value) >= 8:
            values.append(value)
            secret = names.get(name)
            if secret is None:
                if len(names) >= 4_096:
                    names.clear()
                secret = names[name] = SECRET_NAME.search(name) is not None
            if secret:
                secrets.append(value)
    return _environment(tuple(secrets), tuple(values))


@functools.lru_cache(maxsize=8)
def _environment(secrets: tuple[str, ...], values: tuple[str, ...]) -> Environment:
    return Environment(secrets, values, _cutter(secrets), _cutter(values))


def _redacting(value: Any) -> Any:
    """``value`` (``params`` or ``returns``) as JSON Schema when it redacts something (``x-redact`` in it), else
    None (nothing to walk); the same object is converted once."""
    if value is None:
        return None
    found = _SCHEMAS.get(id(value))
    if found is not None and found[0] is value:
        return found[1]
    from .schema import json_schema

    try:
        schema = json_schema(value)
    except ConfigurationError:
        schema = None
    if schema is not None and "x-redact" not in _encode(schema):
        schema = None
    if len(_SCHEMAS) >= 256:
        _SCHEMAS.clear()
    _SCHEMAS[id(value)] = (value, schema)  # the value is kept: its id is never another's while cached
    return schema


def _plan_text(call: Call) -> str:
    """``"meta_hash": ..., "levels": [...]``: the row text of ``call``'s metadata hash and its plan's cascade levels.

    Made once for each plan (its levels, a tuple, are the same for each of
    its calls) and its metadata: each row of its calls has it spliced in,
    neither hashed nor encoded again while its metadata equals (``==``) the
    metadata last hashed with that plan. That one is kept (a copy) only when
    its values are read-only (``orchestrator.frozen``, or scalars), so it
    cannot change after it was hashed; a call whose metadata a middleware
    changed is hashed on its own.
    """
    meta, levels = call.meta, call.levels
    found = _PLANS.get(id(levels))
    if found is not None and found[0] is levels and found[1] == meta:
        return found[2]
    digest = _digest(meta) if meta is not None else None
    text = _encode({"meta_hash": digest, "levels": [_level(level) for level in levels]})[1:-1]
    if type(levels) is tuple and (meta is None or all(type(value) in _UNCHANGING for value in meta.values())):
        if len(_PLANS) >= 256:
            _PLANS.clear()
        # the levels are kept: their id is never another's while cached
        _PLANS[id(levels)] = (levels, dict(meta) if meta is not None else None, text)
    return text


def _body_text(body: dict[str, Any], plan: str) -> str:
    """The text of a row's ``body`` (``row``'s keys, in its order) with its plan's text (``_plan_text``) at the end.

    The same text ``_encode`` writes for the body, made a part at a time:
    a part that is null, a string or an empty list is written without the
    encoder, whose every call costs more than the plain strings of a small
    row; a run without an error, usage or turns (so no cost) has its nulls
    as one string.
    """
    head = f'{{"args": {_part(body["args"])}, "result": {_part(body["result"])}, '
    if body["error"] is None and body["usage"] is None and not body["turns"]:
        return f"{head}{_QUIET}{plan}}}"
    return (
        f'{head}"error": {_part(body["error"])}, "usage": {_part(body["usage"])}, "cost": {_part(body["cost"])}, '
        f'"prices": {_part(body["prices"])}, "turns": {_part(body["turns"])}, {plan}}}'
    )


def _part(value: Any) -> str:
    """``_encode(value)``, without the encoder for None, a string and an empty list."""
    if value is None:
        return "null"
    kind = type(value)
    if kind is str:
        return _string(value)
    if kind is list and not value:
        return "[]"
    return _encode(value)


def _plain_args(args: Any) -> Any:
    """Args without their ``$`` options (a ``$context`` may hold anything)."""
    if type(args) is dict or isinstance(args, Mapping):
        for key in args:
            if isinstance(key, str) and key.startswith("$"):
                return {key: value for key, value in args.items() if not (isinstance(key, str) and key.startswith("$"))}
    return args


def _turn(
    event: Event, lookup: Callable[[str], Any] | None, secrets: list[Any], sent: dict[tuple[str, int], list[Any]]
) -> dict[str, Any]:
    data = {key: event.data.get(key) for key in _TURN_DATA.get(event.kind, ()) if key in event.data}
    called = data.get("call")
    if event.kind == "tool.start" and lookup is not None and isinstance(called, str):
        arguments = data.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        data["arguments"] = redact(arguments, _redacting(lookup(called)), secrets)
    if "content" in data:
        data["content"] = _bounded(data["content"])
    messages = data.get("messages")
    if isinstance(messages, list):  # the messages as sent (an older agent sent their count)
        data.update(_new_messages(messages, sent, (event.tool, event.depth)))
    turn = {"kind": event.kind, "tool": event.tool, "depth": event.depth, "iteration": event.iteration}
    return {**turn, "time": event.time, "data": data}


def _new_messages(
    messages: list[Any], sent: dict[tuple[str, int], list[Any]], agent: tuple[str, int]
) -> dict[str, Any]:
    """A request's messages as kept: those after the ones its agent's request before sent too (``earlier``: how many).

    Each request of an agent sends the whole conversation again; keeping
    only what is new keeps a run's row as long as its conversation, not its
    square. A conversation rewritten since (compacted) is kept whole.
    """
    before = sent.get(agent)
    sent[agent] = messages
    earlier = len(before) if before and messages[: len(before)] == before else 0
    return {"messages": [_bounded(message) for message in messages[earlier:]], "earlier": earlier}


def _bounded(value: Any) -> Any:
    """``value``, or the first ``MAX_TEXT`` characters of its JSON when it is longer."""
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + f"... [{len(value) - MAX_TEXT} more]"
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= MAX_TEXT else {"cut": len(text) - MAX_TEXT, "head": text[:MAX_TEXT]}


def _row_encoder() -> Callable[[Any], str]:
    """``JSONEncoder(ensure_ascii=False, default=str).encode``, its C encoder made once, not for each row.

    ``encode`` makes it again on every call (with a Python closure): a
    fifth of a small row's cost. The text is the same; without json's C
    accelerator, ``encode`` itself. No check for a circular value: the
    recursion limit stops one, and that run is not recorded (a warning).
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(ensure_ascii=False, default=str).encode
    encoder = make(None, str, json.encoder.encode_basestring, None, ": ", ", ", False, False, True)
    return lambda value: "".join(encoder(value, 0))


_encode = _row_encoder()  # one encoder for every row
_string: Callable[[str], str] = json.encoder.encode_basestring  # a string as _encode writes it (ensure_ascii=False)
_sorted = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=repr).encode  # metadata, to hash


def _digest(meta: Mapping[str, Any]) -> str:
    """The hash of a call's merged metadata (its keys sorted); ``_plan_text`` keeps it per plan."""
    import hashlib  # on the writer thread: OpenSSL's load stays off a command's start

    return "sha256:" + hashlib.sha256(_sorted(meta).encode()).hexdigest()


def _level(level: Any) -> dict[str, Any]:
    path = getattr(level, "path", None)
    return {"kind": getattr(level, "kind", None), "name": getattr(level, "name", None), "path": path and str(path)}


def _cutter(secrets: Sequence[Any]) -> Cut | None:
    """Patterns matching every secret's text (strings of 4 characters or more, longest first): as it is, and as
    JSON writes it inside a string (to look for it in a row's text first)."""
    texts: set[str] = set()
    for secret in secrets:
        if isinstance(secret, str):
            texts.add(secret)
        elif secret is not None and not isinstance(secret, bool):
            texts.add(json.dumps(secret, ensure_ascii=False, default=str))
            texts.update(_strings(secret))
    return _pattern(tuple(sorted((text for text in texts if len(text) >= 4), key=lambda t: (-len(t), t))))


@functools.lru_cache(maxsize=64)
def _pattern(texts: tuple[str, ...]) -> Cut | None:
    """The patterns of ``texts``, compiled once (the environment's secrets are the same for every run)."""
    if not texts:
        return None
    written = [json.dumps(text, ensure_ascii=False)[1:-1] for text in texts]
    return re.compile("|".join(map(re.escape, texts))), re.compile("|".join(map(re.escape, {*texts, *written})))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def _scrub(value: Any, cut: re.Pattern[str]) -> Any:
    if isinstance(value, str):
        return cut.sub(REDACTED, value)
    if isinstance(value, Mapping):
        return {_scrub(str(key), cut): _scrub(item, cut) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(item, cut) for item in value]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return cut.sub(REDACTED, str(value))
