"""The repository: every function takes the invocation's validated connection and owns exactly
one transaction (docs/storage.md §7). Writes use one `tx.write`, reads one `tx.read`; they return
frozen records (`cafleet.records`) and raise the errors of `cafleet.broker.errors`.

Code outside this package imports only this facade and `cafleet.broker.errors`
(`tests/test_layers.py` checks it): one place lists the repository's functions.

The repository modules are imported on first use of one of their names (PEP 562), so a command
imports only the modules it calls: an editable checkout recompiles each imported module on every
run when PYTHONDONTWRITEBYTECODE is set. The errors are imported at once; every caller needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cafleet import lazy
from cafleet.broker.errors import (
    BootstrapAborted,
    BrokerError,
    CannotAck,
    CannotDeregisterRootDirector,
    DatabaseBusy,
    FleetDeleted,
    FleetNotFound,
    MemberDeregistered,
    MemberNotFound,
    MessageNotFound,
    MonitorSlotTaken,
    NoActiveMonitor,
    NotSameFleet,
    PaneDirectsFleet,
    PlacementsChanged,
    PlacementVanished,
    RecipientNotFound,
    RootDirectorInactive,
    SenderNotActive,
    StorageIntegrityError,
)

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from cafleet.broker.assets import (
        all_asset_installs,
        asset_installs_for,
        current_asset_versions,
        record_asset_install,
    )
    from cafleet.broker.fleets import (
        create_fleet,
        delete_fleet,
        director_placement,
        fleet_directed_from,
        fleet_placements,
        fleet_summary,
        get_fleet,
        list_fleets,
        panes_shared_outside,
    )
    from cafleet.broker.members import (
        deregister_member,
        get_active_member,
        get_active_monitor,
        get_member,
        idle_seconds,
        member_names,
        member_roster,
        pane_shared_with,
        register_member,
        set_placement_pane,
        wake_roster,
    )
    from cafleet.broker.messages import (
        ack_message,
        broadcast_message,
        get_message,
        poll_inbox,
        send_message,
        unacked_deliveries,
    )
    from cafleet.broker.monitor import (
        claim_monitor,
        clear_monitor,
        get_monitor_runtime,
        heartbeat,
        is_live,
        live_fleet_runtimes,
        record_monitor_wake,
        request_monitor_wake,
        set_wake_interval,
    )
    from cafleet.broker.notifications import (
        next_pending_notification,
        oldest_pending_by_recipient,
        recheck_pending,
        stamp_notified,
    )
    from cafleet.broker.recovery import (
        get_spawn,
        placed_members,
        rebind_placement,
        record_pane_loss,
    )
    from cafleet.broker.views import (
        inbox_view,
        roster_activity,
        sent_view,
        timeline,
        web_roster,
    )

# Public name -> the module that defines it.
_HOMES: dict[str, str] = {
    "all_asset_installs": "assets",
    "asset_installs_for": "assets",
    "current_asset_versions": "assets",
    "record_asset_install": "assets",
    "create_fleet": "fleets",
    "delete_fleet": "fleets",
    "fleet_directed_from": "fleets",
    "director_placement": "fleets",
    "fleet_placements": "fleets",
    "fleet_summary": "fleets",
    "get_fleet": "fleets",
    "list_fleets": "fleets",
    "panes_shared_outside": "fleets",
    "deregister_member": "members",
    "get_active_member": "members",
    "get_active_monitor": "members",
    "get_member": "members",
    "idle_seconds": "members",
    "member_names": "members",
    "member_roster": "members",
    "pane_shared_with": "members",
    "register_member": "members",
    "set_placement_pane": "members",
    "wake_roster": "members",
    "ack_message": "messages",
    "broadcast_message": "messages",
    "get_message": "messages",
    "poll_inbox": "messages",
    "send_message": "messages",
    "unacked_deliveries": "messages",
    "claim_monitor": "monitor",
    "clear_monitor": "monitor",
    "get_monitor_runtime": "monitor",
    "heartbeat": "monitor",
    "is_live": "monitor",
    "live_fleet_runtimes": "monitor",
    "record_monitor_wake": "monitor",
    "request_monitor_wake": "monitor",
    "set_wake_interval": "monitor",
    "get_spawn": "recovery",
    "placed_members": "recovery",
    "rebind_placement": "recovery",
    "record_pane_loss": "recovery",
    "next_pending_notification": "notifications",
    "oldest_pending_by_recipient": "notifications",
    "recheck_pending": "notifications",
    "stamp_notified": "notifications",
    "inbox_view": "views",
    "roster_activity": "views",
    "sent_view": "views",
    "timeline": "views",
    "web_roster": "views",
}


def __getattr__(name: str) -> Any:
    return lazy.load(__name__, _HOMES, name)


__all__ = [
    "BootstrapAborted",
    "BrokerError",
    "CannotAck",
    "CannotDeregisterRootDirector",
    "DatabaseBusy",
    "FleetDeleted",
    "FleetNotFound",
    "MemberDeregistered",
    "MemberNotFound",
    "MessageNotFound",
    "MonitorSlotTaken",
    "NoActiveMonitor",
    "NotSameFleet",
    "PaneDirectsFleet",
    "PlacementVanished",
    "PlacementsChanged",
    "RecipientNotFound",
    "RootDirectorInactive",
    "SenderNotActive",
    "StorageIntegrityError",
    "ack_message",
    "all_asset_installs",
    "asset_installs_for",
    "current_asset_versions",
    "broadcast_message",
    "claim_monitor",
    "clear_monitor",
    "create_fleet",
    "delete_fleet",
    "deregister_member",
    "fleet_directed_from",
    "director_placement",
    "fleet_placements",
    "fleet_summary",
    "get_active_member",
    "get_active_monitor",
    "get_fleet",
    "get_member",
    "get_message",
    "get_monitor_runtime",
    "get_spawn",
    "heartbeat",
    "idle_seconds",
    "is_live",
    "live_fleet_runtimes",
    "list_fleets",
    "member_names",
    "member_roster",
    "next_pending_notification",
    "oldest_pending_by_recipient",
    "pane_shared_with",
    "placed_members",
    "panes_shared_outside",
    "poll_inbox",
    "rebind_placement",
    "recheck_pending",
    "record_asset_install",
    "record_monitor_wake",
    "record_pane_loss",
    "register_member",
    "request_monitor_wake",
    "send_message",
    "set_placement_pane",
    "set_wake_interval",
    "stamp_notified",
    "unacked_deliveries",
    "wake_roster",
    "inbox_view",
    "roster_activity",
    "sent_view",
    "timeline",
    "web_roster",
]
