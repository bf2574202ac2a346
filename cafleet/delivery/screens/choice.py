"""One answer a prompt on an agent's screen offers (read by `cafleet.delivery.screens.prompts`
and each agent's prompt reader)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Choice:
    number: int  # 1-based, as the screen numbers it
    label: str  # the choice's words, without its number or shortcut
    keys: tuple[str, ...]  # tmux send-keys key names that pick it
    # The agent asks to confirm this choice in a second dialog: (that dialog's question, the
    # label of its choice that confirms). `member answer` confirms it too.
    confirm: tuple[str, str] | None = None


__all__ = ["Choice"]
