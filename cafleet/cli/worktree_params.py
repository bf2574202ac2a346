"""The worktree options (docs/worktrees.md): `member create --worktree/--no-worktree --branch
--base`, collapsed into one `worktree` parameter, and `fleet create --worktree`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from cafleet.workflows.worktrees import Request

F = TypeVar("F", bound=Callable[..., Any])


def request(wanted: bool | None, branch: str | None, base: str | None) -> Request | None:
    """The request the three options make (None: none given, the fleet's default applies);
    `--branch` or `--base` imply `--worktree`; an empty one, or `--no-worktree` with either, is
    exit 2."""
    for flag, given in (("--branch", branch), ("--base", base)):
        if given is not None and not given.strip():  # not a silent "the default"
            raise click.UsageError(f"{flag} is empty; give a name, or leave {flag} out")
    if wanted is False and (branch is not None or base is not None):
        flag = "--branch" if branch is not None else "--base"
        raise click.UsageError(f"{flag} needs a worktree; it cannot go with --no-worktree")
    if wanted is None and branch is None and base is None:
        return None
    from cafleet.workflows.worktrees import Request

    return Request(wanted=wanted is not False, branch=branch, base=base)


def member_worktree_options(f: F) -> F:
    """Adds `--worktree/--no-worktree`, `--branch`, `--base`; the command receives `worktree`
    (a `Request`, or None)."""

    @functools.wraps(f)
    def wrapper(**kwargs: Any) -> Any:
        choice = request(
            kwargs.pop("worktree_flag"), kwargs.pop("worktree_branch"), kwargs.pop("worktree_base")
        )
        return f(**kwargs, worktree=choice)

    options = [
        click.option(
            "--worktree/--no-worktree",
            "worktree_flag",
            default=None,
            help=(
                "Start the member in a new git worktree of the repository around this directory, "
                "on a new branch (default: the fleet's setting, 'fleet create --worktree')."
            ),
        ),
        click.option(
            "--branch",
            "worktree_branch",
            metavar="NAME",
            default=None,
            help="The worktree's new branch (default: cafleet/<fleet_id>-<name>); implies --worktree.",
        ),
        click.option(
            "--base",
            "worktree_base",
            metavar="REF",
            default=None,
            help="What the branch starts from (default: this checkout's HEAD); implies --worktree.",
        ),
    ]
    decorated: Any = wrapper
    for option in reversed(options):
        decorated = option(decorated)
    return decorated  # type: ignore[no-any-return]


fleet_worktree_option = click.option(
    "--worktree",
    "worktree",
    is_flag=True,
    help="Give each member created later its own git worktree ('member create --no-worktree' opts out).",
)

# `member delete` and `fleet delete`.
discard_worktree_option = click.option(
    "--discard-worktree",
    is_flag=True,
    help=(
        "Remove the member's git worktree even when it has uncommitted changes or commits on no "
        "branch (the changes are lost; the branch is kept)."
    ),
)
