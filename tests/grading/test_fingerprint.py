"""The grading key tells a new submission from the same one graded again."""
from __future__ import annotations

from autograder.grading.fingerprint import grading_key, regraded, resubmitted, submission_of


def test_the_key_tells_a_new_submission_from_new_graders():
    """Is a key's submission hash read back, a changed submission told apart from the same one graded under
    other graders (a course.yml change) or another seed, and a key without the hash (older results.json, or
    none) never taken for a resubmission?"""
    first = grading_key("g1", "s1", seed=1, on_roster=True)
    assert submission_of(first) == "s1"
    assert resubmitted(first, grading_key("g1", "s2", seed=1, on_roster=True))
    assert not resubmitted(first, grading_key("g2", "s1", seed=7, on_roster=False, isolation=("seccomp",)))
    assert not resubmitted(first, first)
    assert not resubmitted("0" * 64, first) and not resubmitted("", first) and submission_of("0" * 64) == ""
    assert first != grading_key("g2", "s1", seed=1, on_roster=True)      # still a key of everything graded


def test_the_key_tells_new_graders_from_another_seed_roster_or_sandbox():
    """Is a result keyed under other graders told apart (whatever its submission), while another seed, roster
    status or sandbox under the same graders, and a key that does not carry the graders (empty, or written
    before keys held them), are never taken for new graders?"""
    first = grading_key("g1" * 32, "s1", seed=1, on_roster=True)
    assert regraded(first, "g2" * 32)
    assert regraded(grading_key("g1" * 32, "s2", seed=1, on_roster=True), "g2" * 32)
    assert not regraded(first, "g1" * 32)
    assert not regraded(grading_key("g1" * 32, "s1", seed=7, on_roster=False, isolation=("seccomp",)), "g1" * 32)
    assert not regraded("0" * 64 + "/s1", "g2" * 32) and not regraded("", "g2" * 32)
    assert submission_of("0" * 64 + "/s1") == "s1"                  # a key written before it held the graders
