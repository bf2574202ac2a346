"""Collisions (docs/cli.md §2.37): two active members' worktrees changing the same path.

A member's changed paths are what its worktree changes against its base: files changed by
commits since the merge base, plus `git status` (staged, unstaged, untracked; an untracked file
the checkout it was added from also has is a `CAFLEET_WORKTREE_COPY` copy, not a change). Each
tick reads one fingerprint per worktree, `git status --porcelain=v2 --branch` (HEAD included),
all worktrees' at once, and recomputes a member's paths only when its fingerprint changed. Two members of one repository whose paths
meet are a collision; the Director is sent one message per collision (the pair and its paths)
the tick it first appears, and `fleet show` lists the current ones.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, NamedTuple

from cafleet import broker, git

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.monitor.state import LoopState
    from cafleet.records import WorktreeSpec

PATHS_SHOWN = 5


class Collision(NamedTuple):
    members: tuple[int, int]
    paths: tuple[str, ...]

    def text(self) -> str:
        shown = ", ".join(self.paths[:PATHS_SHOWN])
        more = len(self.paths) - PATHS_SHOWN
        return f"members {self.members[0]} and {self.members[1]} both change {shown}" + (
            f" and {more} more" if more > 0 else ""
        )


class Seen:
    """What survives between ticks: each worktree's fingerprint and paths, the collisions
    already reported."""

    def __init__(self) -> None:
        self.paths: dict[int, tuple[str, frozenset[str]]] = {}
        self.reported: set[tuple[tuple[int, int], tuple[str, ...]]] = set()


def _top(spec: WorktreeSpec) -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(spec.path)))  # worktrees.top_of


def _parse(status: str) -> tuple[str | None, list[tuple[str, bool]]]:
    """HEAD and each changed path (with whether it is untracked) of a porcelain v2 status."""
    head = None
    paths = []
    for entry in status.split("\0"):
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid ") :]
            head = None if oid == "(initial)" else oid
        elif entry.startswith("1 "):
            paths.append((entry.split(" ", 8)[-1], False))
        elif entry.startswith("u "):
            paths.append((entry.split(" ", 10)[-1], False))
        elif entry.startswith("? "):
            paths.append((entry[2:], True))
    return head, paths


def _changed(spec: WorktreeSpec, status: str) -> frozenset[str]:
    top = _top(spec)
    head, entries = _parse(status)
    # An untracked file the checkout it was added from also has is a copy, not a change.
    paths = {p for p, new in entries if not (new and os.path.lexists(os.path.join(top, p)))}
    if head is not None:
        base = git.merge_base(spec.path, spec.base, head)
        if base is not None and base != head:
            paths.update(git.changed_between(spec.path, base, head))
    return frozenset(paths)


def member_paths(specs: dict[int, WorktreeSpec], seen: Seen) -> dict[int, frozenset[str]]:
    """Each member's changed paths, recomputed only for a worktree whose status (HEAD
    included) moved; the statuses of all worktrees are read at once."""
    ids = [i for i in specs if os.path.isdir(specs[i].path)]
    found: dict[int, frozenset[str]] = {}
    for member_id, status in zip(ids, git.statuses([specs[i].path for i in ids]), strict=True):
        if status is None:
            continue
        cached = seen.paths.get(member_id)
        if cached is None or cached[0] != status:
            cached = (status, _changed(specs[member_id], status))
            seen.paths[member_id] = cached
        found[member_id] = cached[1]
    for gone in set(seen.paths) - set(found):
        seen.paths.pop(gone, None)
    return found


def current(conn: Connection, fleet_id: int) -> list[Collision]:
    """`fleet show`'s: the collisions now, none when git cannot say."""
    try:
        return collisions(conn, fleet_id)
    except git.GitError:
        return []


def collisions(conn: Connection, fleet_id: int, seen: Seen | None = None) -> list[Collision]:
    """The fleet's current collisions, pairs in member order."""
    specs = broker.fleet_worktrees(conn, fleet_id)
    if len(specs) < 2:
        return []
    paths = member_paths(specs, seen or Seen())
    ids = sorted(paths)
    found = []
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            if _top(specs[a]) != _top(specs[b]):
                continue
            both = paths[a] & paths[b]
            if both:
                found.append(Collision((a, b), tuple(sorted(both))))
    return found


def collision_text(c: Collision) -> str:
    a, b = c.members
    return (
        f"[cafleet] collision: {c.text()} in their worktrees. Merge one first (cafleet task "
        f"merge), then have the other merge its base; or tell one to leave them (cafleet "
        f"member diff {a} / {b} shows each change)"
    )


def report_collisions(state: LoopState) -> None:
    """One tick: the Director is sent each collision not reported before (see the module)."""
    if state.collisions is None:
        state.collisions = Seen()
    seen: Seen = state.collisions
    current = collisions(state.conn, state.fleet_id, seen)
    keys = {(c.members, c.paths) for c in current}
    seen.reported &= keys
    fresh = [c for c in current if (c.members, c.paths) not in seen.reported]
    if not fresh:
        return
    fleet = broker.get_fleet(state.conn, fleet_id=state.fleet_id)
    director = fleet.director_member_id if fleet is not None else None
    if director is None:
        return
    monitor = broker.get_active_monitor(state.conn, fleet_id=state.fleet_id)
    sender = monitor.member_id if monitor is not None else director
    for c in fresh:
        seen.reported.add((c.members, c.paths))
        sent = broker.send_message(
            state.conn, from_member_id=sender, to_member_id=director, text=collision_text(c)
        )
        state.log(f"tick -> collision: {c.text()} (msg {sent.message_id})")


__all__ = [
    "Collision",
    "Seen",
    "collision_text",
    "collisions",
    "current",
    "member_paths",
    "report_collisions",
]
