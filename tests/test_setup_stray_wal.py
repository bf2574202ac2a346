"""docs/storage.md §6: with P absent, `setup` refuses when `P-wal` or `P-shm` exists, instead of creating a
database beside them (SQLite would delete a `-wal` it cannot match, losing its frames)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from tests.cli_helpers import run_cli
from tests.storage_helpers import leave_wal_frames, snapshot


def _foreign_wal(directory: Path) -> Path:
    """`other.db` in WAL mode with committed frames left in `other.db-wal` (its writer exited
    without closing), made by plain sqlite3 in another file."""
    other = directory / "other.db"
    leave_wal_frames(
        other,
        "CREATE TABLE keep (v TEXT)",
        "INSERT INTO keep VALUES ('precious')",
    )
    return other


def _message(db: Path, stray: list[str]) -> str:
    names = " and ".join(f"{db}{s}" for s in stray)
    verb, pronoun, obj = ("exist", "they", "them") if len(stray) > 1 else ("exists", "it", "it")
    return (
        f"Error: {db} does not exist but {names} {verb} beside it; {pronoun} may hold another "
        f"database's data, so cafleet will not create a database next to {obj}: restore {db}, "
        f"or move {names} away, then run 'cafleet setup' again\n"
    )


@pytest.mark.parametrize("stray", [["-wal"], ["-shm"], ["-wal", "-shm"]])
def test_setup_refuses_beside_a_foreign_wal_and_keeps_its_bytes(
    db_path: Path, stray: list[str]
) -> None:
    db_path.parent.mkdir(parents=True)
    other = _foreign_wal(db_path.parent)
    for suffix in ("-wal", "-shm"):
        source = Path(f"{other}{suffix}")
        if suffix in stray:
            os.replace(source, f"{db_path}{suffix}")
        else:
            source.unlink()
    os.replace(other, db_path.parent / "elsewhere.db")  # the WAL's own database is not P
    before = snapshot(db_path)
    assert before.main is None

    code, out, err = run_cli("setup")

    assert code == 1
    assert "Created" not in out  # the db half refused; the assets half reports on its own
    # setup reports per half: `db half failed: <the refusal>` (docs/cli.md), then the summary
    assert f"db half failed: {_message(db_path, stray).removeprefix('Error: ')}" in err
    assert snapshot(db_path) == before
    if "-wal" in stray:
        # The frames are intact: put the WAL back beside its database and read them.
        elsewhere = db_path.parent / "elsewhere.db"
        os.replace(f"{db_path}-wal", f"{elsewhere}-wal")
        con = sqlite3.connect(str(elsewhere))
        try:
            assert con.execute("SELECT v FROM keep").fetchall() == [("precious",)]
        finally:
            con.close()


def test_setup_creates_the_database_once_the_stray_files_are_moved(db_path: Path) -> None:
    db_path.parent.mkdir(parents=True)
    Path(f"{db_path}-shm").write_bytes(b"\0" * 32768)
    assert run_cli("setup")[0] == 1
    os.replace(f"{db_path}-shm", db_path.parent / "moved-shm")
    code, out, _err = run_cli("setup")
    assert code == 0
    assert out.startswith(f"Created {db_path} and applied migrations to head")
