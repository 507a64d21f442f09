"""Small text helpers shared by every stage (truncation, articles).

Standard library only and no imports from the rest of the package, so that any module may use it,
the sandboxed child included.
"""
from __future__ import annotations

ELLIPSIS = "..."
VOWELS = frozenset("aeiouAEIOU")


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in "..." when something was cut."""
    if limit < len(ELLIPSIS):
        raise ValueError(f"limit must be at least {len(ELLIPSIS)}, got {limit}")
    return text if len(text) <= limit else text[: limit - len(ELLIPSIS)] + ELLIPSIS


def with_article(word: str) -> str:
    """`word` with "a" or "an" in front, by its first letter: "an int", "a float"."""
    return f"an {word}" if word[:1] in VOWELS else f"a {word}"
