"""The tool dependency graph and auto-static (R-CAS-8).

An edge T -> K exists when K is in T's statically merged key set and names a
tool. Only the subgraph reachable from the tool at hand is built; its
strongly connected components (networkx, Tarjan) are computed once and the
answer is kept for every node of that subgraph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

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
    import networkx as nx  # imported on first use: SCCs are cached

    graph = nx.DiGraph()
    graph.add_node(start.uri)
    todo = [start]
    seen = {start.uri}
    while todo:
        tool = todo.pop()
        try:
            keys = list(keys_of(tool))
        except OrchestratorError:
            continue
        for key in keys:
            target = find(key)
            if target is None:
                continue
            graph.add_edge(tool.uri, target.uri)
            if target.uri not in seen:
                seen.add(target.uri)
                todo.append(target)
    components: dict[str, frozenset[str]] = {}
    for component in nx.strongly_connected_components(graph):
        members = frozenset(component)
        for uri in members:
            components[uri] = members
    return components
