"""Units: a unit of work as plain JSON, how it is made from a call, and how a worker runs one.

A **unit** is plain JSON: the tool folders (paths, or an installed package),
the tool's ref, its args, the JSON part of the context seed (envelope,
locals, a *copy* of nonlocals), overrides, a timeout and the invocation depth,
so the depth limit still holds on a worker. A delegated unit (the ``delegate``
middleware's engine form) also carries ``rest``: the entries of the caller's
chain after ``delegate``, which the worker runs instead of the whole chain.

The engines (``orchestrator.executor``, ``processes``, ``cluster``) import
this module; it imports none of them. A reply is ``{"result": ...}`` or
``{"error": {...}}``: a failure comes back as the same ``OrchestratorError``
subclass with its fields (``dump_error`` / ``load_error``).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import sys
import sysconfig
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from . import errors as _errors
from .errors import ConfigurationError, InvocationError, InvocationTimeout, OrchestratorError, name_tool
from .frozen import thaw
from .ordering import Entry
from .registry import SearchPath, builtin_folder

if TYPE_CHECKING:
    from .context import Context
    from .manager import Manager

Unit = dict[str, Any]
"""A unit of work: plain JSON (see the module docstring)."""

UNIT_VERSION = 1
# Configuration built-ins that ran before ``delegate`` run again on the worker: they
# set state from metadata relative to the tool's folder (args defaults, trust, cwd,
# search paths, the model), so they must resolve where the tool really is.
REPLAYED = frozenset({"trust", "params", "cwd", "paths", "model"})
# Engine locals that never travel: the prompt and result are the worker's own.
LOCAL_ONLY = frozenset({"prompt", "result", "middleware"})
MANAGERS = 16  # Managers one worker keeps, one per folder set (least recently used goes)
DIGEST_SECONDS = 1.0  # a folder set's content hash is recomputed at most this often
DIGEST_FILES = 20_000  # files hashed per folder set before it is refused
DIGEST_BYTES = 1_000_000  # larger files are hashed by size and mtime, not content

# True while a worker runs a unit: there ``delegate``'s engine form runs in place,
# so a unit never re-delegates itself (or fans out again from a worker).
_on_worker: ContextVar[bool] = ContextVar("toolcascade_on_worker", default=False)


def on_worker() -> bool:
    """True inside a unit run by an executor (``delegate`` then runs in place)."""
    return _on_worker.get()


# -- folder references --------------------------------------------------------------


@functools.cache
def _site_dirs() -> tuple[Path, ...]:
    found = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    found |= {p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}
    return tuple(Path(p).resolve() for p in found if p)


def folder_ref(folder: str | Path, root: Path | None = None) -> dict[str, Any]:
    """How a worker finds ``folder``: relative to ``root`` (a shipped ``working_dir``), in an
    installed package, or by its absolute path (a shared filesystem, or this machine)."""
    path = Path(folder).resolve()
    if root is not None and path.is_relative_to(root):
        return {"path": path.relative_to(root).as_posix() or "."}
    for site in _site_dirs():
        if path.is_relative_to(site) and path != site:
            parts = path.relative_to(site).parts
            return {"package": parts[0], "folder": "/".join(parts[1:]) or "."}
    return {"path": str(path)}


def resolve_ref(ref: Mapping[str, Any]) -> Path:
    """The local folder of a folder reference (see ``folder_ref``).

    Raises:
        ConfigurationError: the package is not installed here, or the folder does not exist.
    """
    if "package" in ref:
        name = str(ref["package"])
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.submodule_search_locations:
            raise ConfigurationError(
                f"package {name!r} is not installed on this worker: install it in the workers' image",
                key="folders",
            )
        folder = Path(next(iter(spec.submodule_search_locations))) / str(ref.get("folder", "."))
    else:
        folder = Path(str(ref.get("path", "")))
    if not folder.is_dir():
        raise ConfigurationError(
            f"tool folder {str(folder)!r} does not exist on this worker: ship it with runtime_env "
            "working_dir, install it in the workers' image, or put it on a shared filesystem",
            key="folders",
        )
    return folder.resolve()


_digests: dict[tuple[str, ...], tuple[float, str]] = {}
_digest_lock = threading.Lock()


def folders_digest(folders: Sequence[str]) -> str:
    """A content hash of the files under ``folders`` (recomputed at most once per ``DIGEST_SECONDS``).

    Raises:
        ConfigurationError: more than ``DIGEST_FILES`` files (ship such a tree as an installed package).
    """
    key = tuple(folders)
    now = time.monotonic()
    with _digest_lock:
        cached = _digests.get(key)
    if cached is not None and now - cached[0] < DIGEST_SECONDS:
        return cached[1]
    digest = hashlib.sha256()
    count = 0
    for folder in key:
        digest.update(folder.encode("utf-8", "surrogateescape") + b"\0")
        for base, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            for name in sorted(files):
                if name.startswith("."):
                    continue
                count += 1
                if count > DIGEST_FILES:
                    raise ConfigurationError(
                        f"tool folders hold more than {DIGEST_FILES} files: ship them as an installed package",
                        key="folders",
                    )
                path = os.path.join(base, name)
                digest.update(os.path.relpath(path, folder).encode("utf-8", "surrogateescape") + b"\0")
                try:
                    stat = os.stat(path)
                    if stat.st_size <= DIGEST_BYTES:
                        with open(path, "rb") as handle:
                            digest.update(handle.read())
                    else:
                        digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
                except OSError:  # vanished or unreadable: its absence is part of the content
                    digest.update(b"?")
    found = digest.hexdigest()
    with _digest_lock:
        if len(_digests) > 256:
            _digests.clear()
        _digests[key] = (now, found)
    return found


# -- units ------------------------------------------------------------------------


def as_json(value: Any, what: str, tool: str | None) -> Any:
    """A plain-JSON copy of ``value`` (frozen metadata thawed).

    Raises:
        InvocationError: ``value`` holds something JSON cannot carry.
    """
    try:
        return json.loads(json.dumps(thaw(value), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvocationError(f"{what} cannot travel to an executor: it must be plain JSON ({exc})", tool=tool) from exc


def _json_part(mapping: Mapping[str, Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The entries of ``mapping`` JSON can carry (the rest stays with the caller)."""
    kept = {}
    for key, value in mapping.items():
        if key in skip or not isinstance(key, str):
            continue
        try:
            kept[key] = json.loads(json.dumps(thaw(value), allow_nan=False))
        except (TypeError, ValueError, RecursionError):
            continue
    return kept


@functools.cache
def _builtin() -> str:
    return str(builtin_folder("tools").resolve())


@functools.lru_cache(maxsize=1024)
def _folder_refs(paths: tuple[SearchPath, ...], root: Path | None) -> str:
    """The folder references of ``paths`` as JSON text (cached: search paths repeat on every call)."""
    refs = [{**folder_ref(sp.folder, root), "trusted": sp.trusted} for sp in paths if sp.folder != _builtin()]
    return json.dumps(refs)


def _folders(paths: Iterable[SearchPath], root: Path | None) -> list[dict[str, Any]]:
    """Where a worker finds each search path (the built-in folder stays: every worker has its own)."""
    return list(json.loads(_folder_refs(tuple(paths), root)))


def _seal(unit: Unit, paths: Iterable[SearchPath]) -> Unit:
    unit["digest"] = folders_digest([sp.folder for sp in paths if sp.folder != _builtin()])
    return unit


def unit_for(
    manager: Manager,
    ref: str,
    args: Any = None,
    *,
    context: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    root: Path | None = None,
) -> Unit:
    """The unit that invokes ``ref`` with ``args`` in ``manager``'s folders, for any executor.

    ``root`` is the folder shipped as the workers' ``working_dir`` (folders
    under it travel as relative references).

    Raises:
        InvocationError: args, context or overrides are not plain JSON.
    """
    seed = _json_part(context or {}, frozenset({"parent", "target"}))
    unit: Unit = {
        "v": UNIT_VERSION,
        "tool": ref,
        "args": as_json(args, "args", ref),
        "folders": _folders(manager.paths, root),
        "context": seed,
        "overrides": as_json(overrides, "overrides", ref) if overrides else None,
        "timeout": timeout,
        "depth": 0,
    }
    return _seal(unit, manager.paths)


def continuation(target: Context, root: Path | None = None) -> Unit:
    """The unit that runs the rest of ``target``'s chain (after the running ``delegate`` entry) elsewhere.

    Raises:
        ConfigurationError: the tool is not a file, or an entry is a program function.
        InvocationError: the args are not plain JSON.
    """
    tool = target.tool
    if tool.path is None or tool.root is None:
        raise ConfigurationError(
            f"{tool.name!r} is a registered function: only tools in files can run on an executor",
            tool=tool.name,
            key="delegate",
        )
    ran = target.chain[: max(target.pos - 1, 0)]
    rest = [*(e for e in ran if e.name in REPLAYED), *target.chain[target.pos :]]
    for entry in rest:
        if entry.fn is not None:
            raise ConfigurationError(
                f"entry {entry.name!r} is a program function and cannot run on an executor",
                tool=tool.name,
                key="delegate",
            )
    deadline = anyio.current_effective_deadline()
    timeout = None if deadline == float("inf") else max(deadline - anyio.current_time(), 0.001)
    unit: Unit = {
        "v": UNIT_VERSION,
        "tool": tool.path.relative_to(tool.root).with_suffix("").as_posix(),
        "args": as_json(target.args, "args", tool.name),
        "folders": _folders(target.paths, root),
        "context": {
            "envelope": _json_part(target.envelope),
            "locals": _json_part(target.locals, LOCAL_ONLY),
            "nonlocals": _json_part(target.nonlocals),
        },
        "overrides": None,
        "timeout": timeout,
        "depth": target.depth,
        "rest": [{"name": e.name, "args": thaw(e.args)} for e in rest],  # metadata values: YAML/JSON already
    }
    return _seal(unit, target.paths)


def dump_unit(unit: Unit) -> str:
    """``unit`` as JSON text for the wire.

    Raises:
        InvocationError: something in it JSON cannot carry.
    """
    try:
        return json.dumps(unit, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvocationError(
            f"the unit cannot travel to an executor: it must be plain JSON ({exc})", tool=str(unit.get("tool"))
        ) from exc


# -- errors across the wire -------------------------------------------------------------

_FIELDS = ("detail", "tool", "path", "line", "level", "key")
_EXTRA = ("errors", "cycle", "ref", "searched", "retryable", "status", "retry_after", "request", "token")


def dump_error(exc: BaseException) -> dict[str, Any]:
    """An error as JSON: type, message, the class's bases, structured fields and notes."""
    data: dict[str, Any] = {
        "type": type(exc).__name__,
        "message": str(exc),
        "bases": [cls.__name__ for cls in type(exc).__mro__[1:] if issubclass(cls, OrchestratorError)],
        "notes": [str(n) for n in getattr(exc, "__notes__", ())],
    }
    if isinstance(exc, OrchestratorError):
        data["fields"] = {name: getattr(exc, name, None) for name in _FIELDS}
        data["extra"] = _json_part({name: getattr(exc, name) for name in _EXTRA if hasattr(exc, name)})
    return data


def load_error(data: Mapping[str, Any]) -> Exception:
    """The error ``dump_error`` described: the same ``OrchestratorError`` subclass with its fields.

    A subclass this process does not know becomes its nearest known base; a
    foreign exception becomes an ``InvocationError`` naming the original type.
    """
    kind = str(data.get("type", "Exception"))
    message = str(data.get("message", ""))
    found: type[OrchestratorError] | None = None
    for name in (kind, *data.get("bases", ())):
        cls = getattr(_errors, str(name), None)
        if isinstance(cls, type) and issubclass(cls, OrchestratorError):
            found = cls
            break
    exc: Exception
    if found is None:
        exc = InvocationError(f"{kind}: {message}")
    else:
        exc = found.__new__(found)
        Exception.__init__(exc, message)
        for name, value in {**dict.fromkeys(_FIELDS), **(data.get("fields") or {})}.items():
            setattr(exc, name, value)
        for name, value in (data.get("extra") or {}).items():
            setattr(exc, name, [tuple(v) for v in value] if name == "errors" else value)
        if found.__name__ != kind:
            exc.add_note(f"(raised on the worker as {kind})")
    for note in data.get("notes", ()):
        exc.add_note(str(note))
    return exc


def unwrap(reply: str | Mapping[str, Any]) -> Any:
    """The result of a worker's reply, or its error raised here.

    Raises:
        OrchestratorError: the unit's error (see ``load_error``).
    """
    data = json.loads(reply) if isinstance(reply, str) else reply
    if "error" in data:
        raise load_error(data["error"])
    return data.get("result")


# -- running units ----------------------------------------------------------------


class Managers:
    """One worker's Managers, one per folder set, keyed by the set's content hash (least recently used goes).

    ``sessions`` is what each Manager gets as ``Manager(sessions=...)`` (a SQLite file path, a store; None:
    ``$TOOLCASCADE_SESSIONS``, else the user's state folder), so a batch's lines keep their conversations
    where ``batch --store`` says.
    """

    def __init__(self, size: int = MANAGERS, sessions: Any = None) -> None:
        self.size = size
        self.sessions = sessions
        self._managers: OrderedDict[str, tuple[Manager, list[str]]] = OrderedDict()

    def get(self, unit: Mapping[str, Any]) -> tuple[Manager, list[str]]:
        """The Manager for ``unit``'s folders, and the untrusted folders it seeds per call.

        Raises:
            ConfigurationError: a folder this worker cannot find (when the Manager is made).
        """
        folders = unit.get("folders") or []
        key = json.dumps([unit.get("digest"), folders], sort_keys=True)
        found = self._managers.get(key)
        if found is not None:
            self._managers.move_to_end(key)
            return found
        refs = [(resolve_ref(ref), bool(ref.get("trusted", True))) for ref in folders]
        from .manager import Manager  # the manager imports units lazily: only a unit run needs this

        manager = Manager([p for p, trusted in refs if trusted], sessions=self.sessions)
        found = self._managers[key] = (manager, [str(p) for p, trusted in refs if not trusted])
        while len(self._managers) > self.size:
            self._managers.popitem(last=False)[1][0].close()  # its watcher thread ends now, not at collection
        return found

    def close(self) -> None:
        """Close every Manager kept (their watcher threads end); a later unit makes new ones."""
        kept = list(self._managers.values())
        self._managers.clear()
        for manager, _untrusted in kept:
            manager.close()


def _check_unit(unit: Any) -> None:
    if not isinstance(unit, Mapping) or not isinstance(unit.get("tool"), str):
        raise InvocationError("a unit must be a JSON object with a 'tool' string (see orchestrator.units)")
    if unit.get("v", UNIT_VERSION) != UNIT_VERSION:
        raise InvocationError(f"unit version {unit.get('v')!r} is not {UNIT_VERSION}: upgrade toolcascade")
    depth = unit.get("depth", 0)
    if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
        raise InvocationError(f"unit depth must be a non-negative integer, not {depth!r}")


async def _invoke(manager: Manager, unit: Mapping[str, Any], untrusted: list[str]) -> Any:
    from .options import extract_options

    seed = dict(unit.get("context") or {})
    if untrusted:
        seed["paths"] = [*untrusted, *seed.get("paths", ())]
    ref, depth, rest, timeout = unit["tool"], unit.get("depth", 0), unit.get("rest"), unit.get("timeout")
    if depth == 0 and rest is None:
        return await manager.invoke(
            ref, unit.get("args"), context=seed, overrides=unit.get("overrides"), timeout=timeout
        )
    if depth > manager.max_depth:
        raise InvocationError(f"invocation depth limit ({manager.max_depth}) reached invoking {ref!r}", tool=ref)
    args, options = extract_options(unit.get("args"), ref, seed, None, unit.get("overrides"), timeout)
    seconds = options["timeout"]
    with anyio.move_on_after(seconds if seconds is not None else float("inf")):
        ctx = manager.prepare(ref, args, options)
        ctx.depth = depth  # nested invocations count from the caller's depth (R-INV-5)
        if rest is not None:
            entries = [Entry(str(e["name"]), e.get("args")) for e in rest]
            ctx.chain = manager.planner.conditioned(entries, ctx.paths, ctx.run.checked)
        return await manager.run(ctx)
    raise InvocationTimeout(f"timed out after {seconds} s", tool=ref)


async def run_unit(managers: Managers, unit: Unit | str) -> str:
    """Run one unit on this worker; the reply is JSON text: ``{"result": ...}`` or ``{"error": {...}}``.

    Never raises for the unit's own failures (they travel in the reply);
    cancellation propagates, so the tool's ``finally`` blocks run.
    """
    token = _on_worker.set(True)
    try:
        data = json.loads(unit) if isinstance(unit, str) else unit
        _check_unit(data)
        manager, untrusted = managers.get(data)
        result = await _invoke(manager, data, untrusted)
        try:
            return json.dumps({"result": result}, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvocationError(
                f"the result ({type(result).__name__}) cannot travel back: a unit's result must be plain JSON",
                tool=str(data["tool"]),
            ) from exc
    except Exception as exc:
        name_tool(exc)
        return json.dumps({"error": dump_error(exc)}, default=str)
    finally:
        _on_worker.reset(token)
