"""Fault-injecting tmux shim (docs/runtime.md §6.3), installed as ``<dir>/bin/tmux``.

Standalone: standard library only. ``<dir>`` is the parent of the directory holding the shim.

- By default it execs ``$CAFLEET_REAL_TMUX`` with the same argv.
- **Guard:** the server a call addresses (``-S`` path, else ``-L`` name under ``TMUX_TMPDIR``, else
  ``$TMUX``'s socket, else tmux's default socket) must lie inside ``<dir>``; otherwise the call
  is logged with ``"guard": "violation"`` and refused with exit status 97.
- **Rules:** when ``CAFLEET_TMUX_FAULTS`` names an existing JSON file (a list of rules, or
  ``{"rules": [...]}``), the first rule that matches applies. A rule matches on ``command`` (the
  subcommand; ``"*"`` for any), optional ``target`` (the ``-t`` value), optional ``contains`` (a
  substring of the space-joined arguments after the subcommand), optional ``arg`` (one argument
  equal to it) and optional ``last`` (the last argument equal to it). ``times: k`` limits a rule to
  its first k matches (counted across processes). ``action`` is one of:
    - ``fail``: ``stderr`` (default ``injected``), ``status`` (default 1), ``when`` ``before``
      (default; nothing forwarded) or ``after`` (forward first, then fail);
    - ``delay``: sleep ``seconds``, then forward;
    - ``pause_until``: forward once ``path`` exists (gives up after ``timeout``, default 120 s);
    - ``kill_pane_before``: kill the ``-t`` target pane, then forward;
    - ``kill_caller_after``: forward, then SIGKILL the parent process (the cafleet process).
- **Log:** every call is appended to ``<dir>/tmux-calls.jsonl`` (one ``os.write``) on entry:
  ``{"t","argv","command","target","socket","rule","action","guard","pid","ppid"}``.
"""

from __future__ import annotations

import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOG_PATH = os.path.join(ROOT, "tmux-calls.jsonl")
GUARD_STATUS = 97
_ARG_FLAGS = "cfLST"


def parse(argv: list[str]) -> dict:
    """Split tmux's global options from the subcommand and its arguments."""
    opts: dict[str, str] = {}
    flags: set[str] = set()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        j = 1
        while j < len(arg):
            letter = arg[j]
            if letter in _ARG_FLAGS:
                value = arg[j + 1 :]
                if not value:
                    i += 1
                    value = argv[i] if i < len(argv) else ""
                opts[letter] = value
                break
            flags.add(letter)
            j += 1
        i += 1
    global_args = argv[:i]
    rest = argv[i:]
    command = rest[0] if rest else None
    args = rest[1:]
    target = None
    for k, arg in enumerate(args[:-1]):
        if arg == "-t":
            target = args[k + 1]
            break
    return {
        "opts": opts,
        "flags": flags,
        "global_args": global_args,
        "command": command,
        "args": args,
        "target": target,
    }


def effective_socket(parsed: dict) -> str:
    opts = parsed["opts"]
    if "S" in opts:
        return opts["S"]
    tmpdir = os.environ.get("TMUX_TMPDIR") or "/tmp"
    uid_dir = os.path.join(tmpdir, f"tmux-{os.getuid()}")
    if "L" in opts:
        return os.path.join(uid_dir, opts["L"])
    tmux_env = os.environ.get("TMUX")
    if tmux_env:
        return tmux_env.split(",", 1)[0]
    return os.path.join(uid_dir, "default")


def inside_root(path: str) -> bool:
    root = os.path.realpath(ROOT)
    real = os.path.realpath(path)
    return real == root or real.startswith(root + os.sep)


def real_tmux() -> str:
    real = os.environ.get("CAFLEET_REAL_TMUX")
    if real:
        return real
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or os.path.realpath(entry) == os.path.realpath(HERE):
            continue
        candidate = os.path.join(entry, "tmux")
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    sys.stderr.write("tmux shim: no real tmux (CAFLEET_REAL_TMUX unset)\n")
    sys.exit(127)


def load_rules() -> list[dict]:
    path = os.environ.get("CAFLEET_TMUX_FAULTS")
    if not path:
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    if isinstance(data, dict):
        data = data.get("rules", [])
    return [rule for rule in data if isinstance(rule, dict)]


def rule_matches(rule: dict, parsed: dict) -> bool:
    command = rule.get("command", "*")
    if command != "*" and command != parsed["command"]:
        return False
    if "target" in rule and rule["target"] != parsed["target"]:
        return False
    args = parsed["args"]
    if "contains" in rule and rule["contains"] not in " ".join(args):
        return False
    if "arg" in rule and rule["arg"] not in args:
        return False
    return not ("last" in rule and (not args or args[-1] != rule["last"]))


def claim_count(rule: dict) -> bool:
    """True while the rule is within its first `times` matches (counted under a flock)."""
    times = rule.get("times")
    if times is None:
        return True
    import fcntl

    counts_path = os.environ["CAFLEET_TMUX_FAULTS"] + ".counts"
    key = json.dumps(rule, sort_keys=True)
    fd = os.open(counts_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = b""
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            raw += chunk
        try:
            counts = json.loads(raw.decode() or "{}")
        except ValueError:
            counts = {}
        used = int(counts.get(key, 0))
        if used >= int(times):
            return False
        counts[key] = used + 1
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(counts).encode())
        return True
    finally:
        os.close(fd)


def write_log(entry: dict) -> None:
    data = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
    fd = os.open(LOG_PATH, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def forward_and_wait(real: str, argv: list[str]) -> int:
    import subprocess

    proc = subprocess.run([real, *argv], capture_output=True)
    sys.stdout.buffer.write(proc.stdout)
    sys.stdout.buffer.flush()
    sys.stderr.buffer.write(proc.stderr)
    sys.stderr.buffer.flush()
    return proc.returncode


def main() -> int:
    argv = sys.argv[1:]
    parsed = parse(argv)
    version_only = "V" in parsed["flags"]
    socket = effective_socket(parsed)
    guard_ok = version_only or inside_root(socket)
    rule_index = None
    rule: dict | None = None
    if guard_ok and not version_only:
        for index, candidate in enumerate(load_rules()):
            if rule_matches(candidate, parsed) and claim_count(candidate):
                rule_index, rule = index, candidate
                break
    write_log(
        {
            "t": time.time(),
            "argv": argv,
            "command": parsed["command"],
            "target": parsed["target"],
            "socket": socket,
            "rule": rule_index,
            "action": rule.get("action") if rule else None,
            "guard": "ok" if guard_ok else "violation",
            "pid": os.getpid(),
            "ppid": os.getppid(),
        }
    )
    if not guard_ok:
        sys.stderr.write(f"tmux shim: refusing a server outside {ROOT}: {socket}\n")
        return GUARD_STATUS
    real = real_tmux()
    if rule is not None:
        action = rule.get("action")
        if action == "fail":
            status = int(rule.get("status", 1))
            message = str(rule.get("stderr", "injected"))
            if rule.get("when", "before") == "after":
                forward_and_wait(real, argv)
            if message:
                sys.stderr.write(message + "\n")
            sys.stderr.flush()
            return status
        if action == "delay":
            time.sleep(float(rule.get("seconds", 1)))
        elif action == "pause_until":
            deadline = time.monotonic() + float(rule.get("timeout", 120))
            path = str(rule["path"])
            while not os.path.exists(path) and time.monotonic() < deadline:
                time.sleep(0.02)
        elif action == "kill_pane_before" and parsed["target"]:
            import subprocess

            subprocess.run(
                [real, *parsed["global_args"], "kill-pane", "-t", parsed["target"]],
                capture_output=True,
            )
        elif action == "kill_caller_after":
            import signal

            status = forward_and_wait(real, argv)
            os.kill(os.getppid(), signal.SIGKILL)
            return status
    sys.stdout.flush()
    os.execv(real, [real, *argv])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
