"""The cache folder: what toolcascade keeps between processes, and how it reads and writes it safely.

Everything kept here is only a cache: a missing, damaged or foreign file is
ignored (and rewritten when it can be), never an error. What lives here:

- the listing index (``orchestrator.index``), one file per set of search paths;
- the package's own parsed frontmatters (``kept_frontmatter``), by their
  text, so a first invoke plans through the built-ins without YAML;
- every other tool folder's parsed frontmatters (``orchestrator.frontmatters``,
  one ``blocks-*.json`` per folder), by their text, so a ``check`` after a
  ``list`` parses no YAML;
- the installed format plugins (``kept_entry_points``), by the signature of
  every ``sys.path`` folder, so a first invoke imports no ``importlib.metadata``.

**Where.** ``TOOLCASCADE_CACHE`` when set, else the user cache folder
``platformdirs`` names for ``toolcascade`` (``$XDG_CACHE_HOME/toolcascade`` or
``~/.cache/toolcascade`` on Linux, ``~/Library/Caches/toolcascade`` on macOS,
``%LOCALAPPDATA%\\toolcascade\\Cache`` on Windows): never inside a tool folder.
``TOOLCASCADE_INDEX=off`` turns all of it off. ``state_folder`` (the session
store's default home) and ``config_folder`` (the user's own settings) come
from ``platformdirs`` the same way.

**Trust.** Files are JSON (never pickle), read only when they are regular
files owned by this user and writable by nobody else, within a size bound,
and written through a temporary file renamed over the old one (0600, in a
folder made 0700), so a reader sees a whole file whatever other processes do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
import sys
from pathlib import Path
from typing import Any

from .frozen import FrozenDict, FrozenList
from .searchpath import signature as _signature
from .version import __version__

log = logging.getLogger("orchestrator.cachefolder")

VERSION = 1
"""The layout of the files kept here besides the index; a file of another version is ignored."""

FILE_BYTES = 4 * 1024 * 1024
"""A kept frontmatter or plugin file larger than this is not read."""

PLAIN_DEPTH = 64
"""Values nested deeper than this are not written (JSON parsers recurse)."""

APP = "toolcascade"
CACHE_ENV = "TOOLCASCADE_CACHE"
CONFIG_ENV = "TOOLCASCADE_CONFIG"
SWITCH_ENV = "TOOLCASCADE_INDEX"

_PACKAGE = Path(__file__).resolve().parent


def enabled() -> bool:
    """False when ``TOOLCASCADE_INDEX`` is ``off``/``0``/``false``/``no``."""
    return os.environ.get(SWITCH_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def cache_folder() -> Path | None:
    """The user's cache folder for toolcascade, or None when no home is known.

    ``TOOLCASCADE_CACHE`` when set, else ``platformdirs``' user cache folder.
    """
    return _chosen(CACHE_ENV) or _platform("user_cache_path")


def state_folder() -> Path | None:
    """The user's state folder for toolcascade (what outlives a run: the session store), or None without a home.

    ``platformdirs``' user state folder: ``$XDG_STATE_HOME/toolcascade`` or
    ``~/.local/state/toolcascade`` on Linux.
    """
    return _platform("user_state_path")


def config_folder() -> Path | None:
    """The user's configuration folder for toolcascade (settings that belong to a person), or None without a home.

    ``TOOLCASCADE_CONFIG`` when set, else ``platformdirs``' user config
    folder: ``$XDG_CONFIG_HOME/toolcascade`` or ``~/.config/toolcascade`` on
    Linux, ``~/Library/Application Support/toolcascade`` on macOS,
    ``%LOCALAPPDATA%\\toolcascade`` on Windows. Nothing is created.
    """
    return _chosen(CONFIG_ENV) or _platform("user_config_path")


def system_config_folder() -> Path | None:
    """The system-wide configuration folder for toolcascade (a managed ``AUTHORITY.md`` may live there), or None.

    ``platformdirs``' site config folder: ``/etc/xdg/toolcascade`` on Linux,
    ``/Library/Application Support/toolcascade`` on macOS,
    ``C:\\ProgramData\\toolcascade`` on Windows.
    """
    return _platform("site_config_path")


def _chosen(variable: str) -> Path | None:
    chosen = os.environ.get(variable)
    return Path(chosen).expanduser() if chosen else None


def _platform(kind: str) -> Path | None:
    """``platformdirs``' folder ``kind`` for toolcascade, read from the environment at each call (tests change it)."""
    import platformdirs  # only where a folder is needed: not on the path of a plain invoke

    try:
        return Path(getattr(platformdirs.PlatformDirs(APP, appauthor=False), kind))
    except RuntimeError:  # no home directory to put it in
        return None


def plain(value: Any, frozen: bool = False, depth: int = 0) -> bool:
    """True when JSON carries ``value`` exactly: string-keyed dicts, lists, strings, ints, finite floats, bools, None.

    ``frozen``: its dicts and lists must all be ``FrozenDict``/``FrozenList``
    (cached metadata is frozen), else all plain ones; ``decode`` makes them so again.
    """
    kind = type(value)
    if value is None or kind in (str, int, bool):
        return True
    if kind is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if depth >= PLAIN_DEPTH:
        return False
    # Loops, with the leaves tested inline: a listing's index checks every tool's params (10,000 trees).
    if kind is (FrozenList if frozen else list):
        for item in value:
            leaf = type(item)
            if not (item is None or leaf is str or leaf is int or leaf is bool) and not plain(item, frozen, depth + 1):
                return False
        return True
    if kind is (FrozenDict if frozen else dict):
        for key, item in value.items():
            if type(key) is not str:
                return False
            leaf = type(item)
            if not (item is None or leaf is str or leaf is int or leaf is bool) and not plain(item, frozen, depth + 1):
                return False
        return True
    return False


def read_json(path: Path, limit: int) -> Any:
    """The JSON in ``path``, or None: not a regular file, not ours, writable by others, larger than ``limit`` bytes, not JSON.

    Opened without blocking (a FIFO in its place never hangs the caller).
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o022):
            return None  # another user could have written it
        chunks = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            return None
        return json.loads(b"".join(chunks))
    except (OSError, ValueError, RecursionError, MemoryError):
        return None
    finally:
        os.close(fd)


def replace_file(file: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``file`` and rename it over ``file``: readers see a whole file.

    Raises:
        OSError: the folder cannot be made or written.
    """
    import tempfile  # only a process that writes pays for it

    folder = file.parent
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=".tmp-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(temp, file)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def prune(folder: Path, prefix: str, keep: int) -> None:
    """Remove the least recently written files of ``folder`` whose names start with ``prefix``, beyond ``keep``."""
    try:
        with os.scandir(folder) as entries:
            found = [(e.stat().st_mtime_ns, e.path) for e in entries if e.name.startswith(prefix) and e.is_file()]
    except OSError:
        return
    for _mtime, path in sorted(found)[: max(0, len(found) - keep)]:
        try:
            os.unlink(path)
        except OSError:
            pass


def package_code() -> list[list[Any]]:
    """The package's source files with their signatures: an edited checkout never reuses an older index."""
    found = []
    for folder in (_PACKAGE, _PACKAGE / "formats"):
        try:
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if e.name.endswith(".py"))
        except OSError:
            continue
        for name in names:
            path = str(folder / name)
            found.append([path, _signature(path)])
    return found


def package_version() -> str:
    """The installed toolcascade's version (files written by another one are not read)."""
    return __version__


# -- the package's own frontmatters ----------------------------------------------

FRONTMATTER_ENTRIES = 256
"""Parsed frontmatter blocks kept for the package's own files (it ships ~15); the oldest go first."""

_blocks: dict[str, Any] | None = None
_blocks_file: Path | None = None


def _frontmatters() -> dict[str, Any]:
    """The kept blocks (read once per process from the cache folder); empty when off or unreadable."""
    global _blocks, _blocks_file
    if _blocks is None:
        _blocks = {}
        folder = cache_folder()
        if not enabled() or folder is None:
            return _blocks
        try:
            material = json.loads(json.dumps(parser_material()))
            digest = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:32]
        except Exception as exc:  # no parser to describe: keep nothing
            log.debug("no kept frontmatters: %s: %s", type(exc).__name__, exc)
            return _blocks
        _blocks_file = folder / f"frontmatters-{digest}.json"
        data = read_json(_blocks_file, FILE_BYTES)
        if isinstance(data, dict) and data.get("version") == VERSION and data.get("key") == material:
            blocks = data.get("blocks")
            if isinstance(blocks, dict):
                _blocks = blocks
    return _blocks


def parser_material() -> dict[str, Any]:
    """What a parsed block depends on besides its text: the parser's code and PyYAML's."""
    import importlib.util

    spec = importlib.util.find_spec("yaml")
    origin = spec.origin if spec is not None else None
    parser = [str(_PACKAGE / name) for name in ("loader.py", "documents.py")]
    return {
        "version": VERSION,
        "package": package_version(),
        "python": sys.version,
        "parser": [[path, _signature(path)] for path in parser],
        "yaml": [origin, _signature(origin) if origin else None],
    }


def _block_key(block: str, first_line: int, limits: Any) -> str:
    return hashlib.sha256(f"{first_line}\0{limits!r}\0{block}".encode("utf-8", "surrogatepass")).hexdigest()


def kept_frontmatter(block: str, first_line: int, limits: Any) -> tuple[dict[str, Any], dict[str, int]] | None:
    """The (data, key lines) ``loader.load_yaml`` made of this exact block before, or None.

    Only the package's own files are kept (``loader`` asks for them alone):
    a first invoke then plans through the built-in tools without importing
    or running YAML. Keyed by the block's text, so no timestamp is trusted.
    """
    row = _frontmatters().get(_block_key(block, first_line, limits))
    if type(row) is not list or len(row) != 2:
        return None
    data, lines = row
    if type(data) is not dict or not plain(data) or type(lines) is not dict:
        return None
    if not all(type(k) is str and type(v) is int for k, v in lines.items()):
        return None
    return json.loads(json.dumps(data)), dict(lines)  # a copy: the caller owns (and freezes) what it gets


def keep_frontmatter(block: str, first_line: int, limits: Any, data: dict[str, Any], lines: dict[str, int]) -> None:
    """Remember a parsed block of the package's own files for the next process; never raises."""
    if not plain(data):
        return  # a date, a set: not carried exactly
    blocks = _frontmatters()
    if _blocks_file is None:
        return
    key = _block_key(block, first_line, limits)
    if key in blocks:
        return
    blocks[key] = [json.loads(json.dumps(data)), dict(lines)]
    while len(blocks) > FRONTMATTER_ENTRIES:
        del blocks[next(iter(blocks))]
    try:
        material = json.loads(json.dumps(parser_material()))
        text = json.dumps({"version": VERSION, "key": material, "blocks": blocks}, separators=(",", ":"))
        replace_file(_blocks_file, text.encode())
    except Exception as exc:  # an unwritable cache: the next process parses again
        log.debug("frontmatters not written: %s: %s", type(exc).__name__, exc)


# -- entry points ------------------------------------------------------------------

_points: dict[str, Any] | None = None


def _search_path() -> list[list[Any]]:
    """``sys.path`` with each folder's signature: a distribution installed or removed changes its folder."""
    found = []
    for entry in sys.path:
        signature = _signature(entry or ".")
        found.append([entry, list(signature) if signature else None])  # as JSON gives it back
    return found


def _entry_points_file() -> Path | None:
    folder = cache_folder()
    return folder / "entry-points.json" if folder is not None and enabled() else None


def kept_entry_points(group: str) -> list[tuple[str, str]] | None:
    """The (name, value) pairs ``importlib.metadata`` found in ``group`` for this ``sys.path``, or None."""
    global _points
    if _points is None:
        file = _entry_points_file()
        data = read_json(file, FILE_BYTES) if file is not None else None
        _points = {}
        if isinstance(data, dict) and data.get("version") == VERSION and data.get("path") == _search_path():
            groups = data.get("groups")
            if isinstance(groups, dict):
                _points = groups
    pairs = _points.get(group)
    if type(pairs) is not list or not all(
        type(p) is list and len(p) == 2 and type(p[0]) is str and type(p[1]) is str for p in pairs
    ):
        return None
    return [(name, value) for name, value in pairs]


def keep_entry_points(group: str, pairs: list[tuple[str, str]]) -> None:
    """Remember what ``importlib.metadata`` found in ``group`` for the next process; never raises."""
    global _points
    file = _entry_points_file()
    if file is None:
        return
    if _points is None:
        _points = {}
    _points[group] = [[name, value] for name, value in pairs]
    try:
        text = json.dumps({"version": VERSION, "path": _search_path(), "groups": _points}, separators=(",", ":"))
        replace_file(file, text.encode())
    except Exception as exc:  # an unwritable cache: the next process asks importlib.metadata again
        log.debug("entry points not written: %s: %s", type(exc).__name__, exc)
