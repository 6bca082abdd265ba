"""What untrusted callers (MCP clients, models calling tools) may ask for with ``$`` options.

Callers pass ``$context`` and ``$middleware`` as data (R-CHAIN-4). The engine
already refuses to remove or override ``$locked`` entries; on top of that an
untrusted caller may not send ``$overrides`` (unless allowed), may not seed
``paths``, ``cwd``, ``parent`` or ``target``, and may add or override only
middleware it could call itself: hidden built-ins such as ``paths`` or
``delegate`` would otherwise point a call at any file on disk.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

from .errors import InvocationError, SecurityError
from .ordering import extra_specs

REFUSED_CONTEXT = ("paths", "cwd", "parent", "target")


def check_untrusted(
    options: Mapping[str, Any],
    callable_tools: Container[str],
    *,
    tool: str,
    caller: str,
    overrides: bool = False,
) -> None:
    """Refuse what ``caller`` may not ask for in ``options`` (as ``extract_options`` returns them).

    Raises:
        SecurityError: refused ``$overrides``, a refused ``$context`` key, or extra
            middleware naming a tool outside ``callable_tools`` (removals pass).
        InvocationError: a ``$context`` that is not a mapping.
    """
    if options.get("overrides") is not None and not overrides:
        raise SecurityError(f"$overrides is not accepted from {caller}", tool=tool, key="$overrides")
    context = options.get("context") or {}
    if not isinstance(context, Mapping):
        raise InvocationError(f"$context must be a mapping, not {type(context).__name__}", tool=tool, key="$context")
    for key in REFUSED_CONTEXT:
        if key in context:
            raise SecurityError(f"$context.{key} is not accepted from {caller}", tool=tool, key="$context")
    seeded = context.get("locals")
    specs = [
        *extra_specs(options.get("middleware"), "$middleware"),
        *extra_specs(seeded.get("middleware") if isinstance(seeded, Mapping) else None, "$context"),
    ]
    for name, spec, source in specs:
        if not spec.get("remove") and name not in callable_tools:
            raise SecurityError(
                f"{source} from {caller} may add or override only tools it can call, not {name!r}",
                tool=tool,
                key=source,
            )
