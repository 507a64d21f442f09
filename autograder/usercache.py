"""A folder of this user's for derived data that only saves time (every entry can be computed
again from its inputs, and is named by a hash of them): `<temp folder>/course-autograder-<uid>`,
mode 0700. It is used only when this user owns it and no one else may write it, so nothing
another user wrote is ever read; when it cannot be had, callers compute as if it were empty.

    data = read_entry("grader-names", key)        # None: absent, unreadable or not ours
    write_entry("grader-names", key, data)        # atomically; failures are ignored
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import py_compile
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


def _current_pyc(source: Path, pyc: Path) -> bool:
    """Whether `pyc` is this interpreter's bytecode of `source` as it is now, by the check the
    interpreter itself makes when importing (timestamp and size, or a checked source hash), and no
    one but its owner may write it (nor, for the cache's own files, anyone but this user)."""
    try:
        st = os.stat(source)
        fd = os.open(pyc, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        header = os.read(fd, 16)
    except OSError:
        return False
    finally:
        os.close(fd)
    if (not stat.S_ISREG(info.st_mode) or info.st_mode & 0o022 or len(header) < 16
            or header[:4] != importlib.util.MAGIC_NUMBER):
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags == 0:                       # timestamp-based: the source's mtime and size
        return (int.from_bytes(header[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                and int.from_bytes(header[12:16], "little") == st.st_size & 0xFFFFFFFF)
    if flags == 3:                       # checked hash (compileall under SOURCE_DATE_EPOCH)
        try:
            return header[8:16] == importlib.util.source_hash(source.read_bytes())
        except OSError:
            return False
    return False                         # an unchecked hash: it could be stale


def sandbox_bytecode(source: Path) -> Path | None:
    """This interpreter's bytecode of one of the sandbox's own modules, for the sandbox to import
    read-only instead of compiling the module at each start (it may write nothing): the file beside
    the source (`make venv` compiles the package) when it is current, else one compiled into this
    cache, named by the source's path, size and time. The interpreter in the sandbox checks it
    against the source as usual (a stale one is compiled in memory). None when neither can be had."""
    beside = Path(importlib.util.cache_from_source(str(source)))
    if _current_pyc(source, beside):
        return beside
    folder = cache_dir()
    if folder is None:
        return None
    try:
        st = os.stat(source)
    except OSError:
        return None
    key = hashlib.sha256(f"{source}\0{st.st_size}\0{st.st_mtime_ns}\0{sys.implementation.cache_tag}".encode())
    cached = folder / f"sandbox-bytecode-{source.stem}-{key.hexdigest()[:24]}.pyc"
    if _current_pyc(source, cached):
        return cached
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".sandbox-bytecode-", suffix=".tmp")
        os.close(fd)
    except OSError:
        return None
    try:
        py_compile.compile(str(source), cfile=tmp, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        os.chmod(tmp, 0o644)             # read by the sandbox's own user, through its bind mount only
        os.replace(tmp, cached)
    except (OSError, py_compile.PyCompileError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return None
    return cached if _current_pyc(source, cached) else None
