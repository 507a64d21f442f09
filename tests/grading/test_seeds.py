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


def test_a_secret_in_a_folder_that_does_not_exist_is_an_error_naming_the_key(tmp_path):
    """Is `secret_file` in a folder that does not exist (a mistyped path, a drive not mounted) one line
    naming the key and the folder, rather than a FileNotFoundError, and no folder made for a new secret
    (which would change every student's hidden inputs)?"""
    path = tmp_path / "secrets" / "course_secret"
    with pytest.raises(CourseError) as info:
        course_secret(path)
    assert str(info.value) == (f"course.yml: secret_file: {path}: the folder {path.parent} does not exist "
                               f"(create it, or change `secret_file`)")
    assert not path.parent.exists()


def test_a_secret_that_cannot_be_read_is_an_error_naming_the_key(tmp_path):
    """Is a secret file that is not text, or a folder in its place, one line naming the key?"""
    path = tmp_path / ".course_secret"
    path.write_bytes(b"\xff" * 40)
    with pytest.raises(CourseError, match=r"^course\.yml: secret_file: .*: not UTF-8 text$"):
        course_secret(path)
    path.unlink()
    path.mkdir()
    with pytest.raises(CourseError, match=r"^course\.yml: secret_file: .*\.course_secret: a folder, not a file "):
        course_secret(path)


def test_seed_is_stable_per_student_and_depends_on_the_secret():
    """Is a student's seed the same on every regrade, different for another student or another secret?"""
    a = student_seed(b"s" * 32, "transformer-block", "ada")
    assert a == student_seed(b"s" * 32, "transformer-block", "ada")
    assert a != student_seed(b"s" * 32, "transformer-block", "alan")
    assert a != student_seed(b"t" * 32, "transformer-block", "ada")
    assert a != student_seed(b"s" * 32, "other-assignment", "ada")
    assert 0 <= a < 2**63
