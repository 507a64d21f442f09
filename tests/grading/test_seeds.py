"""Hidden-input seeds: secret-dependent, stable per student, distinct across students."""
from __future__ import annotations

import stat

import pytest

from autograder.errors import CourseError
from autograder.grading.seeds import course_secret, student_seed


def test_secret_is_created_once_private_and_reused(tmp_path):
    """Is the course secret created on first use with mode 0600, and read back unchanged?"""
    path = tmp_path / ".course_secret"
    first = course_secret(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert course_secret(path) == first and len(first) >= 32


def test_missing_secret_without_create_is_a_clear_error(tmp_path):
    """Does asking for a secret that does not exist (without creating it) name the file?"""
    with pytest.raises(CourseError, match=r"\.course_secret: no course secret"):
        course_secret(tmp_path / ".course_secret", create=False)


def test_seed_is_stable_per_student_and_depends_on_the_secret():
    """Is a student's seed the same on every regrade, different for another student or another secret?"""
    a = student_seed(b"s" * 32, "transformer-block", "ada")
    assert a == student_seed(b"s" * 32, "transformer-block", "ada")
    assert a != student_seed(b"s" * 32, "transformer-block", "alan")
    assert a != student_seed(b"t" * 32, "transformer-block", "ada")
    assert a != student_seed(b"s" * 32, "other-assignment", "ada")
    assert 0 <= a < 2**63
