"""Screen mode of the fake agents: draw Claude Code / Codex / opencode screens from the cue
tables' real texts (cafleet/agents/<name>/screens.py) so the classifier and the delivery gate run
against a real private tmux server without the real agents.

Opt-in, per fake: ``CAFLEET_FAKE_SCREEN="<options>"`` in the pane's environment, or a
``#fake screen <options>`` line in the fake's argv (the rendered spawn prompt). Without it the
fake keeps its plain behaviour (tests/harness/fake_agent.py). Options, space-separated:

``start=<s>``            starting screens for ``s`` seconds (default 0): blank, then partial
``drop-while-starting``  keys typed while starting are thrown away (default: text is kept and
                         Enter is lost, as the real Claude Code and Codex do)
``swallow-enter=<n>``    the first ``n`` Enters on a non-empty composer do nothing
``work=<s>``             a submit starts a turn that works for ``s`` seconds (default 3)
``permission``           a submit opens a permission prompt (awaiting_user) before the turn
``escapes=<n>``          Escapes that interrupt a working turn (default: 1 for claude and
                         codex, 2 for opencode, like the real ones)
``late=<s>``             a submit freezes the screen for ``s`` seconds (the line is taken and
                         logged at once, but the screen goes on showing it in the composer):
                         the real agents redraw seconds late under load
``auto-submit=<s>``      opencode started with ``--prompt``: once started, its home screen
                         (the logo) shows `SPAWN_PROMPT` in the composer for ``s`` seconds,
                         then submits whatever the composer holds (recorded ``auto-submit``)

Records (appended to the fake's log, as in plain mode): ``line`` for every submitted message
(``text`` is what the agent got, ``bytes_b64`` its UTF-8 bytes, ``queued`` true when it was
submitted while working), ``dropped``, ``enter-lost`` (while starting), ``swallowed``,
``interrupted``, ``prompt-key`` (a key that reached the permission prompt), ``screen`` (the
state drawn, on every change).
"""

from __future__ import annotations

import base64
import os
import select
import shutil
import signal
import textwrap
import time
from collections.abc import Callable
from typing import Any

POLL = 0.05
SPAWN_PROMPT = "You are member 3 of a cafleet fleet. Wait for messages from the Director."
ESC_WAIT = 0.05  # a lone ESC is the Escape key once this long passes without a follow-up


def _example(agent: str, needle: str) -> str:
    """The real text of the first cue of ``agent`` whose example contains ``needle``."""
    from cafleet.agents.registry import load_agent

    table = load_agent(agent).screens
    for cue in table.cues + table.first_turn:
        if needle in cue.example:
            return cue.example.rstrip()
    raise KeyError(f"no {agent} cue example contains {needle!r}")


def parse_options(text: str) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    for word in text.split():
        key, _, value = word.partition("=")
        opts[key] = value if value else True
    return opts


class Screens:
    """One agent's screen state machine; ``fake`` is the plain Fake (log, tty writer)."""

    def __init__(self, fake: Any, options: str) -> None:
        self.fake = fake
        self.agent = fake.agent if fake.agent in ("claude", "codex", "opencode") else "claude"
        opts = parse_options(options)
        self.start_s = float(opts.get("start", 0) or 0)
        self.drop_while_starting = "drop-while-starting" in opts
        self.swallow_left = int(opts.get("swallow-enter", 0) or 0)
        self.work_s = float(opts.get("work", 3) or 0)
        self.permission = "permission" in opts
        self.late_s = float(opts.get("late", 0) or 0)
        self.frozen_until = 0.0  # `late`: nothing is drawn before then
        self.escapes_needed = int(opts.get("escapes", 2 if self.agent == "opencode" else 1))
        auto = opts.get("auto-submit")
        self.auto_submit_s = None if auto is None else float(auto or 0)
        self.auto_submit_at: float | None = None  # when the spawn prompt is submitted
        self.started = time.monotonic()
        self.composer = ""
        self.transcript: list[str] = []
        self.queue: list[str] = []
        self.state = "starting" if self.start_s > 0 else "ready"
        if self.state == "ready" and self.auto_submit_s is not None:
            self.composer = SPAWN_PROMPT
            self.auto_submit_at = self.started + self.auto_submit_s
        self.work_until = 0.0
        self.prompting: str | None = None  # the line waiting for the permission answer
        self.escapes = 0
        self.last_escape = 0.0
        self.note = ""
        self.pending = b""
        self.esc_at = 0.0
        self.drawn = ""
        self.cwd = os.getcwd()
        self.exit = False

    # ------------------------------------------------------------------ records

    def log(self, kind: str, **data: Any) -> None:
        self.fake.record({"kind": kind, "t": time.time(), **data})

    def submit(self, text: str, *, queued: bool) -> None:
        raw = text.encode("utf-8", "surrogateescape")
        if self.late_s:
            self.frozen_until = time.monotonic() + self.late_s
        self.log("line", bytes_b64=base64.b64encode(raw).decode("ascii"), text=text, queued=queued)
        if self.fake.after_line(raw):
            self.exit = True

    # ------------------------------------------------------------------ input

    def feed(self, data: bytes) -> None:
        """Split raw tty bytes into keys (ESC sequences are parsed, as a terminal app does)."""
        buf = self.pending + data
        self.pending = b""
        i = 0
        while i < len(buf):
            b = buf[i]
            if b == 0x1B:
                if i + 1 >= len(buf):
                    self.pending = buf[i:]
                    self.esc_at = time.monotonic()
                    return
                nxt = buf[i + 1]
                if nxt == ord("["):  # CSI: parameters, then one final byte 0x40-0x7E
                    j = i + 2
                    while j < len(buf) and not 0x40 <= buf[j] <= 0x7E:
                        j += 1
                    if j >= len(buf):
                        self.pending = buf[i:]
                        self.esc_at = time.monotonic()
                        return
                    i = j + 1  # eaten: "ESC [ c" loses the "[c" of a line, as the issue saw
                    continue
                if nxt == 0x1B:
                    self.key("escape")
                    i += 1
                    continue
                i += 2  # ESC + char: an Alt chord, ignored
                continue
            if b == 0x0D:
                self.key("enter")
            elif b == 0x15:
                self.key("ctrl-u")
            elif b in (0x7F, 0x08):
                self.key("backspace")
            elif b == 0x03:
                self.key("ctrl-c")
            elif b >= 0x20:
                j = i + 1
                while j < len(buf) and buf[j] >= 0x20 and buf[j] != 0x7F:
                    j += 1
                self.key("text", buf[i:j].decode("utf-8", "replace"))
                i = j
                continue
            i += 1

    def flush_escape(self) -> None:
        if self.pending and time.monotonic() - self.esc_at >= ESC_WAIT:
            if self.pending == b"\x1b":
                self.key("escape")
            self.pending = b""

    def key(self, name: str, text: str = "") -> None:
        if self.state == "starting":
            if self.drop_while_starting:
                self.log("dropped", key=name, text=text)
                return
            if name == "enter":
                self.log("enter-lost", composer=self.composer)
                return
        if self.state == "awaiting_user":
            self.log("prompt-key", key=name, text=text)
            self.answer(name, text)
            return
        if name == "text":
            self.composer += text
        elif name == "backspace":
            self.composer = self.composer[:-1]
        elif name == "ctrl-u":
            self.ctrl_u()
        elif name == "ctrl-c":
            self.composer = ""
        elif name == "escape":
            self.escape()
        elif name == "enter":
            self.enter()
        self.draw()

    def ctrl_u(self) -> None:
        if self.agent != "claude":
            self.composer = ""
            return
        # Claude deletes back to the start of the cursor's (last) visual row only.
        rows = textwrap.wrap(self.composer, max(10, self.width() - 2)) or [""]
        self.composer = " ".join(rows[:-1])

    def enter(self) -> None:
        text = self.composer.strip()
        if not text:
            return
        if self.swallow_left > 0:
            self.swallow_left -= 1
            self.log("swallowed", composer=self.composer)
            return
        self.composer = ""
        if self.state == "working":
            self.queue.append(text)
            self.submit(text, queued=True)
            return
        self.begin(text)

    def begin(self, text: str) -> None:
        self.transcript.append(text)
        self.note = ""
        if self.permission:
            self.prompting = text
            self.set_state("awaiting_user")
            return
        self.submit(text, queued=False)
        self.work()

    def work(self) -> None:
        self.work_until = time.monotonic() + self.work_s
        self.escapes = 0
        self.set_state("working")

    def answer(self, name: str, text: str) -> None:
        line = self.prompting or ""
        if name == "enter" or text[:1] in ("1", "y"):
            self.prompting = None
            self.submit(line, queued=False)
            self.work()
        elif name == "escape" or text[:1] in ("3", "n"):
            self.prompting = None
            self.note = "interrupted"
            self.set_state("ready")
        self.draw()

    def escape(self) -> None:
        if self.state != "working":
            return  # an Escape on a ready composer changes nothing (the real ones keep text)
        now = time.monotonic()
        self.escapes = self.escapes + 1 if now - self.last_escape < 2.0 else 1
        self.last_escape = now
        if self.escapes < self.escapes_needed:
            self.note = "esc-again"
            return
        self.log("interrupted", line=self.transcript[-1] if self.transcript else "")
        self.note = "interrupted"
        self.queue.clear()
        if self.agent == "claude" and self.transcript and not self.composer:
            # Claude puts an interrupted prompt back into its composer.
            self.composer = self.transcript.pop()
        self.set_state("ready")

    # ------------------------------------------------------------------ time

    def tick(self) -> None:
        self.flush_escape()
        now = time.monotonic()
        if self.state == "starting" and now - self.started >= self.start_s:
            if self.auto_submit_s is not None:
                self.composer = SPAWN_PROMPT
                self.auto_submit_at = now + self.auto_submit_s
            self.set_state("ready")
        if self.auto_submit_at is not None and now >= self.auto_submit_at:
            self.auto_submit_at = None
            text, self.composer = self.composer.strip(), ""
            self.log("auto-submit", text=text)
            if text:
                self.begin(text)
        if self.state == "working" and now >= self.work_until:
            if self.queue:
                self.transcript.append(self.queue.pop(0))
                self.work()
            else:
                self.set_state("ready")
        self.draw()

    def set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.log("screen", state=state)
        self.draw()

    # ------------------------------------------------------------------ drawing

    def width(self) -> int:
        return shutil.get_terminal_size((120, 40)).columns

    def height(self) -> int:
        return shutil.get_terminal_size((120, 40)).lines

    def draw(self, force: bool = False) -> None:
        if time.monotonic() < self.frozen_until and not force:
            return
        painter: Callable[[], list[str]] = getattr(self, f"_{self.agent}")
        lines = [ln[: self.width()] for ln in painter()]
        lines = lines[-self.height() :]
        text = "\r\n".join(lines)
        if text == self.drawn and not force:
            return
        self.drawn = text
        self.fake.tty_write("\x1b[H\x1b[2J" + text)

    def _elapsed(self) -> int:
        return max(0, int(self.work_s - (self.work_until - time.monotonic())))

    def _claude(self) -> list[str]:
        w = self.width()
        if self.state == "starting":
            return (
                []
                if time.monotonic() - self.started < self.start_s / 2
                else [_example("claude", "Claude Code v")]
            )
        out = [_example("claude", "Claude Code v"), ""]
        for text in self.transcript:
            out.append("❯ " + text)
        if self.note == "interrupted":
            out.append("  ⎿  Interrupted · What should Claude do instead?")
        if self.state == "working":
            out.append(_example("claude", "Retrying in"))
            out += ["  ❯ " + q for q in self.queue]
        rule = "─" * w
        if self.state == "awaiting_user":
            return out + [
                rule,
                " Bash command",
                "   cafleet message ack 12",
                "",
                " Do you want to proceed?",
                " ❯ 1. Yes",
                "   2. Yes, and don't ask again for: cafleet message *",
                _example("claude", "No, and tell Claude"),
                "",
                " Esc to cancel · Tab to amend",
            ]
        rows = textwrap.wrap(self.composer, max(10, w - 2)) or [""]
        if not self.composer and self.queue:
            rows = ["Press up to edit queued messages"]
        out += [rule, "❯\u00a0" + rows[0], *("  " + r for r in rows[1:]), rule]
        if self.composer:
            out.append("")
        elif self.state == "working":
            out.append("  esc to interrupt · ← for agents")
        else:
            out.append("  ? for shortcuts · ← for agents")
        return out

    def _codex(self) -> list[str]:
        if self.state == "starting":
            if time.monotonic() - self.started < self.start_s / 2:
                return []
            return [
                "",
                "  >_ OpenAI Codex (v0.171.0)",
                "     loading",
                "",
                "› Ask Codex to do anything",
                "",
                "  ? for shortcuts",
            ]
        out = ["", "  >_ OpenAI Codex (v0.171.0)", f"     {self.cwd}", ""]
        for text in self.transcript + self.queue:
            out += ["› " + text, ""]
        if self.note == "interrupted":
            out += ["■ Conversation interrupted - use /feedback if something went wrong", ""]
        if self.state == "working":
            out += [f"• Working ({self._elapsed()}s • esc to interrupt)", ""]
        if self.state == "awaiting_user":
            return out + [
                _example("codex", "Would you like to run"),
                "",
                "  $ cafleet message ack 12",
                "",
                _example("codex", "Yes, proceed"),
                "  2. Yes, and don't ask again for this command (p)",
                "  3. No, and tell Codex what to do differently (esc)",
                "",
                "  Press enter to confirm or esc to cancel",
            ]
        rows = textwrap.wrap(self.composer, max(10, self.width() - 2)) or [
            "Ask Codex to do anything"
        ]
        out += ["› " + rows[0], *("  " + r for r in rows[1:]), ""]
        out.append(f"  GPT-6.2-Sol default · {self.cwd}")
        if not self.composer:
            out.append("  ← for agents · ? for shortcuts")
        return out

    def _opencode(self) -> list[str]:
        if self.state == "starting":
            return []
        w = min(self.width() - 4, 100)
        out = [""]
        for text in self.transcript:
            out += ["  ┃", "  ┃  " + text, "  ┃", ""]
        for text in self.queue:
            out += ["  ┃", "  ┃  " + text, "  ┃   QUEUED", "  ┃", ""]
        if self.state == "awaiting_user":
            return out + [
                "  " + _example("opencode", "Permission required"),
                "    $ cafleet message ack 12",
                "",
                "   Allow once   Allow always   Reject",
                "",
            ]
        if self.auto_submit_at is not None:  # the home screen, before the spawn prompt's submit
            out += [_example("opencode", "█▀▀█ █▀▀█"), ""]
        if not self.transcript and not self.composer:
            rows = ['Ask anything… "Fix broken tests"']
        else:
            rows = textwrap.wrap(self.composer, max(10, w - 4)) or [""]
        out += ["  ┃", *("  ┃  " + r for r in rows), "  ┃"]
        out += ["  ┃  Build · Claude Sonnet 4.6 Anthropic", "  ╹" + "▀" * (w - 1)]
        hints = "tab agents  ctrl+p commands"
        if self.state == "working":
            hint = "esc again to interrupt" if self.note == "esc-again" else "esc interrupt"
            bar = "■■■⬝⬝⬝⬝⬝"
            out.append(f"   {bar}  {hint}".ljust(w - len(hints)) + hints)
        else:
            out.append(f"   {self.cwd}".ljust(w - len(hints)) + hints)
        return out

    # ------------------------------------------------------------------ main loop

    def run(self) -> int:
        try:
            return self._run()
        except Exception:
            import traceback

            self.log("error", traceback=traceback.format_exc())
            raise

    def _run(self) -> int:
        from cafleet.agents.registry import agent_names, load_agent

        for name in agent_names():  # every cue table, before any drawing (signals included)
            load_agent(name)

        resized = {"flag": False}
        # The handler only flags: drawing inside it could interleave with a draw in progress.
        signal.signal(signal.SIGWINCH, lambda *_: resized.update(flag=True))
        self.log("screen", state=self.state)
        self.draw(force=True)
        while not self.exit:
            self.fake.poll_control()
            if resized["flag"]:
                resized["flag"] = False
                self.draw(force=True)
            self.tick()
            try:
                ready, _, _ = select.select([0], [], [], POLL)
            except InterruptedError:
                continue
            if not ready:
                continue
            try:
                data = os.read(0, 65536)
            except OSError:
                return 0
            if not data:
                return 0
            self.feed(data)
        time.sleep(0.05)
        return 0


__all__ = ["Screens", "parse_options"]
