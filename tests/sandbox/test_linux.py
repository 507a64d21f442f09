"""The system-call wrappers: each failure is an OSError naming the call; the ones the zygote uses
to drop privileges work in a forked child."""
from __future__ import annotations

import errno
import os

import pytest

from autograder.sandbox import linux


def in_child(fn) -> int:
    """Run fn() in a forked child; its return value (a small int) is the exit status."""
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.WEXITSTATUS(status)


def test_a_failing_call_raises_oserror_naming_it():
    """Does a refused mount raise OSError whose message names the call and the target?"""
    def attempt() -> int:
        linux.drop_capabilities()
        try:
            linux.mount("tmpfs", "/nonexistent-target", "tmpfs")
        except OSError as exc:
            return 0 if exc.errno in (errno.EPERM, errno.ENOENT) and "mount /nonexistent-target" in str(exc) else 1
        return 2
    assert in_child(attempt) == 0


def test_dropping_capabilities_empties_every_set():
    """After drop_capabilities(), are the effective, permitted, inheritable, bounding and ambient sets empty?"""
    def attempt() -> int:
        linux.drop_capabilities()
        st = linux.status()
        return 0 if all(int(st[k], 16) == 0 for k in ("CapEff", "CapPrm", "CapInh", "CapAmb")) else 1
    assert in_child(attempt) == 0


def test_no_new_privs_and_dumpable_stick():
    """Do no_new_privs and the non-dumpable flag show in /proc/self/status and prctl?"""
    def attempt() -> int:
        linux.set_no_new_privs()
        linux.set_dumpable(False)
        return 0 if linux.status()["NoNewPrivs"] == "1" and linux.prctl(3) == 0 else 1
    assert in_child(attempt) == 0


def test_a_malformed_seccomp_program_is_refused_before_the_kernel_sees_it():
    """Is a program whose length is not a multiple of 8 bytes refused with ValueError?"""
    with pytest.raises(ValueError):
        linux.apply_seccomp(b"\x00" * 12)
    with pytest.raises(ValueError):
        linux.apply_seccomp(b"")
