"""Where toolcascade keeps what is not a tool: the cache, state and config folders come from platformdirs (issue 30).

Every environment override still wins: ``TOOLCASCADE_CACHE``, ``TOOLCASCADE_SESSIONS``
and the new ``TOOLCASCADE_CONFIG``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from orchestrator.cachefolder import cache_folder, config_folder, state_folder
from orchestrator.errors import ConfigurationError
from orchestrator.sessions import SQLiteStore, default_path, open_store

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG variables are read on Linux")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh home and no XDG or toolcascade variables."""
    for name in (
        "TOOLCASCADE_CACHE",
        "TOOLCASCADE_CONFIG",
        "TOOLCASCADE_SESSIONS",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
        "XDG_CONFIG_HOME",
    ):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "home"
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.setenv("USERPROFILE", str(folder))
    return folder


def test_each_folder_is_the_one_platformdirs_names(home: Path) -> None:
    dirs = platformdirs.PlatformDirs("toolcascade", appauthor=False)
    assert cache_folder() == Path(dirs.user_cache_dir)
    assert state_folder() == Path(dirs.user_state_dir)
    assert config_folder() == Path(dirs.user_config_dir)
    assert default_path() == Path(dirs.user_state_dir) / "sessions.db"


def test_the_variables_of_toolcascade_win(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCASCADE_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("TOOLCASCADE_CONFIG", str(tmp_path / "conf"))
    monkeypatch.setenv("TOOLCASCADE_SESSIONS", str(tmp_path / "s" / "x.db"))
    assert cache_folder() == tmp_path / "c"
    assert config_folder() == tmp_path / "conf"
    store = open_store(None)
    assert isinstance(store, SQLiteStore) and store.path == tmp_path / "s" / "x.db"


@linux_only
def test_xdg_variables_move_every_folder(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xs"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xf"))
    assert cache_folder() == tmp_path / "xc" / "toolcascade"
    assert state_folder() == tmp_path / "xs" / "toolcascade"
    assert config_folder() == tmp_path / "xf" / "toolcascade"
    assert default_path() == tmp_path / "xs" / "toolcascade" / "sessions.db"


@linux_only
def test_linux_defaults_are_where_they_always_were(home: Path) -> None:
    assert cache_folder() == home / ".cache" / "toolcascade"
    assert state_folder() == home / ".local" / "state" / "toolcascade"
    assert config_folder() == home / ".config" / "toolcascade"
    assert default_path() == home / ".local" / "state" / "toolcascade" / "sessions.db"


@linux_only
def test_a_relative_xdg_variable_is_ignored_as_the_spec_says(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/config")
    assert cache_folder() == home / ".cache" / "toolcascade"
    assert config_folder() == home / ".config" / "toolcascade"


def test_asking_for_a_folder_creates_nothing(home: Path) -> None:
    for folder in (cache_folder(), state_folder(), config_folder()):
        assert folder is not None and not folder.exists()
    assert not home.exists()


def test_a_store_kept_at_the_old_place_stays_found(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = home / ".local" / "state" / "toolcascade" / "sessions.db"
    monkeypatch.setattr("orchestrator.sessions.state_folder", lambda: home / "Library" / "toolcascade")
    assert default_path() == home / "Library" / "toolcascade" / "sessions.db"  # nothing kept yet: the platform's
    legacy.parent.mkdir(parents=True)
    legacy.write_bytes(b"")
    assert default_path() == legacy  # an upgrade loses no conversation
    (home / "Library" / "toolcascade").mkdir(parents=True)
    (home / "Library" / "toolcascade" / "sessions.db").write_bytes(b"")
    assert default_path() == home / "Library" / "toolcascade" / "sessions.db"


def test_no_home_no_state_folder_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLCASCADE_SESSIONS", raising=False)
    monkeypatch.setattr("orchestrator.sessions.state_folder", lambda: None)
    with pytest.raises(ConfigurationError, match="TOOLCASCADE_SESSIONS"):
        open_store(None)
