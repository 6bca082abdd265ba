"""Issue 24, the listing's CPU: a repeated listing reads its rows from the index at once, imports no format, and
lists exactly what a listing without the index lists.

Files are aged (``cache_helpers.age``) so the index keeps their entries
(an entry whose files changed within 2 s of the write is not kept).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cache_helpers import age

from orchestrator import Manager
from orchestrator.folders import real_paths
from orchestrator.index import FORMATS_GROUP

TOOL = """\
---
description: Tool {n}, about {{{{ args.topic }}}}.
metadata:
  params:
    type: object
    properties: {{topic: {{type: string}}}}
---
Write about {{{{ args.topic }}}}.
"""

LIST = """
import json, sys
from orchestrator import Manager
rows = [[i.ref, i.name, i.kind, i.description, i.hidden, i.params, str(i.path)] for i in Manager([sys.argv[1]]).list_tools()]
formats = sorted(m for m in sys.modules if m.startswith("orchestrator.formats."))
print(json.dumps({"rows": rows, "formats": formats}))
"""


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """Two folders of markdown tools, aged."""
    root = tmp_path / "tools"
    for folder in ("a", "b"):
        (root / folder).mkdir(parents=True)
        for n in range(4):
            (root / folder / f"t{n}.md").write_text(TOOL.format(n=n))
    age(root)
    return root


def rows(manager: Manager) -> list[tuple[object, ...]]:
    return [(i.ref, i.name, i.kind, i.description, i.hidden, i.params, i.path) for i in manager.list_tools()]


def listed(tools: Path, cache: Path) -> dict[str, list[object]]:
    """What a new process lists over ``tools`` with ``cache`` as its cache folder, and the format modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", LIST, str(tools)],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "TOOLCASCADE_CACHE": str(cache)},
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_a_repeated_listing_in_a_new_process_imports_no_format_and_lists_the_same(tools: Path, cache: Path) -> None:
    first = listed(tools, cache)
    assert first["formats"], "a first listing reads every file: it asks each format whether the file is its own"
    again = listed(tools, cache)
    assert again["rows"] == first["rows"]
    assert len(again["rows"]) >= 8
    assert again["formats"] == [], "the index's key names the built-in formats without importing them"


def test_rows_served_at_once_leave_out_an_edited_and_a_removed_file(
    tools: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows(Manager([tools]))  # writes the index
    edited = tools / "a" / "t1.md"
    edited.write_text(TOOL.format(n=1).replace("Tool 1,", "Edited tool,"))
    (tools / "b" / "t2.md").unlink()
    age(tools, seconds=30)  # older than the racy window, and another mtime than the one kept
    served = rows(Manager([tools]))
    monkeypatch.setenv("TOOLCASCADE_INDEX", "off")
    assert served == rows(Manager([tools]))
    descriptions = {ref: description for ref, _name, _kind, description, *_ in served}
    assert descriptions["a/t1"] == "Edited tool, about {{ args.topic }}."
    assert "b/t2" not in descriptions


def test_a_listing_in_the_same_process_after_an_edit_lists_the_edit(tools: Path, cache: Path) -> None:
    rows(Manager([tools]))  # writes the index
    manager = Manager([tools])
    assert rows(manager) == rows(manager)  # the second listing: the registry's own caches
    (tools / "a" / "t0.md").write_text(TOOL.format(n=0).replace("Tool 0,", "Changed,"))
    age(tools, seconds=20)
    manager.refresh()
    assert dict((r[0], r[3]) for r in rows(manager))["a/t0"] == "Changed, about {{ args.topic }}."


def test_the_index_names_the_entry_point_group_formats_are_installed_under() -> None:
    from orchestrator.formats import ENTRY_POINTS

    assert FORMATS_GROUP == ENTRY_POINTS


def test_real_paths_split_as_os_path_split_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.md").write_text("x")
    monkeypatch.chdir(tmp_path)
    texts = ["f.md", "d/f.md", f"{tmp_path}//d//f.md", f"{tmp_path}/d/./f.md", "/", f"{tmp_path}/d/"]
    assert real_paths([Path(t) for t in texts]) == [os.path.realpath(t) for t in texts]
    assert real_paths(texts) == [os.path.realpath(t) for t in texts]  # type: ignore[arg-type]  # text as given


def test_a_listing_index_looks_at_each_path_once(tools: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows(Manager([tools]))  # writes the index
    looked: list[str] = []
    real_stat = os.stat

    def counting(path: object, *args: object, **kwargs: object) -> os.stat_result:
        looked.append(os.fspath(path))  # type: ignore[arg-type]
        return real_stat(path, *args, **kwargs)  # type: ignore[arg-type]

    manager = Manager([tools])
    monkeypatch.setattr(os, "stat", counting)
    rows(manager)
    monkeypatch.setattr(os, "stat", real_stat)
    files = [p for p in looked if p.endswith(".md") and "/tools/" in p and "AUTHORITY" not in p]
    assert sorted(set(files)) == sorted(files), "each tool file is looked at once"
    assert len(set(files)) == 8


def test_a_repeated_listing_with_frozen_builtins_lists_what_it_lists_without_the_index(
    tools: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The built-ins of an installed package are never looked at: the index's one pass over its paths skips them."""
    rows(Manager([tools], watch_builtins=False))  # writes the index
    manager = Manager([tools], watch_builtins=False)
    served = [(i.ref, i.description, i.hidden) for i in manager.list_tools(hidden=True)]
    assert not any(p.startswith(manager.registry.frozen) for p in manager.registry.declared_signatures())
    monkeypatch.setenv("TOOLCASCADE_INDEX", "off")
    assert served == [(i.ref, i.description, i.hidden) for i in Manager([tools]).list_tools(hidden=True)]
    assert any(ref == "a/t0" for ref, *_ in served) and len(served) > 8
