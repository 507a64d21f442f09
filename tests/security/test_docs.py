"""docs/security.md states the adversarial corpus's limits and bounds as tests/security/harness.py sets them."""
from __future__ import annotations

from conftest import ROOT

from .harness import ATTACKER_SECONDS, GRADER_PEAK_MB, LIMITS


def test_docs_security_gives_the_corpus_limits_and_bounds_the_harness_uses():
    """Does the page name each short limit of the scratch course with its value, the attacker's time
    bound and the grader's memory bound, so that a change to the harness shows up as a stale page?"""
    text = " ".join((ROOT / "docs" / "security.md").read_text(encoding="utf-8").split())
    for key, value in LIMITS.items():
        assert f"`{key}` {value:g}" in text, f"docs/security.md: the corpus's limit `{key}` {value:g} is not stated"
    assert f"attacker takes under {ATTACKER_SECONDS:g} s" in text
    assert f"stays under **{GRADER_PEAK_MB} MB**" in text
