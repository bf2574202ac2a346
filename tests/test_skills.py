"""The bundled skills and presets (docs/runtime.md §7.4, docs/cli.md §3.2): the Agent Skills format, progressive
disclosure, and every `cafleet …` command line they quote checked against the real Click tree,
so the skills cannot drift from the CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
import yaml

import cafleet
from cafleet.agents.claude.rules import claude_rule_matches
from cafleet.agents.codex import rules_file as codex_rules
from cafleet.agents.codex.rules import parse_rules
from cafleet.agents.opencode import preset_file as opencode_agent
from cafleet.assets.bundle import skill_files, skill_names
from cafleet.cli.app import cli

SKILLS = Path(cafleet.__file__).parent / "data" / "skills"
VERSION = cafleet.__version__
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`(cafleet [^`]+)`")
PLACEHOLDER = re.compile(r"<[^<>]+>")
NAME_RULE = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")


def split_front_matter(text: str) -> tuple[dict, str]:
    assert text.startswith("---\n"), "front matter first"
    head, sep, body = text[4:].partition("\n---\n")
    assert sep, "front matter closed by ---"
    data = yaml.safe_load(head)
    assert isinstance(data, dict)
    return data, body


def quoted_commands(text: str) -> list[str]:
    """Every `cafleet …` command line: lines of fenced blocks and inline code spans."""
    found: list[str] = []
    for block in FENCE.findall(text):
        found += [
            line.strip() for line in block.splitlines() if line.strip().startswith("cafleet ")
        ]
    outside = FENCE.sub("", text)
    found += [m.strip() for m in INLINE.findall(outside)]
    return found


def skill_texts() -> dict[str, str]:
    """`<skill>/<file>` → rendered text, for every bundled skill file."""
    return {
        f"{name}/{rel}": data.decode("utf-8")
        for name in skill_names()
        for rel, data in skill_files(name, VERSION).items()
    }


def all_commands() -> list[tuple[str, str]]:
    return [(where, c) for where, text in skill_texts().items() for c in quoted_commands(text)]


def parse_command(line: str) -> list[str]:
    """Parse ``line`` the way `cafleet` would, without running anything; returns the command
    path. Placeholders such as `<id>` stand for an id (1)."""
    args = shlex.split(PLACEHOLDER.sub("1", line), comments=True)
    assert args[0] == "cafleet"
    args = args[1:]
    ctx = cli.make_context("cafleet", list(args), resilient_parsing=False)
    path = []
    with ctx:
        while isinstance(ctx.command, click.Group):
            rest = [*ctx._protected_args, *ctx.args]  # what the group left for a subcommand
            assert rest, f"{line}: a group without a subcommand"
            name, command, sub_args = ctx.command.resolve_command(ctx, rest)
            assert command is not None and name is not None, line
            path.append(name)
            ctx = command.make_context(name, sub_args, parent=ctx, resilient_parsing=False)
    return path


def test_skills_are_in_the_agent_skills_format() -> None:
    names = skill_names()
    assert names == ["cafleet"]
    for name in names:
        files = skill_files(name, VERSION)
        meta, body = split_front_matter(files["SKILL.md"].decode("utf-8"))
        assert meta["name"] == name and NAME_RULE.fullmatch(name) and len(name) <= 64
        description = meta["description"]
        assert isinstance(description, str) and 0 < len(description) <= 1024
        assert "Use when" in description  # says when to use it, not only what it does
        assert meta["metadata"] == {"cafleet-version": VERSION}
        assert "@CAFLEET_VERSION@" not in "".join(d.decode() for d in files.values())
        assert body.strip()


def test_skill_md_is_short_and_points_at_the_role_files() -> None:
    files = skill_files("cafleet", VERSION)
    skill = files["SKILL.md"].decode("utf-8")
    assert len(skill.splitlines()) <= 100  # progressive disclosure: details live beside it
    for role in ("director.md", "member.md", "monitor.md", "reference.md"):
        assert f"`{role}`" in skill, role
        assert role in files, role
    assert sorted(files) == sorted(
        ["SKILL.md", "director.md", "member.md", "monitor.md", "reference.md"]
    )


def test_skills_cover_what_every_role_needs() -> None:
    texts = skill_texts()
    everything = "\n".join(texts.values())
    commands = [c for _w, c in all_commands()]
    for sub in ("send", "broadcast", "poll", "ack", "wait", "stream"):
        assert any(c.startswith(f"cafleet message {sub} ") for c in commands), sub
    director = texts["cafleet/director.md"]
    assert "ACKed before you end your" in director  # seed 000: before the Director ends its turn
    assert "approvals you deferred" in director
    assert "cafleet message stream 1` as a\nbackground task" in director
    assert "may\nappear twice" in texts["cafleet/SKILL.md"]  # poll + ACK are the truth
    assert "On each tick" in texts["cafleet/monitor.md"]
    assert "When something goes wrong" in texts["cafleet/SKILL.md"]
    assert "Error: " in everything
    # work goes in tasks: the Director creates them, members claim and finish them
    for sub in ("create", "list", "show"):
        assert any(c.startswith(f"cafleet task {sub} ") for c in commands), sub
    member = texts["cafleet/member.md"]
    for sub in ("claim", "done", "block"):
        assert f"cafleet task {sub} 12 --member-id 7" in member, sub


def test_every_quoted_command_parses_against_the_click_tree() -> None:
    commands = all_commands()
    assert len(commands) >= 40  # the extraction itself works
    paths = set()
    for where, line in commands:
        try:
            paths.add(tuple(parse_command(line)))
        except click.ClickException as exc:  # unknown command/option, bad type, missing value
            pytest.fail(f"{where}: {line!r} does not parse: {exc.format_message()}")
    # The quoted commands reach most of the tree: a renamed command fails the parse above.
    assert {("message", "send"), ("member", "create"), ("monitor", "scan"), ("setup",)} <= paths


@pytest.mark.parametrize(
    "line",
    [
        "cafleet message poll --member 7",  # an option that does not exist
        "cafleet message list 7",  # a command that does not exist
        "cafleet message send --from-member-id 7 hi",  # a required option missing
        "cafleet member ping seven",  # a bad id
    ],
)
def test_a_drifted_command_fails_the_parse(line: str) -> None:
    with pytest.raises(click.ClickException):
        parse_command(line)


def test_role_files_use_only_what_the_role_may_run() -> None:
    """A member's claude runs with `Bash(cafleet message *)` only; the monitor also with
    `monitor scan` and `member ping` (docs/runtime.md §2.2)."""
    from cafleet.agents.claude import MEMBER_RULES, MONITOR_RULES

    texts = skill_texts()
    for role, rules in (("member", MEMBER_RULES), ("monitor", MONITOR_RULES)):
        commands = quoted_commands(texts[f"cafleet/{role}.md"])
        assert commands, role
        for command in commands:
            line = PLACEHOLDER.sub("1", command)
            assert any(claude_rule_matches(rule, line) for rule in rules), (role, command)


def test_quoted_lines_are_the_product_lines() -> None:
    """The notification, wake, ping and poll lines the skills show are what cafleet types."""
    from cafleet.delivery.drains import notification_line
    from cafleet.monitor.wakeline import WakeEntry, build_wake_line
    from cafleet.output import envelope_lines
    from cafleet.workflows.members import PING_LINE

    texts = skill_texts()
    line = notification_line(
        message_id=42,
        sender_name="Director",
        from_member_id=1,
        body="please run the parser tests",
        max_text_len=200,
    )
    assert f"```text\n{line}\n```" in texts["cafleet/SKILL.md"]
    assert f"```text\n{line}\n```" in texts["cafleet/member.md"]
    wake = build_wake_line(
        3,
        [WakeEntry(7, "builder", "claude", 0), WakeEntry(8, "tester", "codex", 2)],
        WakeEntry(1, "Director", "claude", 1),
        "k3f9",  # each wake ends with its own id; the skill shows one
    )
    assert f"```text\n{wake}\n```" in texts["cafleet/monitor.md"]
    quoted = re.search(r"`(\[cafleet\] ping: [^`]*), \.\.\.`", texts["cafleet/member.md"])
    assert quoted is not None and PING_LINE.format(member_id=7).startswith(quoted.group(1))
    message = SimpleNamespace(
        message_id=42,
        from_member_id=1,
        created_at="2026-12-01T09:30:00.000000+00:00",
        type="unicast",
        origin_message_id=None,
        text="please run the parser tests",
    )
    shown = "\n".join(envelope_lines(message, None, {1: "Director"}))  # as poll prints it
    assert f"```text\n{shown}\n```" in texts["cafleet/reference.md"]


def test_codex_rules_preset() -> None:
    text = codex_rules(VERSION).decode("utf-8")
    assert f"cafleet {VERSION}" in text
    rules = parse_rules("cafleet.rules", text)
    assert [(r.pattern, r.decision) for r in rules] == [((("cafleet",),), "allow")]


# docs/permissions.md §2: one opencode preset per profile; bash rules are last-match-wins, so
# `cafleet *` (always allowed) follows the catch-all.
PRESET_PERMISSIONS = {
    "workspace": {"edit": "allow", "bash": {"*": "allow", "cafleet *": "allow"},
                  "webfetch": "ask", "external_directory": "ask"},
    "ask": {"edit": "ask", "bash": {"*": "ask", "cafleet *": "allow"},
            "webfetch": "ask", "external_directory": "ask"},
    "readonly": {"edit": "deny", "bash": {"*": "deny", "cafleet *": "allow"},
                 "webfetch": "deny", "external_directory": "deny"},
    "full": {"edit": "allow", "bash": {"*": "allow", "cafleet *": "allow"},
             "webfetch": "allow", "external_directory": "allow", "doom_loop": "allow"},
}  # fmt: skip


@pytest.mark.parametrize("profile", list(PRESET_PERMISSIONS))
def test_opencode_agent_preset(profile: str) -> None:
    text = opencode_agent(VERSION, profile).decode("utf-8")
    meta, body = split_front_matter(text)
    assert meta == {
        "description": meta["description"],
        "mode": "primary",
        "permission": PRESET_PERMISSIONS[profile],
    }
    assert list(meta["permission"]["bash"]) == ["*", "cafleet *"]
    assert meta["description"].startswith("A member of a cafleet fleet")
    assert f"# cafleet {VERSION}:" in text.split("\n---\n")[0]  # a YAML comment, not a field
    assert body.lstrip("\n") == skill_files("cafleet", VERSION)["member.md"].decode("utf-8")


def test_version_token_renders() -> None:
    old = skill_files("cafleet", "0.0.9")["SKILL.md"].decode("utf-8")
    assert split_front_matter(old)[0]["metadata"] == {"cafleet-version": "0.0.9"}
    assert old != skill_files("cafleet", VERSION)["SKILL.md"].decode("utf-8")


def test_readme_commands_parse_too() -> None:
    """The README walkthrough quotes the same commands a new user types."""
    readme = (Path(cafleet.__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    commands = [c for c in quoted_commands(readme) if c not in ("cafleet …", "cafleet --help")]
    assert len(commands) >= 12
    for line in commands:
        try:
            parse_command(line)
        except click.ClickException as exc:
            pytest.fail(f"README: {line!r} does not parse: {exc.format_message()}")
