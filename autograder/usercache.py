"""A folder of this user's for derived data that only saves time (every entry can be computed
again from its inputs, and is named by a hash of them): `<temp folder>/course-autograder-<uid>`,
mode 0700. It is used only when this user owns it and no one else may write it, so nothing
another user wrote is ever read; when it cannot be had, callers compute as if it were empty.

    data = read_entry("grader-names", key)        # None: absent, unreadable or not ours
    write_entry("grader-names", key, data)        # atomically; failures are ignored
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ENTRY_MAX_BYTES = 2**20


def cache_dir() -> Path | None:
    """The folder, created if needed; None when it is not this user's alone."""
    path = Path(tempfile.gettempdir()) / f"course-autograder-{os.getuid()}"
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        return None
    return path


def _entry(kind: str, key: str) -> Path | None:
    folder = cache_dir()
    return folder / f"{kind}-{key}.json" if folder is not None else None


def read_entry(kind: str, key: str) -> Any:
    """The JSON stored under (kind, key), or None."""
    path = _entry(kind, key)
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            if os.fstat(fh.fileno()).st_uid != os.getuid():
                return None
            data = fh.read(ENTRY_MAX_BYTES + 1)
    except OSError:
        return None
    if len(data) > ENTRY_MAX_BYTES:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return None


def write_entry(kind: str, key: str, value: Any) -> None:
    """Store `value` (plain JSON data) under (kind, key); any failure leaves the cache as it was."""
    path = _entry(kind, key)
    if path is None:
        return
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{kind}-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(value, fh)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


@contextlib.contextmanager
def bytecode() -> Iterator[None]:
    """Within the block, where this process may not write bytecode beside the sources
    (PYTHONDONTWRITEBYTECODE, as many containers set it), modules imported are compiled once into
    this cache (`sys.pycache_prefix`) and read from there afterwards: the instructor's code and the
    graders' rewritten asserts are otherwise compiled again by every command. Nothing changes
    where bytecode may be written, or a prefix is already set, or there is no cache folder."""
    folder = cache_dir() if sys.dont_write_bytecode and sys.pycache_prefix is None else None
    if folder is None:
        yield
        return
    sys.pycache_prefix, sys.dont_write_bytecode = str(folder / "bytecode"), False
    try:
        yield
    finally:
        sys.pycache_prefix, sys.dont_write_bytecode = None, True
