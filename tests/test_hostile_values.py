"""Hostile files and values (docs/operations.md §2, docs/cli.md §1.5, §1.6): a FIFO or an
oversized file where cafleet reads one, numbers JSON should not hold, choices that only look like
numbers, ids and settings the database cannot hold, URLs with passwords, control characters in
what is shown or typed. Each is a clear refusal or the ordinary answer, never a hang, a traceback
or Python's own text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from cafleet.pgurl import display_url
from cafleet.sessions import prices
from tests.cli_helpers import assert_unchanged, call_main, run_cli, snapshot
from tests.factories import Db
from tests.fleet_helpers import create_fleet, ok, stop_loop
from tests.harness.fixtures import TmuxHarness
from tests.harness.util import fake_log
from tests.test_escalation import prompting_member
from tests.web_helpers import client, fleet_headers, make_app, unchanged


def _price_file() -> Path:
    path = Path(os.environ["HOME"], ".config", "cafleet", "prices.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _usage(member_id: int) -> tuple[int, str, str]:
    # A hang is a failure here, not a stuck test: the command must answer within seconds.
    return run_cli("member", "usage", str(member_id), timeout=15)


def test_price_file_fifo_is_refused_without_hanging(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    os.mkfifo(path)
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == f"Error: cannot read the price file {path}: not a regular file\n"


def test_price_file_too_large_is_refused(head_db: Path) -> None:
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    path.write_text("{" + " " * prices.FILE_LIMIT + "}", encoding="utf-8")
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == (
        f"Error: cannot read the price file {path}: larger than {prices.FILE_LIMIT} bytes\n"
    )


@pytest.mark.parametrize(
    ("rate", "problem"),
    [
        ("NaN", "NaN is not a number JSON allows"),
        ("Infinity", "Infinity is not a number JSON allows"),
        ("-Infinity", "-Infinity is not a number JSON allows"),
        ("1e400", "1e400 is out of range"),
    ],
)
def test_price_that_is_not_a_finite_number_is_refused(
    head_db: Path, rate: str, problem: str
) -> None:
    """`--json` printed `NaN` (not JSON) for such a price."""
    with Db(head_db) as db:
        fleet = db.fleet()
    path = _price_file()
    path.write_text('{"gpt-5": {"input": ' + rate + "}}", encoding="utf-8")
    code, out, err = _usage(fleet.monitor.member_id)
    assert (code, out) == (1, "")
    assert err == f"Error: cannot read the price file {path}: {problem}\n"


def test_price_beyond_the_largest_rate_is_refused(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "cafleet" / "prices.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"m": {"output": 10**400}}), encoding="utf-8")
    with pytest.raises(prices.PriceFileError) as caught:
        prices.load({"HOME": str(tmp_path)})
    assert str(caught.value) == (
        f"{path}: m.output must be a non-negative number of at most {prices.RATE_LIMIT}"
    )
    # The largest rate and any token count still give a finite estimate.
    path.write_text(json.dumps({"m": {"output": prices.RATE_LIMIT}}), encoding="utf-8")
    from cafleet.sessions import Tally

    tally = Tally()
    tally.add("m", (0, 10**18, 0, 0))
    estimate = prices.cost(tally, prices.load({"HOME": str(tmp_path)}))
    assert estimate is not None and estimate == float(prices.RATE_LIMIT) * 10**12


def test_session_record_fifo_is_unreadable_not_a_hang(tmp_path: Path) -> None:
    from cafleet.sessions import RecordUnreadable
    from cafleet.sessions.jsonl import head_objects, new_objects

    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(RecordUnreadable, match="not a regular file"):
        list(new_objects(str(fifo), {}))
    assert list(head_objects(str(fifo))) == []


# --- member answer: choices that only look like numbers ----------------------------------------

# (choice, the refusal's words after `Error: `) — each typed nothing.
NOT_CHOICES = [
    ("²", "choice '²' is not a choice number: write it in the digits 0-9 without a leading zero (1, 2, …)"),
    ("١", "choice '١' is not a choice number: write it in the digits 0-9 without a leading zero (1, 2, …)"),
    ("01", "choice '01' is not a choice number: write it in the digits 0-9 without a leading zero (1, 2, …)"),
    ("9" * 5000, "choice '" + "9" * 40 + "…' is not a choice number: write it in the digits 0-9 without a leading zero (1, 2, …)"),
    ("1\r", "choice '1␍' contains control characters; give a choice's number or its words"),
    ("\x1b]0;x\x07yes", "choice '␛]0;x␇yes' contains control characters; give a choice's number or its words"),
    (" ", "choice is empty; give a choice's number (1, 2, …) or its words"),
]  # fmt: skip


@pytest.mark.tmux
def test_answer_refuses_what_only_looks_like_a_choice_number(tmux_db: TmuxHarness) -> None:
    """`²` and 5,000 digits printed `invalid literal for int()` (the WebUI: HTTP 500); `١`,
    `01` and `1\\r` picked choice 1."""
    h = tmux_db
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    member, pane = prompting_member(h, ids.fleet_id)
    for choice, refusal in NOT_CHOICES:
        r = h.cli("member", "answer", str(member), choice)
        assert (r.returncode, r.stdout) == (2, ""), (choice, r.stderr)
        assert r.stderr.splitlines()[-1] == f"Error: {refusal}", choice
    # The WebUI's answer (it answered HTTP 500 for `²`): 400, the same words.
    with client(make_app(h.db_path)) as api:
        for choice, refusal in NOT_CHOICES:
            response = api.post(
                f"/api/members/{member}/answer",
                headers=fleet_headers(ids.fleet_id),
                json={"choice": choice, "prompt_id": "0" * 8},
            )
            assert response.status_code == 400, (choice, response.text)
            assert response.json() == {"detail": f"{refusal}; nothing was typed"}
    assert [k for k in fake_log(pane) if k.get("kind") == "prompt-key"] == []
    # The prompt was there all along: a real choice still answers it.
    ok(h.cli("member", "answer", str(member), "1"))
    assert [(k["key"], k["text"]) for k in fake_log(pane) if k.get("kind") == "prompt-key"] == [
        ("text", "1")
    ]


# --- PostgreSQL URLs: the password is never printed ---------------------------------------------

SECRET = "S3cretPW"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://cafleet:{SECRET}@[::1/cf1",  # libpq quoted the whole URL in its error
        f"postgresql://cafleet:{SECRET}@host:abc/cf1",  # a port that is no number
        f"postgresql://cafleet@[::1/cf1?password={SECRET}",
    ],
)
@pytest.mark.parametrize(
    "argv", [("fleet", "list"), ("member", "show", "1"), ("setup",), ("doctor",)]
)
def test_a_malformed_postgresql_url_never_shows_its_password(
    url: str, argv: tuple[str, ...]
) -> None:
    code, out, err = run_cli(*argv, env={"CAFLEET_DATABASE_URL": url})
    assert code == 1, (out, err)
    assert SECRET not in out + err
    shown = display_url(url)
    # The reason, naming the database without its password (doctor: in its database check).
    assert f"cannot read database {shown}: " in (out if argv == ("doctor",) else err)
    assert "invalid literal" not in out + err  # Python's own words, not a reason


# --- ids the database cannot hold ----------------------------------------------------------------

BIG_IDS = ("2147483648", "9223372036854775807")  # above PostgreSQL's integer; SQLite's largest


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"], indirect=True)
def test_an_id_the_database_cannot_hold_reads_not_found(head_db: Path) -> None:
    """PostgreSQL said `integer out of range` (and the WebUI HTTP 500) where SQLite said not
    found."""
    with Db(head_db) as db:
        fleet = db.fleet()
        director = fleet.director.member_id
    before = snapshot(head_db)
    for big in BIG_IDS:
        for argv, entity in [
            (("fleet", "show", big), "fleet"),
            (("fleet", "delete", big), "fleet"),
            (("member", "list", big), "fleet"),
            (("member", "create", "--fleet-id", big, "--name", "w", "--description", "d"), "fleet"),
            (("member", "show", big), "member"),
            (("member", "delete", big), "member"),
            (("member", "usage", big), "member"),
            (("member", "answer", big, "1"), "member"),
            (("message", "poll", big), "member"),
            (("message", "send", "--from-member-id", str(director), "--to-member-id", big, "x"),
             "member"),
            (("message", "show", big), "message"),
            (("message", "ack", big), "message"),
        ]:  # fmt: skip
            code, out, err = call_main(list(argv))
            assert (code, out) == (1, ""), (argv, err)
            assert err.startswith("Error: ") and f"{entity} {big}" in err, (argv, err)
            assert "not found" in err, (argv, err)
    assert_unchanged(before, head_db)
    with client(make_app(head_db)) as api:
        for big in BIG_IDS:
            headers = fleet_headers(fleet.fleet.fleet_id)
            assert api.get(f"/api/members/{big}/inbox", headers=headers).status_code == 404
            assert api.get("/api/members", headers=fleet_headers(int(big))).status_code == 404
            sent = api.post(
                "/api/messages/send", headers=headers, json={"to_member_id": int(big), "text": "x"}
            )
            assert sent.status_code == 404, sent.text
    unchanged(api, before, head_db)


# --- settings the database cannot hold -----------------------------------------------------------

INT_SETTINGS = [
    "CAFLEET_MAX_TEXT_LEN",
    "CAFLEET_MONITOR_WAKE_INTERVAL",
    "CAFLEET_PANE_LOCK_TIMEOUT",
    "CAFLEET_MIN_PANE_COLUMNS",
    "CAFLEET_MIN_PANE_ROWS",
    "CAFLEET_DELIVERY_HOLD_TIMEOUT",
    "CAFLEET_DELIVERY_WORKERS",
    "CAFLEET_ESCALATE_AFTER",
]


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"], indirect=True)
def test_a_setting_the_database_cannot_hold_is_refused_when_read(
    head_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`CAFLEET_MONITOR_WAKE_INTERVAL=3000000000` killed the loop at start on PostgreSQL (its
    INTEGER column cannot hold it)."""
    with Db(head_db) as db:
        fleet_id = db.fleet().fleet.fleet_id
    before = snapshot(head_db)
    for name in INT_SETTINGS:
        with monkeypatch.context() as mp:
            for value in ("3000000000", "2147483648", "9" * 5000):
                mp.setenv(name, value)
                code, out, err = call_main(["fleet", "list"])
                shown = value if len(value) <= 40 else value[:40] + "…"
                assert (code, out, err) == (
                    1, "", f"Error: {name} must be an integer from 0 to 2147483647 (got '{shown}')\n"
                )  # fmt: skip
            for value in ("2147483647", "0002"):
                mp.setenv(name, value)
                assert call_main(["fleet", "list"])[0] == 0, (name, value)
    # The same bound where an interval is given: `monitor --interval`, the WebUI.
    code, _out, err = call_main(["monitor", str(fleet_id), "--interval", "3000000000"])
    assert code == 2 and "0<=x<=2147483647" in err, err
    assert_unchanged(before, head_db)
    with client(make_app(head_db)) as api:
        response = api.patch(
            "/api/monitor",
            headers=fleet_headers(fleet_id),
            json={"wake_interval_seconds": 3_000_000_000},
        )
        assert response.status_code == 422, response.text
    unchanged(api, before, head_db)


# --- worktree options: empty, control characters, relative bases ---------------------------------


@pytest.mark.parametrize("flag", ["--branch", "--base"])
def test_an_empty_branch_or_base_is_refused(head_db: Path, flag: str) -> None:
    """`--branch ''` silently meant the default branch name."""
    with Db(head_db) as db:
        fleet_id = db.fleet().fleet.fleet_id
    before = snapshot(head_db)
    for empty in ("", "  "):
        code, out, err = call_main(
            ["member", "create", "--fleet-id", str(fleet_id), "--name", "w", "--description", "d",
             flag, empty]
        )  # fmt: skip
        assert (code, out) == (2, "")
        assert err.splitlines()[-1] == f"Error: {flag} is empty; give a name, or leave {flag} out"
    assert_unchanged(before, head_db)


def _repo(path: Path) -> list[str]:
    """A repository with three commits on `main`; their ids, oldest first."""
    from tests.git_helpers import git
    from tests.test_worktrees import make_repo

    make_repo(path)
    for n in (1, 2):
        (path / "shared.txt").write_text(f"line {n}\n")
        git(path, "commit", "-qam", f"commit {n}")
    return git(path, "log", "--reverse", "--format=%H").split()


@pytest.mark.tmux
def test_worktree_refusals_show_control_characters_sanitised(tmux_db: TmuxHarness) -> None:
    """A raw ESC/BEL in `--branch`/`--base` reached the terminal in the error."""
    h = tmux_db
    _repo(h.project_dir)
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    create = ["member", "create", "--fleet-id", str(ids.fleet_id), "--name", "w",
              "--description", "d"]  # fmt: skip
    r = h.cli(*create, "--branch", "x\x1b]0;pwned\x07y")
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr.splitlines()[-1] == "Error: --branch 'x␛]0;pwned␇y' is not a valid branch name"
    r = h.cli(*create, "--base", "\x1b[2J\x07nowhere")
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == f"Error: --base '␛[2J␇nowhere' names no commit in {h.project_dir}\n"
    assert "\x1b" not in r.stderr + r.stdout and "\x07" not in r.stderr


@pytest.mark.tmux
def test_a_relative_base_is_resolved_to_its_commit_at_create(tmux_db: TmuxHarness) -> None:
    """`--base HEAD~1` was stored as written and read again in the member's worktree, where it
    names another commit: the ahead count was wrong."""
    from tests.test_worktrees import create, roster

    h = tmux_db
    commits = _repo(h.project_dir)
    ids = create_fleet(h)
    stop_loop(h, ids.fleet_id)
    m, _pane, _path, _branch, base = create(h, ids.fleet_id, "rel", "--base", "HEAD~1")
    assert base == commits[1]  # the commit it named at create time, not `HEAD~1`
    worktree = roster(h, ids.fleet_id)[m]["worktree"]
    assert (worktree["base"], worktree["ahead"], worktree["dirty"]) == (commits[1], 0, False)
    # `HEAD` names the checked-out branch, as no --base does; a branch keeps its name.
    assert create(h, ids.fleet_id, "head", "--base", "HEAD")[4] == "main"
    assert create(h, ids.fleet_id, "main", "--base", "main")[4] == "main"


# --- bidirectional controls in typed lines -------------------------------------------------------


@pytest.mark.tmux
def test_a_typed_line_shows_bidirectional_controls_sanitised(tmux_db: TmuxHarness) -> None:
    """U+202E in a body or a sender's name reached the agent's pane: the rest of the line reads
    backwards there."""
    from tests.delivery_helpers import expected_line, record_of, send_json
    from tests.factories import build_world
    from tests.harness import util
    from tests.test_delivery_send import occupy_loop_slot

    h = tmux_db
    w = build_world(h.db_path, harness=h, members=("ev\u202eil", "bob"))
    a, b = w.members["ev\u202eil"], w.members["bob"]
    occupy_loop_slot(h, w)
    body = "run \u202etxt.exe\u2066 now\u2069"
    data = send_json(
        h.cli("message", "send", "--from-member-id", str(a), "--to-member-id", str(b), body,
              "--json")
    )  # fmt: skip
    assert data["message"]["text"] == body  # stored as sent
    util.wait_records(w.pane(b), 1)
    line = expected_line(
        data["message"]["message_id"], "ev\ufffdil", a, "run \ufffdtxt.exe\ufffd now\ufffd"
    )
    assert util.line_bytes(w.pane(b)) == [record_of(line)]


def test_the_wake_line_shows_bidirectional_controls_sanitised() -> None:
    from cafleet.monitor.wakeline import WakeEntry, render_entry

    entry = render_entry(WakeEntry(7, "ev\u202eil\u2067", "claude\u202a", 0))
    assert entry == "7 (ev\ufffdil\ufffd; coding_agent=claude\ufffd; unacked=0)"
