"""YAML documents other people wrote, parsed within limits.

Tool and authority frontmatter (and any other YAML a tool names) comes from
people the program does not control. ``parse_yaml`` composes the document
from libyaml's event stream with an explicit stack (no C recursion to crash
on ``[[[[...``), measuring every node with aliases expanded as it goes: it
refuses a document past ``Limits.yaml_nodes`` values, ``Limits.yaml_bytes``
bytes of text or ``Limits.yaml_depth`` levels, and any alias inside the node
it repeats, before anything is constructed. So a "billion laughs" bomb is
refused in microseconds and kilobytes. Aliases come back as copies: the
value is always a tree.
"""

from __future__ import annotations

import operator
import re
from pathlib import Path
from typing import Any

import yaml

from .errors import ToolDefinitionError
from .frozen import FrozenDict, FrozenList
from .limits import DEFAULT_LIMITS, Limits
from .mistakes import explain

try:
    from yaml import CSafeLoader as SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader  # type: ignore[assignment]


class _Loader(SafeLoader):  # type: ignore[misc,valid-type]
    """The safe loader, remembering the node it constructs so a Python error can name its line.

    A plain scalar's tag depends on its text alone (the safe resolver has no
    path resolvers), so the tags of short ones are remembered (``_TAGS``):
    libyaml asks for one per scalar, and the resolver's regular expressions
    were a fifth of reading a frontmatter.
    """

    node: yaml.Node | None = None

    # libyaml's composer calls these around every node it makes (two Python frames a node, ~8% of composing a
    # frontmatter); they follow path resolvers, which the safe loader has none of, and so do nothing. C callables
    # that do nothing with the same arguments (the parent and index; none) take their place.
    descend_resolver = staticmethod(operator.is_)
    ascend_resolver = staticmethod(tuple)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        self.node = node
        return super().construct_object(node, deep)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # Without path resolvers the safe resolver gives a mapping, a sequence and a quoted (or ``!``) scalar
        # their default tag whatever they hold: answered here, not by a second Python frame (a frontmatter's eight
        # collections and quoted scalars were a tenth of composing it).
        if kind is _SCALAR:
            if not implicit[0]:
                return _STR
            if type(value) is str:
                tag = _TAGS.get(value)
                if tag is None:
                    tag = super().resolve(kind, value, implicit)
                    if len(value) <= _TAGGED_LENGTH:
                        if len(_TAGS) >= _TAGGED:
                            _TAGS.clear()  # only a shortcut: a tag is worked out again
                        _TAGS[value] = tag
                return tag
        elif kind is _MAPPING:
            return _MAP
        elif kind is _SEQUENCE:
            return _SEQ
        return super().resolve(kind, value, implicit)


_SCALAR = yaml.ScalarNode
_MAPPING = yaml.MappingNode
_SEQUENCE = yaml.SequenceNode
_TAGS: dict[str, str] = {}  # a plain scalar's text -> the tag the safe resolver gives it
_TAGGED = 8_192  # texts remembered at most ...
_TAGGED_LENGTH = 64  # ... each at most this long


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
# Key tags the safe constructor rewrites before they become dict keys: '<<' merges, '=' becomes a string.
_KEY_TAGS = frozenset({_STR, "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"})


def parse_yaml(
    text: str,
    path: Path,
    first_line: int = 1,
    limits: Limits = DEFAULT_LIMITS,
    what: str = "frontmatter",
    *,
    frozen: bool = False,
) -> tuple[Any, yaml.Node | None]:
    """Safely parse one YAML document someone else wrote: its value and its root node (None when empty).

    The document is composed and measured (``_Composer``) before anything is
    constructed, so ``limits.yaml_nodes`` and ``limits.yaml_bytes`` bound the
    work an alias bomb can cause, and a recursive alias is refused. Aliases
    come back as copies: the value is a tree. ``what`` names the document in
    messages (``frontmatter``, ``model script``). ``frozen``: the caller freezes
    the value anyway (a Tool's metadata), so its mappings and lists may come
    back read-only already (``orchestrator.frozen``), built so once.

    Raises:
        ToolDefinitionError: invalid YAML, a value Python cannot hold (``2001-13-45``), a document
            over a limit, too deep or with a recursive alias, or a mapping key that is not a string.
    """
    if _plain(text, limits):
        fast = _parse_plain(text, frozen)
        if fast is not None:
            return fast
    loader = _Loader(text)
    composer = _Composer(loader, path, first_line, limits, what)
    try:
        node = composer.document()
        data = loader.construct_document(node) if node is not None else None
    except yaml.reader.ReaderError as exc:  # a control character: no mark, a position
        line = first_line + text.count("\n", 0, exc.position)
        raise ToolDefinitionError(f"invalid YAML in {what}: {exc}", path=path, line=line) from exc
    except yaml.YAMLError as exc:
        found = explain(exc, text, first_line)
        raise ToolDefinitionError(f"invalid YAML in {what}: {found.message}", path=path, line=found.line) from exc
    except (ValueError, OverflowError) as exc:  # scalars YAML resolves but Python refuses: dates, 5000-digit ints
        line = first_line + (loader.node.start_mark.line if loader.node is not None else 0)
        raise ToolDefinitionError(
            f"invalid value in {what}: {exc}; quote it to keep it a string", path=path, line=line
        ) from exc
    finally:
        loader.dispose()
    return (_unshare(data) if composer.aliased else data), node


# Plain slotted classes, not dataclasses: three @dataclass(slots=True) cost ~2 ms of every first file read.
class _Measure:
    """What a node costs with every alias under it expanded: nodes, bytes of scalar text, height."""

    __slots__ = ("nodes", "size", "height")

    def __init__(self, nodes: int, size: int, height: int) -> None:
        self.nodes = nodes
        self.size = size
        self.height = height


class _Anchor:
    """An anchored node; ``measure`` is None while it is still open (an alias to it then is a cycle)."""

    __slots__ = ("node", "line", "measure")

    def __init__(self, node: yaml.Node, line: int, measure: _Measure | None) -> None:
        self.node = node
        self.line = line
        self.measure = measure


class _Open:
    """A collection being composed: the totals when it opened, its tallest child, a key awaiting its value."""

    __slots__ = ("node", "anchor", "nodes", "size", "height", "key")

    def __init__(self, node: yaml.CollectionNode, anchor: str | None, nodes: int, size: int) -> None:
        self.node = node
        self.anchor = anchor
        self.nodes = nodes
        self.size = size
        self.height = 0
        self.key: yaml.Node | None = None


class _Composer:
    """Composes one YAML document into nodes, measuring it with aliases expanded, event by event.

    PyYAML's composer (``get_single_node``) measures nothing, and libyaml's
    recurses in C: a few thousand nested ``[`` overflow the stack and kill the
    process. This one keeps an explicit stack and checks every bound at the
    event that crosses it, so the composed graph never outgrows the limits
    and nothing is constructed from a refused document. An alias costs its
    anchor's measure, memoised when the anchor's node closed, so a bomb is
    refused after a handful of events; an alias to a node still open is a
    cycle. Mapping keys must be strings, checked as they arrive.
    """

    def __init__(self, loader: Any, path: Path, first_line: int, limits: Limits, what: str = "frontmatter") -> None:
        self.loader = loader
        self.what = what
        self.path = path
        self.first_line = first_line
        self.limits = limits
        self.nodes = 0
        self.size = 0
        self.aliased = False
        self.anchors: dict[str, _Anchor] = {}
        self.stack: list[_Open] = []

    def document(self) -> yaml.Node | None:
        """The root node of the only document, or None for an empty stream.

        Raises:
            ToolDefinitionError: a bound is crossed, an alias is undefined or recursive, an
                anchor is defined twice, a key is not a string, or there is a second document.
            yaml.YAMLError: the text is not YAML.
        """
        loader = self.loader
        loader.get_event()  # stream start
        if loader.check_event(yaml.StreamEndEvent):
            return None
        loader.get_event()  # document start
        root = None
        while root is None:
            root = self._step(loader.get_event())
        loader.get_event()  # document end
        if not loader.check_event(yaml.StreamEndEvent):
            raise self._error(
                f"{self.what} holds a second YAML document; remove the '...' or '---'", loader.get_event()
            )
        return root

    def _step(self, event: yaml.Event) -> yaml.Node | None:
        """Take one event; return the root once it is complete."""
        if isinstance(event, yaml.CollectionStartEvent):
            self._open(event)
            return None
        if isinstance(event, yaml.AliasEvent):
            node, measure = self._alias(event)
        elif isinstance(event, yaml.ScalarEvent):
            node, measure = self._scalar(event)
        else:
            node, measure = self._close(event)
        if len(self.stack) + measure.height > self.limits.yaml_depth:
            raise self._error(f"{self.what} nests more than {self.limits.yaml_depth} levels deep; flatten it", event)
        if not self.stack:
            return node
        parent = self.stack[-1]
        parent.height = max(parent.height, measure.height)
        if isinstance(parent.node, yaml.SequenceNode):
            parent.node.value.append(node)
        elif parent.key is None:
            self._check_key(node, event)
            parent.key = node
        else:
            parent.node.value.append((parent.key, node))
            parent.key = None
        return None

    def _scalar(self, event: yaml.ScalarEvent) -> tuple[yaml.Node, _Measure]:
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        text = event.value
        size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        measure = _Measure(1, size, 1)
        self._define(event, node, measure)
        self._spend(measure, event)
        return node, measure

    def _open(self, event: yaml.CollectionStartEvent) -> None:
        kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
        tag = event.tag
        if tag is None or tag == "!":
            tag = self.loader.resolve(kind, None, event.implicit)
        node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
        self._define(event, node, None)
        self.stack.append(_Open(node, event.anchor, self.nodes, self.size))
        if len(self.stack) > self.limits.yaml_depth:
            raise self._error(f"{self.what} nests more than {self.limits.yaml_depth} levels deep; flatten it", event)
        self._spend(_Measure(1, 0, 1), event)

    def _close(self, event: yaml.Event) -> tuple[yaml.Node, _Measure]:
        frame = self.stack.pop()
        frame.node.end_mark = event.end_mark
        measure = _Measure(self.nodes - frame.nodes, self.size - frame.size, frame.height + 1)
        if frame.anchor is not None:
            self.anchors[frame.anchor].measure = measure
        return frame.node, measure

    def _alias(self, event: yaml.AliasEvent) -> tuple[yaml.Node, _Measure]:
        name = event.anchor
        anchor = self.anchors.get(name)
        if anchor is None:
            raise self._error(f"alias *{name} names no anchor defined before it; define &{name} first", event)
        if anchor.measure is None:
            raise self._error(
                f"alias *{name} is inside the node it repeats (anchor &{name} at line {anchor.line}): "
                "recursive aliases are refused, metadata must be a tree; write the data out",
                event,
            )
        self.aliased = True
        self._spend(anchor.measure, event, anchor)
        return anchor.node, anchor.measure

    def _define(self, event: yaml.NodeEvent, node: yaml.Node, measure: _Measure | None) -> None:
        name = event.anchor
        if name is None:
            return
        if name in self.anchors:
            raise self._error(
                f"anchor &{name} is defined twice (first at line {self.anchors[name].line}); rename one", event
            )
        self.anchors[name] = _Anchor(node, self._line(event), measure)

    def _spend(self, measure: _Measure, event: yaml.Event, anchor: _Anchor | None = None) -> None:
        """Add a node's expanded cost to the document's; refuse the document past a limit."""
        self.nodes += measure.nodes
        self.size += measure.size
        for total, limit, what, field in (
            (self.nodes, self.limits.yaml_nodes, "YAML nodes", "yaml_nodes"),
            (self.size, self.limits.yaml_bytes, "bytes of text", "yaml_bytes"),
        ):
            if total <= limit:
                continue
            if anchor is not None:
                name = getattr(event, "anchor", "")
                raise self._error(
                    f"{self.what} expands to more than {limit} {what} through aliases "
                    f"(alias *{name} repeats anchor &{name} at line {anchor.line}); "
                    f"write the data out or raise Limits.{field}",
                    event,
                )
            grows = " with its aliases expanded" if self.aliased else ""
            raise self._error(
                f"{self.what} has more than {limit} {what}{grows}; shorten it or raise Limits.{field}", event
            )

    def _check_key(self, node: yaml.Node, event: yaml.Event) -> None:
        """Refuse mapping keys that YAML reads as something other than a string (``on: push``)."""
        if isinstance(node, yaml.ScalarNode):
            if node.tag in _KEY_TAGS:
                return
            shown = node.value if len(node.value) <= 40 else node.value[:37] + "..."
            raise self._error(
                f"key {shown!r} is read by YAML as {node.tag.rsplit(':', 1)[-1]}, not a string; quote it: '{shown}'",
                event,
            )
        kind = "sequence" if isinstance(node, yaml.SequenceNode) else "mapping"
        raise self._error(f"a mapping key must be a string, not a YAML {kind}; quote it", event)

    def _line(self, event: yaml.Event) -> int:
        return self.first_line + event.start_mark.line

    def _error(self, message: str, event: yaml.Event) -> ToolDefinitionError:
        return ToolDefinitionError(message, path=self.path, line=self._line(event))


_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)  # each line's indentation


def _plain(text: str, limits: Limits) -> bool:
    """True when ``text`` cannot cross a limit, so libyaml may compose it in C (``_parse_plain``).

    Without anchors and aliases nothing expands: every node costs at least
    one character of text and a scalar's text is no longer than its source,
    so bounding the text bounds the nodes and bytes. Nesting costs a flow
    bracket, or a column of indentation or an indicator (``-``, ``?``,
    ``:``) on its line for at most two levels, so their counts bound the
    depth and with it libyaml's C recursion. Any doubt sends the document through ``_Composer``.
    """
    size = len(text)
    if 2 * size + 2 > limits.yaml_nodes or 4 * size > limits.yaml_bytes or "&" in text or "*" in text or "!" in text:
        return False  # anchors, aliases or tags: without them nothing expands or is constructed oddly
    depth = text.count("[") + text.count("{") + 2
    # First a looser bound at C speed (the deepest indentation and every indicator in the text, as if on one
    # line): most frontmatters pass it; the others are measured line by line.
    indicators = text.count("-") + text.count("?") + text.count(":")
    # The deepest indentation may be at most ``allowed`` columns: without tabs, no line may start with one space
    # more. Two substring searches, where finding every line's indentation took three quarters of this test.
    allowed = (limits.yaml_depth - depth) // 2 - indicators
    if allowed >= 0 and "\t" not in text:
        deeper = " " * (allowed + 1)
        if not text.startswith(deeper) and "\n" + deeper not in text:
            return True
    elif depth + 2 * (max(map(len, _INDENT.findall(text)), default=0) + indicators) <= limits.yaml_depth:
        return True
    deepest = 0
    for line in text.split("\n"):
        rest = line.lstrip(" \t")
        # Two levels per column at most (a mapping and the sequence it holds at its own indentation).
        nested = 2 * (len(line) - len(rest) + rest.count("-") + rest.count("?") + rest.count(":"))
        if nested > deepest:
            deepest = nested
    return depth + deepest <= limits.yaml_depth


def _parse_plain(text: str, frozen: bool = False) -> tuple[Any, yaml.Node | None] | None:
    """A document ``_plain`` passed, composed and constructed by libyaml; None when ``_Composer`` must decide.

    Returns None for anything the measured path treats specially (a YAML
    error, a value Python refuses, a second document, a key that is not a
    string), so every error is still reported by ``_Composer`` in its words.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        try:
            return _build(node, loader, frozen), node
        except _Other:
            data = loader.construct_document(node)
    except (yaml.YAMLError, ValueError, OverflowError, TypeError, RecursionError):
        return None
    finally:
        loader.dispose()
    if not _string_keys(data):
        return None
    return data, node


_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"


class _Other(Exception):
    """A node ``_build`` leaves to the safe constructor: a date, a merge key, a set, a key that is not a string."""


def _build(node: yaml.Node, loader: _Loader, frozen: bool = False) -> Any:
    """The value of a composed ``_plain`` document made of maps, sequences and plain scalars, as the safe constructor makes it.

    The constructor's generic machinery (a generator per collection, a memo
    per node) was most of the cost of reading a frontmatter; this builds the
    same dicts, lists and scalars directly, with the constructor's own
    scalar rules (``0x1F``, ``1_000``, ``.inf``, ``yes``). Depth is bounded
    by ``_plain``. ``frozen``: mappings and lists are ``FrozenDict`` and ``FrozenList``.

    Raises:
        _Other: a tag other than str, int, float, bool, null, map or seq, or a mapping key that is not a string.
    """
    tag = node.tag
    if tag == _STR:
        return node.value
    if tag == _MAP:
        out = {}
        for key, value in node.value:
            if key.tag != _STR:
                raise _Other
            # A string value inline: most of a frontmatter's scalars are, and a call each was a third of this.
            out[key.value] = value.value if value.tag == _STR else _build(value, loader, frozen)
        return FrozenDict(out) if frozen else out
    if tag == _SEQ:
        items = [item.value if item.tag == _STR else _build(item, loader, frozen) for item in node.value]
        return FrozenList(items) if frozen else items
    if tag == _INT:
        return loader.construct_yaml_int(node)
    if tag == _FLOAT:
        return loader.construct_yaml_float(node)
    if tag == _BOOL:
        return loader.construct_yaml_bool(node)
    if tag == _NULL:
        return None
    raise _Other


def _string_keys(value: Any) -> bool:
    """True when every mapping key in ``value`` is a string (``_Composer._check_key`` refuses the others)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if type(key) is not str:
                    return False
                if isinstance(inner, (dict, list, tuple, set)):
                    stack.append(inner)
        elif isinstance(item, (list, tuple, set)):
            stack.extend(inner for inner in item if isinstance(inner, (dict, list, tuple, set)))
    return True


def _unshare(value: Any) -> Any:
    """``value`` with every list, dict and tuple copied, so an alias no longer shares its anchor's object."""
    if isinstance(value, dict):
        return {key: _unshare(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_unshare(item) for item in value]
    if isinstance(value, tuple):  # !!pairs and !!omap items
        return tuple(_unshare(item) for item in value)
    return value
