"""JSON Schema checks for ``params`` and ``returns``, with validators compiled once per schema.

``params`` and ``returns`` may be written as JSON Schema or as Picoschema
(``orchestrator.picoschema``). ``json_schema`` is the one place a shorthand
becomes JSON Schema, and every reader goes through it: the checks here
(``check``, ``validator_for``: ``validate-args``, ``validate-returns``,
approval), the defaults (``fill_defaults``) and the description ``list``,
MCP's ``inputSchema`` and agents' tool definitions are made from
(``orchestrator.descriptions``, whose ``params`` ``object_schema`` takes).
Expansions are cached with the compiled validators, so a schema costs
nothing more per call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import picoschema
from .errors import ConfigurationError, ValidationError

if TYPE_CHECKING:
    from .tool import Tool

_VALIDATORS: dict[int, tuple[Any, Any]] = {}
_BY_CONTENT: dict[str, Any] = {}
_DEFAULTS: dict[int, tuple[Any, bool]] = {}  # id(schema) -> (schema, whether it declares a default)
_EXPANDED: dict[int, tuple[Any, Any]] = {}  # id(shorthand) -> (shorthand, its JSON Schema)
_LIMIT = 1024


def json_schema(value: Any, key: str = "params", origin: Tool | None = None, tool: str | None = None) -> Any:
    """The JSON Schema ``value`` (a ``params`` or ``returns`` metadata value) means.

    A Picoschema shorthand is expanded (once per schema object); JSON Schema
    and None are returned as they are, the same object. ``origin`` is the
    tool whose metadata holds ``value``: an error then names its file and
    the line of the bad part; ``tool`` names the tool otherwise.

    Raises:
        ConfigurationError: the shorthand is malformed (naming the tool, file, line and ``key.path``).
    """
    if value is None or isinstance(value, bool):
        return value
    hit = _EXPANDED.get(id(value))
    if hit is not None and hit[0] is value:
        return hit[1]
    if not picoschema.is_shorthand(value):
        return value
    try:
        expanded = picoschema.expand(value)
    except picoschema.Unreadable as exc:
        raise picoschema.located(exc, key, origin, tool) from None
    if len(_EXPANDED) >= _LIMIT:
        _EXPANDED.clear()
    _EXPANDED[id(value)] = (value, expanded)
    return expanded


def schema_problems(tool: Tool) -> list[ConfigurationError]:
    """For ``check``: the malformed shorthands in ``tool``'s own ``params`` and ``returns``, each naming its line."""
    found = []
    for key in ("params", "returns"):
        try:
            json_schema(tool.metadata.get(key), key, tool)
        except ConfigurationError as exc:
            found.append(exc)
    return found


def validator_for(schema: Any, tool: str | None = None, key: str = "params", origin: Tool | None = None) -> Any:
    """The compiled validator for ``schema`` (JSON Schema or shorthand), cached by identity and by content.

    Cached metadata keeps its identity (the fast path); a schema rebuilt on
    every call (a tool whose metadata holds a template) is found by its JSON
    text instead of being checked and compiled again. ``key`` and
    ``origin`` place a shorthand's errors (see ``json_schema``).

    Raises:
        ConfigurationError: the schema itself is invalid.
    """
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if not isinstance(schema, (Mapping, bool, str)):
        raise ConfigurationError(
            f"a schema must be a mapping (JSON Schema or Picoschema) or a Picoschema type, not {type(schema).__name__}",
            tool=origin.name if origin is not None else tool,
            key=key,
        )
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        text = None  # not JSON (a python tool's schema): by identity only
    validator = _BY_CONTENT.get(text) if text is not None else None
    if validator is None:
        validator = _compile(json_schema(schema, key, origin, tool), tool)
        if len(_BY_CONTENT) >= _LIMIT:
            _BY_CONTENT.clear()
        if text is not None:
            _BY_CONTENT[text] = validator
    # Found by identity from now on, also when another schema with the same text compiled it.
    if len(_VALIDATORS) >= _LIMIT:
        _VALIDATORS.clear()
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


def _compile(schema: Any, tool: str | None) -> Any:
    """A validator for ``schema``, checked against its metaschema first.

    Raises:
        ConfigurationError: the schema itself is invalid.
    """
    import jsonschema  # imported on the first validation: compiled validators are cached
    from jsonschema.exceptions import SchemaError

    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        raise ConfigurationError(f"invalid JSON schema: {exc.message}", tool=tool) from exc
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def pointer(path: Any) -> str:
    """A JSON pointer (RFC 6901) for a jsonschema error path."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def check(
    schema: Any,
    value: Any,
    error: type[ValidationError],
    tool: str | None = None,
    *,
    key: str = "params",
    origin: Tool | None = None,
) -> None:
    """Validate ``value`` against ``schema`` (JSON Schema or shorthand); raise ``error`` listing every failing JSON pointer.

    ``key`` (``params``, ``returns``) and ``origin`` (the tool whose
    metadata holds the schema) place the errors of a malformed shorthand.

    Raises:
        ValidationError: (the given subclass) one or more failures.
        ConfigurationError: the schema itself is invalid.
    """
    validator = validator_for(schema, tool, key, origin)
    failures = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    if failures:
        said = [(pointer(f.absolute_path), wording(f)) for f in failures]
        raise error(list(dict.fromkeys(said)), tool=tool)  # one line for all of an object's missing properties


TYPE_NAMES = {"object": "an object", "array": "a list", "integer": "an integer", "null": "null"}


def wording(failure: Any) -> str:
    """Our words for the failures people meet most (a wrong type, a missing property, a value not allowed).

    Others keep jsonschema's message. Ours stay the same whatever jsonschema
    release is installed, so what users (and tests) read does not move.
    """
    kind, expected, instance = failure.validator, failure.validator_value, failure.instance
    if kind == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(TYPE_NAMES.get(name, f"a {name}") for name in names)
        return f"{shown(instance)} is not {wanted}"
    if kind == "required" and isinstance(instance, dict):
        missing = [name for name in expected if name not in instance]
        return f"missing required {'property' if len(missing) == 1 else 'properties'} {', '.join(map(repr, missing))}"
    if kind == "enum":
        return f"{shown(instance)} is not one of {', '.join(map(shown, expected))}"
    return str(failure.message)


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as JSON, cut to ``limit`` characters (an argument may be large)."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def fill_defaults(schema: Any, value: Any) -> Any:
    """``value`` with the defaults of ``schema``'s object properties filled in.

    A new object where a default may go; ``value`` itself when ``schema``
    declares no default anywhere it looks (decided once per schema; a
    Picoschema shorthand never declares one).
    """
    if not isinstance(schema, Mapping):
        return value
    return _fill(schema, value) if declares_defaults(schema) else value


def declares_defaults(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has a ``default`` where ``fill_defaults`` looks (decided once per schema object)."""
    hit = _DEFAULTS.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_DEFAULTS) >= _LIMIT:
            _DEFAULTS.clear()
        # Picoschema has no way to say a default: a shorthand is not expanded here (nor its errors raised)
        declares = not picoschema.is_shorthand(schema) and _declares_default(schema)
        hit = _DEFAULTS[id(schema)] = (schema, declares)
    return hit[1]


def _declares_default(schema: Any) -> bool:
    """Whether ``schema`` has a ``default`` where ``fill_defaults`` looks: itself or its properties, deeply."""
    if not isinstance(schema, Mapping):
        return False
    properties = schema.get("properties")
    return "default" in schema or (
        isinstance(properties, Mapping) and any(_declares_default(sub) for sub in properties.values())
    )


def _fill(schema: Any, value: Any) -> Any:
    if not isinstance(schema, Mapping):
        return value
    if value is None and "default" in schema:
        return schema["default"]
    properties = schema.get("properties")
    if not isinstance(value, Mapping) or not isinstance(properties, Mapping):
        return value
    filled = dict(value)
    for name, sub in properties.items():
        if name in filled:
            filled[name] = _fill(sub, filled[name])
        elif isinstance(sub, Mapping) and "default" in sub:
            filled[name] = sub["default"]
    return filled


def object_schema(params: Any) -> tuple[dict[str, Any], bool]:
    """A JSON Schema for an object of arguments, and whether ``params`` had to be wrapped.

    ``params`` is JSON Schema: what ``describe`` gives (``ToolInfo.params``),
    a shorthand already expanded by ``json_schema``.

    Tool-calling APIs (MCP, OpenAI functions) take objects only: a params that
    is not an object schema becomes ``{value: <params>}``, and callers unwrap
    ``arguments["value"]`` on the way in. No params at all is any object.

    Raises:
        ValueError: ``params`` is not usable as a JSON Schema.
    """
    if params is None:
        return {"type": "object"}, False
    schema = json.loads(json.dumps(params, default=str))  # a private, JSON-only copy of cached metadata
    if isinstance(schema, dict) and _is_object_schema(schema):
        properties = schema.get("properties", {})
        required = schema.get("required", [])
        if not isinstance(properties, dict) or not all(isinstance(p, (dict, bool)) for p in properties.values()):
            raise ValueError("params 'properties' must map names to schemas")
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise ValueError("params 'required' must be a list of names")
        return {"type": "object", **schema}, False
    if not isinstance(schema, (dict, bool)):
        raise ValueError(f"params must be a JSON Schema, not {type(params).__name__}")
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}, True


def _is_object_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" or ("type" not in schema and "properties" in schema)
