"""How many cores a batch may use by default: the CPUs this process may run on (its affinity),
fewer when its cgroup caps its CPU time (a container started with `--cpus 2`, a Kubernetes CPU
limit, a SLURM job's cgroup): there the affinity still lists every core of the host, and one
worker per listed core would have them all throttled by the quota.

Read from the kernel's files only (no import beyond the standard library): the command's early
start-up asks before it imports the engine.
"""
from __future__ import annotations

import math
import os
from pathlib import Path


def affinity() -> tuple[int, ...]:
    """The CPUs this process may run on, in order (empty when unknown)."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return ()


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(root within the hierarchy, mount point, file system type, super options) of each mount."""
    mounts = []
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if sep and len(fields) >= 5 and len(rest) >= 3:
            mounts.append((fields[3], fields[4].replace("\\040", " "), rest[0], set(rest[2].split(","))))
    return mounts


def _within(path: str, mount_root: str) -> str | None:
    """`path` (from /proc/self/cgroup) relative to a mount of its hierarchy rooted at `mount_root`."""
    if mount_root == "/":
        return path
    if path == mount_root or path.startswith(mount_root.rstrip("/") + "/"):
        return path[len(mount_root.rstrip("/")):] or "/"
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _quota(directory: Path, version: int) -> float | None:
    """CPUs allowed by one cgroup's own quota (None: no quota there, or unreadable)."""
    if version == 2:
        text = _read(directory / "cpu.max")
        parts = text.split() if text else []
    else:
        parts = [_read(directory / "cpu.cfs_quota_us") or "", _read(directory / "cpu.cfs_period_us") or ""]
    if len(parts) != 2:
        return None
    quota, period = parts       # v2's "max" (no quota) and v1's -1 are no limit below
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def cgroup_cpu_limit(proc: Path = Path("/proc/self")) -> float | None:
    """The CPUs this process's cgroup lets it use (the smallest quota on its way up to the root,
    cgroup v2's cpu.max or v1's cpu.cfs_quota_us / cpu.cfs_period_us), None when none is set or
    the files cannot be read. `proc` is /proc/<pid> of the process asked about."""
    cgroups, mountinfo = _read(proc / "cgroup"), _read(proc / "mountinfo")
    if not cgroups or not mountinfo:
        return None
    limits: list[float] = []
    for line in cgroups.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        v2 = number == "0" and controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        for root, point, fstype, options in _mounts(mountinfo):
            if (fstype == "cgroup2") != v2 or (not v2 and (fstype != "cgroup" or "cpu" not in options)):
                continue
            relative = _within(path, root)
            if relative is None:
                continue
            directory = Path(point) / relative.lstrip("/")
            base = Path(point)
            while True:
                found = _quota(directory, 2 if v2 else 1)
                if found is not None:
                    limits.append(found)
                if directory == base or base not in directory.parents:
                    break
                directory = directory.parent
            break
    return min(limits) if limits else None


def available_cores() -> int:
    """The cores this process may keep busy: its affinity's CPUs, capped by its cgroup's CPU quota
    (rounded up: 1.5 CPUs allow 2 workers), at least 1."""
    listed = len(affinity()) or (os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    if limit is not None:
        listed = min(listed, math.ceil(limit))
    return max(listed, 1)
