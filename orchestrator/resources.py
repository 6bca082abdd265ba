"""MCP resources: files an author declares next to a tool, served read-only by URI.

``mcp: {resources: [PATTERN, ...]}`` on a tool (or its authority, for a
folder's tools) names files next to the tool's file: glob patterns relative
to its folder (``SKILL.md``, ``docs/*.md``, ``scripts/**/*.py``). A served
tool's declared files are listed by ``resources/list`` as
``toolcascade://NAME/PATH`` (``NAME`` the tool's served name, ``PATH`` the
file's path in the tool's folder, percent-encoded), and each declaring tool
gets a template ``toolcascade://NAME/{+path}`` in
``resources/templates/list``. ``resources/read`` returns a file's text (or,
when it is not UTF-8, its bytes as base64) with its media type.

Never outside the served folders: a pattern that is absolute or has a
``..`` segment is refused when listed; a file matched through a symlink
that resolves outside the tool's folder (or its search path) is left out;
and a read serves only a path the tool's patterns list right now (an
encoded separator, ``..``, an absolute path or an unlisted file is "no such
resource"), checked again where the file resolves when it is read.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from .annotations import KEY
from .errors import ConfigurationError, OrchestratorError

if TYPE_CHECKING:
    import mcp.types as types
    from mcp.server.context import ServerRequestContext as Context

    from .listings import Listing
    from .mcp import Service

log = logging.getLogger("orchestrator")
SCHEME = "toolcascade://"
FIELD = "resources"
MAX_FILES = 1000
"""Files one tool's patterns may list; the rest are left out (and logged)."""
MAX_BYTES = 10_000_000
"""Bytes one resource may have."""


def patterns(service: Service, listing: Listing) -> tuple[list[str], Path | None, Path | None]:
    """The tool's declared patterns, its folder and its search path root (None, None: no file of its own).

    Raises:
        ConfigurationError: ``mcp.resources`` is not a list of relative patterns inside the folder.
        OrchestratorError: the tool cannot be found or its cascade resolved.
    """
    manager = service.manager
    tool = manager.find_tool(listing.ref)
    given = manager.planner.plan(tool, manager.paths).raw.values.get(KEY)
    declared = given.get(FIELD) if isinstance(given, Mapping) else None
    if declared is None or tool.path is None or tool.root is None:
        return [], None, None
    key = f"{KEY}.{FIELD}"
    if not isinstance(declared, list) or not all(isinstance(p, str) and p for p in declared):
        raise ConfigurationError(f"{key} must be a list of glob patterns", tool=listing.ref, key=key)
    for pattern in declared:
        pure = PurePosixPath(pattern)
        if pure.is_absolute() or ".." in pure.parts or "\\" in pattern:
            raise ConfigurationError(
                f"{key}: {pattern!r} reaches outside the tool's folder; name files inside it (docs/*.md)",
                tool=listing.ref,
                key=key,
            )
    return declared, tool.path.parent, tool.root


def files(service: Service, listing: Listing) -> dict[str, Path]:
    """The tool's declared files by their path in its folder (posix), confined to the folder and its search path."""
    declared, folder, root = patterns(service, listing)
    if folder is None or root is None:
        return {}
    inside = folder.resolve()
    found: dict[str, Path] = {}
    for pattern in declared:
        for path in sorted(folder.glob(pattern)):
            rel = path.relative_to(folder).as_posix()
            if rel in found or not _confined(path, inside, root):
                continue
            if len(found) == MAX_FILES:
                log.warning(
                    "%s: mcp.resources lists more than %d files; the rest are not served", listing.ref, MAX_FILES
                )
                return found
            found[rel] = path
    return found


def _confined(path: Path, inside: Path, root: Path) -> bool:
    """A regular file whose real path is inside the tool's folder and its search path."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    return real.is_file() and real.is_relative_to(inside) and real.is_relative_to(root.resolve())


def uri(listing: Listing, rel: str) -> str:
    """The URI of the file ``rel`` of a served tool."""
    return f"{SCHEME}{listing.name}/{quote(rel, safe='/')}"


async def list_resources(service: Service, ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
    """``resources/list``: every served tool's declared files."""
    import anyio.to_thread
    import mcp.types as types

    served = await service.listed()
    found = await anyio.to_thread.run_sync(_listed, service, list(served.values()))
    return types.ListResourcesResult(resources=found)


def _listed(service: Service, served: list[Listing]) -> list[Any]:
    import mcp.types as types

    found = []
    for listing in served:
        try:
            declared = files(service, listing)
        except OrchestratorError as exc:
            log.warning("%s: its resources are not served: %s", listing.ref, exc)
            continue
        for rel, path in declared.items():
            media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            found.append(types.Resource(name=f"{listing.name}/{rel}", uri=uri(listing, rel), mime_type=media))
    return found


async def list_templates(service: Service, ctx: Context, params: types.PaginatedRequestParams | None) -> Any:
    """``resources/templates/list``: ``toolcascade://NAME/{+path}`` for each served tool that declares resources."""
    import anyio.to_thread
    import mcp.types as types

    served = await service.listed()

    def declaring() -> list[Any]:
        found = []
        for listing in served.values():
            try:
                if patterns(service, listing)[1] is None:
                    continue
            except OrchestratorError:
                continue
            found.append(
                types.ResourceTemplate(
                    name=f"{listing.name} files",
                    uri_template=f"{SCHEME}{listing.name}/{{+path}}",
                    description=f"Files next to {listing.ref}",
                )
            )
        return found

    return types.ListResourceTemplatesResult(resource_templates=await anyio.to_thread.run_sync(declaring))


async def read_resource(service: Service, ctx: Context, params: types.ReadResourceRequestParams) -> Any:
    """``resources/read``: a declared file's contents.

    Raises:
        MCPError: no such resource (an unknown tool, a path its patterns do not list, one outside its folder),
            or a file over ``MAX_BYTES``.
    """
    import anyio.to_thread
    import mcp.types as types
    from mcp.shared.exceptions import MCPError

    text = str(params.uri)

    def missing() -> MCPError:
        return MCPError(types.INVALID_PARAMS, f"no resource {text!r}: read one that resources/list names")

    if not text.startswith(SCHEME):
        raise missing()
    name, _, encoded = text[len(SCHEME) :].partition("/")
    try:
        listing = (await service.resolve(name))[0]
    except OrchestratorError:
        listing = None
    if listing is None:
        raise missing()
    rel = unquote(encoded)

    def read() -> bytes | None:
        path = files(service, listing).get(rel)
        _declared, folder, root = patterns(service, listing)
        if path is None or folder is None or root is None or not _confined(path, folder.resolve(), root):
            return None  # checked again where it resolves now: a symlink swapped since the listing stays out
        if path.stat().st_size > MAX_BYTES:
            raise MCPError(types.INVALID_PARAMS, f"resource {text!r} has more than {MAX_BYTES} bytes")
        return path.read_bytes()

    try:
        data = await anyio.to_thread.run_sync(read)
    except OrchestratorError:
        data = None
    if data is None:
        raise missing()
    media = mimetypes.guess_type(rel)[0] or "application/octet-stream"
    try:
        contents: Any = types.TextResourceContents(uri=text, mime_type=media, text=data.decode("utf-8"))
    except UnicodeDecodeError:
        contents = types.BlobResourceContents(uri=text, mime_type=media, blob=base64.b64encode(data).decode())
    return types.ReadResourceResult(contents=[contents])
