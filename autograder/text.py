"""Small text helpers shared by every stage (truncation, plurals, points, articles, control characters written
out).

Standard library only and no imports from the rest of the package, so that any module may use it,
the sandboxed child included.
"""
from __future__ import annotations

import datetime as dt
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence

ELLIPSIS = "..."
VOWELS = frozenset("aeiouAEIOU")


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in "..." when something was cut."""
    if limit < len(ELLIPSIS):
        raise ValueError(f"limit must be at least {len(ELLIPSIS)}, got {limit}")
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)] + ELLIPSIS


def code_excerpt(line: str, limit: int) -> str:
    """A line of code to quote in `backticks`, stripped: when longer than `limit` characters, cut
    and ended with an ellipsis ("…"), so that the cut shows inside the quote rather than the line
    seeming to end mid-token."""
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "\u2026"


def plural(n: int, one: str, many: str | None = None) -> str:
    """`n` and the word for that many: "1 time", "2 times", "0 days"; `many` for an irregular plural."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def minutes(n: float, unit: str = "minute") -> str:
    """A number of minutes that need not be whole: 1 -> "1 minute", 0.5 -> "0.5 minutes", 2 -> "2 minutes"
    (`unit` another singular, "idle minute")."""
    return f"{n:g} {unit}" + ("" if n == 1 else "s")


def format_points(x: float) -> str:
    """Points for people: at most two decimals, no trailing zeros (15, 12.5, 3.33)."""
    text = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def format_time(when: dt.datetime) -> str:
    """A time for people, to the second and in UTC ("2026-12-14 23:59:30 UTC"; a naive time is taken as UTC):
    a submission 30 seconds late must not read as made in the due date's minute. A fraction of a second is
    shown when the time has one, without trailing zeros ("2026-12-14 23:59:30.4 UTC"): a submission 0.4 s
    after a due date on the second, cut to the second, would read as made on the due date itself."""
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    fraction = f".{when.microsecond:06d}".rstrip("0") if when.microsecond else ""
    return f"{when:%Y-%m-%d %H:%M:%S}{fraction} UTC"


def sorted_ids(ids: Iterable[str]) -> list[str]:
    """Student ids in the order a message lists them: sorted ignoring case, stably (ids differing in case
    alone keep the order they came in), never in the gradebook's or the file system's order."""
    return sorted(ids, key=str.casefold)


def id_key(sid: str) -> str:
    """A student id as a person reading it takes it: ignoring case and Unicode normalisation (Unicode's
    canonical caseless match), so that 'Zoë' typed as one code point (NFC, what most keyboards give) and
    'zoë' as 'e' and a combining diaeresis (NFD, what a Mac's file names give) are one key. Not NFKC: ids
    differing only by a compatibility form (full-width 'ａｄａ', the ligature 'ﬁ', '²' for '2') look different
    on screen, so a person tells them apart, and folding them would take ids of other characters for one."""
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", sid).casefold())


def id_difference(a: str, b: str) -> str:
    """How two ids of the same `id_key` differ: "case", "Unicode normalisation", or both."""
    if unicodedata.normalize("NFC", a) == unicodedata.normalize("NFC", b):
        return "Unicode normalisation"
    return "case" if a.casefold() == b.casefold() else "case and Unicode normalisation"


def lookalikes(ids: Iterable[str]) -> set[str]:
    """The ids of `ids` that print like another of them (the same characters, encoded otherwise: they
    differ only by Unicode normalisation), which a message names with their escapes (`spelt_id`)."""
    forms: dict[str, set[str]] = {}
    for sid in ids:
        forms.setdefault(unicodedata.normalize("NFC", sid), set()).add(sid)
    return {sid for alike in forms.values() if len(alike) > 1 for sid in alike}


def spelt_id(sid: str) -> str:
    """An id as a message names it when another prints just like it: shown (`shown_name`) and followed by
    its code points as Python writes them ("zoë ('zoe\\u0308')" beside "zoë ('zo\\xeb')")."""
    return f"{shown_name(sid)} ({sid!a})"


def first_few(items: Sequence[str], shown: int = 5) -> str:
    """Items for a one-line message, in the order given: the first `shown` and how many more there are
    ("ada (2 days), bob (1 day) and 3 more")."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def first_ids(ids: Sequence[str], shown: int = 5) -> str:
    """Student ids for a one-line message, sorted (`sorted_ids`): the first `shown` and how many more there
    are ("ada, bob, cy, dee, eve and 2 more"); ids that print like another of them (`lookalikes`) followed
    by their escapes (`spelt_id`), so that two are never listed as the same name."""
    alike = lookalikes(ids)
    return first_few([spelt_id(sid) if sid in alike else sid for sid in sorted_ids(ids)], shown)


def times(n: int) -> str:
    """How often, in words: "once", "twice", "3 times"."""
    return {1: "once", 2: "twice"}.get(n, f"{n} times")


def with_article(word: str) -> str:
    """`word` with "a" or "an" in front, by its first letter: "an int", "a float"."""
    return f"an {word}" if word[:1] in VOWELS else f"a {word}"


# Control characters: C0 but tab and newline, DEL, C1, and Unicode's bidirectional embeddings, overrides
# and isolates (U+202A-U+202E, U+2066-U+2069), which reorder the text after them on screen so that what a
# reader sees is not what is there ("Trojan source"). Student text (outputs, messages) keeps its tabs and
# newlines (a CRLF is a newline); a name (a file's or folder's, from a submission) shows them too, since
# a newline in a name printed on a line would forge the next line.
_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
CONTROL = re.compile(rf"\r\n|[{_CONTROLS}]")
NAME_CONTROL = re.compile(rf"[\t\n{_CONTROLS}]")


def _visible(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\r\n":
        return "\n"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, pattern: re.Pattern[str] = CONTROL) -> str:
    """`text` with the control characters `pattern` finds written out as Python's repr shows them
    (`\\x1b`, `\\u202e`), so that printed in a terminal or stored in a report they are seen, never acted on
    (an escape sequence that erases or rewrites a line, a lone carriage return, NUL)."""
    return text if pattern.search(text) is None else pattern.sub(_visible, text)


def shown_name(name: str) -> str:
    """A file or folder name (or a path) from a submission as it can be printed or written in a report:
    bytes that are not UTF-8 as escapes ('zo\\xeb'), control characters tabs and newlines included
    written out ('x\\x1b[2K', 'a\\nb')."""
    try:
        text = os.fsencode(name).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:          # a lone surrogate no file system name gives ('\ud800', from JSON)
        text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return visible(text, NAME_CONTROL)


def display_width(text: str) -> int:
    """How many terminal columns `text` takes: a wide character (East Asian wide or full-width: '李')
    two, a combining mark or zero-width character none, any other one."""
    if text.isascii():
        return len(text)
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def pad(text: str, width: int, *, right: bool = False) -> str:
    """`text` padded with spaces to `width` terminal columns (`display_width`), on the left when `right`."""
    fill = " " * max(0, width - display_width(text))
    return fill + text if right else text + fill
