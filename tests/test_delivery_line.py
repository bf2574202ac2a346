"""Unit tests of the notification line (docs/runtime.md §4.2): normaliser, truncation, frame."""

from __future__ import annotations

from cafleet.delivery.drains import DrainFailure, notification_line, warning_line
from cafleet.text import normalize_notification_text as normalise
from cafleet.text import truncate as truncate_codepoints

SUFFIX = " \u2014 ack with: cafleet message ack 7"


def line(body: str, *, name: str | None = "alice", limit: int = 200) -> str:
    return notification_line(
        message_id=7, sender_name=name, from_member_id=3, body=body, max_text_len=limit
    )


def test_frame_is_exact() -> None:
    assert line("hello") == "[cafleet msg 7 from alice (3)] hello" + SUFFIX


def test_acceptance_25_normaliser() -> None:
    body = "a\r\nb\rc\nd\te\x1b\x07\x7f\u0085f😀שלום"
    assert normalise(body) == "a⏎b⏎c⏎d\tef😀שלום"
    assert line(body) == "[cafleet msg 7 from alice (3)] a⏎b⏎c⏎d\tef😀שלום" + SUFFIX


def test_crlf_is_one_mark_and_separators_become_marks() -> None:
    assert normalise("x\r\n\r\ny") == "x⏎⏎y"
    assert normalise("x\n\ry") == "x⏎⏎y"
    assert normalise("p\u2028q\u2029r") == "p⏎q⏎r"


def test_controls_removed_tab_kept() -> None:
    controls = "".join(chr(c) for c in range(0x20) if c not in (9, 10, 13))
    c1 = "".join(chr(c) for c in range(0x80, 0xA0))
    assert normalise("a" + controls + "\x7f" + c1 + "\tb") == "a\tb"
    assert normalise("\u00a0é") == "\u00a0é"  # U+00A0 is not a control character


def test_lone_surrogates_become_replacement() -> None:
    assert normalise("a\ud800b\udfffc") == "a\ufffdb\ufffdc"


def test_truncation() -> None:
    assert truncate_codepoints("x" * 201, 200) == "x" * 200 + "…"
    assert truncate_codepoints("x" * 200, 200) == "x" * 200
    assert truncate_codepoints("abcdefg", 5) == "abcde…"
    assert truncate_codepoints("abc", 0) == "…"
    assert truncate_codepoints("", 0) == ""
    # codepoints, not bytes
    assert truncate_codepoints("😀" * 6, 5) == "😀" * 5 + "…"


def test_truncation_applies_after_normalising() -> None:
    # 4 CRLF pairs collapse to 4 marks: 4 codepoints, within a limit of 4
    assert line("\r\n" * 4, limit=4) == "[cafleet msg 7 from alice (3)] ⏎⏎⏎⏎" + SUFFIX
    assert line("\x1b" * 10 + "abcdef", limit=5) == (
        "[cafleet msg 7 from alice (3)] abcde… (+1 character: cafleet message show 7)" + SUFFIX
    )


def test_empty_after_normalising_gives_two_spaces() -> None:
    assert (
        line("\x1b\x07") == "[cafleet msg 7 from alice (3)]  \u2014 ack with: cafleet message ack 7"
    )


def test_sender_name_verbatim_and_normalised_never_truncated() -> None:
    assert line("b", name="a`b$(c)").startswith("[cafleet msg 7 from a`b$(c) (3)] b")
    assert line("b", name="x\ny\x1bz").startswith("[cafleet msg 7 from x⏎yz (3)] b")
    assert line("b", name="n" * 300, limit=5).startswith("[cafleet msg 7 from " + "n" * 300)


def test_unknown_sender() -> None:
    assert line("b", name=None).startswith("[cafleet msg 7 from unknown (3)] b")


def test_line_never_contains_cr_or_lf() -> None:
    body = "".join(chr(c) for c in range(0, 0x110)) + "\u2028\u2029\ud800"
    text = line(body, limit=10_000)
    assert "\r" not in text and "\n" not in text and "\x1b" not in text


def test_warning_line() -> None:
    failure = DrainFailure(12, 5, "%3", "pane %3 is receiving another keystroke")
    assert warning_line(failure) == (
        "Warning: message 12 not notified to member 5: pane %3 is receiving another keystroke "
        "(it stays in the inbox; delivery will be retried)"
    )
