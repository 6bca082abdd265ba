"""One schema set-up for toolcascade's SQLite files (``orchestrator.sqlitefile``): the session store and the run log."""

from __future__ import annotations

import sqlite3

import pytest

from orchestrator import ConfigurationError
from orchestrator.runlog import RUNLOG, RunLog
from orchestrator.sqlitefile import open_checked
from orchestrator.sqlitestore import STORE, SQLiteStore

pytestmark = pytest.mark.anyio


async def test_each_kind_refuses_the_others_file_and_leaves_it_untouched(tmp_path):
    sessions, runs = tmp_path / "sessions.db", tmp_path / "runs.db"
    await SQLiteStore(sessions).append("a", [{"role": "user", "content": "hi"}])
    open_checked(runs, RUNLOG, create=True).close()
    before = sessions.read_bytes(), runs.read_bytes()
    with pytest.raises(ConfigurationError, match="not a toolcascade run log") as info:
        RunLog(sessions).runs()
    assert "TOOLCASCADE_RUNLOG" in str(info.value)  # where to choose another file
    with pytest.raises(ConfigurationError, match="not a toolcascade session store") as info:
        await SQLiteStore(runs).sessions()
    assert "TOOLCASCADE_SESSIONS" in str(info.value)
    with pytest.raises(ConfigurationError, match="not a toolcascade session store"):
        open_checked(runs, STORE, create=True)
    assert (sessions.read_bytes(), runs.read_bytes()) == before


def test_a_new_file_is_made_private_in_wal_with_its_schema_and_id(tmp_path):
    path = tmp_path / "deep" / "runs.db"
    db = open_checked(path, RUNLOG, create=True)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA application_id").fetchone()[0] == RUNLOG.application_id
        assert [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == [
            "runs",
            "sqlite_sequence",
        ]
    finally:
        db.close()
    assert path.stat().st_mode & 0o777 == 0o600
    again = open_checked(path, RUNLOG)  # ours: opened as it is
    again.close()
    with sqlite3.connect(path) as theirs:
        assert theirs.execute("PRAGMA application_id").fetchone()[0] == RUNLOG.application_id
    theirs.close()
