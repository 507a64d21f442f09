"""The grading key tells a new submission from the same one graded again."""
from __future__ import annotations

from autograder.grading.fingerprint import grading_key, resubmitted, submission_of


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
