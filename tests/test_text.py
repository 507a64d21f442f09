"""The shared text helpers."""
from __future__ import annotations

import pytest

from autograder.text import (
    NAME_CONTROL,
    code_excerpt,
    display_width,
    first_few,
    first_ids,
    format_time,
    minutes,
    pad,
    shown_name,
    sorted_ids,
    truncate,
    visible,
    with_article,
)


def test_truncate_keeps_short_text():
    """Is text within the limit returned unchanged?"""
    assert truncate("layer_norm", 10) == "layer_norm"


def test_truncate_cuts_to_the_limit_with_an_ellipsis():
    """Is longer text cut to exactly `limit` characters, ending in "..."?"""
    cut = truncate("x" * 50, 12)
    assert len(cut) == 12 and cut.endswith("...") and cut.startswith("x" * 9)


def test_truncate_refuses_a_limit_too_small_for_the_ellipsis():
    """Does a limit below the ellipsis' own length fail loudly rather than return garbage?"""
    with pytest.raises(ValueError, match="at least 3"):
        truncate("abcdef", 2)


def test_a_code_excerpt_cut_short_ends_in_an_ellipsis_of_its_own():
    """Is a line of code within the limit only stripped, and a longer one cut to `limit` characters
    ending in "…" (not a bare cut that reads as code, such as `+ '<sc`)?"""
    assert code_excerpt("   return x + 1  ", 20) == "return x + 1"
    cut = code_excerpt("raise ValueError('boom ' + 'long message ' * 200 + '<script>')", 40)
    assert len(cut) <= 40 and cut.endswith("\u2026") and cut.startswith("raise ValueError('boom ' + ")
    assert code_excerpt("a" * 40, 40) == "a" * 40 and code_excerpt("a" * 41, 40) == "a" * 39 + "\u2026"


@pytest.mark.parametrize(("word", "expected"), [
    ("int", "an int"), ("object", "an object"), ("Exception", "an Exception"),
    ("float", "a float"), ("list", "a list"), ("", "a "),
])
def test_with_article_by_first_letter(word, expected):
    """Does the article follow the word's first letter?"""
    assert with_article(word) == expected


@pytest.mark.parametrize(("name", "shown"), [
    ("hw.ipynb", "hw.ipynb"),
    ("x\x1b[2K\x1b[1A\x1b[32mFAKE\x1b[0m\x1b]0;pwned\x07.txt",
     "x\\x1b[2K\\x1b[1A\\x1b[32mFAKE\\x1b[0m\\x1b]0;pwned\\x07.txt"),
    ("a\tb\nc\r\nd\x00\x7f\x9b", "a\\x09b\\x0ac\\x0d\\x0ad\\x00\\x7f\\x9b"),
    ("zo\udceb", "zo\\xeb"),                       # a byte that is not UTF-8, as os.listdir gives it
    ("\ud800x", "\\ud800x"),                       # a lone surrogate read from JSON
    ("caf\u00e9 \u2713.ipynb", "caf\u00e9 \u2713.ipynb"),
    ("ada\u202egpj.exe", "ada\\u202egpj.exe"),               # a right-to-left override: shown as "adaexe.jpg"
    ("\u2066x\u2069\u202a\u202d", "\\u2066x\\u2069\\u202a\\u202d"),
    ("\u05e9\u05dc\u05d5\u05dd.ipynb", "\u05e9\u05dc\u05d5\u05dd.ipynb"),   # right-to-left letters are text, kept
])
def test_shown_name_writes_out_control_characters_tabs_and_newlines_included(name, shown):
    """Is a submitted name printable on one line as it is: every control character (tab and newline
    too, which would forge a line) and every byte that is not UTF-8 written out as Python's repr
    does, other text kept?"""
    assert shown_name(name) == shown
    assert NAME_CONTROL.search(shown) is None and shown_name(shown) == shown


def test_visible_keeps_tabs_and_newlines_of_text():
    """Does student text keep its tabs and newlines (a CRLF as a newline) while other control
    characters are written out?"""
    assert visible("a\tb\nc\r\nd\re\x1b[31m") == "a\tb\nc\nd\\x0de\\x1b[31m"


def test_visible_writes_out_bidirectional_overrides():
    """Are the bidirectional embeddings, overrides and isolates (which make a line read differently
    from what it holds) written out, while right-to-left letters and marks stay text?"""
    shown = visible("score = 0 \u202e01 = score\u202c \u2067x\u2069 \u05d0\u200f")
    assert shown == "score = 0 \\u202e01 = score\\u202c \\u2067x\\u2069 \u05d0\u200f"


@pytest.mark.parametrize(("text", "width"), [
    ("ada", 3), ("zo\u00eb", 3), ("zoe\u0308", 3), ("\u674e\u96f7", 4), ("\uff21b", 3), ("a\u200bb", 2), ("", 0),
])
def test_display_width_counts_terminal_columns(text, width):
    """Are wide characters two columns, combining marks and zero-width characters none, others one?"""
    assert display_width(text) == width
    assert display_width(pad(text, 6)) == 6 and pad(text, 6, right=True).endswith(text)


@pytest.mark.parametrize("n, unit, said", [
    (1, "idle minute", "1 idle minute"), (1.0, "minute", "1 minute"), (0.5, "minute", "0.5 minutes"),
    (60, "idle minute", "60 idle minutes"), (0.02, "minute", "0.02 minutes"),
])
def test_minutes_are_one_minute_alone_in_the_singular(n, unit, said):
    """Is a number of minutes that need not be whole said as `course serve` says it ("after 1 idle minute",
    not "1 idle minutes")?"""
    assert minutes(n, unit) == said


def test_student_ids_are_listed_sorted_ignoring_case_and_stably():
    """Are student ids listed sorted ignoring case (not in the gradebook's order), ids differing in case alone
    kept in the order given, and a long list cut to the first few and a count?"""
    assert sorted_ids(["zed", "Bob", "ada", "bob", "Ada"]) == ["ada", "Ada", "Bob", "bob", "zed"]
    assert sorted_ids(["bob", "Bob"]) == ["bob", "Bob"]
    assert first_ids(["g", "F", "e", "D", "c", "B", "a"]) == "a, B, c, D, e and 2 more"
    assert first_ids(["b", "A"], shown=5) == "A, b" and first_ids([]) == ""


def test_student_ids_that_print_alike_are_listed_with_their_escapes():
    """Are two ids that differ only by Unicode normalisation ('zoë' as one code point, and as 'e' and a
    combining mark), which print the same, listed each with its escapes, other ids as they are?"""
    assert first_ids(["zo\u00eb", "ada", "zoe\u0308"]) == "ada, zoe\u0308 ('zoe\\u0308'), zo\u00eb ('zo\\xeb')"
    assert first_ids(["zo\u00eb", "ada"]) == "ada, zo\u00eb"


def test_first_few_keeps_the_order_given_and_counts_the_rest():
    """Are formatted items listed in the order given, the first few and how many more?"""
    items = [f"s{i} ({i} days)" for i in (3, 1, 2, 5, 4, 6, 7)]
    assert first_few(items) == "s3 (3 days), s1 (1 days), s2 (2 days), s5 (5 days), s4 (4 days) and 2 more"
    assert first_few(items, 7) == ", ".join(items)
    assert first_few(["12", "3"], 1) == "12 and 1 more" and first_few([]) == ""


def test_a_time_for_people_shows_its_seconds_in_utc():
    """Is a time shown to the second, in UTC whatever its offset, a naive one taken as UTC, and a fraction
    of a second shown only when the time has one (never cut off, never rounded up to the next second)?"""
    import datetime as dt

    plus_one = dt.timezone(dt.timedelta(hours=1))
    assert format_time(dt.datetime(2026, 12, 15, 0, 59, 30, tzinfo=plus_one)) == "2026-12-14 23:59:30 UTC"
    assert format_time(dt.datetime(2026, 12, 14, 23, 59)) == "2026-12-14 23:59:00 UTC"
    assert format_time(dt.datetime(2026, 12, 14, 23, 59, 30, 999999)) == "2026-12-14 23:59:30.999999 UTC"
    assert format_time(dt.datetime(2026, 12, 14, 23, 59, 0, 400000)) == "2026-12-14 23:59:00.4 UTC"
    assert format_time(dt.datetime(2026, 12, 14, 23, 59, 0, 120)) == "2026-12-14 23:59:00.00012 UTC"
