"""Who chooses where a key goes: a model spec's route, its grant, and the checks that trusted configuration chose it.

A spec's *route* is its ``provider``,
``base-url`` and ``api-key-env``: which key is sent, and where. Files from
folders the program does not trust (reached through ``paths:`` metadata)
never choose it. ``authorize_model`` runs when an agent fixes its model: it
finds which level of the tool's cascade set each route field and refuses
(``SecurityError`` naming the tool, file, line and key) a route that a level
from an untrusted folder set, unless the provider is ``scripted`` (no key, no
network); otherwise it grants the spec (``grant_model``). The grant is an
HMAC of the route under a key made once per process, kept in the spec's
``grant`` field: it cannot be forged, and it holds only for the route it was
made for. Providers honour ``base-url`` and ``api-key-env`` only in a granted
spec (``model.check_route``), wherever the request was built (a model's own call to
``model-call``, a program's): an ungranted spec gets the
provider's default key (``OPENAI_API_KEY``) sent only to its default endpoint
(``OPENAI_BASE_URL``, or the provider's own API), both chosen by the program's
environment. A program that builds a spec with ``base-url`` in code and sends
it through ``model-call`` itself grants it with ``grant_model``.

The models an agent's ``model-pipeline`` names for its middleware
(``PIPELINE_MODELS``: ``fallback``'s ``models``, ``compact``'s
``summarize``) choose where a key goes just as its ``model`` does, so the
agent authorizes them when it starts (``authorize_pipeline``), by the same
levels and the same rule for their key path (``model-pipeline.fallback.models``):
granted when trusted configuration set them, a ``SecurityError`` when a file
from an untrusted folder did. The granted specs travel down in the
pipeline's args to the middleware, which hands them to ``model-call``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..cascade import MISSING, merge_default, untrusted_level
from ..errors import SecurityError

if TYPE_CHECKING:
    from ..cascade import Level
    from ..context import Context
    from ..manager import Manager
    from ..registry import SearchPath
    from ..tool import Tool

GRANT = "grant"
"""The field holding a spec's grant (``grant_model``): set by toolcascade, never by a file."""
ROUTE = ("provider", "base-url", "api-key-env")
"""The fields that choose which key is sent, and where: only trusted configuration sets them."""
KEYLESS = frozenset({"scripted"})
"""Providers that send no key anywhere: any file may choose them."""
PIPELINE_MODELS = {"fallback": "models", "compact": "summarize"}
"""The ``model-pipeline`` middleware whose arg holds model specs (a list, or one spec): the agent grants them."""

_SECRET = secrets.token_bytes(32)  # made once per process: a grant never outlives it
_SEALS: dict[tuple[Any, ...], str] = {}  # route -> its grant: an agent grants its model, a provider checks it
_MOST_SEALS = 256  # routes remembered (a process meets a few); past it the memory starts again


def _seal(spec: Mapping[str, Any]) -> str:
    """The HMAC of ``spec``'s route, made once per route: every request grants and checks the same few."""
    route = (spec.get("provider"), spec.get("base-url"), spec.get("api-key-env"))  # ROUTE's fields
    provider, url, env = route
    if not (type(provider) is str and (url is None or type(url) is str) and (env is None or type(env) is str)):
        return _hmac(route)  # a field that is no string (a file's mistake; 1 == True as a key): not remembered
    sealed = _SEALS.get(route)
    if sealed is None:
        if len(_SEALS) >= _MOST_SEALS:
            _SEALS.clear()
        sealed = _SEALS[route] = _hmac(route)
    return sealed


def _hmac(route: tuple[Any, ...]) -> str:
    text = json.dumps(list(route), sort_keys=True, default=str)
    return hmac.new(_SECRET, text.encode(), hashlib.sha256).hexdigest()


def grant_model(spec: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` granted its route: trusted code vouches for its provider, base-url and api-key-env.

    Agents grant their model themselves (``authorize_model``); a program that
    sends a spec it built in code through ``model-call`` grants it here.
    """
    return {**spec, GRANT: _seal(spec)}


def granted(spec: Mapping[str, Any]) -> bool:
    """Whether ``spec`` carries a grant made for its very route (its name, options, timeout may differ)."""
    grant = spec.get(GRANT)
    return isinstance(grant, str) and hmac.compare_digest(grant, _seal(spec))


def authorize_model(
    spec: dict[str, Any], ctx: Context, manager: Manager, *, key: Sequence[str] = ("model",)
) -> dict[str, Any]:
    """``spec`` granted (``grant_model``), unless a file from an untrusted folder chose its route.

    ``key`` is where the spec lies in the tool's metadata: ``("model",)``
    for the agent's model, ``("model-pipeline", "fallback", "models")`` for
    a model its pipeline names. Asked once per agent run, where the agent
    fixes its models: the tool's cascade plan (cached) tells which level set
    each route field. A spec the program put in ``ctx.locals`` or passed in
    overrides is judged by the same levels.

    Raises:
        SecurityError: a level from an untrusted folder set the provider, base-url or api-key-env
            of a model that sends a key (naming the tool, that level's file and line, and the key).
    """
    if spec.get("provider") in KEYLESS:
        return spec
    tool = ctx.tool
    roots = untrusted_roots(tool, ctx.paths)
    if roots or not tool.trusted:
        plan = manager.planner.plan(tool, ctx.paths, ctx.run.checked)
        found = route_setter(plan.levels, tool, ctx.paths, roots, key=key)
        if found is not None:
            level, message = found
            dotted = ".".join(key)
            raise SecurityError(message, tool=tool.name, path=level.path, line=route_line(level, key), key=dotted)
    return grant_model(spec)


def authorize_pipeline(
    pipeline: dict[str, Any] | None, ctx: Context, manager: Manager, *, key: Sequence[str] = ("model-pipeline",)
) -> dict[str, Any] | None:
    """An agent's ``model-pipeline`` with the model specs of ``PIPELINE_MODELS`` authorized (``authorize_model``).

    Asked once per run, when the agent starts. Mapping specs come back
    granted; ``provider:name`` strings choose no endpoint and come back as
    they are, once judged. Args of another shape are left for the
    middleware's own params to refuse. ``key`` is where the pipeline lies in
    the tool's metadata.

    Raises:
        SecurityError: a file from an untrusted folder chose the route of one of them (naming the
            tool, file, line and key path, ``model-pipeline.fallback.models``).
    """
    if not pipeline:
        return pipeline
    authorized = dict(pipeline)
    for name, arg in PIPELINE_MODELS.items():
        args = pipeline.get(name)
        if not isinstance(args, Mapping) or args.get(arg) is None:
            continue
        value = args[arg]
        where = (*key, name, arg)
        if isinstance(value, list):
            value = [_authorized(item, ctx, manager, where) for item in value]
        else:
            value = _authorized(value, ctx, manager, where)
        authorized[name] = {**args, arg: value}
    return authorized


def check_tool_pipeline(
    pipeline: Any, ctx: Context, manager: Manager, *, key: Sequence[str] = ("tool-pipeline",)
) -> None:
    """Refuse a ``tool-pipeline`` through which a file from an untrusted folder would choose a called agent's route.

    An agent hands its ``tool-pipeline`` to every tool it calls as overrides,
    and a called agent judges overrides as the program's own. So the calling
    agent judges, by its own levels, what in it chooses a route: ``model``,
    the models of a ``model-pipeline`` (``PIPELINE_MODELS``) and, in a nested
    ``tool-pipeline``, the same again. Asked once per run, when the agent starts.

    Raises:
        SecurityError: a level from an untrusted folder set one of them (naming the tool, file,
            line and key path, ``tool-pipeline.model``).
    """
    if not isinstance(pipeline, Mapping):
        return
    if pipeline.get("model") is not None:
        _authorized(pipeline["model"], ctx, manager, (*key, "model"))
    if isinstance(pipeline.get("model-pipeline"), Mapping):
        authorize_pipeline(dict(pipeline["model-pipeline"]), ctx, manager, key=(*key, "model-pipeline"))
    check_tool_pipeline(pipeline.get("tool-pipeline"), ctx, manager, key=(*key, "tool-pipeline"))


def _authorized(value: Any, ctx: Context, manager: Manager, key: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        provider = value.partition(":")[0]
        authorize_model({"provider": provider}, ctx, manager, key=key)
        return value
    if isinstance(value, Mapping):
        return authorize_model(dict(value), ctx, manager, key=key)
    return value


def untrusted_roots(tool: Tool, paths: Sequence[SearchPath]) -> tuple[Path, ...]:
    """The roots of the search paths (and of ``tool``) that the program does not trust."""
    roots = dict.fromkeys(sp.root for sp in paths if not sp.trusted)
    if not tool.trusted and tool.root is not None:
        roots[tool.root] = None
    return tuple(roots)


def route_setter(
    levels: Sequence[Level],
    tool: Tool,
    paths: Sequence[SearchPath],
    roots: Sequence[Path],
    *,
    key: Sequence[str] = ("model",),
) -> tuple[Level, str] | None:
    """The untrusted level that set a route field of the model at ``key`` last, with the message saying so, or None.

    Follows the cascade's rules (R-CAS-5, R-CAS-6) down the key path
    (``("model",)``, ``("model-pipeline", "compact", "summarize")``): a
    mapping merged onto a mapping sets the fields it holds; anything else (a
    ``provider:name`` string, a list, a ``replace`` policy, the first value)
    sets them all, absent ones included; ``$remove`` clears them. A list of
    specs is set whole by the level that set the list.
    """
    head, rest = key[0], tuple(key[1:])
    trusted_siblings = {sp.root.parent / "authorities" for sp in paths if sp.trusted}
    owners: dict[str, Level] = {}
    policy = "default"
    merged: Any = MISSING
    for level in levels:
        policy = (level.annotations.get("$merge") or {}).get(head, policy)
        removed = level.annotations.get("$remove")
        if removed == head or isinstance(removed, list) and head in removed:
            owners, merged = {}, MISSING
        if head not in level.data:
            continue
        value = level.data[head]
        if policy in ("default", "deep"):
            owners.update((field, level) for field in _fields_set(merged, value, rest))
            merged = merge_default(merged, value)
        else:
            owners = dict.fromkeys(ROUTE, level)
            merged = value
    for field in ROUTE:
        owner = owners.get(field)
        if owner is not None and untrusted_level(owner, tool, roots, trusted_siblings):
            return owner, _route_message(owner, _at(owner.data[head], rest), ".".join(key))
    return None


def _fields_set(old: Any, new: Any, rest: tuple[str, ...]) -> tuple[str, ...]:
    """The route fields of the spec at ``rest`` that merging ``new`` onto ``old`` sets (merge_default's rule)."""
    for step in rest:
        if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
            return ROUTE  # the level's value replaces everything beneath, the spec included
        if step not in new:
            return ()
        old, new = old.get(step, MISSING), new[step]
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return tuple(field for field in ROUTE if field in new)
    return ROUTE


def _at(value: Any, rest: tuple[str, ...]) -> Any:
    """The value at the key path ``rest`` inside ``value``, or None."""
    for step in rest:
        value = value.get(step) if isinstance(value, Mapping) else None
    return value


def route_line(level: Level, key: Sequence[str] = ("model",)) -> int | None:
    """The line of the level's route field (``model.base-url``, as adapters record it), else of the nearest key."""
    dotted = ".".join(key)
    for field in ROUTE:
        line = level.lines.get(f"{dotted}.{field}")
        if line is not None:
            return line
    for depth in range(len(key), 0, -1):
        line = level.lines.get(".".join(key[:depth]))
        if line is not None:
            return line
    return None


def _route_message(level: Level, value: Any, key: str = "model") -> str:
    who = "this tool" if level.kind == "tool" else f"{level.kind} {level.name!r}"
    specs = value if isinstance(value, list) else [value]
    chosen = [f for f in ("base-url", "api-key-env") if any(isinstance(v, Mapping) and f in v for v in specs)]
    if chosen:
        what = f"{who} sets {key} {' and '.join(chosen)}"
        why = "such a file cannot choose where a key is sent"
    else:
        providers = [v.partition(":")[0] if isinstance(v, str) else (v or {}).get("provider") for v in specs]
        keyed = [p for p in providers if p not in KEYLESS] or providers
        what = f"{who} chooses the model provider {keyed[0]!r}" + (f" in {key}" if key != "model" else "")
        why = "such a file gets no default key either"
    return (
        f"{what}, but it is a file from a folder the program does not trust: {why}. Set the model in trusted "
        "configuration (an authority or tool in a trusted folder, or the program's overrides), mark the folder "
        "trusted (Manager(trusted_paths=[...])), or use provider scripted"
    )
