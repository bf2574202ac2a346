"""Doctor's member-permissions rows (docs/cli.md §3.3): rules in the agents' own settings that would
block the cafleet commands members run.

Members run `cafleet message …`; the monitor also runs `cafleet monitor scan …` and
`cafleet member ping …` (docs/runtime.md §2.2). Each agent is checked the way it decides:

- **claude** (run with `--permission-mode dontAsk --allowedTools …`): a matching `deny` rule
  wins over the allow-list, and a matching `ask` rule is a refusal in dontAsk mode. A `deny` or
  `ask` rule on `Write`, `Edit` or `Bash` that blocks no cafleet command is a note: it still
  refuses or asks under the `workspace` and `full` profiles (docs/permissions.md §4). Read from the
  user settings (`<claude dir>/settings.json`), the project's `.claude/settings.json` and
  `.claude/settings.local.json` (the current directory: members start where `member create`
  ran), and the managed settings.
- **codex** (run with `--ask-for-approval never`): every `<codex home>/rules/*.rules` file is
  evaluated like `codex execpolicy check`: of the `prefix_rule`s whose pattern prefixes the
  command, the strictest decision wins (forbidden > prompt > allow); `prompt` cannot be asked,
  so it blocks too.
- **opencode** (run with `--agent cafleet`): the agent's own permission rules come last and the
  last matching rule wins, so the installed preset's `"cafleet *": allow` overrides anything in
  `opencode.json`. The row fails when the preset is missing or differs from cafleet's; rules in
  the config files that would block without it are listed as notes.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import re
import shlex
from dataclasses import dataclass, field

MEMBER_COMMANDS: tuple[str, ...] = (
    "cafleet message poll 1",
    "cafleet message ack 1",
    "cafleet message send --from-member-id 1 --to-member-id 2 done",
    "cafleet message wait 1",
)
MONITOR_COMMANDS: tuple[str, ...] = ("cafleet monitor scan 1 --json", "cafleet member ping 1")
NEEDED_COMMANDS = MEMBER_COMMANDS + MONITOR_COMMANDS
CLAUDE_MANAGED_SETTINGS = "/etc/claude-code/managed-settings.json"


@dataclass(frozen=True, slots=True)
class Blocking:
    file: str
    rule: str
    command: str  # the first needed command it blocks


@dataclass
class PermissionRow:
    coding_agent: str
    checked: list[str] = field(default_factory=list)  # files read
    blocking: list[Blocking] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not self.blocking


# --- wildcard patterns shared by claude and opencode ---------------------------------------------


def wildcard_matches(pattern: str, command: str) -> bool:
    """`*` matches any run of characters (spaces included); everything else is literal."""
    regex = ".*".join(re.escape(part) for part in pattern.split("*"))
    return re.fullmatch(regex, command, re.DOTALL) is not None


# --- claude --------------------------------------------------------------------------------------


def claude_rule_matches(rule: str, command: str) -> bool:
    """Whether a permission rule string covers a Bash command: `Bash`, `Bash(*)`,
    `Bash(prefix:*)` (the legacy prefix form) or `Bash(glob)`."""
    rule = rule.strip()
    if rule == "Bash":
        return True
    match = re.fullmatch(r"Bash\((.*)\)", rule, re.DOTALL)
    if match is None:
        return False
    inner = match.group(1).strip()
    if inner.endswith(":*"):
        prefix = inner[:-2]
        return command == prefix or command.startswith(prefix + " ")
    return wildcard_matches(inner, command)


# What the `workspace` and `full` profiles let a Claude Code member do without asking
# (docs/permissions.md §2): a deny or ask rule on one of these tools still refuses or asks.
PROFILE_TOOLS: dict[str, str] = {
    "Write": "edits",
    "Edit": "edits",
    "MultiEdit": "edits",
    "NotebookEdit": "edits",
    "Bash": "commands",
}


def profile_note(path: str, kind: str, rule: str) -> str | None:
    """A note for a Claude Code ``deny``/``ask`` rule that limits the workspace and full
    profiles (docs/permissions.md §4), or None."""
    tool = rule.split("(", 1)[0].strip()
    what = PROFILE_TOOLS.get(tool)
    if what is None:
        return None
    verb = "refuses" if kind == "deny" else "asks for"
    return f"{path}: {kind} {rule} {verb} {what} under the workspace and full profiles"


def _claude_files(claude_dir: str, cwd: str) -> list[str]:
    return [
        os.path.join(claude_dir, "settings.json"),
        os.path.join(cwd, ".claude", "settings.json"),
        os.path.join(cwd, ".claude", "settings.local.json"),
        CLAUDE_MANAGED_SETTINGS,
    ]


def check_claude(claude_dir: str, cwd: str) -> PermissionRow:
    row = PermissionRow("claude")
    for path in _claude_files(claude_dir, cwd):
        if not os.path.isfile(path):
            continue
        row.checked.append(path)
        try:
            with open(path, encoding="utf-8") as fh:
                settings = json.load(fh)
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {path}: {exc}"
            continue
        permissions = settings.get("permissions") if isinstance(settings, dict) else None
        if not isinstance(permissions, dict):
            continue
        for kind in ("deny", "ask"):
            rules = permissions.get(kind)
            if not isinstance(rules, list):
                continue
            for rule in rules:
                if not isinstance(rule, str):
                    continue
                hit = next((c for c in NEEDED_COMMANDS if claude_rule_matches(rule, c)), None)
                if hit is not None:
                    row.blocking.append(Blocking(path, f"{kind} {rule}", hit))
                elif (note := profile_note(path, kind, rule)) is not None:
                    row.notes.append(note)
    return row


# --- codex ---------------------------------------------------------------------------------------

_STRICTNESS = {"allow": 0, "prompt": 1, "forbidden": 2}


@dataclass(frozen=True, slots=True)
class PrefixRule:
    file: str
    pattern: tuple[tuple[str, ...], ...]  # each position: the accepted tokens
    decision: str

    def matches(self, tokens: list[str]) -> bool:
        if len(tokens) < len(self.pattern):
            return False
        return all(token in accepted for token, accepted in zip(tokens, self.pattern, strict=False))

    @property
    def text(self) -> str:
        shown = [p[0] if len(p) == 1 else list(p) for p in self.pattern]
        return f"prefix_rule(pattern={json.dumps(shown)}, decision={json.dumps(self.decision)})"


def parse_rules(path: str, source: str) -> list[PrefixRule]:
    """The `prefix_rule(...)` calls of a Starlark rules file (its syntax is Python's here);
    raises ValueError for a file that does not parse or a rule it cannot read."""
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        raise ValueError(f"cannot parse {path}: {exc.msg} (line {exc.lineno})") from None
    rules: list[PrefixRule] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "prefix_rule"
        ):
            continue
        args = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        try:
            pattern = ast.literal_eval(args["pattern"])
            decision = ast.literal_eval(args["decision"]) if "decision" in args else "allow"
        except (KeyError, ValueError) as exc:
            raise ValueError(f"cannot read a prefix_rule in {path} (line {node.lineno})") from exc
        if not isinstance(pattern, list) or not pattern or decision not in _STRICTNESS:
            raise ValueError(f"cannot read a prefix_rule in {path} (line {node.lineno})")
        positions = tuple(
            (element,) if isinstance(element, str) else tuple(element) for element in pattern
        )
        rules.append(PrefixRule(path, positions, decision))
    return rules


def codex_decision(rules: list[PrefixRule], command: str) -> tuple[str | None, list[PrefixRule]]:
    """The strictest decision among the rules matching ``command`` (None: no rule matched)."""
    tokens = shlex.split(command)
    matched = [rule for rule in rules if rule.matches(tokens)]
    if not matched:
        return None, []
    decision = max((r.decision for r in matched), key=_STRICTNESS.__getitem__)
    return decision, matched


def check_codex(codex_home: str) -> PermissionRow:
    row = PermissionRow("codex")
    rules: list[PrefixRule] = []
    for path in sorted(glob.glob(os.path.join(glob.escape(codex_home), "rules", "*.rules"))):
        row.checked.append(path)
        try:
            with open(path, encoding="utf-8") as fh:
                rules += parse_rules(path, fh.read())
        except (OSError, ValueError) as exc:
            row.error = str(exc)
    for command in NEEDED_COMMANDS:
        decision, matched = codex_decision(rules, command)
        if decision in ("prompt", "forbidden"):
            for rule in matched:
                if rule.decision == decision:
                    row.blocking.append(Blocking(rule.file, rule.text, command))
            break  # one command is enough to name the rule
    return row


# --- opencode ------------------------------------------------------------------------------------


def strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas (opencode.jsonc) as plain JSON."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        else:
            out.append(ch)
            i += 1
    return re.sub(r",(\s*[}\]])", r"\1", "".join(out))


def _opencode_files(config_dir: str, cwd: str) -> list[str]:
    names = ("opencode.json", "opencode.jsonc")
    files = [os.path.join(config_dir, n) for n in names]
    files += [os.path.join(cwd, n) for n in names]
    files += [os.path.join(cwd, ".opencode", n) for n in names]
    return files


def _bash_rules(permission: object) -> list[tuple[str, str]]:
    """A `permission` block's bash rules as (pattern, action) pairs, in order."""
    if isinstance(permission, str):
        return [("*", permission)]
    if not isinstance(permission, dict):
        return []
    bash = permission.get("bash")
    if isinstance(bash, str):
        return [("*", bash)]
    if isinstance(bash, dict):
        return [(str(k), str(v)) for k, v in bash.items()]
    return []


def check_opencode(config_dir: str, cwd: str, preset_state: str) -> PermissionRow:
    """``preset_state`` is the preset's state as doctor's coding-agents row saw it:
    "ok", "missing" or "stale"."""
    row = PermissionRow("opencode")
    top: list[tuple[str, str, str]] = []
    agent: list[tuple[str, str, str]] = []
    for path in _opencode_files(config_dir, cwd):
        if not os.path.isfile(path):
            continue
        row.checked.append(path)
        try:
            with open(path, encoding="utf-8") as fh:
                config = json.loads(strip_jsonc(fh.read()))
        except (OSError, ValueError) as exc:
            row.error = f"cannot read {path}: {exc}"
            continue
        if not isinstance(config, dict):
            continue
        top += [(path, p, a) for p, a in _bash_rules(config.get("permission"))]
        agents = config.get("agent")
        cafleet_agent = agents.get("cafleet") if isinstance(agents, dict) else None
        if isinstance(cafleet_agent, dict):
            agent += [(path, p, a) for p, a in _bash_rules(cafleet_agent.get("permission"))]
    ordered = top + agent
    for command in NEEDED_COMMANDS:
        last = None
        for path, pattern, action in ordered:
            if wildcard_matches(pattern, command):
                last = (path, pattern, action)
        if last is not None and last[2] in ("deny", "ask"):
            text = f'bash "{last[1]}": {last[2]}'
            if preset_state == "ok":
                row.notes.append(
                    f"{last[0]}: {text} is overridden by the cafleet agent preset's "
                    '"cafleet *": allow'
                )
            else:
                row.blocking.append(Blocking(last[0], text, command))
            break
    if preset_state != "ok":
        row.error = (
            "the cafleet agent preset is "
            + ("missing" if preset_state == "missing" else "not cafleet's current one")
            + "; run 'cafleet setup --coding-agent opencode'"
        )
    return row


__all__ = [
    "MEMBER_COMMANDS",
    "MONITOR_COMMANDS",
    "NEEDED_COMMANDS",
    "Blocking",
    "PermissionRow",
    "PrefixRule",
    "check_claude",
    "check_codex",
    "check_opencode",
    "claude_rule_matches",
    "codex_decision",
    "parse_rules",
    "profile_note",
    "strip_jsonc",
    "wildcard_matches",
]
