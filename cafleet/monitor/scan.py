"""`monitor scan` entries (docs/runtime.md §5.10): a one-shot capture of a fleet's panes.

No claim, no lock, no database writes; captures are never stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.db.timefmt import now_ts
from cafleet.hosts import current_host, effective_host

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.mux import Multiplexer
    from cafleet.records import Member

PENDING_ANNOTATION = "pane not available (pending placement)"


@dataclass(frozen=True, slots=True)
class ScanEntry:
    member_id: int
    name: str
    kind: str
    coding_agent: str
    pane_id: str | None  # None only while pending
    lines: int
    content: str | None
    captured_at: str | None
    content_sha256: str | None
    error: str | None


def _failed_entry(base: dict[str, Any], pane_id: str | None, error: str) -> ScanEntry:
    """An entry with nothing captured: ``base`` holds the member's fields and ``lines``."""
    return ScanEntry(
        **base, pane_id=pane_id, content=None, captured_at=None, content_sha256=None, error=error
    )


def sha256_hex(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def scan_members(conn: Connection, fleet_id: int) -> list[Member]:
    """The Director first, then every other active member with a placement row, by id.

    Raises FleetNotFound / FleetDeleted for an unknown or soft-deleted fleet.
    """
    roster = broker.member_roster(conn, fleet_id=fleet_id)
    members = [entry.member for entry in roster]
    director = [m for m in members if m.kind == "director"]
    others = [m for m in members if m.kind != "director" and m.placement is not None]
    return [*director, *others]


def _live_tmux_panes(members: list[Member], cache: dict[str, Multiplexer]) -> frozenset[str] | None:
    """One `list-panes -a` for the whole scan when several tmux panes are to be captured, so a
    gone pane costs no capture of its own; None when it fails or is not worth a call."""
    from cafleet.mux import MultiplexerError, usable_backend

    panes = [
        m.placement
        for m in members
        if m.placement is not None
        and m.placement.mux_pane_id is not None
        and m.placement.backend == "tmux"
    ]
    if len(panes) < 2:
        return None
    try:
        backend = cache.get("tmux")
        if backend is None:
            backend = usable_backend()
            cache["tmux"] = backend
        return frozenset(backend.list_panes())
    except MultiplexerError:
        return None


def capture_entries(
    members: list[Member],
    *,
    lines: int,
    ansi: bool,
    backends: dict[str, Multiplexer] | None = None,
) -> list[ScanEntry]:
    """Capture each member's pane; failures become annotations and never abort the scan.

    A tmux pane missing from the scan's one `list-panes -a` is annotated `capture failed: pane
    not found` without a capture (a dead pane costs one cheap check: docs/runtime.md §5.10)."""
    from cafleet.mux import MultiplexerError, PaneGone, owner_of, owner_problem, usable_backend

    cache: dict[str, Multiplexer] = {} if backends is None else backends
    director = next((m for m in members if m.kind == "director"), None)
    director_placement = None if director is None else director.placement
    director_host = None if director_placement is None else director_placement.host_id
    here = current_host()

    def elsewhere(member: Member) -> str | None:
        placement = member.placement
        host = None if placement is None else effective_host(placement.host_id, director_host)
        return None if host is None or host == here else host

    # Another host's pane is not captured from here (docs/runtime.md §10.2).
    remote = {m.member_id: h for m in members if (h := elsewhere(m)) is not None}
    live = _live_tmux_panes([m for m in members if m.member_id not in remote], cache)
    entries: list[ScanEntry] = []
    for member in members:
        placement = member.placement
        base: dict[str, Any] = {
            "member_id": member.member_id,
            "name": member.name,
            "kind": member.kind,
            "coding_agent": placement.coding_agent if placement is not None else "-",
            "lines": lines,
        }
        if placement is None:
            # Only the Director can get here without a placement row.
            entries.append(_failed_entry(base, None, "capture failed: the member has no placement"))
            continue
        if placement.mux_pane_id is None:
            entries.append(_failed_entry(base, None, PENDING_ANNOTATION))
            continue
        pane_id = placement.mux_pane_id
        host = remote.get(member.member_id)
        if host is not None:
            entries.append(
                _failed_entry(base, pane_id, f"capture failed: the pane is on host {host}")
            )
            continue
        if live is not None and placement.backend == "tmux" and pane_id not in live:
            entries.append(_failed_entry(base, pane_id, "capture failed: pane not found"))
            continue
        try:
            backend = cache.get(placement.backend)
            if backend is None:
                backend = usable_backend(placement.backend)
                cache[placement.backend] = backend
            # docs/runtime.md §1.8: another server's pane, or an id reused elsewhere, is not captured.
            not_ours = owner_problem(backend, pane_id, owner_of(placement))
            if not_ours is not None:
                entries.append(_failed_entry(base, pane_id, f"capture failed: {not_ours}"))
                continue
            content = backend.capture(pane_id, lines, ansi=ansi)
        except PaneGone:
            error = "capture failed: pane not found"
        except MultiplexerError as exc:
            error = f"capture failed: {exc}"
        else:
            entries.append(
                ScanEntry(
                    **base,
                    pane_id=pane_id,
                    content=content,
                    captured_at=now_ts(),
                    content_sha256=sha256_hex(content),
                    error=None,
                )
            )
            continue
        entries.append(_failed_entry(base, pane_id, error))
    return entries


def entry_dict(entry: ScanEntry) -> dict[str, object]:
    """JSON keys in docs/cli.md §2.22's order."""
    return {
        "member_id": entry.member_id,
        "name": entry.name,
        "kind": entry.kind,
        "coding_agent": entry.coding_agent,
        "pane_id": entry.pane_id,
        "lines": entry.lines,
        "content": entry.content,
        "captured_at": entry.captured_at,
        "content_sha256": entry.content_sha256,
        "error": entry.error,
    }


def render_text(entries: list[ScanEntry], sanitize_line: Callable[[str], str] | None) -> str:
    """Sections separated by one blank line: the header, then the content or the annotation."""
    sections: list[str] = []
    for e in entries:
        name = e.name if sanitize_line is None else sanitize_line(e.name)
        agent = e.coding_agent if sanitize_line is None else sanitize_line(e.coding_agent)
        pane = e.pane_id if e.pane_id is not None else "\u2014"
        header = f"=== {e.member_id} ({name}; kind={e.kind}; coding_agent={agent}; pane={pane}"
        if e.error is None:
            header += f"; captured_at={e.captured_at}) ==="
            body = e.content or ""
        else:
            header += ") ==="
            body = e.error
        sections.append(f"{header}\n{body}")
    return "\n\n".join(sections)
