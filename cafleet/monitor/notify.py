"""Notification channels (docs/cli.md §2.35, docs/cli.md §2.35): events recorded in the
store's outbox (`fire`), sent by the monitor loop's sender thread (`Sender`), each with bounded
time and size, retried with backoff and given up after `MAX_TRIES`.

Recording never does network I/O, so a report, a delivery or a command is never slowed by a
channel. The tick hands due rows to one background thread and records its results at the next
tick: the database is only touched on the loop's own thread. Sends use the standard library only
(`http.client`), imported when a send happens.
"""

from __future__ import annotations

import json
import queue
import threading
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cafleet import broker
from cafleet.db.timefmt import utcnow
from cafleet.errors import CafleetError

if TYPE_CHECKING:
    from cafleet.db.runtime import Connection
    from cafleet.records.notify import Channel, OutboxEntry

TIMEOUT = 5.0  # seconds per connect and per read
DEADLINE = 15.0  # seconds one send may take in all, redirects and a slow body included
MAX_RESPONSE = 64 * 1024  # bytes of a response read; the rest is never read
MAX_REDIRECTS = 3
MAX_TRIES = 5  # then the row is given up and the channel reported failing
BACKOFF = (5, 30, 120, 600)  # seconds before the 2nd, 3rd, 4th and 5th try
BATCH = 20  # rows one sender round takes
REDACTED = "***"


# --- redaction ------------------------------------------------------------------------------------


def redact(url: str | None) -> str:
    """``url`` without its credentials: userinfo, query values and a Slack hook's secret path
    are replaced by `***`; the fragment is dropped."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    if not url:
        return "-"
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return REDACTED
    netloc = host + (f":{port}" if port is not None else "")
    if parts.username is not None or parts.password is not None:
        netloc = f"{REDACTED}@{netloc}"
    path = parts.path
    if host.endswith("hooks.slack.com"):
        segments = path.split("/")
        path = "/".join(segments[:2] + [REDACTED] * (len(segments) > 2))
    query = urlencode([(k, REDACTED) for k, _ in parse_qsl(parts.query, keep_blank_values=True)])
    return urlunsplit((parts.scheme, netloc, path, query.replace("%2A", "*"), ""))


# --- events ---------------------------------------------------------------------------------------


def payload(
    event: str,
    fleet_id: int,
    text: str,
    member_id: int | None = None,
    member_name: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The webhook's JSON object (docs/cli.md §2.35)."""
    return {
        "event": event,
        "fleet_id": fleet_id,
        "member_id": member_id,
        "member_name": member_name,
        "text": text,
        **extra,
    }


def fire(conn: Connection, fleet_id: int, event: str, key: str, data: dict[str, Any]) -> int:
    """Record ``data`` in the outbox of every channel of the fleet that takes ``event``, once
    per ``key``. Never raises: a report is never lost because a channel could not be queued.
    Returns the rows added."""
    try:
        return broker.record_event(
            conn, fleet_id=fleet_id, event=event, event_key=f"{event}:{key}", payload=data
        )
    except CafleetError:
        return 0


# --- formats --------------------------------------------------------------------------------------


def request_for(kind: str, data: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The body and headers a channel of ``kind`` is sent."""
    if kind == "slack":
        text = data["text"]
        if data.get("answer_url"):
            text += f"\n<{data['answer_url']}|Answer from here>"
        return json.dumps({"text": text}).encode(), {"Content-Type": "application/json"}
    if kind == "ntfy":
        headers = {
            "Title": f"cafleet {data['event']}: fleet {data['fleet_id']}",
            "Tags": "robot",
            "Content-Type": "text/plain; charset=utf-8",
        }
        if data["event"] in ("escalation", "budget", "lost_pane"):
            headers["Priority"] = "high"
        if data.get("answer_url"):
            headers["Click"] = data["answer_url"]
        return data["text"].encode(), headers
    return json.dumps(data).encode(), {"Content-Type": "application/json"}


def send(channel: Channel, data: dict[str, Any]) -> str | None:
    """Send one event now; returns why it failed, in a few words that never hold a full URL
    (None: sent)."""
    if channel.kind == "desktop":
        return _desktop(data)
    assert channel.target is not None
    body, headers = request_for(channel.kind, data)
    return post(channel.target, body, headers)


def _desktop(data: dict[str, Any]) -> str | None:
    import shutil
    import subprocess

    binary = shutil.which("notify-send")
    if binary is None:
        return "notify-send is not installed"
    try:
        subprocess.run(
            [binary, "--app-name=cafleet", f"cafleet {data['event']}", data["text"][:1000]],
            check=True,
            timeout=TIMEOUT,
            capture_output=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"notify-send failed: {type(exc).__name__}"
    return None


def post(
    url: str,
    body: bytes,
    headers: dict[str, str],
    *,
    timeout: float = TIMEOUT,
    deadline: float = DEADLINE,
) -> str | None:
    """POST ``body``: at most `MAX_REDIRECTS` redirects, `MAX_RESPONSE` bytes read, ``timeout``
    per connect and read and ``deadline`` in all. Returns why it failed (None: a 2xx)."""
    import http.client
    import socket
    import time
    from urllib.parse import urljoin, urlsplit

    ends = time.monotonic() + deadline
    for _ in range(MAX_REDIRECTS + 1):
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"not an http(s) URL: {redact(url)}"
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout)
        else:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        try:
            sent = dict(headers)
            if parts.username:
                import base64

                user = f"{parts.username}:{parts.password or ''}".encode()
                sent["Authorization"] = "Basic " + base64.b64encode(user).decode()
            conn.request("POST", target, body=body, headers=sent)
            response = conn.getresponse()
            read = 0
            while read < MAX_RESPONSE and time.monotonic() < ends:
                chunk = response.read1(min(8192, MAX_RESPONSE - read))
                if not chunk:
                    break
                read += len(chunk)
            status = response.status
            location = response.getheader("Location")
        except TimeoutError:
            return "timed out"
        except (OSError, http.client.HTTPException) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else ""
            if isinstance(exc, socket.gaierror):
                reason = "host not found"
            return f"{type(exc).__name__}{': ' + reason if reason else ''}"
        finally:
            conn.close()
        if 200 <= status < 300:
            return None
        if status in (301, 302, 303, 307, 308) and location:
            if time.monotonic() >= ends:
                return "timed out following redirects"
            url = urljoin(url, location)
            continue
        return f"HTTP {status}"
    return f"more than {MAX_REDIRECTS} redirects"


def next_try(attempts: int, now: datetime) -> datetime | None:
    """When a row that failed its ``attempts``-th try is tried again (None: given up)."""
    if attempts >= MAX_TRIES:
        return None
    return now + timedelta(seconds=BACKOFF[min(attempts, len(BACKOFF)) - 1])


# --- the sender -----------------------------------------------------------------------------------


class Sender:
    """One background thread sending the rows a tick hands it; `pump` (on the loop's thread)
    records the results of the last round and hands over the next due rows."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[OutboxEntry, Channel] | None] = queue.Queue()
        self._done: queue.Queue[tuple[OutboxEntry, Channel, str | None]] = queue.Queue()
        self._in_flight = 0
        self._thread: threading.Thread | None = None

    def pump(self, conn: Connection, log: Any = None, now: datetime | None = None) -> int:
        """Record finished sends, then queue the due rows when none is in flight. Returns the
        rows queued."""
        self.collect(conn, log, now)
        if self._in_flight:
            return 0
        due = broker.due_events(conn, limit=BATCH, now=now)
        if not due:
            return 0
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="cafleet-notify", daemon=True)
            self._thread.start()
        for job in due:
            self._in_flight += 1
            self._jobs.put(job)
        return len(due)

    def collect(self, conn: Connection, log: Any = None, now: datetime | None = None) -> None:
        while True:
            try:
                entry, channel, error = self._done.get_nowait()
            except queue.Empty:
                return
            self._in_flight -= 1
            at = now or utcnow()
            if error is None:
                broker.mark_sent(conn, outbox_id=entry.outbox_id, channel_id=channel.channel_id)
                continue
            retry = next_try(entry.attempts + 1, at)
            broker.mark_failed(
                conn,
                outbox_id=entry.outbox_id,
                channel_id=channel.channel_id,
                error=error,
                next_at=retry,
                now=at,
            )
            if log is not None:
                then = "given up" if retry is None else "will retry"
                log(
                    f"notify -> channel {channel.channel_id} ({channel.kind}) failed "
                    f"{entry.event}: {error}; {then}"
                )

    def wait_idle(self, timeout: float) -> bool:
        """Tests and `stop`: wait until every queued row has a result."""
        import time

        ends = time.monotonic() + timeout
        while self._done.qsize() < self._in_flight:
            if time.monotonic() >= ends:
                return False
            time.sleep(0.02)
        return True

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._jobs.put(None)

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            entry, channel = job
            error: str | None = None
            try:
                error = send(channel, json.loads(entry.payload_json))
            except Exception as exc:  # the thread must never die with rows in flight
                error = f"unexpected {type(exc).__name__}"
            self._done.put((entry, channel, error))


def flush(conn: Connection, sender: Sender | None, *, log: Any = None, timeout: float = 20) -> None:
    """Send what is due now and wait for it (at most ``timeout`` s), recording the results:
    a stopping loop's last act."""
    sender = sender if sender is not None else Sender()
    sender.pump(conn, log)
    sender.wait_idle(timeout)
    sender.collect(conn, log)
    sender.stop()


def send_test(conn: Connection, channel: Channel, fleet_id: int) -> str | None:
    """`notify test`: send a `test` event now; returns the failure (None: sent)."""
    data = payload("test", fleet_id, f"[cafleet] test notification for fleet {fleet_id}")
    error = send(channel, data)
    broker.channel_result(conn, channel_id=channel.channel_id, error=error)
    return error


__all__ = [
    "MAX_TRIES",
    "Sender",
    "fire",
    "flush",
    "next_try",
    "payload",
    "post",
    "redact",
    "send",
    "send_test",
]
