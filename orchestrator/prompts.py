"""MCP prompts: the served tools offered as prompts (``mcp.serve``), their ``params`` as arguments, their text.

Claude Code and VS Code show MCP prompts as slash commands, so a folder of
``.md`` files becomes a slash-command library. A prompt's arguments are the
properties of its ``params`` (a non-object ``params`` is the one argument
``value``), each with its description and whether it is required.

``prompts/get`` runs the tool through its pipeline as a template: its
``model`` and ``returns`` are left out for that call, so a template, an
agent, a Claude command, a Copilot prompt file or a Prompty file gives its
prompt rendered with the arguments (directives run, ``validate-args``
checks the arguments, ``approval`` asks as for a call), never a model's
answer. The text is one ``user`` message. MCP prompt arguments are text:
for a property whose schema is not ``type: string`` a value that reads as
JSON (``3``, ``true``, ``["a"]``) is passed as that JSON value.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import approval
from .errors import ArgsValidationError, Interrupted, OrchestratorError, describe
from .mediaparts import media_pieces

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext

    from .listings import Listing
    from .mcp import Service

    Context = ServerRequestContext[dict[str, Any], Any]

log = logging.getLogger("orchestrator.mcp")

AS_TEMPLATE = {"$remove": ["model", "returns"]}  # the overrides that render a tool's prompt instead of running it


def prompt(listing: Listing) -> types.Prompt:
    """What ``prompts/list`` shows of a served prompt."""
    import mcp.types as types

    properties = _properties(listing)
    required = set(listing.schema.get("required") or ())
    arguments = [
        types.PromptArgument(
            name=name,
            title=schema.get("title") if isinstance(schema, Mapping) else None,
            description=schema.get("description") if isinstance(schema, Mapping) else None,
            required=name in required,
        )
        for name, schema in properties.items()
    ]
    return types.Prompt(
        name=listing.name, title=listing.offer.title, description=listing.description, arguments=arguments
    )


def prompt_args(listing: Listing, arguments: Mapping[str, str] | None) -> Any:
    """The args of a ``prompts/get``: text arguments, read as JSON where the property is not text."""
    properties = _properties(listing)
    args: dict[str, Any] = {}
    for name, text in (arguments or {}).items():
        args[name] = _value(properties.get(name), text)
    if listing.wrapped:
        return args.get("value")
    return args


def rendered(listing: Listing, result: Any) -> types.GetPromptResult:
    """The ``prompts/get`` answer: the rendered text as one user message (a prompt that places media: one per part)."""
    import mcp.types as types

    pieces = media_pieces(result)
    if pieces is not None:
        from .results import media_content

        blocks = media_content(pieces)
        messages = [types.PromptMessage(role="user", content=block) for block in blocks]
        return types.GetPromptResult(description=listing.description, messages=messages)
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    message = types.PromptMessage(role="user", content=types.TextContent(text=text))
    return types.GetPromptResult(description=listing.description, messages=[message])


def _properties(listing: Listing) -> Mapping[str, Any]:
    properties = listing.schema.get("properties")
    return properties if isinstance(properties, Mapping) else {}


def _value(schema: Any, text: str) -> Any:
    if not isinstance(schema, Mapping) or schema.get("type") in (None, "string"):
        return text
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text  # validate-args says what it should be


# -- the handlers ------------------------------------------------------------------


async def list_prompts(
    service: Service, ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListPromptsResult:
    """``prompts/list``: the served tools offered as prompts, from the same listing as ``tools/list``."""
    import mcp.types as types

    served = await service.listed()
    return types.ListPromptsResult(prompts=[prompt(t) for t in served.values() if t.offer.as_prompt])


async def get_prompt(service: Service, ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    """``prompts/get``: the prompt rendered with the arguments, or a JSON-RPC error saying what to fix.

    Raises:
        MCPError: an unknown prompt or bad arguments (invalid params), or a failure to render it.
    """
    import mcp.types as types
    from mcp.shared.exceptions import MCPError

    try:
        listing, served = await service.resolve(params.name)
    except OrchestratorError as exc:
        why = f"the prompts cannot be listed: {describe(exc)}"
        raise MCPError(types.INTERNAL_ERROR, service.paths.shown(why)) from None
    if listing is None or not listing.offer.as_prompt:
        served = await service.listed()  # to name the prompts there are
        names = sorted(name for name, t in served.items() if t.offer.as_prompt)
        raise MCPError(
            types.INVALID_PARAMS, f"no prompt {params.name!r}; this server serves {', '.join(names) or 'none'}"
        )
    caller = service.caller(served, listing.ref)
    context = {"envelope": service.envelope(ctx)}
    try:
        with approval.asking(service.approver(ctx)):
            call = service.manager.invoke(
                listing.ref,
                prompt_args(listing, params.arguments),
                caller=caller,
                context=context,
                overrides=AS_TEMPLATE,
                timeout=service.timeout(None),
            )
            result = await call
    except Interrupted:
        why = f"prompt {listing.name!r} holds a call for approval; call it as the tool {listing.name!r} to be asked"
        raise MCPError(types.INVALID_REQUEST, why) from None
    except ArgsValidationError as exc:
        raise MCPError(types.INVALID_PARAMS, service.paths.shown(describe(exc))) from None
    except Exception as exc:  # the engine's errors and a tool's own bug alike: one line, keep serving
        log.warning("prompt %r failed: %s", listing.ref, describe(exc))
        raise MCPError(types.INTERNAL_ERROR, service.paths.shown(describe(exc))) from None
    return rendered(listing, result)
