"""Shared fixtures. Every test gets its own database path and HOME under tmp_path, and the coding
agents' own configuration variables are removed (so their directories are under that HOME too):
no test can touch the user's database, home directory, agent configuration or tmux server."""

from __future__ import annotations

import compileall
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["tests.harness.fixtures", "tests.web_fixtures"]

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
    "CAFLEET_DELIVERY_WORKERS",
    "CAFLEET_ESCALATE_AFTER",
    "CAFLEET_MULTIPLEXER",
    "CAFLEET_TMUX_FAULTS",
    "TMUX",
    "TMUX_PANE",
    # The coding agents' identity paths (cafleet/assets/targets.py): without them every agent
    # directory is under the test's HOME.
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
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


# Test modules whose database tests run on both dialects (docs/storage.md §10.6): every test
# that reaches the `dialect` fixture (through `head_db`, `bare_head_db` or `conn`) runs once on
# SQLite and once on a real PostgreSQL server, unless marked `sqlite_only` (a test of SQLite's
# own mechanics: its catalogue, PRAGMAs, triggers, files).
BOTH_DIALECTS = frozenset(
    {
        "test_broker_concurrency",
        "test_broker_fleets",
        "test_broker_integrity",
        "test_broker_lookups",
        "test_broker_members",
        "test_broker_messages",
        "test_broker_monitor",
        "test_broker_notifications",
        "test_storage_postgresql",
        "test_storage_current",
        "test_cli_message",
        "test_web_api",
        "test_message_inputs",
        "test_delivery_send",
        "test_message_wait_stream",
        "test_seed_invariants",
        "test_delivery_drain",
        "test_tasks",
        "test_search",
        "test_notify",
        "test_review_store",
        "test_hooks",
    }
)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if (
        module in BOTH_DIALECTS
        and "dialect" in metafunc.fixturenames
        and metafunc.definition.get_closest_marker("sqlite_only") is None
    ):
        # `soak_unless_sqlite`: too long for the default run on PostgreSQL, so that case is
        # marked `soak` (outside the default run; `-m soak` runs it)
        pg_marks = (
            [pytest.mark.soak]
            if metafunc.definition.get_closest_marker("soak_unless_sqlite") is not None
            else []
        )
        metafunc.parametrize(
            "dialect", ["sqlite", pytest.param("postgresql", marks=pg_marks)], indirect=True
        )


@pytest.fixture
def dialect(request: pytest.FixtureRequest) -> str:
    """`sqlite` unless the test is parametrised over both dialects."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One private PostgreSQL server per test process (tests/pg_server.py), with a database
    already set up by cafleet to copy. Skipped when the server binaries are missing, failed
    then when CAFLEET_REQUIRE_POSTGRES=1 (CI)."""
    from tests.pg_server import TEMPLATE_HEAD, PgDb, start_server

    server = start_server()
    if server is None:
        if os.environ.get("CAFLEET_REQUIRE_POSTGRES") == "1":
            pytest.fail("PostgreSQL server binaries not found (/usr/lib/postgresql/*/bin)")
        pytest.skip("PostgreSQL server binaries not installed")
    try:
        server.admin(f'CREATE DATABASE "{TEMPLATE_HEAD}" TEMPLATE template0')
        from cafleet.db.migrate import run_setup

        saved = os.environ.get("CAFLEET_DATABASE_URL")
        head = PgDb(server, TEMPLATE_HEAD)
        os.environ["CAFLEET_DATABASE_URL"] = head.url
        try:
            run_setup(str(head))
        finally:
            if saved is None:
                os.environ.pop("CAFLEET_DATABASE_URL", None)
            else:
                os.environ["CAFLEET_DATABASE_URL"] = saved
        yield server
    finally:
        server.stop(wait=False)


def _pg_database(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, template: str
) -> Any:
    from tests.pg_server import PgDb

    server = request.getfixturevalue("pg_server")
    db = PgDb(server, server.new_database(template))
    monkeypatch.setenv("CAFLEET_DATABASE_URL", db.url)
    return db


@pytest.fixture(scope="session")
def sqlite_head_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite database per test process that the real db half migrated to head; `head_db`
    copies its directory (file modes, setup lock and all) as PostgreSQL copies its template
    database: the migrations ran once, not once a test."""
    from cafleet.db.migrate import run_setup

    path = tmp_path_factory.mktemp("head-template") / "db" / "cafleet.db"
    run_setup(str(path))
    return path


def copy_head(template: Path, db_path: Path) -> Path:
    """``template``'s directory copied to ``db_path``'s (which must not exist yet)."""
    shutil.copytree(template.parent, db_path.parent)
    if template.name != db_path.name:
        (db_path.parent / template.name).rename(db_path)
    return db_path


@pytest.fixture
def bare_head_db(
    db_path: Path, dialect: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A database migrated to head by the real db half, and nothing else (no asset rows)."""
    if dialect == "postgresql":
        return _pg_database(request, monkeypatch, "cafleet_head")  # type: ignore[no-any-return]
    return copy_head(request.getfixturevalue("sqlite_head_template"), db_path)


@pytest.fixture
def head_db(
    db_path: Path, dialect: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A copy of a database the real db half migrated to head, with every agent's assets
    installed under the test's HOME and recorded (what `cafleet setup` does), so the
    stale-assets guard lets commands through. On PostgreSQL the copy is of a template database."""
    if dialect == "postgresql":
        db = _pg_database(request, monkeypatch, "cafleet_head")
        install_assets(db)
        return db  # type: ignore[no-any-return]
    install_assets(copy_head(request.getfixturevalue("sqlite_head_template"), db_path))
    return db_path


def install_assets(db_path: Path, agents: tuple[str, ...] | None = None) -> None:
    """`cafleet setup`'s assets half for ``agents`` (default: every registered agent), in
    process; fails the test on a failure."""
    import cafleet
    from cafleet.agents.registry import agent_names
    from cafleet.assets.setup import run_assets_half

    agents = agent_names() if agents is None else agents
    results = run_assets_half(
        agents, db_path=str(db_path), record=True, version=cafleet.__version__
    )
    failed = [f"{r.coding_agent}: {r.error}" for r in results if not r.ok]
    assert not failed, f"assets half failed: {failed}"


@pytest.fixture
def conn(head_db: Path) -> Iterator[Any]:
    """A validated connection to the head database (what the CLI guard hands a command)."""
    from cafleet.cli.guard import open_validated_connection
    from cafleet.db.runtime import close_connection

    connection = open_validated_connection(str(head_db))
    yield connection
    close_connection(connection)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--agent-matrix",
        action="store_true",
        help="also run the agent_matrix real-agent cases (or set CAFLEET_AGENT_MATRIX=1)",
    )


@pytest.hookimpl(tryfirst=True)  # before xdist turns `-n N` into `--dist load`
def pytest_cmdline_main(config: pytest.Config) -> None:
    # `--dist loadgroup` lives here, not in addopts, so that `-p no:xdist` still parses; the
    # real-agent tests share one worker (tests/harness/fixtures.py).
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"
    # A worker parses the command line again, so it learns the mode from its controller; it
    # must know it to tag each test with its group.
    if getattr(config, "workerinput", {}).get("cafleet_loadgroup"):
        config.option.loadgroup = True


@pytest.hookimpl(optionalhook=True)  # an xdist hook: absent under -p no:xdist
def pytest_configure_node(node: Any) -> None:
    node.workerinput["cafleet_loadgroup"] = node.config.option.dist == "loadgroup"


def agent_matrix_wanted(config: pytest.Config) -> bool:
    return bool(config.getoption("--agent-matrix")) or os.environ.get("CAFLEET_AGENT_MATRIX") == "1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The other agents' cases of a real-agent matrix are opt-in: one real agent per behaviour
    # keeps the default run short (README.md "Run the tests").
    if agent_matrix_wanted(config):
        return
    dropped = [i for i in items if i.get_closest_marker("agent_matrix") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i.get_closest_marker("agent_matrix") is None]


def compile_checkout() -> None:
    """Write this checkout's bytecode (`__pycache__`, git-ignored). Under
    PYTHONDONTWRITEBYTECODE=1 (this machine's default) nothing else writes it, and then every
    `cafleet` a test spawns compiles each module it imports again: about 90 ms of CPU a
    process, thousands of processes a run. Python still reads bytecode that exists, and
    ignores a file whose source has changed since."""
    root = Path(__file__).resolve().parent.parent
    for package in ("cafleet", "benchmarks"):
        compileall.compile_dir(root / package, quiet=2, workers=1)


def pytest_configure(config: pytest.Config) -> None:
    # Subprocesses spawned by tests must import this checkout, not some other install.
    root = str(Path(__file__).resolve().parent.parent)
    existing = os.environ.get("PYTHONPATH", "")
    if root not in existing.split(os.pathsep):
        os.environ["PYTHONPATH"] = root + (os.pathsep + existing if existing else "")
    if not hasattr(config, "workerinput"):  # once a run: the controller, or the only process
        compile_checkout()
