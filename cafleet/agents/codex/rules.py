"""Doctor's member-permissions row for Codex CLI (docs/cli.md §3.3).

Codex (run with `--ask-for-approval never`): every `<codex home>/rules/*.rules` file is
evaluated like `codex execpolicy check`: of the `prefix_rule`s whose pattern prefixes the
command, the strictest decision wins (forbidden > prompt > allow); `prompt` cannot be asked,
so it blocks too.
"""

from __future__ import annotations

import ast
import glob
import json
import os
import shlex
from dataclasses import dataclass

from cafleet.assets.permissions import NEEDED_COMMANDS, Blocking, PermissionRow

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
