"""Reading a jsonl record incrementally (docs/runtime.md §9.5): the byte offset after the last
complete line read is remembered with the file's identity, so a long session is read once.

A file that is gone, or whose identity changed or that shrank below the remembered offset (it
was rotated or rewritten), raises `RecordUnreadable`: the counts read so far no longer describe
it, and guessing would be wrong.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from cafleet.files import open_regular
from cafleet.sessions import RecordUnreadable

# Bytes read at a time: a huge backlog is read in chunks, never all in memory at once.
CHUNK = 8 * 1024 * 1024


def identity(path: str) -> tuple[int, int]:
    try:
        st = os.stat(path)
    except OSError as exc:
        raise RecordUnreadable(f"{path}: {exc.strerror or exc}") from None
    return st.st_dev, st.st_ino


def new_objects(path: str, state: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Yield the JSON objects of the lines after ``state["offset"]`` up to the end of the file;
    update ``state``'s offset (only past complete lines) and identity. Read in chunks of
    `CHUNK` bytes, so a long backlog never sits in memory whole. A line that is not a JSON
    object is skipped."""
    dev, ino = identity(path)
    known = state.get("file")
    offset = int(state.get("offset") or 0)
    if known is not None and list(known) != [dev, ino]:
        raise RecordUnreadable(f"{path} was replaced (rotated)")
    try:
        # Never blocks: a FIFO or device where a record should be is refused, not read.
        fh = os.fdopen(open_regular(path), "rb")
    except OSError as exc:
        raise RecordUnreadable(f"{path}: {exc.strerror or exc}") from None
    with fh:
        try:
            if os.fstat(fh.fileno()).st_size < offset:
                raise RecordUnreadable(f"{path} shrank below what was read (rotated)")
            fh.seek(offset)
        except OSError as exc:
            raise RecordUnreadable(f"{path}: {exc.strerror or exc}") from None
        state["file"] = [dev, ino]
        pending = b""
        while True:
            try:
                data = fh.read(CHUNK)
            except OSError as exc:
                raise RecordUnreadable(f"{path}: {exc.strerror or exc}") from None
            if not data:
                return  # what is left in `pending` is a line still being written
            pending += data
            end = pending.rfind(b"\n")
            if end < 0:
                continue  # one line longer than a chunk: read on
            complete, pending = pending[: end + 1], pending[end + 1 :]
            offset += len(complete)
            state["offset"] = offset
            for raw in complete.splitlines():
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj


def head_objects(path: str, limit: int = 200) -> Iterator[dict[str, Any]]:
    """The first ``limit`` JSON objects of a jsonl file (for finding a session's first message);
    an unreadable file yields nothing."""
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            for n, raw in enumerate(fh):
                if n >= limit:
                    return
                try:
                    obj = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    yield obj
    except OSError:
        return


def text_of(content: Any) -> str:
    """The text of a message content: a string, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "input_text")
        )
    return ""
