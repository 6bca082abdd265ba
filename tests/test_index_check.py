"""Issue 24, ``check`` after a listing: folders the on-disk index served need no second look per tool.

``check`` lists every folder (served from the index when unchanged) and
then finds each ref. In a read-only pass (``Registry.snapshot()``, as
``check`` runs), the first ref located in a served folder keeps the
location and format of every other ref there, as a listing that parsed the
folder does: the finds that follow resolve and recognise nothing again. A
listing alone (``list``, or ``check`` with its verdict kept) keeps nothing of the kind.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cache_helpers import age

import orchestrator.formats
import orchestrator.registry
from orchestrator import Manager

Write = Callable[[str, str], Path]

TOOL = "---\ndescription: Tool {n}.\nmetadata:\n  params: {{type: object}}\n---\nSay {n}.\n"


@pytest.fixture
def catalog(write: Write, tmp_path: Path, cache: Path) -> Path:
    """Two folders of tools, aged, and an index written by a first listing."""
    for folder in ("a", "b"):
        for n in range(3):
            write(f"tools/{folder}/t{n}.md", TOOL.format(n=n))
    write("tools/top.md", TOOL.format(n="top"))
    write("tools/named.md", "---\nname: alpha\ndescription: Named.\n---\nHi.\n")
    age(tmp_path / "tools")
    Manager([tmp_path / "tools"]).list_tools()
    return tmp_path / "tools"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How often a ref is located and a file's format recognised from now on."""
    counts = {"locate": 0, "recognise": 0}
    locate = orchestrator.registry.Registry._locate
    recognise = orchestrator.formats.recognise

    def located(self: object, *args: object) -> object:
        counts["locate"] += 1
        return locate(self, *args)  # type: ignore[arg-type]

    def recognised(*args: object, **kwargs: object) -> object:
        counts["recognise"] += 1
        return recognise(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(orchestrator.registry.Registry, "_locate", located)
    monkeypatch.setattr(orchestrator.formats, "recognise", recognised)
    return counts


def found_in_a_pass(manager: Manager) -> dict[str, Path | None]:
    """What ``check`` does first: list every folder in a read-only pass, then find each ref listed."""
    registry = manager.registry
    with registry.snapshot() as run:
        refs = [ref for ref, _path, _sp in registry.discover(manager.paths, parse=True)]
        return {ref: registry.find(ref, manager.paths, run).path for ref in refs}


def test_a_read_only_pass_finds_served_refs_without_locating_or_recognising(
    catalog: Path, counted: dict[str, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = Manager([catalog])
    found = found_in_a_pass(manager)
    folders = {path.parent for path in found.values() if path is not None}
    assert counted == {"locate": len(folders), "recognise": 0}  # one lookup per folder, the rest kept with it
    assert found["a/t1"] == catalog / "a" / "t1.md" and found["alpha"] == catalog / "named.md"
    with monkeypatch.context() as patch:  # the same finds with no index: every ref located and read as before
        patch.setenv("TOOLCASCADE_INDEX", "off")
        assert found_in_a_pass(Manager([catalog])) == found


def test_a_listing_alone_keeps_no_locations_for_served_folders(catalog: Path) -> None:
    manager = Manager([catalog])
    manager.list_tools()
    with manager.registry.snapshot():  # check with its verdict kept: a read-only listing that finds nothing
        list(manager.registry.discover(manager.paths, parse=True))
    located = manager.registry.derived.get("refs", {})
    assert not [key for key in located if key[0] in ("a/t0", "b/t2", "top")]


def test_a_served_ref_edited_away_is_not_found_by_its_old_name(catalog: Path, write: Write) -> None:
    manager = Manager([catalog])
    found_in_a_pass(manager)
    (catalog / "a" / "t1.md").unlink()
    manager.clear_cache()
    with manager.registry.snapshot() as run:
        assert not manager.registry.exists("a/t1", manager.paths, run)
