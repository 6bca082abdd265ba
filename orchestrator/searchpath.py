"""Search paths and refs: what a ref may be, and the stat signature every cache is keyed by.

The leaf of discovery: it imports nothing of the package but the errors and
the limits, so the caches, the folder scans, the registry, the on-disk
index and the cache folder all build on it without a cycle.

A ref is checked before any file is touched (``check_ref``): absolute refs,
``..`` segments and names no file system can hold are refused.
"""

from __future__ import annotations

import os
import reprlib
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from .errors import ToolNotFoundError
from .limits import DEFAULT_LIMITS

_PACKAGE = Path(__file__).resolve().parent

NAME_MAX = 255  # bytes in one file or folder name (ext4, APFS, NTFS alike)

# Files in a tools folder that are never tools.
RESERVED = frozenset({"AUTHORITY.md", "AUTHORITY.local.md", "README.md"})

UNSEEN: Any = object()  # Registry.seen() of a path never looked at


def builtin_folder(name: str) -> Path:
    """The built-in ``tools`` or ``authorities`` folder: in the wheel, or in a source checkout."""
    installed = _PACKAGE / "builtin" / name
    return installed if installed.is_dir() else _PACKAGE.parent / name


class SearchPath(NamedTuple):
    """A folder tools are found in; ``trusted`` folders may hold python tools.

    Search paths are parts of cache keys on every invocation, so they are
    plain tuples of a string and a bool: hashed and compared in C.
    """

    folder: str  # absolute and resolved
    trusted: bool = True

    @property
    def root(self) -> Path:
        """The folder as a Path."""
        return _as_path(self.folder)

    @classmethod
    def of(cls, folder: str | os.PathLike[str], trusted: bool = True) -> SearchPath:
        return cls(str(Path(folder).resolve()), trusted)


@lru_cache(maxsize=256)
def _as_path(folder: str) -> Path:
    return Path(folder)


Signature = tuple[int, int] | None


def signature(path: str) -> Signature:
    """(mtime_ns, size) of a file or folder, or None when it does not exist (or cannot: a bad name)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size)


def is_file(path: Path) -> bool:
    """True when ``path`` is a file; False too for names the file system refuses (too long, a loop)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def shown(ref: str, limit: int = 80) -> str:
    """A ref as messages show it: cut, with its length, when long."""
    return ref if len(ref) <= limit else f"{ref[: limit - 20]}... ({len(ref)} characters)"


def check_ref(ref: object, limit: int = DEFAULT_LIMITS.ref_length) -> tuple[str, ...]:
    """Split a ref into its segments, refusing anything that could leave a search path.

    Nothing here touches the file system: a ref refused here never names a file.

    Raises:
        ToolNotFoundError: not a string, empty, longer than ``limit`` characters,
            absolute, with ``..``/``.``/empty segments, a segment longer than a
            file name may be, or characters no file name can hold.
    """
    if not isinstance(ref, str) or not ref:
        got = "an empty string" if isinstance(ref, str) else type(ref).__name__
        raise ToolNotFoundError(reprlib.repr(ref), reason=f"a ref must be a non-empty string, not {got}")
    if len(ref) > limit:
        raise ToolNotFoundError(shown(ref), reason=f"a ref may be at most {limit} characters (Limits.ref_length)")
    if "\x00" in ref:
        raise ToolNotFoundError(shown(ref), reason="a ref may not contain NUL")
    if "\\" in ref or ref.startswith("/") or os.path.isabs(ref):
        raise ToolNotFoundError(ref, reason="refs are relative names like 'team/summarize'")
    parts = tuple(ref.split("/"))
    if any(part in ("", ".", "..") for part in parts):
        raise ToolNotFoundError(ref, reason="refs may not contain '..', '.' or empty segments")
    try:
        encoded = os.fsencode(ref)
    except UnicodeError:
        raise ToolNotFoundError(ref, reason="a ref must be text a file name can hold") from None
    if len(encoded) > NAME_MAX and any(len(part) > NAME_MAX for part in encoded.split(b"/")):
        raise ToolNotFoundError(shown(ref), reason=f"each segment of a ref may be at most {NAME_MAX} bytes")
    return parts


@lru_cache(maxsize=1)
def builtin_tools() -> str:
    """The built-in tools folder, as a search path's folder string."""
    return SearchPath.of(builtin_folder("tools")).folder


def is_dir(path: Path) -> bool:
    """True when ``path`` is a folder; False too for names the file system refuses."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False
