"""Temporary folders owned by a process: named after it, swept once it no longer runs.

A folder is made with the prefix `<kind><pid>-<start>-`, where `<start>` is when the process
started (from /proc), so that the pair names one process even after its pid is reused. A command
that is killed cannot remove its folders; the next one of the same user removes them
(`remove_stale`). Standard library only: `autograder.batch.launch` uses it before the command's
own imports.
"""
from __future__ import annotations

import os
import tempfile
import time


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), None if there is none:
    a pid together with this names one process, even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
        return text[text.rindex(b")") + 2:].split()[19].decode()
    except (OSError, ValueError, IndexError):
        return None


def owned_prefix(kind: str) -> str:
    """The name prefix of this process's folders of `kind`: `<kind><pid>-<start>-`."""
    return f"{kind}{os.getpid()}-{process_start(os.getpid()) or 0}-"


def _stale(kind: str, name: str, mtime: float, legacy_days: float | None) -> bool:
    parts = name[len(kind):].split("-")
    if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
        return process_start(int(parts[0])) != parts[1]
    # no owner recorded in the name (an earlier version's folder): by age, if at all
    return legacy_days is not None and time.time() - mtime > legacy_days * 86400


def remove_stale(kind: str, base: str | None = None, *, legacy_days: float | None = None) -> int:
    """Remove the folders of `kind` in `base` (default: the temporary folder) that belong to this
    user and to processes that no longer run; folders without an owner in their name only when
    older than `legacy_days` (never, if None). Returns how many. Only plain files directly inside
    are removed, never anything a link points to."""
    base = base or tempfile.gettempdir()
    removed = 0
    try:
        entries = [e for e in os.scandir(base) if e.name.startswith(kind)]
    except OSError:
        return 0
    uid = os.geteuid()
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if (not entry.is_dir(follow_symlinks=False) or st.st_uid != uid
                    or not _stale(kind, entry.name, st.st_mtime, legacy_days)):
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            for name in os.listdir(fd):
                try:
                    os.unlink(name, dir_fd=fd)
                except OSError:
                    pass
        except OSError:
            pass
        finally:
            os.close(fd)
        try:
            os.rmdir(entry.path)
            removed += 1
        except OSError:
            pass
    return removed
