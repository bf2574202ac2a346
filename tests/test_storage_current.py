"""The guard's fast check of a file at head (`cafleet.db.current`, docs/storage.md §5.4): a file
brought to head by setup is recognised from its catalogue alone; anything else goes to the full
diagnosis, which alone decides a refusal."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cafleet.cli.guard import GuardRefused, open_validated_connection
from cafleet.db import tx
from cafleet.db.current import is_current
from cafleet.db.runtime import close_connection, open_connection
from cafleet.db.shapes import HEAD_REVISION
from tests.storage_helpers import sql

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def head_db(bare_head_db: Path) -> Path:
    return bare_head_db


def _fast(db: Path) -> bool:
    conn = open_connection(str(db))
    try:
        with tx.read(conn):
            return is_current(conn)
    finally:
        close_connection(conn)


def test_a_file_set_up_to_head_is_current_at_a_glance(head_db: Path) -> None:
    assert _fast(head_db)


@pytest.mark.parametrize(
    "change",
    [
        "CREATE INDEX aux_names ON members (name)",  # compatible: still current, the long way
        "UPDATE alembic_version SET version_num = '0001'",
        "PRAGMA application_id = 7",
        "DROP INDEX idx_members_fleet_status",
    ],
)
def test_any_other_catalogue_goes_to_the_full_diagnosis(head_db: Path, change: str) -> None:
    sql(head_db, change)
    assert not _fast(head_db)


def test_a_compatible_extra_index_is_still_current(head_db: Path) -> None:
    sql(head_db, "CREATE INDEX aux_names ON members (name)")
    close_connection(open_validated_connection(str(head_db)))


def test_a_drifted_index_is_refused_by_the_full_diagnosis(head_db: Path) -> None:
    sql(head_db, "DROP INDEX idx_members_fleet_status")
    sql(head_db, "CREATE INDEX idx_members_fleet_status ON members (fleet_id)")
    with pytest.raises(GuardRefused, match="is damaged"):
        open_validated_connection(str(head_db))


def test_the_guard_on_a_current_file_loads_no_recorded_shapes(head_db: Path) -> None:
    code = (
        "import sys\n"
        "from cafleet.db.guard import open_validated_connection\n"
        "from cafleet.db.runtime import close_connection\n"
        f"close_connection(open_validated_connection({str(head_db)!r}))\n"
        "print(sorted(m for m in ('cafleet.db.shapes', 'cafleet.db.diagnosis', 'sqlalchemy')"
        " if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "[]", "")
    # ... and the file on disk was read, not changed
    db = sqlite3.connect(head_db)
    try:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (HEAD_REVISION,)
        ]
    finally:
        db.close()


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1))
def test_uri_path_quotes_as_urllib_does(path: str) -> None:
    """The runtime's own percent-encoding (urllib.parse costs ~5 ms of imports per command)."""
    import urllib.parse

    from cafleet.db.runtime import uri_path

    assert uri_path(path) == urllib.parse.quote(path)
