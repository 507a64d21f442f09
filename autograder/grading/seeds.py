"""Hidden-input seeds: unpredictable to students (they depend on a course secret), identical on
every regrade of the same student (they depend on nothing else)."""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from ..errors import CourseError


def course_secret(path: Path, *, create: bool = True) -> bytes:
    """The course secret from `path`; created (mode 0600) on first use when `create`."""
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
