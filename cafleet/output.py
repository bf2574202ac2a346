"""What commands print (docs/cli.md §1.3, §1.10): JSON encoding, records in contract key order, text
envelopes, tables, label lines, plurals, truncation and the display sanitizer.

Standard library only (plus `cafleet.text`), so every command module can import it at load
time. Records are read by
attribute name (`cafleet.records` field names); this module never imports the storage layer.

All stdout goes through `out()` / `out_json()`, which turn an EPIPE into `BrokenStdout` (main maps
it to exit 141) and any other write failure into `OutputFailed` (`cannot write output: <detail>`).
"""

from __future__ import annotations

import errno
import json
import sys
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cafleet import status
from cafleet.errors import CafleetError
from cafleet.text import (  # noqa: F401 - re-exported for command modules
    ELLIPSIS,
    NULL_CELL,
    cut_naming_the_rest,
    sanitize_multiline,
    sanitize_single_line,
    truncate,
)


class BrokenStdout(CafleetError):
    """stdout was closed by the reader (EPIPE). Deliberately not an OSError."""


class OutputFailed(CafleetError):
    """Writing stdout failed for another reason; str() is the user-facing message."""

    error_code = status.CODE_OUTPUT

    def __init__(self, detail: str) -> None:
        super().__init__(f"cannot write output: {detail}")


def output_error(exc: OSError) -> Exception:
    if exc.errno == errno.EPIPE or isinstance(exc, BrokenPipeError):
        return BrokenStdout()
    return OutputFailed(exc.strerror or str(exc))


# --- writing -----------------------------------------------------------------------------------


def out(text: str = "") -> None:
    """Write `text` plus a newline on stdout."""
    _emit(text + "\n")


def out_lines(lines: Iterable[str]) -> None:
    """Write several lines in one go."""
    collected = list(lines)
    if collected:
        _emit("\n".join(collected) + "\n")


def _emit(text: str) -> None:
    """Write through to the byte stream, retrying short writes.

    With an unbuffered stdout (PYTHONUNBUFFERED, `-u`) the text layer sits directly on the raw
    file and silently drops the rest of a short write, e.g. when the reader goes away. Writing
    the bytes ourselves turns that into the EPIPE it is.
    """
    stream = sys.stdout
    buffer = getattr(stream, "buffer", None)
    try:
        if buffer is None:
            stream.write(text)
            return
        stream.flush()
        data = memoryview(text.encode(stream.encoding or "utf-8", stream.errors or "strict"))
        while data:
            written = buffer.write(data)
            if written is None or written <= 0:  # non-blocking or stalled file
                raise OSError(errno.EAGAIN, "short write")
            data = data[written:]
    except OSError as exc:
        raise output_error(exc) from exc


def flush() -> None:
    try:
        sys.stdout.flush()
    except OSError as exc:
        raise output_error(exc) from exc


def err(text: str) -> None:
    """One line on stderr (errors, warnings, cleanup diagnostics). Never raises."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def dumps_json(value: Any) -> str:
    """docs/cli.md §1.3: compact, non-ASCII raw, control characters escaped by the encoder."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def out_json(value: Any) -> None:
    out(dumps_json(value))


# --- truncation and the display sanitizer (cafleet.text implements both) -------------------


def body_text(text: str, limit: int | None = None, message_id: int = 0) -> str:
    """A message body for text mode, sanitized (one code point maps to one): whole, or with
    ``limit`` (a summary line) cut there, the cut naming how to read the rest."""
    shown = text if limit is None else cut_naming_the_rest(text, limit, message_id)
    return sanitize_multiline(shown)


def cell(value: object) -> str:
    """A single-line display value: null prints `-`, text is sanitized."""
    if value is None:
        return NULL_CELL
    return sanitize_single_line(str(value))


# --- layout ------------------------------------------------------------------------------------


def char_width(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me"):
        return 0
    if unicodedata.east_asian_width(ch) in ("W", "F"):
        return 2
    return 1


def display_width(text: str) -> int:
    if text.isascii():
        return len(text)
    return sum(char_width(ch) for ch in text)


def plural(count: int, noun: str, plural_noun: str | None = None) -> str:
    """`1 member`, `0 members`: singular only when the count is exactly 1."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural_noun or noun + 's'}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Header, dash row and rows; two-space indent and separators, last column unpadded.

    Cells must already be display strings (see `cell()`).
    """
    widths = [display_width(h) for h in headers]
    for row in rows:
        for i, value in enumerate(row):
            widths[i] = max(widths[i], display_width(value))

    def line(values: Sequence[str]) -> str:
        parts = []
        last = len(values) - 1
        for i, value in enumerate(values):
            if i == last:
                parts.append(value)
            else:
                parts.append(value + " " * (widths[i] - display_width(value)))
        text = "  " + "  ".join(parts)
        # the last column is unpadded; only an empty last cell could leave separator spaces
        return text.rstrip(" ") if not values[last] else text

    lines = [line(headers), line(["-" * w for w in widths])]
    lines.extend(line(row) for row in rows)
    return lines


def counted_table(
    count_noun: str, headers: Sequence[str], rows: Sequence[Sequence[str]]
) -> list[str]:
    """`0 fleets.` alone, or `<n> fleets:` followed by the table."""
    if not rows:
        return [f"{plural(0, count_noun)}."]
    return [f"{plural(len(rows), count_noun)}:", *table(headers, rows)]


def label_lines(pairs: Iterable[tuple[str, str]], width: int, indent: str = "") -> list[str]:
    """`label:` left-justified in `width` columns, then the value."""
    return [f"{indent}{(label + ':').ljust(width)}{value}" for label, value in pairs]


# --- records (docs/cli.md §1.10), keys in contract order ------------------------------------------


def record_dict(
    record: Any, keys: Sequence[str] | None = None, *, hidden: Sequence[str] = (), **renamed: str
) -> dict[str, Any]:
    """A record as its JSON object: its fields in their order but the `hidden` ones (or `keys`, in
    contract order where that differs from the record's), each read from the field of that name or
    of the name `renamed` maps the key to; a tuple becomes a list."""
    if keys is None:
        # The fields in order, as the dataclass lists them for `match` (not `dataclasses.fields`:
        # importing dataclasses and inspect under it costs `cafleet hook` ~5 ms).
        keys = [name for name in record.__match_args__ if name not in hidden]
    result: dict[str, Any] = {}
    for key in keys:
        value = getattr(record, renamed.get(key, key))
        result[key] = list(value) if isinstance(value, tuple) else value
    return result


# The member's kind comes before its status in the JSON; the record keeps the table's order.
MEMBER_KEYS = (
    "member_id",
    "fleet_id",
    "name",
    "description",
    "kind",
    "status",
    "registered_at",
    "deregistered_at",
)


def placement_dict(placement: Any) -> dict[str, Any] | None:
    if placement is None:
        return None
    return record_dict(placement, hidden=("member_id", *placement.PANE_CHECK))


def member_dict(member: Any) -> dict[str, Any]:
    return {**record_dict(member, MEMBER_KEYS), "placement": placement_dict(member.placement)}


def roster_dict(entry: Any) -> dict[str, Any]:
    member = entry.member
    return {
        **record_dict(member, ("member_id", "name", "kind")),
        "placement": placement_dict(member.placement),
        **record_dict(entry, ("last_sent", "last_recv", "last_ack", "idle")),
    }


def fleet_dict(summary: Any) -> dict[str, Any]:
    return record_dict(summary)


def message_dict(message: Any) -> dict[str, Any]:
    return record_dict(message, hidden=("notified_at",))  # the JSON never shows it


# --- text envelopes ----------------------------------------------------------------------------


def party_text(member_id: int, names: Mapping[int, str] | None) -> str:
    """A member in an envelope: `Director (1)`, or the bare id when its name is not known."""
    name = None if names is None else names.get(member_id)
    return str(member_id) if name is None else f"{cell(name)} ({member_id})"


def envelope_lines(
    message: Any,
    limit: int | None = None,
    names: Mapping[int, str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """Header line (the sender by name and id, the send time, then ``extra`` fields), then the
    sanitized body when it is non-empty: whole (what a member reads its messages with), or cut
    at ``limit`` for an echo or a listing (`body_text`)."""
    sender = party_text(message.from_member_id, names)
    header = f"[{message.message_id} | from:{sender} | {cell(message.created_at)}"
    if message.type != "unicast":
        header += f" | kind:{message.type}"
    if message.origin_message_id is not None:
        header += f" | origin:{message.origin_message_id}"
    header += "".join(f" | {field}" for field in extra) + "]"
    body = body_text(message.text, limit, message.message_id)
    return [header, body] if body else [header]


def envelopes_lines(
    messages: Sequence[Any], limit: int | None = None, names: Mapping[int, str] | None = None
) -> list[str]:
    """Envelopes separated by one blank line, or `No messages found.`."""
    return _separated([envelope_lines(m, limit, names) for m in messages])


def history_lines(
    messages: Sequence[Any], member_id: int, limit: int, names: Mapping[int, str]
) -> list[str]:
    """`message history`, a listing (bodies cut at ``limit``, each cut naming `message show`):
    each envelope also names the recipient of what the member sent and whether a delivery was
    ACKed (docs/cli.md §2.31)."""
    shown = []
    for m in messages:
        extra = []
        if m.to_member_id is not None and m.to_member_id != member_id:
            extra.append(f"to:{party_text(m.to_member_id, names)}")
        if m.type == "unicast":
            acked = m.status_state == "completed"
            extra.append(f"ACKed {cell(m.status_timestamp)}" if acked else "not ACKed")
        shown.append(envelope_lines(m, limit, names, extra))
    return _separated(shown)


def _separated(envelopes: Sequence[list[str]]) -> list[str]:
    if not envelopes:
        return ["No messages found."]
    lines: list[str] = []
    for i, envelope in enumerate(envelopes):
        if i:
            lines.append("")
        lines.extend(envelope)
    return lines


def placement_text(placement: Any) -> str:
    """`member show`'s placement value."""
    if placement is None:
        return "(none)"
    pane = placement.mux_pane_id if placement.mux_pane_id is not None else "(pending)"
    lost = f" lost_at={placement.lost_at}" if placement.lost_at is not None else ""
    return (
        f"{placement.backend} session={cell(placement.mux_session)} "
        f"window={cell(placement.mux_window_id)} pane={cell(pane)} "
        f"agent={placement.coding_agent} created_at={placement.created_at}{lost}"
    )
