"""Folders: what one folder of a search path offers, by declared name and by stem.

**Names.** A tool's ``name`` in its frontmatter is its name: the declared
name replaces the file's stem and the folder stays part of the ref
(``team/sum.md`` with ``name: summarize`` is ``team/summarize``). Within a
search path a declared name wins over a stem; a stem (or path) still finds
its file when no other tool there claims it as a name; across search paths
the first match wins, as always. Each folder's declared names are indexed
when it is first looked up (``names`` derived cache: one folder stat per
lookup, as before); files of other formats in their location trees
(``.claude/agents``, ...) belong to the search path's top level. A declared
name edited in place is seen when its folder changes, when the index is
rebuilt after any change, or when a lookup of it finds nothing.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from . import searchpath
from .caches import Caches, drop_oldest_half
from .errors import FolderLimitError, ToolDefinitionError, ToolNotFoundError
from .limits import DEFAULT_LIMITS, Limits
from .loader import load_tool, read_name, read_python_name
from .searchpath import RESERVED, UNSEEN, SearchPath, builtin_tools, check_ref, is_dir
from .tool import Tool

SUGGESTIONS = 3  # refs one "did you mean" names at most

_UNKNOWN = object()


class Names(NamedTuple):
    """What one folder offers: refs (last segment -> (file, format name or None)), clashes, files counted."""

    refs: dict[str, tuple[Path, str | None]]
    clashes: tuple[tuple[str, Path, Path, str], ...]
    files: int


class Folders(Caches):
    """The names each folder offers and the formats its files are read with (cached, following edits)."""

    def __init__(
        self,
        paths: Iterable[SearchPath],
        frozen: Iterable[Path] = (),
        limits: Limits = DEFAULT_LIMITS,
        formats: Any = None,
    ) -> None:
        super().__init__(paths, frozen, limits)
        self.formats = formats
        # The formats each search path folder reads (orchestrator.formats.select), made on first need.
        self._formats: dict[str, Any] | None = None
        if formats is not None:
            self.selection()  # a bad format name is the program's mistake: say so now

    def selection(self) -> dict[str, tuple[Any, ...]]:
        """The formats each search path folder reads: ``orchestrator.formats.select`` of ``formats``.

        Raises:
            ConfigurationError: an unknown format name or a malformed ``formats``.
        """
        if self._formats is None:
            from .formats import select  # only when a lookup first needs it: keeps import cheap

            self._formats = select(self.formats, (sp.folder for sp in self.paths if not self._builtin(sp)))
        return self._formats

    def _builtin(self, sp: SearchPath) -> bool:
        """True for the built-in tools folder: it reads no other format and declares no other names."""
        return sp.folder == builtin_tools()

    def formats_for(self, sp: SearchPath) -> tuple[Any, ...]:
        """The formats search path ``sp`` reads (none in the built-in folder).

        A folder the program did not list (added by ``paths`` metadata)
        reads what a list of names applies to every folder, else every format.
        """
        if self._builtin(sp):
            return ()
        chosen = self.selection()
        found = chosen.get(sp.folder)
        if found is None:
            from .formats import select

            option = None if isinstance(self.formats, Mapping) else self.formats
            found = select(option, (sp.folder,))[sp.folder]
            if len(chosen) < self.derived_bound:
                chosen[sp.folder] = found
        return found

    def names(
        self, sp: SearchPath, prefix: tuple[str, ...], checked: set[str] | None = None, *, parse: bool = False
    ) -> Names:
        """The refs one folder of ``sp`` offers (``prefix`` its segments): declared names, then stems.

        The search path's top level also holds the tools of other formats'
        location trees (``.claude/agents`` ...), by the names their adapters give.
        ``parse`` (a listing, which parses every file anyway) reads names by
        parsing the files into the cache, so each file is opened once.
        """
        key = (sp, prefix)
        names = self.memo("names", key, lambda deps: self._scan(sp, prefix, deps, parse), checked)
        if checked is not None:
            entry = self.derived["names"].get(key)
            if entry is not None:
                checked.update(entry[1])  # the folders it depends on belong to whatever used it
        return names

    def _scan(self, sp: SearchPath, prefix: tuple[str, ...], deps: set[str], parse: bool = False) -> Names:
        from .formats import in_location, location_trees, recognise

        fmts = self.formats_for(sp)
        folder = sp.root.joinpath(*prefix)
        # The folder, not its files: adding or removing a file changes its folder.
        self.watch([str(folder)], deps)
        builtin = self._builtin(sp)
        # Inside a location tree (a skill's folder ...) only that format's files are tools.
        marker = folder / "_"
        trees = [fmt for fmt in fmts if any(in_location(marker, loc) for loc in getattr(fmt, "locations", ()))]
        declared: dict[str, tuple[Path, str | None]] = {}
        clashes: list[tuple[str, Path, Path, str]] = []
        stems: list[tuple[int, str, Path, str | None]] = []

        def claim(name: str, path: Path, fmt: str | None) -> None:
            held = declared.get(name)
            if held is None:
                declared[name] = (path, fmt)
            elif held[0] != path:
                clashes.append((name, held[0], path, "name"))

        count = 0
        # The files whose declared names this scan reads: a listing's index re-reads the folder when one changes.
        indexing = self.indexing  # read once: a listing on another thread may end meanwhile
        read: list[str] | None = [] if indexing is not None else None
        seen_formats: dict[tuple[Path, SearchPath], Any] = {}
        root = sp.root
        for entry in _files_in(folder, self.limits.folder_files):
            path = folder / entry.name  # ``entry.path``'s Path: joined, not parsed whole (40% less)
            # Never read a file outside the search path, not even for its name: found by its stem, it is refused.
            outside = entry.is_symlink() and not _inside(path, root)
            fmt = recognise(path, root, fmts) if fmts and not outside else None
            seen_formats[(path, sp)] = fmt
            if fmt is None:
                if trees:
                    continue  # a resource beside a skill, a note in .claude/agents: never a tool
                stem, ext = os.path.splitext(entry.name)
                if ext not in (".md", ".py") or (ext == ".py" and not sp.trusted):
                    continue
                count += 1
                name = None if builtin or outside else self._declared_name(path, ext, sp if parse else None)
                if read is not None and not (builtin or outside):
                    read.append(entry.path)
                if name is not None and _usable(name):  # else loading it reports the bad name
                    claim(name, path, None)
                stems.append((0 if ext == ".md" else 1, stem, path, None))
                continue
            count += 1
            stem = _strip_suffix(entry.name, getattr(fmt, "suffixes", ()))
            if not any(in_location(path, loc) for loc in getattr(fmt, "locations", ())):  # else named at the top
                named = self._format_name(path, sp, fmt, deps)
                if named != stem:  # a name of its own; its stem alone ranks after our own files' stems
                    claim(named, path, fmt.name)
            stems.append((2, stem, path, fmt.name))
        if not prefix:
            for tree, fmt in location_trees(sp.root, fmts):
                for path in self._walk_tree(sp.root, tree, deps):
                    if recognise(path, sp.root, (fmt,)) is fmt:
                        seen_formats[(path, sp)] = fmt
                        count += 1
                        claim(self._format_name(path, sp, fmt, deps), path, fmt.name)
        with self.lock:  # what this scan saw, added at once (a trim iterates the dict)
            if len(self._file_formats) + len(seen_formats) > self.files_bound:
                drop_oldest_half(self._file_formats)
            self._file_formats.update(seen_formats)
        if indexing is not None and read is not None:
            indexing.scanned[str(folder)] = tuple(read)
        refs = dict(declared)
        for _rank, stem, path, fmt_name in sorted(stems, key=lambda item: item[0]):
            held = refs.get(stem)
            if held is None:
                refs[stem] = (path, fmt_name)
            elif stem in declared and held[0] != path:
                clashes.append((stem, held[0], path, "stem"))
        return Names(refs, tuple(clashes), count)

    def note_formats(self, sp: SearchPath, names: Names) -> None:
        """Note the format of each file ``names`` offers, as the folder's scan would (``format_of`` reads it).

        For a folder whose names came from the on-disk index, in a read-only
        pass (``check``) that finds every tool there (``Registry._keep_folder``):
        those lookups then recognise no file's format again.
        """
        fmts: dict[str, Any] | None = None  # only a folder holding other formats' files imports them
        seen: dict[tuple[Path, SearchPath], Any] = {}
        for path, fmt_name in names.refs.values():
            if fmt_name is None:
                seen[(path, sp)] = None
                continue
            if fmts is None:
                fmts = {fmt.name: fmt for fmt in self.formats_for(sp)}
            fmt = fmts.get(fmt_name, _UNKNOWN)
            if fmt is not _UNKNOWN:
                seen[(path, sp)] = fmt
        with self.lock:  # as ``_scan`` adds them
            if len(self._file_formats) + len(seen) > self.files_bound:
                drop_oldest_half(self._file_formats)
            self._file_formats.update(seen)

    def _declared_name(self, path: Path, ext: str, parse: SearchPath | None = None) -> str | None:
        """The name a markdown or python file declares, cached by its signature.

        With ``parse`` (the search path it is found through) the file is
        loaded into the parse cache and its frontmatter read; else only the
        name is read (a python file is parsed, never run).
        """
        key = str(path)
        held = self._declared.get(key)
        now = searchpath.signature(key) if held is not None or parse is None else UNSEEN
        if held is not None and held[0] == now:
            return held[1]
        if parse is not None:
            try:
                declared = self.load_format(path, parse, None).frontmatter.get("name")
            except ToolDefinitionError:
                declared = None
            name = declared if isinstance(declared, str) else None
            if now is UNSEEN:  # the signature the load just looked at (one stat, not two)
                now = self.seen(key)
                if now is UNSEEN:
                    now = searchpath.signature(key)
        else:
            name = read_python_name(path, self.limits) if ext == ".py" else read_name(path, self.limits)
        self._put(self._declared, key, (now, name))
        return name

    def _format_name(self, path: Path, sp: SearchPath, fmt: Any, deps: set[str]) -> str:
        """The name another format's file has: its adapter's, else (a broken file) the one its location gives."""
        try:
            return self.load_format(path, sp, fmt, deps).name
        except ToolDefinitionError:
            derived = getattr(fmt, "derived_name", None)
            if callable(derived):
                return str(derived(path))
            if path.name == "SKILL.md":
                return path.parent.name
            return _strip_suffix(path.name, (*getattr(fmt, "suffixes", ()), ".md"))

    def load_format(self, path: Path, sp: SearchPath, fmt: Any, checked: set[str] | None = None) -> Tool:
        """Load a tool file found through ``sp``: ours when ``fmt`` is None, else through its adapter (cached).

        Raises:
            ToolDefinitionError: the file is malformed.
        """
        if fmt is None:
            return self.load(path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits), checked)
        return self.load(
            path, lambda p: load_tool(p, sp.root, sp.trusted, self.limits, fmt), checked, ("tool", fmt.name, sp.root)
        )

    def _walk_tree(self, root: Path, tree: Path, deps: set[str]) -> Iterator[Path]:
        """The files of a location tree, sorted; its folders (and the existing ones above it) become ``deps``."""
        try:
            rel = tree.relative_to(root).parts
        except ValueError:
            rel = ()
        current = root
        for part in rel:  # a missing folder's creation changes its parent, which is already watched
            current = current / part
            if not is_dir(current):
                return
            self.watch([str(current)], deps)
        limit = self.limits.folder_files
        count = 0
        for folder, dirs, files in os.walk(tree):
            count += len(dirs) + len(files)
            if count > limit:
                raise FolderLimitError(str(tree), limit)
            dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
            if folder != str(tree):
                self.watch([folder], deps)
            for file in sorted(files):
                yield Path(folder, file)

    def format_of(self, path: Path, sp: SearchPath) -> Any:
        """The format ``path`` (found through ``sp``) is read with, or None for our own tools."""
        known = self._file_formats.get((path, sp), _UNKNOWN)  # what the folder's index saw
        if known is not _UNKNOWN:
            return known
        fmts = self.formats_for(sp)
        if not fmts:
            return None
        from .formats import recognise

        return recognise(path, sp.root, fmts)

    def _names_stale(self, ref: str, paths: tuple[SearchPath, ...]) -> bool:
        """After a miss: has any file of the folders ``ref`` was looked for in changed its declared name?

        A name edited in place does not change the folder's signature; this
        costs a stat per file of those folders, on misses only, at most once
        per file per stat interval (a cold run that misses a name for every
        tool it plans stat-ed every file on every miss).
        """
        try:
            prefix = check_ref(ref, self.limits.ref_length)[:-1]
        except ToolNotFoundError:
            return False
        epoch = self.freshness.epoch
        confirmed = self._names_confirmed
        for sp in paths:
            if self._builtin(sp):
                continue
            for path in self._listing(str(sp.root.joinpath(*prefix))):
                held = self._declared.get(path)
                if held is None or confirmed.get(path) == epoch:
                    continue
                if held[0] != searchpath.signature(path):
                    return True
                if len(confirmed) >= self.files_bound:
                    confirmed.clear()  # only an optimisation: a missing mark costs one more stat
                confirmed[path] = epoch
        return False

    def _listing(self, folder: str) -> tuple[str, ...]:
        """The paths of the files ``_files_in(folder)`` finds, cached by the folder's signature.

        Adding, removing or renaming a file changes its folder's signature,
        so one stat of the folder replaces reading it again on every miss.
        """
        now = searchpath.signature(folder)
        held = self._listings.get(folder)
        if held is not None and held[0] == now and now is not None:
            return held[1]
        files = tuple(entry.path for entry in _files_in(Path(folder), self.limits.folder_files))
        self._put(self._listings, folder, (now, files))
        return files


def close_refs(ref: str, refs: Iterable[str]) -> list[str]:
    """The refs of ``refs`` that ``ref`` may have meant, best first, ``SUGGESTIONS`` at most.

    A nested ref whose last segment is the bare ``ref`` (``status`` ->
    ``ops/status``), then close spellings (difflib's ratio).
    """
    import difflib  # only a miss needs it

    known = [r for r in refs if r != ref]
    nested = [r for r in known if "/" not in ref and r.rpartition("/")[2] == ref]
    close = difflib.get_close_matches(ref, known, n=SUGGESTIONS)
    return list(dict.fromkeys([*nested, *close]))[:SUGGESTIONS]


def real_paths(paths: Iterable[Path | None]) -> list[str | None]:
    """Each of ``paths`` resolved as ``os.path.realpath`` (``Path.resolve()``) does it, as text; None stays None.

    A listing's files share a few folders: resolving each file's whole path
    costs a stat per path component (over 10,000 tools, most of a repeated
    ``list``); this resolves each folder once and looks at the file alone,
    resolving it whole only when it is a symlink. Which of a folder's
    entries are symlinks is read once per folder (``os.scandir``, whose
    entries know without a stat on most file systems); a name the folder
    does not list as such (another spelling on a case-insensitive disk) is
    looked at alone.
    """
    folders: dict[str, tuple[str, dict[str, bool]]] = {}
    found: list[str | None] = []
    posix = os.sep == "/" and os.altsep is None
    for path in paths:
        if path is None:
            found.append(None)
            continue
        text = os.fspath(path)
        folder, _, name = text.rpartition("/")
        if not (posix and folder and folder[-1] != "/"):  # else what os.path.split gives, without its cost
            folder, name = os.path.split(text)
        known = folders.get(folder)
        if known is None:
            real = os.path.realpath(folder)
            # The folder's resolved path, ready to take a name (os.path.join's result: a root ends in a separator).
            known = folders[folder] = (real if real.endswith(os.sep) else real + os.sep, symlinks(folder))
        link = known[1].get(name)
        if name in ("", ".", "..") or (os.path.islink(text) if link is None else link):
            found.append(os.path.realpath(text))
            continue
        found.append(known[0] + name)
    return found


def symlinks(folder: str) -> dict[str, bool]:
    """Each entry of ``folder`` by name: whether it is a symlink; empty when it cannot be read."""
    try:
        with os.scandir(folder or ".") as entries:
            return {entry.name: entry.is_symlink() for entry in entries}
    except OSError:
        return {}


def subfolders(root: str, limit: int) -> tuple[list[tuple[str, ...]], int]:
    """The folders a listing reads under ``root`` (``os.walk``'s order, hidden and ``_`` ones skipped) and the
    files and folders counted in them.

    Raises:
        FolderLimitError: more than ``limit`` entries; at most ``limit + 1`` are read.
    """
    found: list[tuple[str, ...]] = []
    count = 0
    todo: list[tuple[str, ...]] = [()]
    while todo:
        rel = todo.pop()
        below = []
        try:
            with os.scandir(os.path.join(root, *rel)) as entries:
                for entry in entries:
                    count += 1
                    if count > limit:
                        raise FolderLimitError(root, limit)
                    if not entry.name.startswith((".", "_")) and _entry_folder(entry):
                        below.append(entry.name)
        except (OSError, ValueError):
            continue  # unreadable: skipped, as os.walk skips it
        found.append(rel)
        below.sort(reverse=True)  # popped in name order: the preorder os.walk gives
        todo.extend((*rel, name) for name in below)
    return found, count


def _entry_folder(entry: os.DirEntry[str]) -> bool:
    """A folder a walk enters: not a symlink to one (``os.walk`` lists those but never follows them)."""
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _files_in(folder: Path, limit: int) -> list[os.DirEntry[str]]:
    """The files of ``folder`` (symlinks to files included) that may be tools, sorted by name; [] if unreadable.

    Raises:
        FolderLimitError: ``folder`` holds more than ``limit`` entries (at most ``limit + 1`` are read).
    """
    found = []
    try:
        with os.scandir(folder) as entries:
            for count, entry in enumerate(entries, 1):
                if count > limit:
                    raise FolderLimitError(str(folder), limit)
                if entry.name not in RESERVED and not entry.name.startswith(".") and _entry_file(entry):
                    found.append(entry)
    except (OSError, ValueError):
        return []
    found.sort(key=lambda e: e.name)
    return found


def _entry_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, ValueError, RuntimeError):
        return False


def _strip_suffix(file: str, suffixes: Iterable[str]) -> str:
    """A file name without the longest of ``suffixes`` it ends with (else its last extension)."""
    for suffix in sorted(suffixes, key=len, reverse=True):
        if file.endswith(suffix) and len(file) > len(suffix):
            return file[: -len(suffix)]
    return os.path.splitext(file)[0]


def _usable(name: str) -> bool:
    """True for a declared name a ref can reach (``check_name`` says why another is not)."""
    return bool(name.strip()) and "/" not in name and "\\" not in name and ".." not in name


def stem(path: Path, fmt: Any) -> str:
    return _strip_suffix(path.name, getattr(fmt, "suffixes", ()) if fmt is not None else ())
