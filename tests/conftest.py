"""Shared fixtures. Every test gets its own database path and HOME under tmp_path, and the coding
agents' own configuration variables are removed (so their directories are under that HOME too):
no test can touch the user's database, home directory, agent configuration or tmux server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.harness.fixtures"]

# Property tests (docs/tmux-arguments.md §7): no example database in the checkout, no per-example deadline (tmux
# and agent start-up times vary with load), and the fixtures they use are per-test by design
# (each example resets what it touches). Each test sets its own modest max_examples.
settings.register_profile(
    "cafleet",
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "cafleet"))

_CLEARED = (
    "CAFLEET_DATABASE_URL",
    "CAFLEET_MAX_TEXT_LEN",
    "CAFLEET_MONITOR_WAKE_INTERVAL",
    "CAFLEET_PANE_LOCK_TIMEOUT",
    "CAFLEET_DELIVERY_HOLD_TIMEOUT",
    "CAFLEET_ESCALATE_AFTER",
    "CAFLEET_MULTIPLEXER",
    "CAFLEET_TMUX_FAULTS",
    "TMUX",
    "TMUX_PANE",
    # The coding agents' identity paths (cafleet/assets/targets.py): without them every agent
    # directory is under the test's HOME.
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "OPENCODE_CONFIG_DIR",
    "XDG_CONFIG_HOME",
)


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point CAFLEET_DATABASE_URL and HOME at temp paths; forget the caller's tmux."""
    for name in _CLEARED:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    db_path = tmp_path / "db" / "cafleet.db"
    monkeypatch.setenv("CAFLEET_DATABASE_URL", f"sqlite:///{db_path}")
    return db_path


@pytest.fixture
def db_path(isolated_env: Path) -> Path:
    """The (not yet created) database path of this test."""
    return isolated_env


@pytest.fixture
def bare_head_db(db_path: Path) -> Path:
    """A database migrated to head by the real db half, and nothing else (no asset rows)."""
    from cafleet.db.migrate import run_setup

    run_setup(str(db_path))
    return db_path


@pytest.fixture
def head_db(db_path: Path) -> Path:
    """A database migrated to head by the real setup path, with every agent's assets installed
    under the test's HOME and recorded (what `cafleet setup` does), so the stale-assets guard
    lets commands through."""
    from cafleet.db.migrate import run_setup

    run_setup(str(db_path))
    install_assets(db_path)
    return db_path


def install_assets(
    db_path: Path, agents: tuple[str, ...] = ("claude", "codex", "opencode")
) -> None:
    """`cafleet setup`'s assets half for ``agents``, in process; fails the test on a failure."""
    import cafleet
    from cafleet.assets.setup import run_assets_half

    results = run_assets_half(
        agents, db_path=str(db_path), record=True, version=cafleet.__version__
    )
    failed = [f"{r.coding_agent}: {r.error}" for r in results if not r.ok]
    assert not failed, f"assets half failed: {failed}"


@pytest.fixture
def conn(head_db: Path):
    """A validated connection to the head database (what the CLI guard hands a command)."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection

    connection = open_validated_connection(str(head_db))
    yield connection
    close_connection(connection)


def pytest_configure(config: pytest.Config) -> None:
    # Subprocesses spawned by tests must import this checkout, not some other install.
    root = str(Path(__file__).resolve().parent.parent)
    existing = os.environ.get("PYTHONPATH", "")
    if root not in existing.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + existing if existing else "")
