"""Hidden-input seeds: unpredictable to students (they depend on a course secret), identical on
every regrade of the same student (they depend on nothing else)."""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..errors import CourseError
from ..layout import CONFIG_FILE

SEED_LIMIT = 2**63      # student_seed's seeds are 63-bit; a replayed one (--seed) is below this too
SEED_EXPECTED = "a whole number >= 0 and below 2**63 (a seed from results.json)"


def is_seed(value: object) -> bool:
    """Whether `value` can seed a student's hidden inputs: a whole number >= 0 below SEED_LIMIT (a
    negative one would fail every check of the submission, as NumPy's SeedSequence refuses it)."""
    return type(value) is int and 0 <= value < SEED_LIMIT


def course_secret(path: Path, *, create: bool = True) -> bytes:
    """The course secret from `path` (course.yml's `secret_file`); created (mode 0600) on first use
    when `create`, in a folder that exists. A folder that does not is a CourseError naming the key,
    as is a secret that cannot be read or written: a new secret in a folder made for it (a mistyped
    path, a drive not mounted) would change every student's hidden inputs without a word."""
    try:
        return _read_or_create(path, create=create)
    except (OSError, UnicodeDecodeError) as exc:
        if not path.parent.is_dir():
            why = f"the folder {path.parent} does not exist (create it, or change `secret_file`)"
        elif path.is_dir():
            why = "a folder, not a file (give the file that holds, or will hold, the course secret)"
        elif isinstance(exc, UnicodeDecodeError):
            why = "not UTF-8 text"
        else:
            why = exc.strerror or type(exc).__name__
        raise CourseError(f"{CONFIG_FILE}: secret_file: {path}: {why}") from None


def _read_or_create(path: Path, *, create: bool) -> bytes:
    if path.is_file():
        value = path.read_text(encoding="utf-8").strip()
        if len(value) < 16:
            raise CourseError(f"{path}: the course secret is too short (need at least 16 characters)")
        return value.encode()
    if not create:
        raise CourseError(f"{path}: no course secret (run `course autograde` once to create it)")
    value = secrets.token_hex(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(value + "\n")
    return value.encode()


def student_seed(secret: bytes, assignment: str, student: str) -> int:
    """A 63-bit seed for one student's hidden inputs in one assignment."""
    digest = hmac.new(secret, f"{assignment}\0{student}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1
