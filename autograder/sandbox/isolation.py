"""Linux isolation, from the trusted side: what the sandbox may see, which system calls student
code may make, the cgroup around a host, and what this machine supports.

Layers (the names recorded in results.json and printed by `course doctor`):

    bubblewrap         the zygote runs in bubblewrap: new PID, network, IPC and UTS namespaces
                       (and a user namespace when not started by root), --die-with-parent,
                       --new-session
    allow-list-fs      its filesystem is a read-only allow-list: the interpreter and its standard
                       library, the system's shared libraries, numpy, the sandbox's own modules
                       (and their bytecode, read-only: usercache.sandbox_bytecode);
                       nothing of the course folder, the home folder or the grader's /proc
    no-network         only a loopback interface
    unprivileged-uid   no process of the sandbox runs as root (started by root: a real drop to
                       an unused uid, not a user-namespace mapping of root)
    user-namespace, pid-namespace, mount-namespace, ipc-namespace, uts-namespace
                       per submission: everything of one submission dies with it
    fresh-proc         per submission: /proc shows the submission's processes only
    private-scratch    per submission: a size-limited tmpfs; the notebook's folder is read-only
                       for the problems, each problem gets an empty writable folder
    no-capabilities, no-new-privs, non-dumpable, seccomp, rlimits, process-limit
                       the template (the process that runs the notebook) and all its forks
    cgroup             the host's processes in a cgroup with pids.max and a memory limit (root only)

REQUIRED are the layers `course autograde` insists on unless `--insecure` is given.
"""
from __future__ import annotations

import ctypes
import errno
import importlib.util
import os
import shutil
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from .. import tempdirs, usercache
from . import linux

REQUIRED = ("bubblewrap", "allow-list-fs", "no-network", "unprivileged-uid", "user-namespace",
            "pid-namespace", "mount-namespace", "fresh-proc", "private-scratch", "no-capabilities",
            "no-new-privs", "non-dumpable", "seccomp", "rlimits", "process-limit")
OPTIONAL = ("cgroup", "ipc-namespace", "uts-namespace", "random-pids")

DESCRIPTIONS = {
    "bubblewrap": "the sandbox runs in bubblewrap (new PID, network, IPC, UTS namespaces)",
    "allow-list-fs": "read-only allow-list: interpreter, stdlib, shared libraries, numpy, sandbox modules",
    "no-network": "only a loopback interface",
    "unprivileged-uid": "no sandbox process runs as root",
    "user-namespace": "per submission",
    "pid-namespace": "per submission: all its processes die with it",
    "mount-namespace": "per submission",
    "fresh-proc": "/proc shows the submission's own processes only",
    "private-scratch": "per submission tmpfs; notebook folder read-only for problems",
    "no-capabilities": "student code holds no capability",
    "no-new-privs": "no way to gain privileges (setuid files, ...)",
    "non-dumpable": "student processes cannot read each other's memory",
    "seccomp": "ptrace, mount, namespaces, keyrings, bpf, exec, new IPC channels denied",
    "rlimits": "address space, CPU time, file size, open files",
    "process-limit": "RLIMIT_NPROC in the submission's own user namespace",
    "cgroup": "pids.max and a memory limit around the sandbox",
    "ipc-namespace": "per submission",
    "uts-namespace": "per submission",
    "random-pids": "each problem process gets a process id at random (no channel through the id counter)",
}

SANDBOX_UID = 1_999_999_999        # used when the grader runs as root: owns no file on the machine
LIB = "/sandbox/lib"               # numpy and the sandbox's modules, seen from inside
CHILD_MODULES = ("__init__.py", "linux.py", "protocol.py", "child.py", "zygote.py")
ENGINE_MODULES = ("__init__.py", "text.py")      # of the package itself (text.py: standard library only)

# --------------------------------------------------------------------------- seccomp

# System calls denied (EPERM) to the template, the problems and anything they start. Each group
# says what it would otherwise allow.
STUDENT_DENIED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd"),
     "reading or steering another process"),
    (("mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
      "fsmount", "fspick", "mount_setattr"),
     "changing what the filesystem shows (removing covers, remounting read-write)"),
    (("setns", "unshare"), "entering or creating namespaces"),
    (("keyctl", "add_key", "request_key"), "the kernel keyring"),
    (("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register"),
     "kernel interfaces often used in exploits"),
    (("kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
      "swapon", "swapoff", "acct", "quotactl", "syslog", "open_by_handle_at", "name_to_handle_at",
      "lookup_dcookie", "fanotify_init", "personality", "uselib", "vhangup"),
     "administering the machine"),
    (("execve", "execveat"), "running other programs"),
    (("sched_setaffinity",), "leaving the CPU the sandbox is held on (sandbox_cpus: spread), to crowd the "
                             "CPUs of other workers' sandboxes"),
    (("socket", "socketpair", "pipe", "pipe2", "memfd_create", "eventfd", "eventfd2", "mq_open",
      "shmget", "shmat", "msgget", "semget"),
     "new channels between processes (one problem's checks passing data to the next)"),
)
# Denied to the zygote and the processes it starts before student code (they need mount,
# unshare and friends to build each submission's namespaces).
HOST_DENIED = tuple(group for group in STUDENT_DENIED
                    if group[0][0] in ("ptrace", "keyctl", "bpf", "kexec_load", "execve"))

_MAP_SHARED = 0x01
_SELF_ONLY = ("prlimit64", "sched_setscheduler", "sched_setparam", "sched_setattr")
_PRIO_PROCESS, _IOPRIO_WHO_PROCESS = 0, 1
_PR_SET_DUMPABLE = 4
_TIOCSTI = 0x5412
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_CMP_NE, _SCMP_CMP_EQ, _SCMP_CMP_MASKED_EQ = 1, 4, 7


def _errno_action(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("a", ctypes.c_uint64), ("b", ctypes.c_uint64)]


class SeccompUnavailable(Exception):
    """libseccomp could not be loaded or refused the filter."""


def _libseccomp() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc}); apt-get install libseccomp2") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_ArgCmp)]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_arch_resolve_name.restype = ctypes.c_uint32
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _build(groups: tuple[tuple[tuple[str, ...], str], ...], *, student: bool) -> bytes:
    lib = _libseccomp()
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        x32 = lib.seccomp_arch_resolve_name(b"x32")
        if x32:
            lib.seccomp_arch_add(ctx, x32)        # the same rules for the x32 ABI, where the kernel has it

        def rule(name: str, action: int, *cmps: tuple[int, int, int, int]) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return                            # not a system call on this architecture
            arr = (_ArgCmp * len(cmps))(*(_ArgCmp(*c) for c in cmps)) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
            if rc != 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")

        eperm = _errno_action(errno.EPERM)
        for names, _why in groups:
            for name in names:
                rule(name, eperm)
        if student:
            rule("mmap", eperm, (3, _SCMP_CMP_MASKED_EQ, _MAP_SHARED, _MAP_SHARED))   # shared memory across forks
            # clone3's flags are out of a filter's reach: ENOSYS makes the C library fall back to clone.
            rule("clone3", _errno_action(errno.ENOSYS))
            for flag in linux.NAMESPACE_FLAGS:
                rule("clone", eperm, (0, _SCMP_CMP_MASKED_EQ, flag, flag))
            rule("prctl", eperm, (0, _SCMP_CMP_EQ, _PR_SET_DUMPABLE, 0), (1, _SCMP_CMP_NE, 0, 0))
            # Limits, priority and scheduling of the calling process only (pid 0): a problem's code
            # could otherwise lower those of the template, which every later problem is forked from
            # (data passed between problems), or of the supervisor (left without the open files it
            # sweeps the submission with).
            for name in _SELF_ONLY:
                rule(name, eperm, (0, _SCMP_CMP_NE, 0, 0))
            for name, which in (("setpriority", _PRIO_PROCESS), ("ioprio_set", _IOPRIO_WHO_PROCESS)):
                rule(name, eperm, (0, _SCMP_CMP_NE, which, 0))
                rule(name, eperm, (1, _SCMP_CMP_NE, 0, 0))
            rule("ioctl", eperm, (1, _SCMP_CMP_EQ, _TIOCSTI, 0))
        r, w = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, w)
            os.close(w)
            w = -1
            if rc != 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(r, 65536):
                chunks.append(chunk)
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)


_PROGRAMS: dict[str, bytes] = {}


def seccomp_programs() -> tuple[bytes, bytes]:
    """(host filter, student filter) as classic BPF, built once per process with libseccomp."""
    if not _PROGRAMS:
        _PROGRAMS["host"] = _build(HOST_DENIED, student=False)
        _PROGRAMS["student"] = _build(STUDENT_DENIED, student=True)
    return _PROGRAMS["host"], _PROGRAMS["student"]


# --------------------------------------------------------------------------- what the sandbox sees

@dataclass(frozen=True)
class Mount:
    kind: str            # ro-bind | dev-bind | dir | tmpfs | symlink
    source: str          # host path (symlink: its target)
    dest: str


def _python_paths() -> tuple[str, str, list[str]]:
    """(interpreter, standard library folder, extra files such as libpython) on the host."""
    exe = os.path.realpath(sys.executable)
    stdlib = os.path.realpath(sysconfig.get_paths()["stdlib"])
    extra = []
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or ""
    if libdir and soname and os.path.isfile(os.path.join(libdir, soname)):
        extra.append(os.path.realpath(os.path.join(libdir, soname)))
        if os.path.join(libdir, soname) != extra[-1]:
            extra.append(os.path.join(libdir, soname))
    return exe, stdlib, extra


def numpy_dir() -> str:
    """numpy's package folder on the host, found without importing numpy (this module is imported
    by processes that need only its names, e.g. the report of a one-student run)."""
    spec = importlib.util.find_spec("numpy")
    if spec is None or spec.origin is None:
        raise ImportError("numpy is not installed")
    return os.path.dirname(os.path.realpath(spec.origin))


def _system_library_dirs() -> list[str]:
    arch = sysconfig.get_config_var("MULTIARCH") or "x86_64-linux-gnu"
    out: list[str] = []
    for d in (f"/usr/lib/{arch}", f"/lib/{arch}", "/usr/lib64", "/lib64"):
        if os.path.isdir(d) and not os.path.islink(d) and os.path.realpath(d) not in [os.path.realpath(o) for o in out]:
            out.append(d)
    return out


def allow_list() -> list[Mount]:
    """Everything the sandbox's filesystem holds, in bubblewrap order, below an empty tmpfs root."""
    mounts: list[Mount] = []
    exe, stdlib, extra = _python_paths()
    for link in ("/lib", "/lib64", "/bin", "/sbin"):
        if os.path.islink(link):
            mounts.append(Mount("symlink", os.readlink(link), link))
    for d in _system_library_dirs():
        mounts.append(Mount("ro-bind", d, d))
    if os.path.isfile("/etc/ld.so.cache"):
        mounts.append(Mount("ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"))
    mounts.append(Mount("ro-bind", exe, exe))
    for f in extra:
        if not any(f.startswith(m.dest + "/") for m in mounts if m.kind == "ro-bind"):
            mounts.append(Mount("ro-bind", f, f))
    mounts.append(Mount("ro-bind", stdlib, stdlib))
    site = os.path.join(stdlib, "site-packages")
    if os.path.isdir(site):
        mounts.append(Mount("tmpfs", "", site))             # the interpreter's own installed packages: hidden
    numpy_folder = numpy_dir()
    mounts.append(Mount("ro-bind", numpy_folder, f"{LIB}/numpy"))
    libs = os.path.join(os.path.dirname(numpy_folder), "numpy.libs")
    if os.path.isdir(libs):
        mounts.append(Mount("ro-bind", libs, f"{LIB}/numpy.libs"))
    package = Path(__file__).resolve().parent
    modules = [(package.parent / name, f"{LIB}/autograder/{name}") for name in ENGINE_MODULES]
    modules += [(package / name, f"{LIB}/autograder/sandbox/{name}") for name in CHILD_MODULES]
    for source, dest in modules:
        mounts.append(Mount("ro-bind", str(source), dest))
        # its bytecode too, read-only, where the interpreter looks for it (or it compiles the module)
        pyc = usercache.sandbox_bytecode(source)
        if pyc is not None:
            mounts.append(Mount("ro-bind", str(pyc), importlib.util.cache_from_source(dest)))
    for dev in ("null", "zero", "full", "random", "urandom"):
        mounts.append(Mount("dev-bind", f"/dev/{dev}", f"/dev/{dev}"))
    return mounts


def bwrap_path() -> str | None:
    return shutil.which("bwrap") or (os.path.exists("/usr/bin/bwrap") and "/usr/bin/bwrap") or None


def bwrap_command(bwrap: str, zygote_args: list[str], *, as_root: bool, fd: int) -> list[str]:
    """The bubblewrap command line that starts the zygote on socket `fd`."""
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
            "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
    if not as_root:
        args.append("--unshare-user")
    args += ["--tmpfs", "/"]
    made: set[str] = {"/"}

    def parents(path: str) -> None:
        parts = Path(path).parent.parts
        for i in range(2, len(parts) + 1):
            d = str(Path(*parts[:i]))
            if d not in made:
                made.add(d)
                args.extend(["--perms", "0755", "--dir", d])

    for m in allow_list():
        parents(m.dest)
        if m.kind == "symlink":
            args += ["--symlink", m.source, m.dest]
        elif m.kind == "tmpfs":
            args += ["--perms", "0755", "--tmpfs", m.dest]
        else:
            args += [f"--{m.kind}", m.source, m.dest]
        made.add(m.dest)
    if as_root:
        args += ["--perms", "0555", "--dir", "/proc"]         # the zygote mounts it, then drops root
    else:
        args += ["--proc", "/proc"]
    args += ["--perms", "01777", "--size", str(64 * 2**20), "--tmpfs", "/tmp", "--remount-ro", "/",
             "--chdir", "/tmp"]
    return args + zygote_args


def sandbox_python() -> str:
    return os.path.realpath(sys.executable)


def readable_by_others(path: str) -> bool:
    """Can a user other than the owner reach `path` (every folder on the way searchable)?"""
    p = Path(path).resolve()
    for d in [*reversed(p.parents)]:
        try:
            if not d.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def machine_facts() -> tuple[str, ...]:
    """One line each: what on this machine decides which layers are possible."""
    import subprocess

    facts = []
    bwrap = bwrap_path()
    if bwrap:
        try:
            version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            version = "version unknown"
        facts.append(f"bubblewrap: {bwrap} ({version})")
    else:
        facts.append("bubblewrap: not installed (apt-get install bubblewrap)")
    uid = os.geteuid()
    facts.append(f"running as: uid {uid}" + (" (root: the sandbox drops to an unused uid)" if uid == 0 else ""))
    for name in ("/proc/sys/user/max_user_namespaces", "/proc/sys/kernel/unprivileged_userns_clone"):
        try:
            facts.append(f"{name[len('/proc/sys/'):].replace('/', '.')}: {Path(name).read_text().strip()}")
        except OSError:
            pass
    try:
        seccomp_programs()
        facts.append("libseccomp: available")
    except SeccompUnavailable as exc:
        facts.append(f"libseccomp: {exc}")
    facts.append(f"python in the sandbox: {sandbox_python()}")
    return tuple(facts)


# --------------------------------------------------------------------------- cgroups

class Cgroup:
    """A cgroup (v1 pids + memory controllers, or v2) for one host, below the grader's own."""

    def __init__(self, dirs: list[Path]):
        self.dirs = dirs

    @property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    @classmethod
    def create(cls, name: str, *, pids: int, memory_bytes: int) -> Cgroup | str:
        """The cgroup, or a one-line reason why none could be made."""
        if os.geteuid() != 0:
            return "not running as root"
        own = _own_cgroups()
        made: list[Path] = []
        try:
            if "" in own and Path("/sys/fs/cgroup/cgroup.controllers").exists():     # v2
                parent = Path("/sys/fs/cgroup") / own[""].lstrip("/")
                d = parent / name
                d.mkdir()
                made.append(d)
                (d / "pids.max").write_text(str(pids))
                (d / "memory.max").write_text(str(memory_bytes))
                (d / "memory.swap.max").write_text("0") if (d / "memory.swap.max").exists() else None
            else:
                for ctrl, limit_file, value in (("pids", "pids.max", pids),
                                                ("memory", "memory.limit_in_bytes", memory_bytes)):
                    if ctrl not in own or not Path(f"/sys/fs/cgroup/{ctrl}").is_dir():
                        raise OSError(f"no {ctrl} controller")
                    d = Path(f"/sys/fs/cgroup/{ctrl}") / own[ctrl].lstrip("/") / name
                    d.mkdir()
                    made.append(d)
                    (d / limit_file).write_text(str(value))
        except OSError as exc:
            for d in reversed(made):
                try:
                    d.rmdir()
                except OSError:
                    pass
            return f"cgroup: {exc.strerror or exc}"
        return cls(made)

    def set_memory(self, memory_bytes: int) -> None:
        for d in self.dirs:
            for name in ("memory.max", "memory.limit_in_bytes"):
                if (d / name).exists():
                    try:
                        (d / name).write_text(str(memory_bytes))
                    except OSError:
                        pass

    def members(self) -> set[int]:
        out: set[int] = set()
        for f in self.procs_files:
            try:
                out.update(int(pid) for pid in Path(f).read_text().split())
            except (OSError, ValueError):
                pass
        return out

    def remove(self, wait: float = 5.0) -> None:
        """Wait for the host's processes to finish dying (the kernel kills them with bubblewrap's
        PID namespace), then remove the folders."""
        end = time.monotonic() + wait
        while self.members() and time.monotonic() < end:
            time.sleep(0.01)
        for d in self.dirs:
            try:
                d.rmdir()
            except OSError:
                pass


def _own_cgroups() -> dict[str, str]:
    """controller -> this process's cgroup path ("" for cgroup v2)."""
    out = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                out[c] = path
    except OSError:
        pass
    return out


def remove_stale_cgroups(prefix: str) -> None:
    """Empty cgroups left by graders that were killed (names: prefix + <pid>-<n>, pid gone)."""
    own = _own_cgroups()
    bases = [Path("/sys/fs/cgroup") / own[""].lstrip("/")] if "" in own else []
    bases += [Path(f"/sys/fs/cgroup/{c}") / own[c].lstrip("/") for c in ("pids", "memory") if c in own]
    for base in bases:
        try:
            entries = list(base.glob(prefix + "*"))
        except OSError:
            continue
        for d in entries:
            pid = d.name[len(prefix):].split("-")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                try:
                    d.rmdir()
                except OSError:
                    pass


# --------------------------------------------------------------------------- the host's folder

HOST_DIR_PREFIX = "autograder-host-"
LEGACY_HOST_DIR_DAYS = 1.0      # unnamed folders (of earlier versions) older than this are swept too
process_start = tempdirs.process_start


def host_dir_prefix() -> str:
    """The name prefix of this process's host folders: `autograder-host-<pid>-<start>-`."""
    return tempdirs.owned_prefix(HOST_DIR_PREFIX)


def remove_stale_host_dirs(base: str | None = None) -> int:
    """Remove the host folders in `base` (default: the temporary folder) that belong to this
    user and to processes that no longer run (a killed worker, a host never closed); returns
    how many (see `autograder.tempdirs.remove_stale`)."""
    return tempdirs.remove_stale(HOST_DIR_PREFIX, base, legacy_days=LEGACY_HOST_DIR_DAYS)
