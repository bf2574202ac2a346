"""Re-capture the real agents' screens into tests/data/screens/<agent>/<situation>-N.txt.

    python -m tests.harness.capture_screens [claude] [codex] [opencode] [gemini] [opencode-answered]

Drives each real agent (tests/harness/real_agents.py) through the situations it can reach
offline, in a private tmux server, and saves ``capture-pane -p`` of the visible screen. What the
script did to reach a screen is the ground truth the unit tests check the classifier against:
it is written to tests/data/screens/index.json (``state`` the classifier must answer,
``composer`` the text in the composer or null, ``frames`` message frames visible outside it).
The script waits on literal screen texts, never on the classifier it feeds. Run one agent at a
time on a loaded machine; each takes one to five minutes. Permission prompts come from a local
stand-in API (tests/harness/mock_api.py) for Claude Code and opencode.

After a re-capture run ``python -m pytest tests/test_panestate.py``: cue examples are copied
from captures, and spinner verbs, counters and progress bars change from run to run, so a cue
whose example is no longer in its capture must get a fresh example (or source file).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.harness.fixtures import TmuxHarness, private_tmux
from tests.harness.mock_api import mock_anthropic
from tests.harness.real_agents import AGENTS, RealAgent, installed_version

DATA = Path(__file__).resolve().parents[1] / "data" / "screens"
INDEX = DATA / "index.json"
LONG_WORDS = " ".join(f"word{i}" for i in range(150))
MID_WORDS = " ".join(f"w{i}" for i in range(70))


def frame(n: int) -> str:
    return f"[cafleet msg {n} from Director (1)]"


def line(n: int, body: str = "hello") -> str:
    return f"{frame(n)} {body} \u2014 ack with: cafleet message ack {n}"


UNSET: Any = object()  # "composer" left out of the index: the test does not check it


class Recorder:
    """Saves captures and their index entries. ``composer`` is the text the composer holds
    ("" when empty, None when no composer is drawn, left out when not checked)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.dir = DATA / agent
        self.dir.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = {}
        self.entries: dict[str, dict[str, Any]] = {}

    def save(
        self,
        situation: str,
        text: str,
        *,
        state: str,
        composer: Any = UNSET,
        frames: tuple[str, ...] = (),
        note: str,
        size: str = "120x40",
    ) -> None:
        # The harness directory (/tmp/cft + 8 random characters) in a stable spelling of the
        # same length, so columns stay put and re-captures diff cleanly.
        text = re.sub(r"/tmp/cft[a-z0-9_]{8}", "/tmp/cftxxxxxxxx", text)
        n = self.counts.get(situation, 0) + 1
        self.counts[situation] = n
        name = f"{situation}-{n}.txt"
        (self.dir / name).write_text(text, encoding="utf-8")
        entry: dict[str, Any] = {"state": state}
        if composer is not UNSET:
            entry["composer"] = composer
        entry.update(frames=list(frames), note=note, size=size,
                     version=installed_version(self.agent))  # fmt: skip
        self.entries[f"{self.agent}/{name}"] = entry
        print(f"  {self.agent}/{name}: {state} ({note})", flush=True)


@contextmanager
def agent_in(h: TmuxHarness, agent: str, **kwargs: Any) -> Iterator[RealAgent]:
    a = RealAgent(h, agent, **kwargs)
    try:
        yield a.start()
    finally:
        a.stop()


def save_starts(rec: Recorder, screens: list[str], limit: int = 3) -> None:
    for text in _spread(screens, limit):
        blank = not text.strip()
        rec.save(
            "starting",
            text,
            state="starting",
            composer=None,
            note="blank screen right after spawn" if blank else "partial screen during start-up",
        )


def _spread(items: list[str], limit: int) -> list[str]:
    if len(items) <= limit:
        return items
    step = (len(items) - 1) / (limit - 1)
    return [items[round(i * step)] for i in range(limit)]


def poll_until(
    a: RealAgent, ready: Callable[[str], bool], timeout: float = 120
) -> tuple[str, list[str]]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = a.capture()
        if ready(text):
            return text, seen
        if text not in seen:
            seen.append(text)
        time.sleep(0.1)
    raise AssertionError(f"{a.agent} never reached the expected screen:\n{a.capture()}")


def clear_composer(a: RealAgent, empty: Callable[[str], bool], tries: int = 8) -> str:
    for _ in range(tries):
        text = a.capture()
        if empty(text):
            return text
        a.keys("C-u")
        time.sleep(0.4)
    raise AssertionError(f"{a.agent}: Ctrl-U did not empty the composer:\n{a.capture()}")


# --------------------------------------------------------------------------- claude


def _claude_prompt_line(text: str) -> str | None:
    """The composer's first line (between the last two rules), or None."""
    lines = text.splitlines()
    rules = [i for i, ln in enumerate(lines) if ln.strip() and set(ln.strip()) == {"─"}]
    if len(rules) < 2:
        return None
    return lines[rules[-2] + 1]


def _claude_empty(text: str) -> bool:
    first = _claude_prompt_line(text)
    # Claude puts a no-break space after the ❯; split() treats it as a space.
    return first is not None and " ".join(first.split()) in (
        "❯",
        "❯ Press up to edit queued messages",
    )


def claude(h: TmuxHarness, rec: Recorder) -> None:
    def is_ready(t: str) -> bool:
        return "? for shortcuts" in t and _claude_prompt_line(t) is not None

    with agent_in(h, "claude") as a:
        text, early = poll_until(a, is_ready)
        save_starts(rec, early)
        rec.save("ready", text, state="ready", composer="", note="first ready screen after start")

        a.type_text("draft that was never sent")
        text = a.wait_screen(r"❯\sdraft that was never sent")
        rec.save("composer", text, state="ready", composer="draft that was never sent",
                 note="ready, text typed but not submitted (the footer hint disappears)")  # fmt: skip
        clear_composer(a, _claude_empty)

        a.submit(line(12))
        text = a.wait_screen(r"esc to interrupt")
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="right after submit, offline: first API attempt")  # fmt: skip
        text = a.wait_screen(r"attempt [3-9]/10", timeout=60)
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="offline API retries with backoff")  # fmt: skip

        a.type_text(line(13, "typed while working"))
        text = a.wait_screen(r"❯\s\[cafleet msg 13")
        rec.save("working-composer", text, state="working", composer=line(13, "typed while working"),
                 frames=(frame(12),), note="working, a line typed but not yet submitted")  # fmt: skip
        a.keys("Enter")
        text = a.wait_screen(r"Press up to edit queued messages")
        rec.save("queued", text, state="working", composer="", frames=(frame(12), frame(13)),
                 note="Enter while working: the line is queued under the status line")  # fmt: skip

        a.keys("Escape")
        text = a.wait_screen(r"Interrupted · What should Claude do instead\?")
        time.sleep(1.0)
        text = a.capture()
        rec.save("interrupted", text, state="working", composer="", frames=(frame(12), frame(13)),
                 note="one Escape interrupted msg 12; the queued msg 13 started at once")  # fmt: skip
        time.sleep(1.5)
        a.keys("Escape")
        text, _ = poll_until(a, lambda t: "esc to interrupt" not in t, timeout=30)
        time.sleep(1.0)
        text = a.capture()
        restored = _claude_prompt_line(text) or ""
        composer = " ".join(restored.split()).removeprefix("❯").strip()
        rec.save("interrupted", text, state="ready", composer=composer, frames=(frame(12),),
                 note="a second Escape interrupted msg 13 too; Claude may put it back in the composer")  # fmt: skip
        clear_composer(a, _claude_empty)

        a.type_text("a long draft " + LONG_WORDS + " that wraps over several rows")
        text = a.wait_screen(r"\[Pasted text #\d+\]")
        rec.save("paste", text, state="ready", composer="[Pasted text #1]",
                 note="a 1,000+ character draft typed in one burst (no Enter): Claude shows "
                 "it as a paste placeholder")  # fmt: skip
        clear_composer(a, _claude_empty)

        a.type_text("a wrapped draft " + MID_WORDS + " end of draft")
        text = a.wait_screen(r"end of draft")
        rec.save("composer", text, state="ready",
                 composer="a wrapped draft " + MID_WORDS + " end of draft",
                 note="ready, a 300-character unsubmitted draft wrapped over three rows")  # fmt: skip
        a.keys("C-u")
        time.sleep(0.6)
        rec.save("composer-ctrl-u", a.capture(), state="ready",
                 note="after one Ctrl-U on the wrapped draft: only the cursor's row is deleted "
                 "(composer text not recorded: partial)")  # fmt: skip
        clear_composer(a, _claude_empty)

        long_line = line(14, LONG_WORDS)
        a.harness.tmux("send-keys", "-t", a.pane, "-l", "--", long_line, ";",
                       "send-keys", "-t", a.pane, "Enter")  # fmt: skip
        text = a.wait_screen(r"\[Pasted text #\d+")
        rec.save("paste", text, state="ready", composer="[Pasted text #2 +1 lines]",
                 note="a 1,000+ character line typed in one burst with Enter right after: "
                 "Claude took it as a paste and the Enter became part of it")  # fmt: skip
        clear_composer(a, _claude_empty)

        a.type_text("/model")
        time.sleep(0.8)
        a.keys("Enter")
        text = a.wait_screen(r"Select model|Enter to (select|confirm)|Esc to (exit|cancel)")
        time.sleep(0.5)
        rec.save(
            "menu", a.capture(), state="awaiting_user", composer=None, note="/model picker open"
        )
        a.keys("Escape")
        poll_until(a, lambda t: _claude_prompt_line(t) is not None and "Select model" not in t, 20)

        a.type_text("/")
        time.sleep(1.0)
        rec.save("slash", a.capture(), state="ready", composer="/",
                 note="a lone / typed: the command list opens under the composer")  # fmt: skip
        clear_composer(a, _claude_empty)

        a.harness.tmux("resize-window", "-t", f"={a.session}:", "-x", "70", "-y", "24")
        time.sleep(1.5)
        a.type_text(line(15, "a message long enough to wrap in a narrow pane"))
        text = a.wait_screen(r"narrow pane|wrap in a")
        time.sleep(0.5)
        rec.save("composer", a.capture(), state="ready",
                 composer=line(15, "a message long enough to wrap in a narrow pane"),
                 note="narrow 70x24 pane, a line wrapped in the composer", size="70x24")  # fmt: skip
        a.keys("Enter")
        a.wait_screen(r"esc to interrupt")
        time.sleep(1.0)
        rec.save("working", a.capture(), state="working", composer="", frames=(frame(15),),
                 note="narrow 70x24 pane, working", size="70x24")  # fmt: skip

    with (
        mock_anthropic() as url,
        agent_in(h, "claude", name="claude-perm", extra_env={"ANTHROPIC_BASE_URL": url}) as a,
    ):
        # A local stand-in API answers every prompt with a Bash tool call: the real prompt.
        poll_until(a, is_ready)
        a.submit("run the ack command", settle=1.0)
        a.wait_screen(r"Do you want to proceed\?", timeout=60)
        time.sleep(1.0)
        rec.save("permission", a.capture(), state="awaiting_user", composer=None,
                 note="Bash permission prompt (tool call from tests/harness/mock_api.py)")  # fmt: skip

    with (
        mock_anthropic("stall") as url,
        agent_in(h, "claude", name="claude-stream", extra_env={"ANTHROPIC_BASE_URL": url}) as a,
    ):
        # A reply that streams and never ends: Claude's spinner line (offline it only retries).
        poll_until(a, is_ready)
        a.submit(line(16), settle=1.0)
        a.wait_screen(r"^[·✢✳✶✻✽*] \S.*…", timeout=60)
        rec.save("working", a.capture(), state="working", composer="", frames=(frame(16),),
                 note="a reply streaming (stalling local API): the spinner line")  # fmt: skip

    with agent_in(h, "claude", name="claude-notrust", trust=False) as a:
        text = a.wait_screen(r"Yes, I trust this folder", timeout=120)
        time.sleep(1.0)
        rec.save("dialog-trust", a.capture(), state="awaiting_user", composer=None,
                 note="started without hasTrustDialogAccepted: the folder trust dialog")  # fmt: skip

    with agent_in(h, "claude", name="claude-key", approve_key=False) as a:
        a.wait_screen(r"Do you want to use this API key\?", timeout=120)
        time.sleep(1.0)
        rec.save("dialog-api-key", a.capture(), state="awaiting_user", composer=None,
                 note="started without approving the key: the custom API key dialog")  # fmt: skip


# --------------------------------------------------------------------------- codex


def _codex_empty(text: str) -> bool:
    return any(ln.startswith("› Ask Codex to do anything") or
               ln.startswith("› Ask a follow-up") for ln in text.splitlines())  # fmt: skip


def codex(h: TmuxHarness, rec: Recorder) -> None:
    model_line = re.compile(r"^\s+\S[^·\n]* · /", re.M)

    def is_ready(t: str) -> bool:
        return _codex_empty(t) and bool(model_line.search(t))

    with agent_in(h, "codex") as a:
        text, early = poll_until(a, is_ready)
        save_starts(rec, early, limit=4)
        rec.save(
            "ready",
            text,
            state="ready",
            composer="",
            note="first screen with the footer's model line: start-up complete",
        )

        a.type_text("draft that was never sent")
        text = a.wait_screen(r"› draft that was never sent")
        rec.save("composer", text, state="ready", composer="draft that was never sent",
                 note="ready, text typed but not submitted")  # fmt: skip
        clear_composer(a, _codex_empty)

        a.submit(line(12))
        text = a.wait_screen(r"esc to interrupt")
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="right after submit")  # fmt: skip
        text = a.wait_screen(r"Reconnecting", timeout=60)
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="offline: reconnect attempts")  # fmt: skip

        a.type_text(line(13, "typed while working"))
        text = a.wait_screen(r"› \[cafleet msg 13")
        rec.save("working-composer", text, state="working", composer=line(13, "typed while working"),
                 frames=(frame(12),), note="working, a line typed but not yet submitted")  # fmt: skip
        a.keys("Enter")
        time.sleep(1.5)
        rec.save("queued", a.capture(), state="working", composer="", frames=(frame(12), frame(13)),
                 note="Enter while working: Codex takes the line into the running turn (steer)")  # fmt: skip

        a.keys("Escape")
        text = a.wait_screen(r"Conversation interrupted")
        time.sleep(0.8)
        rec.save("interrupted", a.capture(), state="ready", composer="", frames=(frame(12), frame(13)),
                 note="one Escape while working interrupted the turn")  # fmt: skip

        a.type_text("a wrapped draft " + MID_WORDS + " end of draft")
        a.wait_screen(r"end of draft")
        time.sleep(0.5)
        rec.save("composer", a.capture(), state="ready",
                 composer="a wrapped draft " + MID_WORDS + " end of draft",
                 note="ready, a 300-character unsubmitted draft wrapped over three rows")  # fmt: skip
        a.keys("C-u")
        time.sleep(0.6)
        rec.save("composer-ctrl-u", a.capture(), state="ready",
                 note="after one Ctrl-U on the wrapped draft (composer text not recorded)")  # fmt: skip
        clear_composer(a, _codex_empty)

        a.keys("Escape")
        time.sleep(0.3)
        a.keys("Escape")
        text = a.wait_screen(r"Browsing transcript|esc back|rewind", timeout=10)
        rec.save("overlay-backtrack", text, state="awaiting_user", composer=None,
                 note="Escape twice on an empty composer: the transcript browser (Enter rewinds)")  # fmt: skip
        a.keys("Escape")
        time.sleep(1.0)

        a.type_text("/model")
        time.sleep(0.8)
        a.keys("Enter")
        text = a.wait_screen(r"Select (Model|model)|Press enter|esc to", timeout=20)
        time.sleep(0.5)
        rec.save(
            "menu", a.capture(), state="awaiting_user", composer=None, note="/model picker open"
        )
        a.keys("Escape")
        time.sleep(1.0)

        a.harness.tmux("resize-window", "-t", f"={a.session}:", "-x", "70", "-y", "24")
        time.sleep(1.5)
        clear_composer(a, _codex_empty)
        a.type_text(line(15, "a message long enough to wrap in a narrow pane"))
        a.wait_screen(r"narrow|pane")
        time.sleep(0.5)
        rec.save("composer", a.capture(), state="ready",
                 composer=line(15, "a message long enough to wrap in a narrow pane"),
                 note="narrow 70x24 pane, a line wrapped in the composer", size="70x24")  # fmt: skip

    with agent_in(h, "codex", name="codex-notrust", trust=False) as a:
        # Codex 0.171 with an API key goes straight to the composer; save a dialog if one shows.
        text = a.wait_screen(r"Do you trust|Trust and continue|› Ask Codex to do anything", 120)
        time.sleep(1.0)
        if "Ask Codex to do anything" not in text:
            rec.save("dialog-trust", a.capture(), state="awaiting_user", composer=None,
                     note="started without trust_level: the directory trust dialog")  # fmt: skip
        else:
            print("  codex: no trust dialog without trust_level (straight to the composer)")

    with agent_in(h, "codex", name="codex-nologin", login=False,
                  extra_env={"OPENAI_API_KEY": ""}) as a:  # fmt: skip
        a.wait_screen(r"Sign in with|Press enter to continue", timeout=120)
        time.sleep(1.0)
        rec.save("dialog-sign-in", a.capture(), state="awaiting_user", composer=None,
                 note="started without a stored key: the sign-in picker")  # fmt: skip


# --------------------------------------------------------------------------- opencode


def _oc_footer_ready(t: str) -> bool:
    return "ctrl+p commands" in t and "esc interrupt" not in t


def _stalling(url: str) -> dict[str, Any]:
    return {"provider": {"anthropic": {"options": {"baseURL": url + "/v1"}}}}


def opencode(h: TmuxHarness, rec: Recorder) -> None:
    # opencode gives up on an unreachable API within seconds; a local API that never finishes
    # its reply keeps the turn running while the script types into it.
    with (
        mock_anthropic("stall") as url,
        agent_in(h, "opencode", opencode_config=_stalling(url)) as a,
    ):
        text, early = poll_until(a, lambda t: "Ask anything" in t and _oc_footer_ready(t), 180)
        save_starts(rec, early)
        rec.save(
            "ready",
            text,
            state="ready",
            composer="",
            note="home screen with the composer's placeholder",
        )

        a.type_text("draft that was never sent")
        text = a.wait_screen(r"┃\s+draft that was never sent")
        rec.save("composer", text, state="ready", composer="draft that was never sent",
                 note="ready, text typed but not submitted")  # fmt: skip
        a.keys("C-u")
        a.wait_screen(r"Ask anything")

        a.submit(line(12), settle=1.0)
        text = a.wait_screen(r"esc interrupt")
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="right after submit (session screen)")  # fmt: skip
        time.sleep(5)
        rec.save("working", a.capture(), state="working", composer="", frames=(frame(12),),
                 note="five seconds later, the reply still streaming")  # fmt: skip

        a.type_text(line(13, "typed while working"))
        text = a.wait_screen(r"┃\s+\[cafleet msg 13")
        rec.save("working-composer", text, state="working", composer=line(13, "typed while working"),
                 frames=(frame(12),), note="working, a line typed but not yet submitted")  # fmt: skip
        a.keys("Enter")
        text = a.wait_screen(r"QUEUED")
        rec.save("queued", text, state="working", composer="", frames=(frame(12), frame(13)),
                 note="Enter while working: the line is listed QUEUED")  # fmt: skip

        a.keys("Escape")
        text = a.wait_screen(r"esc again")
        rec.save("escape-once", text, state="working", composer="", frames=(frame(12), frame(13)),
                 note="one Escape while working: only a hint, still working")  # fmt: skip
        a.keys("Escape")
        text, _ = poll_until(a, _oc_footer_ready, timeout=30)
        time.sleep(1.0)
        rec.save("interrupted", a.capture(), state="ready", composer="", frames=(frame(12), frame(13)),
                 note="the second Escape interrupted; the session screen is idle")  # fmt: skip

        a.type_text("a wrapped draft " + MID_WORDS + " end of draft")
        a.wait_screen(r"end of draft")
        time.sleep(0.5)
        rec.save("composer", a.capture(), state="ready",
                 composer="a wrapped draft " + MID_WORDS + " end of draft",
                 note="session screen, a 300-character unsubmitted draft wrapped over rows")  # fmt: skip
        a.keys("C-u")
        time.sleep(0.8)
        rec.save("composer-ctrl-u", a.capture(), state="ready",
                 note="after one Ctrl-U on the wrapped draft (composer text not recorded)")  # fmt: skip
        for _ in range(6):
            a.keys("C-u")
            time.sleep(0.4)

        a.keys("C-p")
        text = a.wait_screen(r"Commands|Search", timeout=20)
        time.sleep(0.5)
        rec.save(
            "menu",
            a.capture(),
            state="awaiting_user",
            composer=None,
            note="ctrl+p command palette open",
        )
        a.keys("Escape")
        time.sleep(1.0)

        a.type_text("/")
        time.sleep(1.0)
        rec.save("slash", a.capture(), state="ready", composer="/",
                 note="a lone / typed: the command list opens above the composer")  # fmt: skip

    with agent_in(h, "opencode", name="opencode-offline") as a:
        # The API unreachable (an unresolvable name): opencode retries, then gives up.
        poll_until(a, lambda t: "Ask anything" in t and _oc_footer_ready(t), 180)
        a.submit(line(12), settle=1.0)
        text = a.wait_screen(r"\[retrying|Cannot connect to API", timeout=60)
        if "[retrying" in text:
            rec.save("working-offline", text, state="working", composer="", frames=(frame(12),),
                     note="API unreachable: opencode retrying")  # fmt: skip
        text, _ = poll_until(a, _oc_footer_ready, timeout=120)
        time.sleep(1.0)
        rec.save("error", a.capture(), state="ready", composer="", frames=(frame(12),),
                 note="API unreachable: opencode gave up, the error is in the transcript")  # fmt: skip

    config: dict[str, Any] = {"permission": {"bash": "ask"}}
    with mock_anthropic() as url:
        config["provider"] = {"anthropic": {"options": {"baseURL": url + "/v1"}}}
        with agent_in(h, "opencode", name="opencode-perm", opencode_config=config) as a:
            poll_until(a, lambda t: "Ask anything" in t and _oc_footer_ready(t), 180)
            a.submit("run the ack command", settle=1.0)
            a.wait_screen(r"Permission required", timeout=90)
            time.sleep(1.0)
            rec.save("permission", a.capture(), state="awaiting_user", composer=None,
                     note="bash permission dialog (tool call from tests/harness/mock_api.py)")  # fmt: skip


def opencode_answered(h: TmuxHarness, rec: Recorder) -> None:
    """opencode idle after a turn its model finished (the scripted model answers): the footer
    then shows the context and cost where the stalling API's screens show `tab agents`."""
    from tests.harness.scripted_model import scripted_model

    with (
        scripted_model() as model,
        agent_in(h, "opencode", name="opencode-answered", model_url=model.base_url("oc")) as a,
    ):
        poll_until(a, lambda t: "Ask anything" in t and _oc_footer_ready(t), 180)
        a.submit("hello", settle=1.0)
        poll_until(
            a,
            lambda t: bool(re.search(r"▣\s+Build · .* · [0-9.]+m?s", t)) and _oc_footer_ready(t),
            180,
        )
        time.sleep(1.0)
        rec.save("ready-answered", a.capture(), state="ready", composer="",
                 note="session screen after a finished turn: context and cost in the footer "
                 "instead of 'tab agents'")  # fmt: skip


# --------------------------------------------------------------------------- gemini


def _gemini_empty(text: str) -> bool:
    return bool(re.search(r"^ [>*]   Type your message or @path/to/file", text, re.M))


@contextmanager
def _stalled() -> Iterator[str]:
    """A base URL whose server takes connections and never answers: a turn stays working."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


def gemini(h: TmuxHarness, rec: Recorder) -> None:
    from tests.harness.scripted_model import Action, ScriptedModel, shell

    def footer_ready(t: str) -> bool:
        return _gemini_empty(t) and "workspace (/directory)" in t

    with _stalled() as url, agent_in(h, "gemini", model_url=url) as a:
        text, early = poll_until(a, footer_ready)
        save_starts(rec, early, limit=4)
        rec.save("ready", text, state="ready", composer="", note="first ready screen after start")

        a.type_text("draft that was never sent")
        text = a.wait_screen(r"^ > draft that was never sent")
        rec.save("composer", text, state="ready", composer="draft that was never sent",
                 note="ready, text typed but not submitted")  # fmt: skip
        clear_composer(a, _gemini_empty)

        time.sleep(3.0)  # past the start-up seconds in which an Enter can be lost
        a.submit(line(12))
        text = a.wait_screen(r"esc to cancel")
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="right after submit: the model never answers")  # fmt: skip
        text = a.wait_screen(r"esc to cancel, [3-9]s")
        rec.save("working", text, state="working", composer="", frames=(frame(12),),
                 note="seconds later, still waiting for the model")  # fmt: skip
        a.type_text(line(13, "typed while working"))
        text = a.wait_screen(r"^ > \[cafleet msg 13")
        rec.save("working-composer", text, state="working", composer=line(13, "typed while working"),
                 frames=(frame(12),), note="working, a line typed but not yet submitted")  # fmt: skip
        a.keys("Enter")
        time.sleep(1.5)
        rec.save("queued", a.capture(), state="working", composer="", frames=(frame(12), frame(13)),
                 note="Enter while working: Gemini queues the line for after the turn")  # fmt: skip

        a.keys("Escape")
        a.wait_screen(r"Request cancelled")
        time.sleep(1.0)
        rec.save("interrupted", a.capture(), state="working", composer="",
                 frames=(frame(12), frame(13)), note="one Escape cancelled the turn; "
                 "the queued line was submitted at once: working again")  # fmt: skip
        a.keys("Escape")
        poll_until(a, lambda t: t.count("Request cancelled") == 2 and "esc to cancel" not in t)
        time.sleep(1.0)
        rec.save("interrupted", a.capture(), state="ready", composer="",
                 frames=(frame(12), frame(13)), note="a second Escape cancelled that turn too")  # fmt: skip

        a.type_text("a wrapped draft " + MID_WORDS + " end of draft")
        a.wait_screen(r"end of draft")
        time.sleep(0.5)
        rec.save("composer", a.capture(), state="ready",
                 composer="a wrapped draft " + MID_WORDS + " end of draft",
                 note="ready, a 300-character unsubmitted draft wrapped over three rows")  # fmt: skip
        clear_composer(a, _gemini_empty)

    def run_always(conv: Any, cwd: str) -> Any:
        return shell("echo captured > captured.txt") if not conv.calls else None

    with (
        ScriptedModel(run_always) as model,
        agent_in(h, "gemini", name="gemini-ask", model_url=model.base_url("gemini")) as a,
    ):
        poll_until(a, footer_ready)
        time.sleep(3.0)  # past the start-up seconds in which an Enter can be lost
        a.submit(line(14, "run it"), settle=0.5)
        a.wait_screen(r"Allow execution of", timeout=60)
        time.sleep(0.5)
        rec.save("permission", a.capture(), state="awaiting_user", composer=None,
                 frames=(frame(14),), note="the model asked for a shell command: its prompt")  # fmt: skip

    def write_always(conv: Any, cwd: str) -> Any:
        return Action("write", path=f"{cwd}/w.txt", content="written") if not conv.calls else None

    with ScriptedModel(write_always) as model:
        with agent_in(h, "gemini", name="gemini-write", model_url=model.base_url("w")) as a:
            poll_until(a, footer_ready)
            time.sleep(3.0)  # past the start-up seconds in which an Enter can be lost
            a.submit(line(15, "write it"), settle=0.5)
            a.wait_screen(r"Apply this change", timeout=60)
            time.sleep(0.5)
            rec.save("permission-write", a.capture(), state="awaiting_user", composer=None,
                     frames=(frame(15),), note="the model asked to write a file: its prompt")  # fmt: skip
        with agent_in(h, "gemini", name="gemini-yolo", args=["--approval-mode", "yolo"],
                      model_url=model.base_url("yolo")) as a:  # fmt: skip
            text = a.wait_screen(r"YOLO", timeout=60)
            poll_until(a, lambda t: "Type your message" in t)
            time.sleep(0.5)
            rec.save("ready-yolo", a.capture(), state="ready", composer="",
                     note="--approval-mode yolo: YOLO in the footer, composer prefix *")  # fmt: skip

    with agent_in(h, "gemini", name="gemini-notrust", trust=False) as a:
        a.wait_screen(r"Do you trust|trust this folder|Trust folder", timeout=60)
        time.sleep(1.0)
        rec.save("dialog-trust", a.capture(), state="awaiting_user", composer=None,
                 note="folder trust enabled: the trust dialog")  # fmt: skip

    with agent_in(h, "gemini", name="gemini-nologin", login=False,
                  extra_env={"GEMINI_API_KEY": ""}) as a:  # fmt: skip
        a.wait_screen(r"How would you like to authenticate|Sign in with Google|Use Gemini API Key",
                      timeout=60)  # fmt: skip
        time.sleep(1.0)
        rec.save("dialog-sign-in", a.capture(), state="awaiting_user", composer=None,
                 note="no auth type selected: the authentication picker")  # fmt: skip


CAPTURES = {"claude": claude, "codex": codex, "opencode": opencode, "gemini": gemini}
# Situations that can be re-captured alone (their files only): `python -m
# tests.harness.capture_screens opencode-answered`; the agent's whole run includes them.
EXTRA = {"opencode-answered": ("opencode", opencode_answered)}


def main(argv: list[str]) -> int:
    agents = argv or list(AGENTS)
    index: dict[str, Any] = json.loads(INDEX.read_text()) if INDEX.exists() else {}
    for name in agents:
        agent, extra = EXTRA.get(name, (name, None))
        print(f"{agent} {installed_version(agent)}", flush=True)
        rec = Recorder(agent)
        if extra is None:
            for old in rec.dir.glob("*.txt"):
                old.unlink()
            index = {k: v for k, v in index.items() if not k.startswith(f"{agent}/")}
        with pytest.MonkeyPatch.context() as mp, private_tmux(mp) as h:
            if extra is not None:
                extra(h, rec)
            else:
                CAPTURES[agent](h, rec)
                for more, fn in EXTRA.values():
                    if more == agent:
                        fn(h, rec)
        index.update(rec.entries)
        INDEX.write_text(
            json.dumps(dict(sorted(index.items())), indent=1, ensure_ascii=False) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
