"""Model specs, the providers that answer them, and what every provider shares (R-AGENT-2).

A ``model`` value is ``"provider:model-name"`` (``openai:gpt-4o-mini``), the
bare word ``scripted``, a model alias (``sonnet``: a name of
``orchestrator.formats.aliases()``, which ``$TOOLCASCADE_MODEL_ALIASES``
extends; ``inherit``, Claude Code's "the caller's model", is not one here),
or a mapping of ``FIELDS``:

- ``provider``, ``name``: who answers (``openai``, ``anthropic``, ``scripted``
  or a plugin, below) and the model's name at that provider.
- ``base-url``, ``api-key-env``: where to send requests and the environment
  variable holding the key. A variable named here that is unset is a
  ``ConfigurationError`` naming it: no placeholder key is ever sent for it.
  Only trusted configuration chooses them (see "Who chooses where a key
  goes" below).
- ``timeout``: seconds one request may take from connecting to the last
  streamed byte (default ``DEFAULT_TIMEOUT``, 120 s; connecting alone is
  bounded by ``CONNECT_TIMEOUT``, 10 s). A request past it fails with a
  retryable ``ModelError`` naming the model, the URL and the value. Raise it
  for long answers from slow local models.
- ``max-tokens``: the most tokens one answer may have (default
  ``DEFAULT_MAX_TOKENS``, 4096). An answer cut off there is a ``ModelError``
  (finish reason ``length``), never returned as if it were complete; so is
  one the server cut shorter (fewer completion tokens than the limit: its
  context window was full), and the error says which of the two it was.
- ``options``: extra request parameters for the provider's API
  (``temperature``, ...). ``stream: false`` asks for one unstreamed answer.
- ``script``, ``file``: the scripted provider's turns (``scripted.py``).

Every model request goes through the built-in ``model-call`` tool, which hands
it to the provider named here. Providers stream: they call ``on_delta`` with
each piece of text (``{"text": ...}``) and each fragment of a tool call's
arguments (``{"call": name, "arguments": fragment, "index": i}``) as it
arrives, then return the assembled response.

A provider that is not built in is found through the Python entry point group
``toolcascade.providers``: the entry point's name is the provider name in a
spec, its object a factory called once with no arguments that returns a
``Provider``. In the plugin's ``pyproject.toml``::

    [project.entry-points."toolcascade.providers"]
    echo = "toolcascade_echo:EchoProvider"

and ``toolcascade_echo.py``::

    class EchoProvider:
        async def complete(self, request, *, run, on_delta=None):
            text = request["messages"][-1]["content"]
            if on_delta is not None:
                on_delta({"text": text})
            return {"content": text, "tool_calls": [], "finish_reason": "stop",
                    "usage": {}, "model": request["model"]["name"]}

Then ``model: echo:any`` answers with the last message. Built-in names win.

Who chooses where a key goes (a spec's route, its grant, ``authorize_model``)
is told in ``orchestrator.agent.routes``; providers honour ``base-url`` and
``api-key-env`` only in a granted spec (``check_route``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError, RefusedAnswerError

# re-exported: providers, plugins and programs import what every provider shares from here too
from .protocol import CONNECT_TIMEOUT as CONNECT_TIMEOUT
from .protocol import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from .protocol import DEFAULT_TIMEOUT as DEFAULT_TIMEOUT
from .protocol import Delta as Delta
from .protocol import Provider as Provider
from .protocol import check_route as check_route
from .protocol import label as label
from .protocol import max_tokens as max_tokens
from .protocol import normal_usage as normal_usage
from .protocol import timeouts as timeouts
from .routes import GRANT

# re-exported: orchestrator.check, tools and programs (grant_model) import them from here
from .routes import KEYLESS as KEYLESS
from .routes import authorize_model as authorize_model
from .routes import grant_model as grant_model
from .routes import route_line as route_line
from .routes import route_setter as route_setter
from .routes import untrusted_roots as untrusted_roots

FIELDS = (
    "provider",
    "name",
    "base-url",
    "api-key-env",
    "timeout",
    "max-tokens",
    "options",
    "script",
    "file",
)
ENTRY_POINTS = "toolcascade.providers"
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


class Deltas:
    """The delta callback the agent loop hands ``model-call`` (as ``ctx.locals["stream"]``).

    ``emit(kind, data)`` sends ``model.delta`` for each piece and
    ``model.discarded`` when the pieces sent so far will not be the answer
    (the attempt failed, or a middleware runs the request again).
    """

    __slots__ = ("emit", "count", "total")

    def __init__(self, emit: Callable[[str, dict[str, Any]], None]) -> None:
        self.emit = emit
        self.count = 0  # deltas of the attempt in flight
        self.total = 0  # deltas of every attempt of this request

    def __call__(self, delta: dict[str, Any]) -> None:
        self.count += 1
        self.total += 1
        self.emit("model.delta", delta)

    def discard(self, why: str) -> None:
        """Tell listeners to drop the pieces of the current attempt (nothing when none were sent)."""
        if self.count:
            self.emit("model.discarded", {"why": why, "deltas": self.count})
            self.count = 0


def parse_model(
    value: Any, *, tool: str | None = None, folder: Path | None = None, aliases: Any = None
) -> dict[str, Any]:
    """Normalize a ``model`` value into a spec mapping with every field present (a new dict on every call).

    ``folder`` resolves a relative script ``file`` (the tool's own folder). A
    bare word that is no provider is looked up among the model aliases:
    ``aliases`` (the tool's ``model-aliases`` metadata) over ``model_aliases()``.

    The ``model`` middleware parses its tool's metadata on every request, so
    a spec is remembered for the very value object (and tool, folder and
    alias table) it came from, and used again only while that value still
    equals a copy taken when it was parsed: a value changed in place is
    parsed again. A bare word looked up among the aliases is never
    remembered (``$TOOLCASCADE_MODEL_ALIASES`` may change).

    Raises:
        ConfigurationError: a malformed value, an unknown field or provider, a bad timeout or max-tokens,
            ``aliases`` not a mapping of names to models.
    """
    key = (id(value), tool, folder, id(aliases))
    hit = _PARSED.get(key)
    if hit is not None and hit[0] is value and hit[2] is aliases and hit[1] == value:
        return dict(hit[3])
    spec = _parse(value, tool, folder, aliases)
    if isinstance(value, Mapping) or (isinstance(value, str) and (":" in value or value in PROVIDERS)):
        try:
            kept = copy.deepcopy(value)
        except Exception:  # a value holding something that cannot be copied is parsed every time
            return spec
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
        _PARSED[key] = (value, kept, aliases, dict(spec))
    return spec


_PARSED: dict[tuple[Any, ...], tuple[Any, Any, Any, dict[str, Any]]] = {}
_PARSED_LIMIT = 1024


def _parse(value: Any, tool: str | None, folder: Path | None, aliases: Any) -> dict[str, Any]:
    """``parse_model`` itself, every time."""
    where: dict[str, Any] = {"tool": tool, "key": "model"}
    bare = isinstance(value, str) and ":" not in value
    table: dict[str, Any] = {}
    if bare and value not in PROVIDERS and _plugin(value) is None:
        table = model_aliases(aliases, tool=tool)
        if value in table:
            value = table[value]  # an alias names a spec, never another alias
    if isinstance(value, str):
        provider, _, name = value.partition(":")
        spec: dict[str, Any] = {"provider": provider, "name": name or None}
    elif isinstance(value, Mapping):
        unknown = set(value) - set(FIELDS) - {GRANT}
        if unknown:
            raise ConfigurationError(_unknown_fields(value, sorted(unknown, key=str)), **where)
        spec = dict(value)
    else:
        raise ConfigurationError(f"model must be 'provider:name' or a mapping, not {value!r}", **where)
    for field in FIELDS:
        spec.setdefault(field, None)
    provider = spec["provider"]
    if provider is None and isinstance(spec["name"], str) and ":" in spec["name"]:
        named, _, rest = spec["name"].partition(":")
        raise ConfigurationError(
            f"a model mapping names its provider apart from the model: provider: {named}, name: {rest} "
            f"(or the whole model in one string: model: {spec['name']})",
            **where,
        )
    if not isinstance(provider, str) or (provider not in PROVIDERS and _plugin(provider) is None):
        raise ConfigurationError(_unknown_provider(provider, table if bare else None), **where)
    if provider != "scripted" and not spec["name"]:
        raise ConfigurationError(f"model {value!r} needs a name: '{provider}:model-name'", **where)
    if spec["options"] is not None and not isinstance(spec["options"], Mapping):
        raise ConfigurationError("model options must be a mapping", **where)
    timeout = spec["timeout"]
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise ConfigurationError(f"model timeout must be a number of seconds above 0, not {timeout!r}", **where)
    tokens = spec["max-tokens"]
    if tokens is not None and (isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1):
        raise ConfigurationError(f"model max-tokens must be a whole number above 0, not {tokens!r}", **where)
    if isinstance(spec["file"], str) and folder is not None:
        spec["file"] = str((folder / spec["file"]).resolve())
    return spec


ALIASES: dict[str, Any] = {
    "gpt-4o": "openai:gpt-4o",
    "gpt-4o-mini": "openai:gpt-4o-mini",
    "local": "ollama:llama3.2",
}
"""Aliases of our own, beside the other formats' (``sonnet``, ``opus``, ``haiku``); every table above overrides them."""
ALIASES_KEY = "model-aliases"


def model_aliases(extra: Any = None, *, tool: str | None = None) -> dict[str, Any]:
    """The model aliases a ``model`` value may name, later ones winning.

    ``ALIASES``, then ``orchestrator.formats.aliases()`` (``sonnet`` ...,
    extended by ``$TOOLCASCADE_MODEL_ALIASES``) but ``inherit``, then
    ``extra``: the ``model-aliases`` metadata (set once for every tool in the
    user level's ``AUTHORITY.md``, or in any authority or tool). ``inherit``
    means "the caller's model" in Claude Code; a toolcascade tool never
    inherits its caller's model, so it names no model here.

    Raises:
        ConfigurationError: ``$TOOLCASCADE_MODEL_ALIASES`` is malformed, or ``extra``
            is not a mapping of names to ``provider:name`` or model mappings.
    """
    from ..formats import aliases  # only a bare word that is no provider needs the table

    table = {**ALIASES, **{name: spec for name, spec in aliases().items() if name != "inherit"}}
    if extra is None:
        return table
    if not isinstance(extra, Mapping) or not all(
        isinstance(name, str) and isinstance(spec, str | Mapping) for name, spec in extra.items()
    ):
        raise ConfigurationError(
            f"{ALIASES_KEY} must map alias names to 'provider:name' or a model mapping, "
            f"not {json.dumps(extra, default=str)[:200]}",
            tool=tool,
            key=ALIASES_KEY,
        )
    return {**table, **extra}


def _unknown_fields(value: Mapping[str, Any], unknown: list[str]) -> str:
    """Why a model mapping's fields are refused: a misspelt field, or a request parameter outside ``options``."""
    import difflib  # only a refused spec needs it

    hints = []
    parameters = {}
    for key in unknown:
        close = difflib.get_close_matches(str(key).replace("_", "-"), FIELDS, n=1)
        if close:
            hints.append(f"{key!r}: did you mean {close[0]!r}?")
        else:
            parameters[key] = value[key]
    if parameters:
        shown = ", ".join(f"{key}: {json.dumps(v, default=str)}" for key, v in parameters.items())
        hints.append(f"request parameters for the provider's API go under options: options: {{{shown}}}")
    return (
        f"unknown model field(s) {', '.join(map(str, unknown))}; {'; '.join(hints)} "
        f"(the model fields are {', '.join(FIELDS)})"
    )


def _unknown_provider(provider: Any, table: Mapping[str, Any] | None) -> str:
    """Why a provider is refused, with the closest provider (or, for a bare word, alias) and how to add an alias.

    ``table``: the aliases a bare word was looked up in; None for ``provider:name``.
    """
    import difflib  # only a refused spec needs it

    from ..formats import ALIASES_ENV

    bare = table is not None
    providers = sorted(PROVIDERS)
    found = table or model_aliases()
    ours = sorted(name for name in found if name in ALIASES and found[name] == ALIASES[name])
    aliases = [*sorted(name for name in found if name not in ours), *ours] if bare else []  # the configured first
    close = difflib.get_close_matches(str(provider), [*providers, *aliases], n=1)
    hint = f"; did you mean {close[0]!r}? Or write" if close else "; write"
    alias = (
        f", or a model alias ({', '.join(aliases)}; define your own in {ALIASES_KEY} metadata (the user level's "
        f"AUTHORITY.md sets it for every tool: {ALIASES_KEY}: {{fast: openai:gpt-4o-mini}}) or in ${ALIASES_ENV})"
    )
    return (
        f"unknown model provider {provider!r}{' (nor a model alias)' if bare else ''}{hint} "
        f"'provider:name' with a provider of {', '.join(providers)} or a {ENTRY_POINTS!r} entry point"
        f"{alias if bare else ''}"
    )


def provider_for(spec: Mapping[str, Any]) -> Provider:
    """The provider instance for a parsed spec (created once per process).

    Raises:
        ConfigurationError: no built-in provider or entry point has that name.
    """
    name = spec["provider"]
    made = _INSTANCES.get(name)
    if made is None:
        factory = PROVIDERS.get(name) or _plugin(name)
        if factory is None:
            raise ConfigurationError(f"unknown model provider {name!r}", key="model")
        made = _INSTANCES[name] = factory()
    return made


def _plugin(name: str) -> Callable[[], Provider] | None:
    """The factory a ``toolcascade.providers`` entry point named ``name`` gives, loaded once.

    Raises:
        ConfigurationError: the entry point cannot be imported.
    """
    found = _PLUGINS.get(name)
    if found is not None:
        return found
    for point in entry_points(group=ENTRY_POINTS):
        if point.name == name:
            try:
                factory = point.load()
            except Exception as exc:  # a broken plugin is a setup problem to report, not a crash
                raise ConfigurationError(
                    f"model provider {name!r} (entry point {point.value!r}) cannot be loaded: "
                    f"{type(exc).__name__}: {exc}",
                    key="model",
                ) from exc
            _PLUGINS[name] = factory
            return factory  # type: ignore[no-any-return]
    return None


def _scripted() -> Provider:
    from .scripted import ScriptedProvider

    return ScriptedProvider()


def _openai() -> Provider:
    from .openai import OpenAIProvider

    return OpenAIProvider()


def _anthropic() -> Provider:
    from .anthropic import AnthropicProvider

    return AnthropicProvider()


def _ollama() -> Provider:
    from .openai import OLLAMA_URL, OpenAIProvider

    return OpenAIProvider("OLLAMA", OLLAMA_URL, local=True)


def _gemini() -> Provider:
    from .openai import GEMINI_URL, OpenAIProvider

    return OpenAIProvider("GEMINI", GEMINI_URL)


PROVIDERS: dict[str, Any] = {
    "scripted": _scripted,
    "openai": _openai,
    "anthropic": _anthropic,
    "ollama": _ollama,
    "gemini": _gemini,
}
"""Built-in provider factories by name; others come from ``toolcascade.providers`` entry points."""

_INSTANCES: dict[str, Provider] = {}
_PLUGINS: dict[str, Callable[[], Provider]] = {}


# -- what the agent loop and model-call share ----------------------------------


def add_usage(total: dict[str, Any], usage: Any) -> None:
    """Add one response's usage to a run's totals, counting the call."""
    if isinstance(usage, Mapping):
        for key in USAGE_KEYS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    total["calls"] = total.get("calls", 0) + 1


def check_response(request: Mapping[str, Any], response: Mapping[str, Any], tool: str | None = None) -> None:
    """Refuse an answer that is not what was asked: truncated, or without the tool call ``tool-choice`` demands.

    Raises:
        RefusedAnswerError: (a ``ModelError``) the answer was cut off, at max-tokens or by the server
            (not retryable), or the model made no call though ``tool-choice`` is
            ``required`` or a tool's name, or called another tool (retryable: the
            next sample may obey).
    """
    spec = request.get("model") or {}
    if response.get("finish_reason") == "length":
        raise RefusedAnswerError(_cut_off(spec, response.get("usage")), response=response, retryable=False, tool=tool)
    choice = request.get("tool-choice")
    if not request.get("tools") or choice in (None, "auto", "none"):
        return
    names = [c.get("name") for c in response.get("tool_calls") or []]
    if not names:
        raise RefusedAnswerError(
            f"model {label(spec)}: tool-choice is {choice!r} but the model answered without calling a tool",
            response=response,
            retryable=True,
            tool=tool,
        )
    if choice != "required" and any(name != choice for name in names):
        raise RefusedAnswerError(
            f"model {label(spec)}: tool-choice is {choice!r} but the model called {', '.join(map(str, names))}",
            response=response,
            retryable=True,
            tool=tool,
        )


def _cut_off(spec: Mapping[str, Any], usage: Any) -> str:
    """Why an answer stopped at finish reason ``length``: at max-tokens, or earlier, by the server.

    An answer shorter than the token limit was not cut by it: the server
    stopped it, most often because its context window was full (a local
    server's context size is often far below the model's).
    """
    options = spec.get("options") or {}
    named = next((f"options.{key}" for key in ("max_completion_tokens", "max_tokens") if options.get(key)), None)
    limit = options[named.removeprefix("options.")] if named else max_tokens(spec)
    named = named or "max-tokens"
    used = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    if not isinstance(used, int) or isinstance(used, bool):
        return (
            f"model {label(spec)}: the answer was cut off (finish reason length), either at {named} ({limit}) "
            "or by the server's context window; the server reported no usage to tell which: raise max-tokens, "
            "ask for a shorter answer or send a shorter conversation"
        )
    if isinstance(limit, int) and used < limit:
        prompt = usage.get("prompt_tokens") if isinstance(usage, Mapping) else None
        sent = f" with {prompt} prompt tokens" if isinstance(prompt, int) and prompt else ""
        return (
            f"model {label(spec)}: the server stopped the answer after {used} tokens, below {named} ({limit}){sent}: "
            "its context window was most likely full; send a shorter conversation (compact in model-pipeline) or "
            "give the model a larger context (a server setting, such as llama.cpp's --ctx-size or Ollama's num_ctx)"
        )
    return (
        f"model {label(spec)}: the answer was cut off at {named} ({limit}); "
        "raise max-tokens in the model spec or ask for a shorter answer"
    )
