"""`cafleet.broker` imports its repository modules on first use (start-up cost, docs/cli.md §1.8)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.cli_helpers import imported_after
from tests.factories import Db

REPOSITORY_MODULES = (
    "cafleet.broker.assets",
    "cafleet.broker.fleets",
    "cafleet.broker.members",
    "cafleet.broker.messages",
    "cafleet.broker.monitor",
    "cafleet.broker.notifications",
)


def test_every_public_name_resolves_to_its_home_module() -> None:
    import cafleet.broker as broker
    import cafleet.broker.errors as errors

    homes = broker._HOMES
    error_names = {n for n in broker.__all__ if n not in homes}
    assert error_names == {n for n in vars(errors) if n in broker.__all__}
    assert sorted(broker.__all__) == sorted(error_names | set(homes))
    for name, home in homes.items():
        module = importlib.import_module(f"cafleet.broker.{home}")
        assert getattr(broker, name) is getattr(module, name), name
        assert getattr(module, name).__module__ == module.__name__, name  # defined there
    with pytest.raises(AttributeError, match="no attribute 'no_such_function'"):
        broker.no_such_function  # noqa: B018


def test_importing_the_package_imports_no_repository_module() -> None:
    code = textwrap.dedent(
        """
        import sys
        import cafleet.broker
        from cafleet.broker import MemberNotFound, ack_message
        print(",".join(sorted(m for m in sys.modules if m.startswith("cafleet.broker."))))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "cafleet.broker._common,cafleet.broker.errors,cafleet.broker.messages"
    ]


@pytest.mark.parametrize(
    ("argv", "loaded"),
    [
        # Every command that opens the database also reads the fleets' loop rows to heal a dead
        # loop (docs/runtime.md §5.3): broker.monitor is the one module each adds. The text
        # envelopes of ack and poll name each sender (docs/cli.md §1.10): broker.members.
        (
            ["message", "ack", "{message}"],
            ["cafleet.broker.members", "cafleet.broker.messages", "cafleet.broker.monitor"],
        ),
        (
            ["message", "poll", "{member}"],
            ["cafleet.broker.members", "cafleet.broker.messages", "cafleet.broker.monitor"],
        ),
        (["fleet", "list"], ["cafleet.broker.fleets", "cafleet.broker.monitor"]),
    ],
)
def test_a_command_imports_only_the_repository_modules_it_calls(
    head_db: Path, argv: list[str], loaded: list[str]
) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
        worker = db.member(fleet.fleet.fleet_id)
        message = db.send(fleet.director.member_id, worker.member_id, "hi")
    values = {"message": str(message.message_id), "member": str(worker.member_id)}
    real = [a.format(**values) if a.startswith("{") else a for a in argv]
    code, found = imported_after(real, modules=REPOSITORY_MODULES)
    assert code == 0, real
    assert found == loaded
