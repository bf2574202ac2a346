"""A fleet's problems, each with the command that fixes it (docs/cli.md §2.5): what `fleet show`,
`member list` and `doctor` print under a fleet whose supervision is not whole.

Read from a `FleetReport` (no further query, no tmux call): the root Director's pane gone (the
loop cannot run: `fleet adopt`), the loop not live (`monitor start`), no active monitor member
(`member create --role monitor`), a host's delivery loop not live in a fleet across machines
(`monitor host start` on that host), a monitor's or member's pane gone (`member respawn`), a
member left half-made by an interrupted create (`member respawn`), a worktree a deleted member
left behind (`worktree remove`). The last two are the fleet report's own reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from cafleet.monitor.notify import redact

if TYPE_CHECKING:
    from cafleet.records import RecordedWorktree
    from cafleet.workflows.supervision import FleetReport

MONITOR_DESCRIPTION = "Monitor member for this fleet"  # what `fleet create` registers


class Problem(NamedTuple):
    kind: (
        str  # director_gone | loop | no_monitor | host_loop | pane_gone | half_made |
        # worktree_left | channel_failing | collision
    )
    text: str  # what is wrong
    fix: str  # the command that fixes it
    where: str = ""  # where to run it, or the alternative, appended after the command

    @property
    def line(self) -> str:
        """`<what is wrong>; run '<command>'[ <where>]`."""
        return f"{self.text}; run '{self.fix}'{self.where}"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "problem": self.text, "fix": self.fix, "line": self.line}


def fleet_problems(report: FleetReport) -> list[Problem]:
    """Every problem of a live fleet, most fundamental first; a deleted fleet's are only the
    worktrees its members left behind."""
    summary = report.summary
    if summary.deleted_at is not None:
        return _left_trees(report)
    fleet_id = summary.fleet_id
    members = {e.member.member_id: e.member for e in report.roster}
    panes = report.panes.panes
    problems: list[Problem] = []
    director = summary.director_member_id
    director_pane = panes.get(director) if director is not None else None
    director_gone = director_pane is not None and director_pane.state == "gone"
    if director_gone:
        assert director_pane is not None
        problems.append(
            Problem(
                "director_gone",
                f"the root Director's pane {director_pane.pane_id} is gone, so the monitor "
                "loop cannot run",
                f"cafleet fleet adopt {fleet_id}",
                " in the pane that takes its place",
            )
        )
    elif report.loop.state != "live":
        loop = report.loop
        if loop.held:
            text = "the monitor loop is stopped by 'cafleet monitor stop': no scheduled wakes"
        elif loop.state == "stale" and loop.pid_running:
            text = f"the monitor loop (pid {loop.pid}) stopped beating: no scheduled wakes"
        else:
            text = "the monitor loop is not running: no scheduled wakes"
        problems.append(Problem("loop", text, f"cafleet monitor start {fleet_id}"))
    if summary.monitor_member_id is None:
        problems.append(
            Problem(
                "no_monitor",
                "the fleet has no active monitor member: no one health-checks it",
                f"cafleet member create --fleet-id {fleet_id} --role monitor --name monitor "
                f'--description "{MONITOR_DESCRIPTION}"',
                f" (or, when the fleet is done: 'cafleet fleet delete {fleet_id}')",
            )
        )
    hosts = report.hosts
    if hosts is not None and hosts.spans:
        for host in hosts.hosts:
            if host.director or host.live:
                continue
            noun = "member" if len(host.member_ids) == 1 else "members"
            problems.append(
                Problem(
                    "host_loop",
                    f"host {host.host_id}'s delivery loop is not running: lines for {noun} "
                    f"{', '.join(map(str, host.member_ids))} wait",
                    "cafleet monitor host start",
                    f" on host {host.host_id}",
                )
            )
    for member_id, pane in sorted(panes.items()):
        member = members.get(member_id)
        if pane.state != "gone" or member_id == director or member is None:
            continue
        if member.kind == "monitor":
            text = f"the monitor (member {member_id}) lost its pane {pane.pane_id}"
            where = ""
        else:
            text = f"member {member_id} ({member.name}) lost its pane {pane.pane_id}"
            where = f" (or remove it: 'cafleet member delete {member_id}')"
        problems.append(Problem("pane_gone", text, f"cafleet member respawn {member_id}", where))
    for left in report.half_made:
        problems.append(Problem("half_made", left.text, left.fix, left.alternative))
    for channel in report.channels:
        if channel.failing_since is None:
            continue
        shown = f" {redact(channel.target)}" if channel.target else ""
        problems.append(
            Problem(
                "channel_failing",
                f"notification channel {channel.channel_id} ({channel.kind}{shown}) keeps "
                f"failing ({channel.last_error}): its events are not reaching anyone",
                f"cafleet notify test --fleet-id {fleet_id}",
                f" once it is fixed (or remove it: 'cafleet notify remove {channel.channel_id}')",
            )
        )
    for met in report.collisions:
        a, b = met.members
        problems.append(
            Problem(
                "collision",
                f"{met.text()} in their worktrees",
                f"cafleet member diff {a}",
                f" and 'cafleet member diff {b}', then merge one first",
            )
        )
    return problems + _left_trees(report)


def _left_trees(report: FleetReport) -> list[Problem]:
    return left_tree_problems(report.left_trees)


def left_tree_problems(left: Iterable[RecordedWorktree]) -> list[Problem]:
    """A deregistered member's worktree still on disk: kept because it held work, or never
    reached by an interrupted delete (docs/worktrees.md §3)."""
    return [
        Problem(
            "worktree_left",
            f"the worktree {rec.spec.path} (branch {rec.spec.branch}) of deleted member "
            f"{rec.member_id} ({rec.member_name}) is still there",
            f"cafleet worktree remove {rec.spec.path}",
            " (add --discard to drop its changes)",
        )
        for rec in left
    ]


__all__ = ["MONITOR_DESCRIPTION", "Problem", "fleet_problems", "left_tree_problems"]
