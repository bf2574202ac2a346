"""The executable layer map: which part of `cafleet` may import which, at module level and
inside functions (docs/architecture.md §1). `tests/test_layers.py` fails on any other import, and
the table in docs/architecture.md §1 is rendered from this file (`python -m tests.layer_map
--write` rewrites it; the test fails when it differs).

A module belongs to the layer with the longest matching prefix. A layer may import its own
modules, the leaves, the targets in ``eager`` anywhere, and the targets in ``lazy`` only inside a
function or under ``TYPE_CHECKING`` (start-up cost: docs/architecture.md §2). A target is a
module prefix, so ``cafleet.db.timefmt`` allows that module and not the rest of ``cafleet.db``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

# Standard-library modules any layer may import at module level; they import only each other.
LEAVES: dict[str, str] = {
    "cafleet": "the package: its version only",
    "cafleet.errors": "the one exception root (`CafleetError`) and `error_text`",
    "cafleet.status": "the one map of exit statuses, error codes and shared error sentences",
    "cafleet.text": "text rules: ANSI stripping, capture windows, display sanitizers, body limits",
    "cafleet.signals": "the signal recorder (acted on only at safe points)",
    "cafleet.procs": "processes in `/proc` (liveness, process trees)",
    "cafleet.git": "every git command, for member worktrees (`docs/worktrees.md`)",
    "cafleet.lazy": "the PEP 562 loader behind `cafleet.broker` and `cafleet.records`",
    "cafleet.agents.registry": "the one registry of coding agents: their names, each agent's package loaded on first use",
    "cafleet.delivery.policy": "the input-policy type, an agent's policy, every delivery constant",
    "cafleet.pgurl": "PostgreSQL URLs: `P` without its password, the local state directory",
    "cafleet.hosts": "host ids (`CAFLEET_HOST_ID`) and the one rule of whose panes a host types into",
    "cafleet.files": "files read only when regular and bounded; files created `0600` in `0700` directories",
    "cafleet.digest": "SHA-256 without OpenSSL's import cost",
}


@dataclass(frozen=True)
class Layer:
    name: str
    modules: tuple[str, ...]
    owns: str
    eager: tuple[str, ...] = ()
    lazy: tuple[str, ...] = ()


LAYERS: tuple[Layer, ...] = (
    Layer(
        "config",
        ("cafleet.config",),
        "`CAFLEET_*` settings, the database path and the files beside it, `MAX_ID`",
    ),
    Layer(
        "records",
        ("cafleet.records",),
        "NamedTuples decoded from rows; `StorageIntegrityError`",
    ),
    Layer(
        "db",
        ("cafleet.db",),
        "Core tables; the repository's statements authored in Core (`db/statements/`) and their "
        "compiled catalog (`db/catalog/`); the runtime connection on stdlib `sqlite3` "
        "(`db/runtime.py`) with transactions and the writer lock; the guard and diagnosis; "
        "SQLAlchemy's connection and the migration driver (Alembic) for `setup` (the engine "
        "registers its connection kind with the runtime connection, which never imports it). "
        "SQLAlchemy only in `schema`, `statements`, `catalog/build`, `engine`, `migrate` and "
        "the diagnosis of a file that is not current (never on a command's path); `alembic` "
        "only inside `db/migrate.py`, lazily",
        eager=("cafleet.config", "cafleet.records"),
    ),
    Layer(
        "broker",
        ("cafleet.broker",),
        "repository functions, one transaction each, and their errors; callers outside it use "
        "only the `cafleet.broker` facade and `cafleet.broker.errors`",
        eager=("cafleet.db", "cafleet.records"),
    ),
    Layer(
        "mux",
        ("cafleet.mux",),
        "the multiplexer protocol, the tmux backend, the pane-input lock, the one pane-state "
        "answer (`pane_state`) and the one usable-backend helper (`usable_backend`)",
        eager=("cafleet.config", "cafleet.records", "cafleet.db.timefmt"),
    ),
    Layer(
        "asset data",
        ("cafleet.assets.bundle", "cafleet.assets.targets", "cafleet.assets.permissions"),
        "the bundled skills and presets, where each agent's configuration lives, the commands "
        "members need (doctor's permission rows)",
    ),
    Layer(
        "agents",
        ("cafleet.agents",),
        "one package per coding agent (`agents/<name>/`): argv and permission profiles, input "
        "policy, screen cues and prompt reader, session records and usage, assets, doctor's "
        "check of its settings; the `CodingAgent` protocol; spawn-prompt templates",
        eager=(
            "cafleet.assets.bundle",
            "cafleet.assets.targets",
            "cafleet.assets.permissions",
            "cafleet.delivery.screens",
            "cafleet.sessions",
        ),
        lazy=("cafleet.config", "cafleet.assets.status"),
    ),
    Layer(
        "sessions",
        ("cafleet.sessions",),
        "the agents' own session records: finding a member's session, locating it again, "
        "usage read incrementally with its cache file beside the database, the price table "
        "(`docs/runtime.md` §9)",
    ),
    Layer(
        "assets",
        ("cafleet.assets",),
        "`setup`'s assets half: installing skills and presets, the stale-assets guard",
        eager=("cafleet.records", "cafleet.assets.bundle", "cafleet.assets.targets"),
        lazy=("cafleet.db", "cafleet.broker"),
    ),
    Layer(
        "delivery: screens",
        ("cafleet.delivery.screens",),
        "what an agent's pane shows: the cue-table types (each agent's table is in its "
        "package), the classifier "
        "(`docs/agent-screens.md`) and the prompt reader (`docs/runtime.md` §5.12)",
    ),
    Layer(
        "delivery: gate",
        ("cafleet.delivery.gate",),
        "the delivery gate: a verdict (type, hold, dismiss) per pane state (`docs/runtime.md` §4.9)",
        eager=("cafleet.delivery.screens",),
    ),
    Layer(
        "delivery: submit",
        ("cafleet.delivery.submit",),
        "emptying the composer with the agent's key; the verified submit",
        eager=("cafleet.delivery.screens", "cafleet.mux"),
    ),
    Layer(
        "delivery: keys",
        ("cafleet.delivery.keys",),
        "the one typing path (`type_into_pane`): lock, recheck, pane status (the pane is ours), "
        "gate, empty composer, type, verify, record (`docs/runtime.md` §1.7, §4.9)",
        eager=("cafleet.delivery.gate", "cafleet.delivery.submit", "cafleet.mux"),
    ),
    Layer(
        "delivery: parallel",
        ("cafleet.delivery.parallel",),
        "a bounded pool of delivery threads whose database calls the calling thread serves "
        "(`docs/runtime.md` §4.10)",
    ),
    Layer(
        "delivery: drains",
        ("cafleet.delivery.drains", "cafleet.delivery"),
        "the notification line; one drain over heads (for recipients, a fleet or a host), one "
        "attempt step, in parallel across panes",
        eager=(
            "cafleet.delivery.keys",
            "cafleet.delivery.parallel",
            "cafleet.delivery.screens",
            "cafleet.sessions",
            "cafleet.broker",
            "cafleet.db",
            "cafleet.config",
            "cafleet.mux",
        ),
    ),
    Layer(
        "monitor",
        ("cafleet.monitor",),
        "one supervisor (`supervisor`) for a fleet's loop (`loop`) and a host's (`hostloop`), "
        "healing (`ensure`), the log reserve, ticks, wakes, lost panes, blocked members, "
        "`monitor scan`, learning session ids (`learning`)",
        eager=("cafleet.broker", "cafleet.config", "cafleet.db", "cafleet.records"),
        lazy=(
            "cafleet.agents",
            "cafleet.sessions",
            "cafleet.mux",
            "cafleet.delivery.drains",
            "cafleet.delivery.keys",
            # an unverified wake is looked for (its id tag, the screen's state) before the next
            "cafleet.delivery.policy",
            "cafleet.delivery.screens",
            "cafleet.delivery.submit",
        ),
    ),
    Layer(
        "workflows",
        ("cafleet.workflows",),
        "what a command does (fleets, teardown, members, recovery and restore, agent "
        "sessions and usage, messaging, inbox, panes, monitor controls) and what a fleet looks like now (`supervision`: the loop and the "
        "one pane-state implementation behind `member list`, `fleet show`, `doctor` and the "
        "WebUI); typed results and typed errors whose `str()` is what the CLI prints",
        eager=(
            "cafleet.agents",
            "cafleet.assets",
            "cafleet.broker",
            "cafleet.config",
            "cafleet.db",
            "cafleet.delivery",
            "cafleet.monitor",
            "cafleet.mux",
            "cafleet.records",
            "cafleet.sessions",
        ),
    ),
    Layer(
        "output",
        ("cafleet.output",),
        "rendering: text tables and the `--json` records (`docs/cli.md` §1.10), stdout failures",
    ),
    Layer(
        "web",
        ("cafleet.web",),
        "`cafleet server`: a FastAPI app over the same workflows",
        eager=(
            "cafleet.config",
            "cafleet.db",
            "cafleet.records",
            "cafleet.broker",
            "cafleet.workflows",
            "cafleet.output",
            "cafleet.sessions",
        ),
    ),
    Layer(
        "cli",
        ("cafleet.cli",),
        "Click commands: parse, one workflow or repository call, render (text or `--json`)",
        eager=(
            "cafleet.config",
            "cafleet.db",
            "cafleet.output",
            "cafleet.agents",
            "cafleet.assets",
            "cafleet.broker",
            "cafleet.monitor",
            "cafleet.mux",
            "cafleet.records",
            "cafleet.sessions",
            "cafleet.workflows",
            "cafleet.hook",
        ),
        # FastAPI and uvicorn: `cafleet server` only.
        lazy=("cafleet.web",),
    ),
    Layer(
        "hook entry",
        ("cafleet.hook",),
        "`cafleet hook`, run by the agents' hooks before Click is imported: the payload, the "
        "bounded wait, exit 0 whatever happens (`docs/cli.md` §2.38)",
        eager=("cafleet.config", "cafleet.db", "cafleet.broker"),
        # Only to learn a session a payload names (docs/runtime.md §9.4).
        lazy=("cafleet.agents", "cafleet.sessions"),
    ),
    Layer("entry point", ("cafleet.__main__",), "`python -m cafleet`", eager=("cafleet.cli",)),
)


def _path(module: str) -> str:
    """`cafleet.db` -> `cafleet/db/`, `cafleet.config` -> `cafleet/config.py`."""
    root = Path(__file__).resolve().parent.parent
    rel = module.replace(".", "/")
    if module in ("cafleet", "cafleet.delivery"):  # the package's own module, not its tree
        return f"`{rel}/__init__.py`"
    return f"`{rel}/`" if (root / rel).is_dir() else f"`{rel}.py`"


def _short(module: str) -> str:
    return module.removeprefix("cafleet.")


def render_table() -> str:
    """docs/architecture.md §1's table, rendered from the map."""
    rows = [
        "| layer | modules | owns | may import (module level) | may import (inside functions) |",
        "|---|---|---|---|---|",
    ]
    for layer in LAYERS:
        eager = ", ".join(f"`{_short(t)}`" for t in layer.eager) or "leaves only"
        lazy = ", ".join(f"`{_short(t)}`" for t in layer.lazy) or "-"
        modules = ", ".join(_path(m) for m in layer.modules)
        rows.append(f"| {layer.name} | {modules} | {layer.owns} | {eager} | {lazy} |")
    rows += [
        "",
        "Leaves, which any layer may import at module level (they import only each other):",
        "",
    ]
    rows += ["| leaf | holds |", "|---|---|"]
    rows += [f"| {_path(m)} | {what} |" for m, what in LEAVES.items()]
    return "\n".join(rows) + "\n"


BEGIN = (
    "<!-- layer map: generated from tests/layer_map.py by `python -m tests.layer_map --write` -->"
)
END = "<!-- end of layer map -->"
DOC = Path(__file__).resolve().parent.parent / "docs/architecture.md"


def documented_table(text: str) -> str:
    start = text.index(BEGIN) + len(BEGIN)
    return text[start : text.index(END)].strip("\n") + "\n"


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(BEGIN) + len(BEGIN)
    DOC.write_text(text[:start] + "\n" + render_table() + text[text.index(END) :], encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        sys.stdout.write(render_table())
