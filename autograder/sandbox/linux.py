"""Thin wrappers over the Linux system calls the sandbox needs (ctypes; standard library only).

Imported on both sides: inside the sandbox by the zygote (namespaces, mounts, capabilities,
seccomp), and by the trusted side to probe what the machine allows. Every wrapper raises
OSError with the call's name on failure.
"""
from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER,
                   CLONE_NEWPID, CLONE_NEWNET)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_BIND, MS_REC, MS_PRIVATE = 32, 1024, 4096, 16384, 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NAME = 15
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_SYS_CAPSET = 126                      # x86_64

_libc: ctypes.CDLL | None = None


def libc() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), "unshare")


def _bytes(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    _check(libc().mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data)),
           f"mount {target}")


MNT_DETACH = 2


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(libc().umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def sethostname(name: str) -> None:
    data = name.encode()
    _check(libc().sethostname(data, ctypes.c_size_t(len(data))), "sethostname")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    result = libc().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                          ctypes.c_ulong(arg4), ctypes.c_ulong(arg5))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return int(result)


def read_small(path: str) -> bytes:
    """The content of a small file (a /proc or /sys entry), read with system calls only: in a
    process just forked, Python's text-file layers (io, codecs) would run, and copy the pages
    they touch, for a few bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        parts: list[bytes] = []
        while True:
            data = os.read(fd, 65536)
            if not data:
                return b"".join(parts)
            parts.append(data)
    finally:
        os.close(fd)


def last_capability() -> int:
    try:
        return int(read_small("/proc/sys/kernel/cap_last_cap"))
    except (OSError, ValueError):
        return 40


# prctl with its argument types declared (ctypes converts plain ints; made once, at import)
_prctl_ulong = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                                ctypes.c_ulong, use_errno=True)(("prctl", libc()))


def drop_capabilities() -> None:
    """Empty the bounding, ambient, inheritable, permitted and effective capability sets."""
    for cap in range(last_capability() + 1):
        # failure ignored: without CAP_SETPCAP the bounding set cannot change (then it is empty anyway)
        _prctl_ulong(PR_CAPBSET_DROP, cap, 0, 0, 0)
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()      # two {effective, permitted, inheritable}, all zero
    _check(libc().syscall(ctypes.c_long(_SYS_CAPSET), header, data), "capset")


def set_no_new_privs() -> None:
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def set_dumpable(flag: bool) -> None:
    prctl(PR_SET_DUMPABLE, 1 if flag else 0)


def set_parent_death_signal(sig: int) -> None:
    prctl(PR_SET_PDEATHSIG, sig)


def namer(name: str) -> Callable[[], object]:
    """A call that names this process `name` (its comm: what ps, top and perf show; at most 15
    bytes kept), its arguments built once here. Bound ahead, it runs no Python-level lookups
    (student code may rebind this module's functions before a fork calls it)."""
    raw = name.encode()[:15]
    if not raw:
        raise ValueError("a process name is a non-empty string")
    return functools.partial(libc().prctl, ctypes.c_int(PR_SET_NAME), ctypes.c_char_p(raw), ctypes.c_ulong(0),
                             ctypes.c_ulong(0), ctypes.c_ulong(0))


def set_name(name: str) -> None:
    """Name this process `name` (see `namer`)."""
    namer(name)()


# clone(2)'s number where its first two arguments are the flags and the stack (NULL: the child
# continues on a copy of the caller's, as after fork)
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(os.uname().machine)
_syscall: Any = None


def fork_into(flags: int, exit_signal: int) -> int:
    """fork(2) with namespace `flags` (CLONE_NEW*): the child starts in new namespaces (with
    CLONE_NEWPID as their PID 1), without an intermediate process calling unshare(2) and forking
    again. The system call is made directly, with the interpreter lock held: neither the C
    library's nor Python's at-fork handlers run, so this is for single-threaded callers whose
    child runs only the caller's own code. Returns 0 in the child, its pid in the parent; OSError
    where the kernel or the architecture does not allow it."""
    global _syscall
    if _SYS_CLONE is None:
        raise OSError(38, "clone: not known on this architecture")
    if _syscall is None:
        _syscall = ctypes.PyDLL(None, use_errno=True).syscall
        _syscall.restype = ctypes.c_long
    pid = int(_syscall(ctypes.c_long(_SYS_CLONE), ctypes.c_ulong(flags | exit_signal), ctypes.c_void_p(None),
                       ctypes.c_void_p(None), ctypes.c_void_p(None), ctypes.c_ulong(0)))
    if pid < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"clone: {os.strerror(err)}")
    return pid


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def apply_seccomp(program: bytes) -> None:
    """Install a classic-BPF seccomp filter (as exported by libseccomp) on this thread, for good:
    it is inherited by every later child and cannot be removed. Needs no_new_privs first."""
    if len(program) % 8 or not program:
        raise ValueError("a seccomp program is a non-empty sequence of 8-byte instructions")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    _check(libc().prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                        ctypes.byref(prog), ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")


def status() -> dict[str, str]:
    """This process's /proc/self/status as a dict (Uid, CapEff, NoNewPrivs, Seccomp, ...)."""
    out: dict[str, str] = {}
    try:
        text = read_small("/proc/self/status").decode("utf-8", "replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)
