"""JSON Schema checks for ``params`` and ``returns``, with validators compiled once per schema."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .errors import ConfigurationError, ValidationError

_VALIDATORS: dict[int, tuple[Any, Any]] = {}
_BY_CONTENT: dict[str, Any] = {}
_DEFAULTS: dict[int, tuple[Any, bool]] = {}  # id(schema) -> (schema, whether it declares a default)
_LIMIT = 1024


def validator_for(schema: Any, tool: str | None = None) -> Any:
    """The compiled validator for ``schema``, cached by identity and by content.

    Cached metadata keeps its identity (the fast path); a schema rebuilt on
    every call (a tool whose metadata holds a template) is found by its JSON
    text instead of being checked and compiled again.

    Raises:
        ConfigurationError: the schema itself is invalid.
    """
    hit = _VALIDATORS.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if not isinstance(schema, (Mapping, bool)):
        raise ConfigurationError(f"a JSON schema must be a mapping, not {type(schema).__name__}", tool=tool)
    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):
        text = None  # not JSON (a python tool's schema): by identity only
    validator = _BY_CONTENT.get(text) if text is not None else None
    if validator is None:
        validator = _compile(schema, tool)
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


def check(schema: Any, value: Any, error: type[ValidationError], tool: str | None = None) -> None:
    """Validate ``value``; raise ``error`` listing every failing JSON pointer.

    Raises:
        ValidationError: (the given subclass) one or more failures.
        ConfigurationError: the schema itself is invalid.
    """
    failures = sorted(validator_for(schema, tool).iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
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
    declares no default anywhere it looks (decided once per schema).
    """
    if not isinstance(schema, Mapping) or not declares_defaults(schema):
        return value
    return _fill(schema, value)


def declares_defaults(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` has a ``default`` where ``fill_defaults`` looks (decided once per schema object)."""
    hit = _DEFAULTS.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_DEFAULTS) >= _LIMIT:
            _DEFAULTS.clear()
        hit = _DEFAULTS[id(schema)] = (schema, _declares_default(schema))
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
