"""The default number of workers: the CPUs of the process's affinity, capped by its cgroup's CPU
quota (cgroup v2's cpu.max, v1's cfs quota), read from /proc and the cgroup file system."""
from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import cpus
from tests.conftest import ROOT


def _proc(tmp_path: Path, cgroup: str, mountinfo: list[str]) -> Path:
    proc = tmp_path / "proc-self"
    proc.mkdir()
    (proc / "cgroup").write_text(cgroup)
    (proc / "mountinfo").write_text("\n".join(mountinfo) + "\n")
    return proc


def _write(path: Path, **files: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (path / name.replace("_", ".", 1)).write_text(text + "\n")


def _v2_limit(tmp_path: Path, where: str, cpu_max: dict[str, str]) -> float | None:
    """The limit read for a process in cgroup `where` of a cgroup2 mount whose groups have `cpu_max`."""
    root = tmp_path / "cg2"
    for group, text in cpu_max.items():
        _write(root / group.lstrip("/"), cpu_max=text)
    return cpus.cgroup_cpu_limit(_proc(tmp_path, f"0::{where}\n", [f"30 23 0:26 / {root} rw - cgroup2 cgroup2 rw"]))


def test_a_v2_quota_of_one_and_a_half_cpus_is_read(tmp_path):
    """Under cgroup v2 with cpu.max "150000 100000", is the limit 1.5 CPUs?"""
    assert _v2_limit(tmp_path, "/kubepods/pod1", {"/kubepods/pod1": "150000 100000"}) == 1.5


def test_a_v2_parents_smaller_quota_is_the_limit(tmp_path):
    """When the process's own cgroup has no quota ("max") but a parent's allows 2 CPUs, is it 2?"""
    assert _v2_limit(tmp_path, "/jobs/job7", {"/jobs": "200000 100000", "/jobs/job7": "max 100000"}) == 2.0


def test_no_quota_anywhere_is_no_limit(tmp_path):
    """With cpu.max "max" all the way up (v2) or a v1 quota of -1, is there no limit?"""
    assert _v2_limit(tmp_path, "/a", {"/a": "max 100000"}) is None
    v1 = tmp_path / "cg1"
    _write(v1, cpu_cfs_quota_us="-1", cpu_cfs_period_us="100000")
    proc1 = tmp_path / "p1"
    proc1.mkdir()
    (proc1 / "cgroup").write_text("3:cpu,cpuacct:/\n")
    (proc1 / "mountinfo").write_text(f"32 31 0:29 / {v1} rw - cgroup cgroup rw,cpu,cpuacct\n")
    assert cpus.cgroup_cpu_limit(proc1) is None


def test_a_v1_quota_inside_a_containers_mount_is_read(tmp_path):
    """Under cgroup v1, in a container whose cpu hierarchy is mounted at its own cgroup (mount root
    /docker/abc, the process's path /docker/abc), is a quota of 2 CPUs read from the mount point?"""
    v1 = tmp_path / "cpu,cpuacct"
    _write(v1, cpu_cfs_quota_us="200000", cpu_cfs_period_us="100000")
    proc = _proc(tmp_path, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n",
                 [f"40 31 0:35 /docker/abc {tmp_path / 'memory'} rw - cgroup cgroup rw,memory",
                  f"41 31 0:36 /docker/abc {v1} rw - cgroup cgroup rw,cpu,cpuacct"])
    assert cpus.cgroup_cpu_limit(proc) == 2.0


def test_unreadable_or_missing_files_are_no_limit(tmp_path):
    """With no cgroup files at all (another system, a locked-down /proc), is there no limit?"""
    assert cpus.cgroup_cpu_limit(tmp_path / "nowhere") is None


def test_the_default_is_the_affinity_capped_by_the_quota_rounded_up(monkeypatch):
    """With 8 CPUs listed, is the default 8 with no quota, 2 with a quota of 1.5 CPUs, and never 0?"""
    monkeypatch.setattr(cpus, "affinity", lambda: tuple(range(8)))
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: None)
    assert cpus.available_cores() == 8
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: 1.5)
    assert cpus.available_cores() == 2
    monkeypatch.setattr(cpus, "cgroup_cpu_limit", lambda: 0.2)
    assert cpus.available_cores() == 1


def _writable_cpu_hierarchy() -> tuple[Path, int] | None:
    """A cpu cgroup hierarchy this process may make a group in: (its mount point, its version)."""
    text = Path("/proc/self/mountinfo").read_text()
    for root, point, fstype, options in cpus._mounts(text):
        here = Path(point)
        if root != "/" or not os.access(here, os.W_OK):
            continue
        if fstype == "cgroup" and "cpu" in options:
            return here, 1
        if fstype == "cgroup2" and "cpu" in (here / "cgroup.subtree_control").read_text().split():
            return here, 2
    return None


def test_a_process_in_a_real_cgroup_with_a_one_cpu_quota_defaults_to_one_core():
    """Moved into a real cgroup allowed one CPU's time, does a process see one core, whatever its
    affinity lists?"""
    found = _writable_cpu_hierarchy()
    if found is None:
        pytest.skip("no cpu cgroup hierarchy this user may write here (the parsing is tested above)")
    mount, version = found
    group = mount / f"course-autograder-test-{os.getpid()}-{secrets.token_hex(3)}"
    group.mkdir()
    try:
        if version == 2:
            (group / "cpu.max").write_text("100000 100000\n")
        else:
            (group / "cpu.cfs_period_us").write_text("100000\n")
            (group / "cpu.cfs_quota_us").write_text("100000\n")
        code = ("import os, sys\n"
                "open(sys.argv[1], 'a').write(str(os.getpid()))\n"
                "from autograder import cpus\n"
                "print(len(cpus.affinity()), cpus.cgroup_cpu_limit(), cpus.available_cores())\n")
        done = subprocess.run([sys.executable, "-c", code, str(group / "cgroup.procs")], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)
    finally:
        group.rmdir()
    assert done.returncode == 0, done.stderr
    listed, limit, cores = done.stdout.split()
    assert (limit, cores) == ("1.0", "1")
    assert int(listed) == len(cpus.affinity())
