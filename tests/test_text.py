"""Text helpers: ANSI stripping, capture windowing, normalisers and display sanitizers (unit)."""

from __future__ import annotations

import pytest

from cafleet.text import (
    normalize_notification_text,
    sanitize_multiline,
    sanitize_single_line,
    sanitize_wake_field,
    strip_ansi,
    strip_ansi_line,
    truncate,
    window_capture,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("\x1b[31mred\x1b[0m", "red"),
        ("\x1b[1;38;5;208mX\x1b[m", "X"),
        ("a\x1b[?25lb", "ab"),
        ("\x1b]8;;http://x\x07link\x1b]8;;\x07", "link"),
        ("\x1b]0;title\x1b\\text", "text"),
        ("old text\rnew", "new"),
        ("a\rb\rc", "c"),
        ("\x1b(Bkeep", "\x1b(Bkeep"),  # other escapes stay
        ("\x1b]unterminated", "\x1b]unterminated"),
        ("plain", "plain"),
    ],
)
def test_strip_ansi_line(raw: str, expected: str) -> None:
    assert strip_ansi_line(raw) == expected


def test_strip_ansi_multi_line() -> None:
    assert strip_ansi("\x1b[1ma\x1b[0m\nb\rc") == "a\nc"


def test_window_capture_drops_trailing_blank_run() -> None:
    raw = "l1\nl2\n\nl4\n  \n\x1b[0m\n\t\n"
    assert window_capture(raw, 10) == "l1\nl2\n\nl4"
    assert window_capture(raw, 2) == "\nl4"
    assert window_capture(raw, 1) == "l4"


def test_window_capture_all_blank() -> None:
    assert window_capture("\n\n  \n", 5) == ""
    assert window_capture("", 5) == ""


def test_window_capture_ansi_mode_keeps_original_lines() -> None:
    raw = "\x1b[32mok\x1b[0m  \nx\r\x1b[1mbold\n\x1b[0m   \n"
    assert window_capture(raw, 5, ansi=True) == "\x1b[32mok\x1b[0m  \nx\r\x1b[1mbold"
    assert window_capture(raw, 5) == "ok  \nbold"


def test_window_capture_rejects_non_positive() -> None:
    with pytest.raises(ValueError, match="^capture: lines must be positive, got 0$"):
        window_capture("x", 0)


def test_notification_normaliser_acceptance_25() -> None:
    body = "a\r\nb\rc\nd\te\x1b\x07\x7f\u0085f😀שלום"
    assert normalize_notification_text(body) == "a⏎b⏎c⏎d\tef😀שלום"


def test_notification_normaliser_separators_and_surrogates() -> None:
    assert normalize_notification_text("a\u2028b\u2029c") == "a⏎b⏎c"
    assert normalize_notification_text("x\ud800y") == "x\ufffdy"
    assert normalize_notification_text("\x00\x1f\x9f") == ""
    assert normalize_notification_text("\r\n\r\n") == "⏎⏎"
    assert normalize_notification_text("a`b$(c)") == "a`b$(c)"


def test_wake_sanitiser() -> None:
    assert sanitize_wake_field("x`$(y)") == "xˋ$﹙y)"
    assert sanitize_wake_field("a\r\nb\tc\x1bd\u2028e") == "a⏎b⏎cd⏎e"
    assert sanitize_wake_field("\ud800") == "\ufffd"


def test_display_sanitizers() -> None:
    text = "a\x1bb\rc\nd\te\x7ff\x85g\x00"
    assert sanitize_multiline(text) == "a␛b␍c\nd\te␡f\ufffdg␀"
    assert sanitize_single_line(text) == "a␛b␍c␊d␉e␡f\ufffdg␀"
    assert len(sanitize_single_line(text)) == len(text)
    assert sanitize_multiline("plain é 😀") == "plain é 😀"


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abc", 3, "abc"),
        ("abcd", 3, "abc…"),
        ("", 0, ""),
        ("a", 0, "…"),
        ("😀😀😀", 2, "😀😀…"),
        ("x" * 201, 200, "x" * 200 + "…"),
        ("x" * 200, 200, "x" * 200),
    ],
)
def test_truncate(text: str, limit: int, expected: str) -> None:
    assert truncate(text, limit) == expected
