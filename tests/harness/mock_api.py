"""A local stand-in for the Anthropic Messages API, so a real agent's turn does what a test
needs without any model. Pointed at with ``ANTHROPIC_BASE_URL`` (Claude Code) or opencode's
``provider.anthropic.options.baseURL``; two modes:

``tool``  every streamed reply is one ``tool_use`` of the agent's shell tool: the agent shows its
          real permission prompt (tests/harness/capture_screens.py).
``stall`` every streamed reply starts and then only sends pings until the server stops: the
          agent stays ``working`` for as long as a test needs (opencode gives up on a refused
          connection within seconds).
``text``  every streamed reply is the text "Done.": each turn ends at once and the agent is
          ``ready`` again (a monitor that answers every wake line).

Every other request (titles, token counts) gets a short text reply. Standard library only;
serves on 127.0.0.1, one daemon thread per request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

COMMAND = "cafleet message ack 12"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _shell_tool(body: dict[str, Any]) -> str | None:
    names = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    for name in names:
        if name.lower() == "bash":
            return str(name)
    return None


def _answered(body: dict[str, Any]) -> bool:
    """Whether the conversation already holds a tool result (then reply with text)."""
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_result" for p in content
        ):
            return True
    return False


class _Handler(BaseHTTPRequestHandler):
    server_version = "mock-anthropic/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        self.server.requests.append(self.path)  # type: ignore[attr-defined]

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("content-length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            body = {}
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        if "count_tokens" in self.path:
            return self._json({"input_tokens": 10})
        tool = _shell_tool(body)
        if not body.get("stream"):
            return self._json(self._message("text", "ok"))
        if self.server.mode == "stall":  # type: ignore[attr-defined]
            return self._stream_stall()
        if tool is None or _answered(body) or self.server.mode == "text":  # type: ignore[attr-defined]
            return self._stream_text("Done.")
        return self._stream_tool(tool)

    def _stream_stall(self) -> None:
        self._start_stream()
        stop: threading.Event = self.server.stopping  # type: ignore[attr-defined]
        try:
            while not stop.wait(1.0):
                self.wfile.write(_sse("ping", {"type": "ping"}))
                self.wfile.flush()
        except OSError:
            return  # the agent closed the stream (an interrupt)

    def _json(self, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    @staticmethod
    def _message(kind: str, text: str) -> dict[str, Any]:
        return {
            "id": "msg_mock",
            "type": "message",
            "role": "assistant",
            "model": "claude-mock",
            "content": [{"type": kind, "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 2},
        }

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        start = self._message("text", "")
        start["content"], start["stop_reason"] = [], None
        self.wfile.write(_sse("message_start", {"type": "message_start", "message": start}))

    def _end_stream(self, reason: str) -> None:
        self.wfile.write(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        delta = {"stop_reason": reason, "stop_sequence": None}
        usage = {"output_tokens": 20}
        self.wfile.write(
            _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": usage})
        )
        self.wfile.write(_sse("message_stop", {"type": "message_stop"}))
        self.wfile.flush()

    def _stream_text(self, text: str) -> None:
        self._start_stream()
        block = {"type": "text", "text": ""}
        self.wfile.write(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
        )
        delta = {"type": "text_delta", "text": text}
        self.wfile.write(
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
        self._end_stream("end_turn")

    def _stream_tool(self, tool: str) -> None:
        self._start_stream()
        block = {"type": "tool_use", "id": "toolu_mock01", "name": tool, "input": {}}
        self.wfile.write(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": block},
            )
        )
        args = json.dumps({"command": COMMAND, "description": "Acknowledge message 12"})
        delta = {"type": "input_json_delta", "partial_json": args}
        self.wfile.write(
            _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
        )
        self._end_stream("tool_use")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False


@contextmanager
def mock_anthropic(mode: str = "tool") -> Iterator[str]:
    """Serve the mock on a free local port; yield its base URL."""
    if mode not in ("tool", "stall", "text"):
        raise ValueError(f"unknown mock mode {mode!r}")
    server = _Server(("127.0.0.1", 0), _Handler)
    server.requests = []  # type: ignore[attr-defined]
    server.mode = mode  # type: ignore[attr-defined]
    server.stopping = threading.Event()  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.stopping.set()  # type: ignore[attr-defined]
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


__all__ = ["COMMAND", "mock_anthropic"]
