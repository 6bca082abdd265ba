"""Issue 24, listing speed over large catalogues: the shortcuts a listing takes give the answers the long way gives.

The figures are measured in ``bench/catalog.py --cpu``; these tests hold the
shortcuts to their meaning, with real files (and symlinks) in ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

from orchestrator.folders import real_paths


def test_real_paths_resolve_as_path_resolve_does(tmp_path: Path) -> None:
    (tmp_path / "tools" / "team").mkdir(parents=True)
    plain = tmp_path / "tools" / "team" / "a.md"
    plain.write_text("a\n")
    missing = tmp_path / "tools" / "gone.md"
    dotted = tmp_path / "tools" / "team" / ".." / "team" / "a.md"
    paths = [plain, None, missing, dotted, tmp_path / "tools" / "team" / "."]
    assert real_paths(paths) == [None if p is None else str(p.resolve()) for p in paths]


def test_real_paths_follow_a_symlinked_file_and_a_symlinked_folder(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "t.md").write_text("t\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "link.md").symlink_to(tmp_path / "shared" / "t.md")
    (tmp_path / "tools" / "folder").symlink_to(tmp_path / "shared", target_is_directory=True)
    paths = [tmp_path / "tools" / "link.md", tmp_path / "tools" / "folder" / "t.md", tmp_path / "shared" / "t.md"]
    found = real_paths(paths)
    assert found == [str(p.resolve()) for p in paths]
    assert len(set(found)) == 1  # one file reached three ways: a listing shows it once
