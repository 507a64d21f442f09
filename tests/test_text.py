"""The shared text helpers."""
from __future__ import annotations

import pytest

from autograder.text import truncate, with_article


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


@pytest.mark.parametrize(("word", "expected"), [
    ("int", "an int"), ("object", "an object"), ("Exception", "an Exception"),
    ("float", "a float"), ("list", "a list"), ("", "a "),
])
def test_with_article_by_first_letter(word, expected):
    """Does the article follow the word's first letter?"""
    assert with_article(word) == expected
