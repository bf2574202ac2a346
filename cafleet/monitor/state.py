"""What survives between ticks of one monitor loop process (docs/runtime.md §5.5).

Its own module so that the tick (`cafleet.monitor.tick`) and the steps it calls
(`cafleet.monitor.losses`, `cafleet.monitor.escalate`) all use it without importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cafleet import signals
from cafleet.config import DEFAULT_MONITOR_WAKE_INTERVAL, db_dir_of
from cafleet.db.timefmt import utcnow
from cafleet.delivery.policy import DEFAULT_HOLD_TIMEOUT

if TYPE_CHECKING:
    from cafleet.config import Settings
    from cafleet.db.runtime import Connection
    from cafleet.delivery.drains import DrainReport


@dataclass(frozen=True)
class UnverifiedWake:
    """A wake typed but not seen taken (docs/runtime.md §5.5 step 12)."""

    pane_id: str
    tag: str  # `[wake <id>]`
    since: float  # time.monotonic() when it was typed
    count: int  # its roster size, for the log line


class SeenPrompt:
    """One member's prompt as the loop saw it: its digest, since when (monotonic), whether
    reported (docs/runtime.md §5.12)."""

    __slots__ = ("digest", "reported", "since")

    def __init__(self, digest: str, since: float) -> None:
        self.digest = digest
        self.since = since
        self.reported = False


@dataclass
class LoopState:
    """What survives between ticks of one loop process."""

    conn: Connection
    fleet_id: int
    pid: int
    tick_seconds: int
    pane_lock_timeout: int
    env_wake_interval: int | None  # CAFLEET_MONITOR_WAKE_INTERVAL, None when unset
    backend: Any  # the tmux backend, available (ensure_available ran at start-up)
    log: Callable[[str], None]  # writes "<ts> <text>" and flushes
    stop_requested: Callable[[], bool]
    hold_timeout: int = DEFAULT_HOLD_TIMEOUT  # CAFLEET_DELIVERY_HOLD_TIMEOUT (docs/runtime.md §4.9)
    last_skip_reason: str | None = None
    displaced: bool = field(default=False)
    last_beat: float = 0.0  # monotonic time of the loop's last heartbeat
    # Held lines (docs/runtime.md §4.9): a hold is logged when it starts or its state changes, not
    # every tick; the wake's hold timeout counts from its first held attempt.
    held_logged: dict[int, str] = field(default_factory=dict)
    wake_held_since: float | None = None
    wake_held_state: str | None = None
    wake_held_pane: str | None = None  # a respawned monitor's new pane starts a new hold
    # The last wake typed but not seen taken: it may still be queued or worked on, so the next
    # attempt looks for its id first and never types a new one over a working monitor.
    unverified_wake: UnverifiedWake | None = None
    wake_wait_logged: bool = False
    # Blocked members (docs/runtime.md §5.12): CAFLEET_ESCALATE_AFTER, and the prompt each
    # member's pane shows (its digest, since when, whether reported).
    escalate_after: int = 30
    prompts_seen: dict[int, SeenPrompt] = field(default_factory=dict)
    # The hook report (its time) each member's screen was last logged contradicting.
    disagreements_logged: dict[int, str] = field(default_factory=dict)
    notifier: Any = None  # the notification sender (`cafleet.monitor.notify.Sender`)
    session_note: str | None = None  # the last session-learning failure logged
    next_learn_at: float = 0.0  # monotonic time of the next session-learning attempt
    # Collisions (`cafleet.monitor.collisions.Seen`, made on first use): worktree fingerprints and
    # the collisions already reported; the last failure logged.
    collisions: Any = None
    collision_note: str | None = None
    # The wake of a monitor member on another host than its fleet's loop is typed by that host's
    # delivery loop with a state of its own (docs/runtime.md §10.4): its log lines say `host`
    # and it reaches the pane on the tmux server its placement records.
    log_prefix: str = "tick"
    by_socket: bool = False
    # A host loop passes on every commit: a wake not delivered is tried again once a tick, as
    # the fleet loop would, or at once for a new request (monotonic time, request seen).
    next_wake_try: float = 0.0
    request_tried: str | None = None

    @classmethod
    def of(
        cls,
        conn: Connection,
        fleet_id: int,
        pid: int,
        tick_seconds: int,
        settings: Settings,
        log: Callable[[str], None],
        **rest: Any,
    ) -> LoopState:
        """A loop's state with its settings' timeouts and intervals (the fleet loop's, or a host
        loop's wake state for one fleet)."""
        return cls(
            conn=conn,
            fleet_id=fleet_id,
            pid=pid,
            tick_seconds=tick_seconds,
            pane_lock_timeout=settings.pane_lock_timeout,
            env_wake_interval=settings.monitor_wake_interval,
            hold_timeout=settings.delivery_hold_timeout,
            escalate_after=settings.escalate_after,
            log=log,
            stop_requested=signals.stop_requested,
            **rest,
        )

    @property
    def db_dir(self) -> str:

        path: str = self.conn.info["cafleet.path"]
        return db_dir_of(path)  # PostgreSQL's local directory (docs/storage.md §10.1)

    def beat(self) -> bool:
        """Heartbeat now; False (and `displaced`) when the slot was taken over."""
        import time

        from cafleet import broker

        if broker.heartbeat(self.conn, fleet_id=self.fleet_id, pid=self.pid, now=utcnow()):
            self.last_beat = time.monotonic()
            return True
        self.displaced = True
        return False

    def beat_if_due(self) -> bool:
        """Inside a long step of a tick (one capture per member pane): heartbeat once a tick's
        length has passed since the last beat, so the loop beats at least once every 2 ticks
        whatever the fleet's size (docs/runtime.md §5.5). False when displaced."""
        import time

        return time.monotonic() - self.last_beat < self.tick_seconds or self.beat()

    @property
    def lock_timeout(self) -> float:
        return float(min(self.pane_lock_timeout, self.tick_seconds))

    def resolve_interval(self, stored: int | None) -> int:
        """A stored NULL resolves to the environment variable, then 600; never to 0."""
        if stored is not None:
            return stored
        if self.env_wake_interval is not None:
            return self.env_wake_interval

        return DEFAULT_MONITOR_WAKE_INTERVAL


__all__ = ["LoopState", "SeenPrompt", "UnverifiedWake"]


def log_drain_report(
    report: DrainReport, held_logged: dict[int, str], log: Callable[[str], None], prefix: str
) -> None:
    """One drain's outcome in a loop's log (docs/runtime.md §5.5): each line notified, each
    failure, and a held line only when its hold starts or its state changes, not every tick."""
    for message_id, member_id in report.notified:
        held_logged.pop(message_id, None)
        log(f"{prefix} -> notify msg {message_id} member {member_id}")
    for failure in report.failures:
        if failure.held is not None:
            if held_logged.get(failure.message_id) != failure.held:
                held_logged[failure.message_id] = failure.held
                log(
                    f"{prefix} -> held msg {failure.message_id} member {failure.recipient_id}: "
                    f"{failure.reason}"
                )
            continue
        held_logged.pop(failure.message_id, None)
        log(
            f"{prefix} -> not notified msg {failure.message_id} member {failure.recipient_id}: "
            f"{failure.reason}"
        )
