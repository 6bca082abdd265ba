"""What a template reads and no render can do without: the analysis ``check`` runs on every template."""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import Any, NamedTuple

from jinja2 import nodes

from .sandbox import ENVIRONMENT, SCOPED

GUARDS = frozenset({"defined", "undefined"})  # tests that make a missing value harmless
DEFAULTS = frozenset({"default", "d"})  # filters that do


class Read(NamedTuple):
    """A variable a template reads without a guard: ``name`` (``args``), ``key`` (``title`` in ``args.title``,
    None for the name alone), and the line (of the template) it is first read on.
    """

    name: str
    key: str | None
    line: int


@lru_cache(maxsize=2048)
def reads(source: str) -> tuple[Read, ...]:
    """The variables ``source`` reads and no render can do without, in order of first appearance.

    Top-level names it never assigns (jinja2's ``meta.find_undeclared_variables``)
    that are no global (``range`` ...), and the constant keys it reads of ``args``
    and ``meta`` (``args.title``, ``meta['tone']``; dict methods such as
    ``args.get`` are not keys). A read guarded anywhere in the template
    (``is defined``, ``is undefined``, ``| default``) is left out.

    Raises:
        jinja2.TemplateSyntaxError: ``source`` does not parse.
    """
    from jinja2 import meta

    tree = ENVIRONMENT.parse(source)
    free = meta.find_undeclared_variables(tree) - set(ENVIRONMENT.globals)
    guarded = {
        _read_of(node.node, free)
        for node in tree.find_all((nodes.Test, nodes.Filter))
        if node.node is not None and node.name in (GUARDS if isinstance(node, nodes.Test) else DEFAULTS)
    }
    found: dict[tuple[str, str | None], int] = {}
    for node in tree.find_all((nodes.Name, nodes.Getattr, nodes.Getitem)):
        read = _read_of(node, free)
        if read is not None and read not in guarded and read not in found:
            found[read] = node.lineno
    return tuple(Read(name, key, line) for (name, key), line in found.items())


def _read_of(node: nodes.Node, free: Collection[str]) -> tuple[str, str | None] | None:
    """``(name, key)`` when ``node`` reads a free variable (``args``) or a constant key of ``args``/``meta``."""
    if isinstance(node, nodes.Name):
        return (node.name, None) if node.ctx == "load" and node.name in free else None
    if isinstance(node, nodes.Getattr):
        key: Any = node.attr
    elif isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Const):
        key = node.arg.value
    else:
        return None
    owner = node.node
    if not isinstance(owner, nodes.Name) or owner.name not in SCOPED or owner.name not in free:
        return None
    if not isinstance(key, str) or (isinstance(node, nodes.Getattr) and hasattr(dict, key)):
        return None
    return owner.name, key
