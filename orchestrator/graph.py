"""The tool dependency graph and auto-static (R-CAS-8).

An edge T -> K exists when K is in T's statically merged key set and names a
tool. Only the subgraph reachable from the tool at hand is built; its
strongly connected components (Tarjan's algorithm, iterative so a long chain
of tools cannot exhaust the stack) are computed once and the answer is kept
for every node of that subgraph. Plain Python: the first invoke of a tool
needs its SCC, and importing a graph library would cost more than the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from .errors import OrchestratorError
from .tool import Tool


def reachable_components(
    start: Tool,
    keys_of: Callable[[Tool], Iterable[str]],
    find: Callable[[str], Tool | None],
) -> dict[str, frozenset[str]]:
    """Map the uri of every tool reachable from ``start`` to the uris of its SCC.

    ``keys_of`` gives a tool's static key set; ``find`` resolves a key to a
    tool or None. A tool whose metadata cannot be resolved (a broken file)
    is a node without edges: its error surfaces when it is invoked.
    """
    edges: dict[str, list[str]] = {start.uri: []}
    todo = [start]
    while todo:
        tool = todo.pop()
        try:
            keys = list(keys_of(tool))
        except OrchestratorError:
            continue
        out = edges[tool.uri]
        for key in keys:
            target = find(key)
            if target is None:
                continue
            out.append(target.uri)
            if target.uri not in edges:
                edges[target.uri] = []
                todo.append(target)
    components: dict[str, frozenset[str]] = {}
    for members in strongly_connected(edges):
        for uri in members:
            components[uri] = members
    return components


def strongly_connected(edges: dict[str, list[str]]) -> Iterator[frozenset[str]]:
    """The strongly connected components of a graph given as node -> successors (every node a key).

    Tarjan's algorithm with an explicit stack of (node, successors left),
    so the depth of the graph never touches Python's recursion limit.
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in edges:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(edges[root]))]
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(edges[successor])))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:  # every successor done: node closes its component, or passes its low link up
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        members.append(member)
                        if member == node:
                            break
                    yield frozenset(members)
