"""Picoschema, Dotprompt's schema shorthand, read as JSON Schema for ``params`` and ``returns``.

The shorthand, as Dotprompt defines it:

- a type is ``string``, ``number``, ``integer``, ``boolean``, ``null`` or
  ``any`` (no ``type``: anything), with an optional description after a
  comma: ``number, the count``;
- a mapping is an object: each key a property, required unless it ends in
  ``?`` (an optional property also accepts null), ``additionalProperties:
  false`` unless a ``(*)`` key gives the schema of every other property;
- a key may say its kind in parentheses, with a description:
  ``tags(array, the tags): string`` (a list of strings),
  ``address(object): {street: string}``, ``color?(enum): [RED, BLUE]``.

**Telling the two apart.** JSON Schema stays accepted and is never read as
shorthand: a string (never a JSON Schema) is shorthand; ``true``/``false``
and an empty mapping are JSON Schema; a mapping is JSON Schema when one of
its entries can only be JSON Schema: a ``$`` key (``$ref``, ``$schema``), a
value that is no string, mapping or list (``minimum: 0``), ``type`` with a
list or with a JSON type name or any text that is no shorthand type
(``type: strng`` is a misspelt JSON Schema, ``type: string, the kind`` a
property), a list under a list keyword (``enum``, ``required``, ``anyOf``),
``properties`` mapping names to schemas, a schema under a schema keyword
(``items: {type: string}``), or an annotation (``title``, ``description``)
whose text is prose rather than one lowercase word before a comma
(``title: string, the title`` and a misspelt ``title: strin`` are
shorthand). Everything else is shorthand. So a shorthand property
named like a keyword reads as one only when its value has that keyword's
JSON Schema form (``required: boolean`` is a property); write
``items(object): {...}`` to make the shorthand plain. A mapping read as JSON
Schema that also holds shorthand keys (``name?``) is an error. Unlike
Dotprompt, a JSON Schema is returned as it is (``properties`` without
``type`` gets no ``type: object``), and named schemas are not resolved.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigurationError

if TYPE_CHECKING:
    from .tool import Tool

SCALARS = ("string", "number", "integer", "boolean", "null", "any")
KINDS = ("array", "object", "enum")
WILDCARD = "(*)"
JSON_TYPES = frozenset(("string", "number", "integer", "boolean", "null", "object", "array"))

# JSON Schema keywords (drafts 4 to 2020-12) by the form of their value.
_LISTS = frozenset(("enum", "required", "anyOf", "oneOf", "allOf", "prefixItems", "examples"))
_SCHEMAS = frozenset(
    (
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedProperties",
        "unevaluatedItems",
    )
)
_SCHEMA_MAPS = frozenset(("properties", "patternProperties", "definitions", "dependentSchemas", "dependencies"))
_ANNOTATIONS = frozenset(
    ("title", "description", "format", "pattern", "default", "const", "contentMediaType", "contentEncoding")
)


class Unreadable(Exception):
    """A shorthand that cannot be read: ``trail`` is the keys leading to the bad part, as written."""

    def __init__(self, message: str, trail: tuple[str, ...]) -> None:
        super().__init__(message)
        self.message = message
        self.trail = trail


# -- detection -------------------------------------------------------------------


def is_shorthand(value: Any) -> bool:
    """Whether ``value`` is Picoschema rather than JSON Schema (None is neither)."""
    if isinstance(value, str):
        return True
    return isinstance(value, Mapping) and not is_json_schema(value)


def is_json_schema(value: Mapping[str, Any]) -> bool:
    """Whether the mapping ``value`` can only be JSON Schema (see the module's rules)."""
    if not value:
        return True
    return any(_only_json(key, item) for key, item in value.items())


def _only_json(key: Any, item: Any) -> bool:
    if not isinstance(key, str) or key.startswith("$"):
        return True
    if not isinstance(item, (str, Mapping, list)):
        return True
    if key == "type":
        return _json_types(item)
    if key in _LISTS:
        return isinstance(item, list)
    if key in _SCHEMAS:
        return isinstance(item, Mapping) and is_json_schema(item)
    if key in _SCHEMA_MAPS:
        return isinstance(item, Mapping) and all(isinstance(v, (Mapping, bool)) for v in item.values())
    if key == "dependentRequired":
        return isinstance(item, Mapping)
    if key in _ANNOTATIONS:
        return not isinstance(item, str) or not _looks_typed(item)
    return False


def _json_types(item: Any) -> bool:
    """``type: string`` and ``type: [string, null]`` are JSON Schema; so is a misspelt ``type: strng``."""
    if isinstance(item, str):
        return item in JSON_TYPES or not _is_scalar(item)
    return isinstance(item, list) and bool(item) and all(isinstance(t, str) and t in JSON_TYPES for t in item)


def _is_scalar(text: str) -> bool:
    return _split(text)[0] in SCALARS


def _looks_typed(text: str) -> bool:
    """``string, the title`` or a misspelt ``strin``: one lowercase word before the comma, as a shorthand type is.

    A JSON Schema ``title`` or ``description`` is prose (``'provider:name' or a mapping``).
    """
    word = _split(text)[0]
    return word.isascii() and word.isalpha() and word.islower()


# -- expansion -------------------------------------------------------------------


def expand(value: Any) -> Any:
    """The JSON Schema ``value`` means: a shorthand expanded, anything else (JSON Schema, None) as it is.

    Raises:
        Unreadable: the shorthand is malformed; ``trail`` leads to the bad part.
    """
    if isinstance(value, str):
        return _scalar(value, ())
    if isinstance(value, Mapping) and not is_json_schema(value):
        return _object(value, ())
    if isinstance(value, Mapping):
        mixed = [k for k in value if isinstance(k, str) and (k.endswith("?") or "(" in k)]
        if mixed:
            raise Unreadable(
                f"mixes JSON Schema keywords with shorthand properties ({', '.join(map(repr, mixed))}): "
                "write it all as JSON Schema or all as Picoschema",
                (mixed[0],),
            )
    return value


def _split(text: str) -> tuple[str, str | None]:
    """``'number, the count'`` -> ``('number', 'the count')``."""
    kind, comma, rest = text.partition(",")
    return kind.strip(), rest.lstrip() if comma else None


def _scalar(text: str, trail: tuple[str, ...]) -> dict[str, Any]:
    kind, description = _split(text)
    if kind not in SCALARS:
        raise Unreadable(f"unknown type {kind!r} (a type is one of {', '.join(SCALARS)}){_meant(kind, SCALARS)}", trail)
    schema: dict[str, Any] = {} if kind == "any" else {"type": kind}
    if description is not None:
        schema["description"] = description
    return schema


def _value(value: Any, trail: tuple[str, ...]) -> dict[str, Any]:
    if isinstance(value, str):
        return _scalar(value, trail)
    if isinstance(value, Mapping):
        return _object(value, trail)
    if isinstance(value, list):
        raise Unreadable("a list of values needs (enum) after the name: 'color(enum): [RED, BLUE]'", trail)
    shown = "null" if value is None else repr(value)
    raise Unreadable(f"{shown} is no type: write a type (string, number ...), a mapping or (enum) with a list", trail)


def _object(value: Mapping[Any, Any], trail: tuple[str, ...]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    extra: Any = False
    for key, item in value.items():
        here = (*trail, str(key))
        if not isinstance(key, str):
            raise Unreadable(f"property names are text, not {type(key).__name__}", here)
        if key == WILDCARD:
            extra = _value(item, here)
            continue
        name, optional, kind, description = _key(key, here)
        prop = _property(kind, item, optional, here)
        if description is not None:
            prop["description"] = description
        properties[name] = prop
        if not optional:
            required.append(name)
    if required:
        schema["required"] = required
    schema["additionalProperties"] = extra
    return schema


def _key(key: str, trail: tuple[str, ...]) -> tuple[str, bool, str | None, str | None]:
    """``'tags?(array, the tags)'`` -> ``('tags', True, 'array', 'the tags')``."""
    name, paren, info = key.partition("(")
    if paren and not info.endswith(")"):
        raise Unreadable(
            f"{key!r} opens '(' without closing it: write 'name(array)' or 'name(object, a description)'", trail
        )
    optional = name.endswith("?")
    name = name[:-1] if optional else name
    if not name.strip():
        raise Unreadable(f"{key!r} has no property name", trail)
    if not paren:
        return name, optional, None, None
    kind, description = _split(info[:-1])
    if kind not in KINDS:
        raise Unreadable(
            f"unknown kind ({kind}) (in parentheses write array, object or enum){_meant(kind, KINDS)}", trail
        )
    return name, optional, kind, description


def _property(kind: str | None, item: Any, optional: bool, trail: tuple[str, ...]) -> dict[str, Any]:
    builders: dict[str | None, Callable[[Any, tuple[str, ...]], dict[str, Any]]] = {
        None: _value,
        "array": lambda v, t: {"type": "array", "items": _value(v, t)},
        "object": _value,
        "enum": _enum,
    }
    prop = builders[kind](item, trail)
    if optional:
        _nullable(prop)
    return prop


def _enum(item: Any, trail: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(item, list) or not item:
        raise Unreadable("(enum) takes a list of the values allowed: 'color(enum): [RED, BLUE]'", trail)
    return {"enum": list(item)}


def _nullable(prop: dict[str, Any]) -> None:
    """An optional property also accepts null, as Dotprompt's do."""
    if "enum" in prop:
        if None not in prop["enum"]:
            prop["enum"].append(None)
    elif isinstance(prop.get("type"), str):
        prop["type"] = [prop["type"], "null"]


def _meant(word: str, choices: tuple[str, ...]) -> str:
    import difflib  # only a malformed shorthand needs it

    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


# -- errors that point at the shorthand --------------------------------------------


def located(error: Unreadable, key: str, origin: Tool | None, tool: str | None) -> ConfigurationError:
    """The typed error for ``error`` in metadata ``key``: the tool, its file and the line of the bad part.

    The file and line are given when the shorthand is the tool's own (its
    file says it); one merged from an authority names the tool only.
    """
    name = origin.name if origin is not None else tool
    dotted = ".".join((key, *error.trail))
    path = line = None
    if origin is not None and origin.path is not None and key in origin.metadata:
        path = origin.path
        line = _line_in(origin.path, (key, *error.trail)) or origin.line_of(key)
    return ConfigurationError(
        f"{key} shorthand (Picoschema): {error.message}", tool=name, path=path, line=line, key=dotted
    )


def _line_in(path: Path, trail: tuple[str, ...]) -> int | None:
    """The file line of ``metadata.<trail...>`` in a markdown file's frontmatter, as near as it is known.

    Read only for an error message: the file was already parsed within the limits when it loaded.
    """
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
        if not text.startswith("---"):
            return None
        end = text.find("\n---", 3)
        node = yaml.compose(text[3 : end if end > 0 else len(text)], Loader=yaml.SafeLoader)
    except (OSError, UnicodeError, yaml.YAMLError):
        return None
    best = None
    for step in ("metadata", *trail):
        if not isinstance(node, yaml.MappingNode):
            break
        found = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == step), None)
        if found is None:
            break
        best = found[0].start_mark.line + 1  # the block starts on the file's first line, after '---'
        node = found[1]
    return best
