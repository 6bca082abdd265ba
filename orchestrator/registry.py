"""Finding tools by ref and listing them: the facade over search paths, folders and caches.

A ref (``summarize``, ``team/summarize``) is looked up in each search path
in order, first match wins, the built-in ``tools/`` folder last. Refs are
checked before any file is touched: absolute refs, ``..`` segments and
symlinks that resolve outside their search path are refused.

A found tool is cached like a derived value, with the folders its ref was
resolved in and its file: a later run verifies those (O(1) once verified
within the interval, or under notifications) instead of looking it up
again. A read-only pass (``check``, through ``snapshot()``) also keeps its
misses: a ref it did not find once is not looked for again in that pass.

A file is parsed once however many search paths reach it; the Tool a lookup
returns carries the ``root`` and ``trusted`` of the search path it was found
through, whichever lookup came first.

**Layers.** Discovery is four modules, each importing only those before it:
``searchpath`` (refs, search paths, stat signatures; a leaf), ``caches``
(``Caches``: every cache that follows file edits, the stat signatures and
the freshness bookkeeping, under one lock), ``folders`` (``Folders``: what
one folder offers, by declared name and stem, and the formats its files are
read with) and this module (``Registry``: finding a ref, listing, the
on-disk index). The names other modules import from here are re-exported.

**The on-disk index.** A full listing (``discover(parse=True)`` over the
registry's own search paths, as ``list`` and ``check`` do) reads and writes
``orchestrator.index``: a new registry's ``names`` and ``described`` lookups
are served from it when every file and folder they came from is unchanged,
and what the listing computed is written for the next process.

A cached value's paths join the ``checked`` set of whatever reuses it, so a
value computed from another (a row of ``list`` from a plan an invocation
cached) depends on every file behind both, and each written index entry
carries every path it depends on.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .caches import (
    BOUND_CEILING,
    DERIVED_BOUND,
    FILES_BOUND,
    GROWTH,
    INDEX_OFF,
    SEEN_BOUND,
    Caches,
    Snapshot,
)
from .errors import OrchestratorError, ToolDefinitionError, ToolNotFoundError
from .folders import SUGGESTIONS, Folders, Names, close_refs, stem, subfolders, symlinks
from .limits import DEFAULT_LIMITS, Limits
from .loader import check_name
from .searchpath import (
    NAME_MAX,
    RESERVED,
    UNSEEN,
    SearchPath,
    Signature,
    builtin_folder,
    builtin_tools,
    check_ref,
    is_dir,
    is_file,
    shown,
    signature,
)
from .tool import Tool

__all__ = [
    "BOUND_CEILING",
    "DERIVED_BOUND",
    "FILES_BOUND",
    "GROWTH",
    "NAME_MAX",
    "RESERVED",
    "SEEN_BOUND",
    "SUGGESTIONS",
    "UNSEEN",
    "Caches",
    "Names",
    "Registry",
    "SearchPath",
    "Signature",
    "Snapshot",
    "Tool",
    "builtin_folder",
    "check_ref",
    "close_refs",
    "is_file",
    "shown",
    "signature",
]


REMOTE_FINDER = "orchestrator.remote:find_remote"
"""What ``find`` asks, on a miss of a ref with a folder, for an MCP server's tool (``orchestrator.remote``)."""


class Registry(Folders):
    """Finds tools by ref and lists them; owns (through its bases) every cache that depends on files."""

    def __init__(
        self,
        paths: Iterable[SearchPath],
        frozen: Iterable[Path] = (),
        limits: Limits = DEFAULT_LIMITS,
        formats: Any = None,
    ) -> None:
        super().__init__(paths, frozen, limits, formats)
        self.functions: dict[str, Tool] = {}
        self.miss_finder: Callable[..., tuple[Tool, bool] | None] | None = None  # REMOTE_FINDER, loaded on first use
        # While a listing runs: each folder's resolved path, so a lookup resolves only its file (``_resolved``).
        self.real_folders: dict[str, str] | None = None

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        metadata: Mapping[str, Any] | None,
        prompt: str | None,
        description: str | None,
        authority: str | None,
    ) -> Tool:
        """A function tool (``Manager.register``): it shadows files, and every derived cache is dropped.

        Raises:
            ToolDefinitionError: a bad name, a non-callable, or metadata that is not a mapping.
        """
        check_name(name)
        if not callable(fn):
            raise ToolDefinitionError(f"register({name!r}): fn must be callable", tool=name)
        if metadata is not None and not isinstance(metadata, Mapping):
            raise ToolDefinitionError(f"register({name!r}): metadata must be a mapping", tool=name)
        meta = dict(metadata or {})
        frontmatter = {"name": name, "description": description, "authority": authority, "metadata": meta}
        tool = Tool(
            name=name,
            uri=f"function:{name}",
            kind="function",
            frontmatter=frontmatter,
            metadata=meta,
            prompt=prompt,
            fn=fn,
            authority=authority,
            description=description,
        )
        self.functions[name] = tool
        self.changed()
        return tool

    # -- finding ----------------------------------------------------------

    def locate(
        self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None
    ) -> tuple[Path, SearchPath] | None:
        """The file ``ref`` names in ``paths`` (first match wins), or None.

        Raises:
            ToolNotFoundError: the ref is malformed or a match resolves outside its search path.
        """
        if type(ref) is not str:
            check_ref(ref)  # refused before it is hashed into a cache key
        return self.memo("refs", (ref, paths), lambda deps: self._locate(ref, paths, deps), checked)

    def _locate(self, ref: str, paths: tuple[SearchPath, ...], deps: set[str]) -> tuple[Path, SearchPath] | None:
        parts = check_ref(ref, self.limits.ref_length)
        prefix, last = parts[:-1], parts[-1]
        for sp in paths:
            hit = self.names(sp, prefix, deps).refs.get(last)
            if hit is None:
                continue
            candidate = hit[0]
            try:
                inside = self._inside(candidate, sp.root)
            except (OSError, ValueError, RuntimeError):  # a symlink loop (RuntimeError before 3.13)
                continue
            if not inside:
                raise ToolNotFoundError(ref, [sp.root], reason=f"{candidate} resolves outside its search path")
            if self.reading is not None:
                self._keep_folder(paths, sp, prefix)
            return candidate, sp
        return None

    def _keep_folder(self, paths: tuple[SearchPath, ...], sp: SearchPath, prefix: tuple[str, ...]) -> None:
        """In a read-only pass (``check``, which finds every ref), the first ref located in a folder keeps the
        location (and format) of every other ref there at once, as a listing that parsed the folder does
        (``keep_found``): a folder the on-disk index served is not resolved and recognised file by file.
        """
        run = self.reading  # read once: this thread's pass
        done = ("located", sp, prefix, paths)
        if run is None or done in run.values:
            return
        run.values[done] = True
        names = self.names(sp, prefix)
        head = "/".join(prefix) + "/" if prefix else ""
        self.note_formats(sp, names)
        self.keep_found(paths, sp, prefix, [(head + last, path, sp) for last, (path, _fmt) in names.refs.items()], True)

    def _inside(self, path: Path, root: Path) -> bool:
        """Whether ``path.resolve()`` lies in ``root``; during a listing each folder is resolved once (``real_folders``).

        A file that is itself a symlink is resolved whole, every time.

        Raises:
            OSError, ValueError, RuntimeError: as ``Path.resolve`` (a symlink loop is RuntimeError before 3.13).
        """
        text = os.fspath(path)
        folders = self.real_folders  # read once: another thread's listing may end meanwhile
        if folders is None or os.path.islink(text):
            return path.resolve().is_relative_to(root)
        return self._folder_inside(os.path.split(text)[0], root, folders)

    @staticmethod
    def _folder_inside(parent: str, root: Path, folders: dict[str, str]) -> bool:
        """Whether folder ``parent`` resolves into ``root``, each folder resolved once per listing (``folders``).

        Raises:
            OSError, ValueError, RuntimeError: as ``Path.resolve``.
        """
        real = folders.get(parent)
        if real is None:
            real = folders[parent] = os.fspath(Path(parent).resolve())
        top = os.fspath(root)
        return real == top or (real + os.sep).startswith(top if top.endswith(os.sep) else top + os.sep)

    def find(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> Tool:
        """The tool ``ref`` names: a registered function first, then the search paths.

        Raises:
            ToolNotFoundError: nothing matches.
            ToolDefinitionError: the matching file is malformed.
        """
        if type(ref) is not str:
            check_ref(ref)  # refused before it is hashed into a cache key
        tool = self.functions.get(ref)
        if tool is not None:
            return tool
        generation = self.generation
        found = self.derived["tools"].get((ref, paths))
        if found is not None:
            if checked is not None and found[-1] is checked:
                return found[0]  # type: ignore[no-any-return]  # already validated in this run
            # Else one check of the folders and file it came from, as a memo hit does (O(1) once verified).
            if len(found) == 3 and self.current(found[1], checked, generation):
                found[2] = checked
                if checked is not None:
                    checked.update(found[1])
                return found[0]  # type: ignore[no-any-return]
        generation = self.generation
        snapshot = checked if type(checked) is Snapshot else self.reading
        try:
            if snapshot is not None:
                missed = snapshot.missed.get((ref, paths))
                if missed is not None:
                    raise missed.with_traceback(None)  # as the cache of failed loads does; no growing traceback
                try:
                    tool, path, sp = self._find_file(ref, paths, checked)
                except ToolNotFoundError as exc:
                    snapshot.missed[(ref, paths)] = exc
                    raise
            else:
                tool, path, sp = self._find_file(ref, paths, checked)
        except ToolNotFoundError:
            remote = self._find_remote(ref, paths, checked, generation) if "/" in ref else None
            if remote is None:
                raise
            return remote
        if tool.root != sp.root or tool.trusted != sp.trusted:
            tool = self._as_found(path, tool, sp)
        located = self.derived["refs"].get((ref, paths))
        # As a memo entry, [tool, deps, run]: the folders its ref was resolved in and the file. Without the
        # ref's entry (dropped while loading) only [tool, run]: valid for this run alone.
        entry = [tool, located[1] | {str(path)}, checked] if located is not None else [tool, checked]
        self.store("tools", (ref, paths), entry, generation)
        return tool

    def _find_remote(
        self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None, generation: int
    ) -> Tool | None:
        """After a miss: the MCP server tool ``ref`` names (``orchestrator.remote``), or None.

        Cached as a file is (with the authority files that declared its server) unless a running tool declared it.
        A malformed ref (refused before any file is touched) names no server's tool either.
        """
        try:
            check_ref(ref, self.limits.ref_length)
        except ToolNotFoundError:
            return None
        finder = self.miss_finder
        if finder is None:
            import importlib  # the finder's module sits above discovery (it plans): named, as the CLI's lazy entries

            module, _, name = REMOTE_FINDER.partition(":")
            finder = self.miss_finder = getattr(importlib.import_module(module), name)
        deps: set[str] = set()
        found = finder(self, ref, paths, deps)
        if found is None:
            return None
        tool, cacheable = found
        if checked is not None:
            checked.update(deps)
        if cacheable:
            self.store("tools", (ref, paths), [tool, frozenset(deps), checked], generation)
        return tool

    def _find_file(
        self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None, again: bool = True
    ) -> tuple[Tool, Path, SearchPath]:
        """Locate and load ``ref``; once, index again when a name was edited in place (see ``Names``).

        Raises:
            ToolNotFoundError: nothing matches.
            ToolDefinitionError: the matching file is malformed.
        """
        hit = self.locate(ref, paths, checked)
        if hit is None:
            if again and (self._folders_changed(ref, paths) or self._names_stale(ref, paths)):
                self.changed()  # a file just written, or a declared name edited in place: index again
                return self._find_file(ref, paths, checked, False)
            raise self.not_found(ref, paths)
        path, sp = hit
        fmt = self.format_of(path, sp)
        try:
            tool = self.load_format(path, sp, fmt, checked)
        except ToolDefinitionError:
            if not is_file(path):  # deleted between finding and reading it: as if it had not been found
                raise self.not_found(ref, paths) from None
            raise
        last = ref.rpartition("/")[2]
        if again and tool.name != last and stem(path, fmt) != last:
            self.changed()  # found by a name the file no longer declares: index again
            return self._find_file(ref, paths, checked, False)
        return tool, path, sp

    def not_found(self, ref: str, paths: tuple[SearchPath, ...]) -> ToolNotFoundError:
        """The error for a ref no search path holds: its "did you mean" is looked for only if it is read."""
        return ToolNotFoundError(
            shown(ref), [sp.root for sp in paths], builtin=builtin_tools(), near=lambda: self.suggest(ref, paths)
        )

    def suggest(self, ref: str, paths: tuple[SearchPath, ...]) -> list[str]:
        """Refs ``ref`` may have meant (``close_refs``), from what the registry lists: never an unbounded scan.

        Close spellings come from the ref's own folder in each search path
        (the names its lookup read); for a bare name, refs in subfolders
        ending in it (``ops/status``) from the folders a listing counts,
        ``Limits.folder_files`` entries per search path at most (a bigger one
        is passed over). Called only when a not-found error is read.
        """
        try:
            parts = check_ref(ref, self.limits.ref_length)
        except ToolNotFoundError:
            return []
        prefix, last = parts[:-1], parts[-1]
        refs: dict[str, None] = dict.fromkeys(n for n in self.functions if n.rpartition("/")[0] == "/".join(prefix))
        for sp in paths:
            try:
                refs.update(dict.fromkeys("/".join((*prefix, n)) for n in self.names(sp, prefix).refs))
                if prefix or self._builtin(sp) or not is_dir(sp.root):
                    continue
                for rel in subfolders(sp.folder, self.limits.folder_files)[0]:
                    if rel and last in self.names(sp, rel).refs:
                        refs["/".join((*rel, last))] = None
            except (OrchestratorError, OSError):
                continue  # a folder too big or unreadable: no suggestion from it
        return close_refs(ref, refs)

    def _folders_changed(self, ref: str, paths: tuple[SearchPath, ...]) -> bool:
        """After a miss: look at the ref's folders now (the program may have just written the file)."""
        try:
            prefix = check_ref(ref, self.limits.ref_length)[:-1]
        except ToolNotFoundError:
            return False
        return not self.watch([str(sp.root.joinpath(*prefix)) for sp in paths], None, now=True)

    def _as_found(self, path: Path, parsed: Tool, sp: SearchPath) -> Tool:
        """``parsed`` (first found through another search path) with ``sp``'s root and trust.

        The file is parsed (a python tool imported) once; only where it was
        found differs, and with it the authority and trust. One Tool per
        (file, search path) while the file is unchanged.
        """
        key = (str(path), sp)
        entry = self._variants.get(key)
        if entry is None or entry[0] is not parsed:
            entry = (parsed, replace(parsed, root=sp.root, trusted=sp.trusted))
            self._put(self._variants, key, entry)
        return entry[1]

    def exists(self, ref: str, paths: tuple[SearchPath, ...], checked: set[str] | None = None) -> bool:
        """True when ``ref`` names a tool (without parsing it)."""
        if type(ref) is not str:
            return False
        if ref in self.functions:
            return True
        try:
            return self.locate(ref, paths, checked) is not None
        except ToolNotFoundError:
            return False

    def discover(
        self, paths: tuple[SearchPath, ...], *, parse: bool = False
    ) -> Iterator[tuple[str, Path | None, SearchPath | None]]:
        """Every ref reachable through ``paths`` with the file it resolves to, first match wins.

        Registered functions come first (path None). A file is listed once,
        by its name (declared, else its stem), with its folder as a prefix;
        other formats' location trees are listed at their search path's top
        level. Only names are read (a frontmatter's ``name``, a python
        literal's, another format's adapter's); with ``parse`` (a listing
        that describes every tool anyway) our files are parsed into the
        cache instead, so each is opened once. The files counted first raise
        the cache bounds.

        A full listing (``parse``, the registry's own search paths) reads and
        writes the on-disk index (``orchestrator.index``) while it runs: its
        lookups of kept values are served from the index when their files are
        unchanged, and once the caller has taken (and described) every ref,
        what it computed is written for the next process.
        """
        index = self._listing_index(paths, parse)
        with self.lock:
            if not self.freshness.listings:
                self.real_folders = {}  # while listings run, one resolve of each folder their lookups reach
            self.freshness.listings += 1  # no watcher starts while it runs (Freshness.verify)
        try:
            yield from self._discover(paths, parse)
            if index is not None:
                index.save(self)  # the caller described every ref it was given: write what it computed
        finally:
            with self.lock:
                self.freshness.listings -= 1
                if not self.freshness.listings:
                    self.real_folders = None
            if index is not None:
                self.indexing = None
                self._index_busy = False

    def _listing_index(self, paths: tuple[SearchPath, ...], parse: bool) -> Any:
        """The index a listing of ``paths`` reads and writes (now ``indexing``), or None.

        Only a full listing of the registry's own search paths with no
        registered functions (they shadow files) uses it, and never a listing
        nested in another or running beside another on a second thread.
        """
        if not parse or paths != self.paths or self.functions:
            return None
        with self.lock:
            if self._index_busy:
                return None
            if self.index is None:
                from .index import Index  # only listings pay for json, hashing and the cache folder

                self.index = Index.open(self) or INDEX_OFF
            if self.index is INDEX_OFF:
                return None
            self._index_busy = True
        self.index.begin()
        self.indexing = self.index
        return self.index

    def _discover(
        self, paths: tuple[SearchPath, ...], parse: bool
    ) -> Iterator[tuple[str, Path | None, SearchPath | None]]:
        seen: set[str] = set()
        for name in sorted(self.functions):
            seen.add(name)
            yield name, None, None
        folders: list[tuple[SearchPath, tuple[str, ...]]] = []
        files = 0
        for sp in paths:
            if not is_dir(sp.root):
                continue
            walked, counted = subfolders(sp.folder, self.limits.folder_files)
            folders.extend((sp, rel) for rel in walked)
            files += counted
        self.grow(files)  # before anything is parsed: a listing's parses all stay cached
        listed: set[tuple[SearchPath, str]] = set()  # by text: a str's hash is kept, a Path's is not
        # Each folder's refs as soon as it is read: its files are described while their looks are fresh
        # (a look within the stat interval is not repeated), not after every other folder was read.
        for sp, rel in folders:
            names = self.names(sp, rel, parse=parse)
            prefix = "/".join(rel) + "/" if rel else ""
            found: list[tuple[str, Path | None, SearchPath | None]] = []
            for last, (path, _fmt) in names.refs.items():
                ref = prefix + last
                file = (sp, os.fspath(path))
                if file in listed or ref in seen:
                    continue
                seen.add(ref)
                listed.add(file)
                found.append((ref, path, sp))
            if parse and found:
                self.keep_found(paths, sp, rel, found)
            yield from found

    def keep_found(
        self,
        paths: tuple[SearchPath, ...],
        sp: SearchPath,
        prefix: tuple[str, ...],
        refs: list[tuple[str, Path | None, SearchPath | None]],
        located: bool = False,
    ) -> None:
        """Keep each of ``refs`` (our own files a listing just parsed in folder ``prefix`` of ``sp``) as ``find``
        and ``locate`` would keep it, so the listing's describe step (and ``check``'s lookups) are cache hits.
        ``located``: a lookup located one of them (``_keep_folder``): a folder not parsed keeps its refs alone.

        The entries are those a lookup would store: the folders the ref is
        resolved in (this folder in ``sp`` and in every search path before it,
        whose names must not hold it) and the file. A ref whose lookup would
        do anything else (a file of another format, a symlink leaving the
        search path, a name the file no longer declares, a load error) is left
        to ``find``. Nothing is kept when the caches were dropped meanwhile.
        """
        files, seen = self._files, self._seen
        ends = (refs[0][1], refs[-1][1])
        parsed = any(path is not None and (os.fspath(path), "tool") in files for path in ends)
        if not (parsed or located):
            return  # nothing parsed here: the folder's names (and its rows) came from the on-disk index
        generation = self.generation
        deps: set[str] = set()
        before: list[dict[str, tuple[Path, str | None]]] = []
        own: dict[str, tuple[Path, str | None]] = {}
        for other in paths:
            offered = self.names(other, prefix, deps).refs
            if other == sp:
                own = offered
                break
            before.append(offered)
        else:
            return
        folders_deps = frozenset(deps)
        parent = os.path.split(os.fspath(ends[0]))[0] if ends[0] is not None else ""
        links = symlinks(parent)  # one read of the folder, not an lstat per file (``_inside``)
        plain_inside: bool | None = None  # whether the folder itself resolves into sp.root, once
        refs_kept: list[tuple[Any, Any]] = []
        tools_kept: list[tuple[Any, Any]] = []
        for ref, path, _sp in refs:
            last = ref.rpartition("/")[2]
            hit = own.get(last)
            if path is None or hit is None or hit[0] is not path or hit[1] is not None:
                continue
            if any(last in offered for offered in before):
                continue
            name = os.fspath(path)
            tool = None
            if parsed:
                entry = files.get((name, "tool"))
                if entry is None or entry[0] != seen.get(name, UNSEEN) or not isinstance(entry[1], Tool):
                    continue
                tool = entry[1]
                if tool.name != last and stem(path, None) != last:
                    continue
            try:
                folder, file = os.path.split(name)
                folders = self.real_folders
                if folder != parent or links.get(file) is not False or folders is None:
                    if not self._inside(path, sp.root):
                        continue
                else:
                    if plain_inside is None:
                        plain_inside = self._folder_inside(parent, sp.root, folders)
                    if not plain_inside:
                        continue
            except (OSError, ValueError, RuntimeError):
                continue
            refs_kept.append(((ref, paths), [(hit[0], sp), folders_deps, None]))
            if tool is not None:
                if tool.root != sp.root or tool.trusted != sp.trusted:
                    tool = self._as_found(path, tool, sp)
                tools_kept.append(((ref, paths), [tool, folders_deps | {name}, None]))
        if self.store_many("refs", refs_kept, generation) and tools_kept:
            self.store_many("tools", tools_kept, generation)

    def clashes(self, paths: tuple[SearchPath, ...]) -> Iterator[tuple[SearchPath, str, Path, Path, str]]:
        """Names two files of one search path claim, and declared names that shadow another file's stem.

        Yields (search path, ref, the file that wins, the other, ``"name"`` or ``"stem"``).
        """
        for sp in paths:
            if not is_dir(sp.root):
                continue
            for rel in subfolders(sp.folder, self.limits.folder_files)[0]:
                for name, winner, loser, kind in self.names(sp, rel).clashes:
                    yield sp, "/".join((*rel, name)), winner, loser, kind
