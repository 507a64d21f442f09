"""The sandbox host as an operating-system process: starting it, and killing and reaping it.

The host is bubblewrap running the zygote (or, with --insecure where bubblewrap cannot run, the
zygote alone). Everything below the zygote lives in bubblewrap's PID namespace and dies with it;
processes of one submission are killed from inside, by that submission's supervisor. This class
is the one place where the trusted side kills and reaps a process.

Standard library only (no numpy), like isolation: `launch_host` starts the host before the
trusted side has imported numpy and pytest, so that the zygote boots (its interpreter, numpy)
meanwhile; SandboxHost.start then talks to it (see autograder.batch.worker).
"""
from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import SandboxUnavailable
from . import isolation

ENV_PASS_THROUGH = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
CGROUP_PREFIX = "autograder-"
CPU_LOCK_NAME = "autograder-sandbox-cpu.lock"   # in the temp folder: one sandbox starts (and picks a CPU) at a time

# Puts the shell into the given cgroups (its pid, before it becomes bubblewrap), then runs the
# command: `sh -c SCRIPT sh N procs-file... command...`.
_ENTER_CGROUPS = 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 97; shift; n=$((n-1)); done; exec "$@"'


def _kill(proc: subprocess.Popen[bytes]) -> int | None:
    if proc.returncode is not None:
        return proc.returncode
    try:
        os.killpg(proc.pid, signal.SIGKILL)      # its own session and group: nothing it started outlives it
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.wait(timeout=30)
    except subprocess.TimeoutExpired:            # stuck in the kernel; nothing more can be done
        return None


class HostProcess:
    """One running host. `kill()` is idempotent and also runs if the object is dropped."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str], pass_fds: Sequence[int],
                 log_path: Path, cgroup_procs: Sequence[str] = ()):
        argv = list(argv)
        if cgroup_procs:
            argv = ["/bin/sh", "-c", _ENTER_CGROUPS, "sh", str(len(cgroup_procs)), *cgroup_procs, *argv]
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=log, env=dict(env), pass_fds=tuple(pass_fds),
                                         start_new_session=True, close_fds=True, cwd="/")
        self._finalizer = weakref.finalize(self, _kill, self.proc)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> int | None:
        """SIGKILL the host's process group and reap it; returns its exit status."""
        self._finalizer.detach()
        return _kill(self.proc)

    def log_tail(self, limit: int = 2000) -> str:
        """The end of what the host wrote to stderr (bubblewrap's own errors, a zygote traceback)."""
        try:
            data = self.log_path.read_bytes()[-limit:]
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()


@dataclass
class LaunchedHost:
    """A host process just started (`launch_host`): its zygote boots and waits for its config on
    `sock`. What did or did not apply so far is in `layers` and `problems` (see SandboxHost)."""
    process: HostProcess
    sock: socket.socket              # the trusted side's end of the control channel
    folder: Path                     # the host's folder (its stderr log)
    cpu: int | None                  # the CPU the host is held on (None: not held)
    cgroup: isolation.Cgroup | None
    layers: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def close(self) -> None:
        """For a host never handed to a SandboxHost: kill it, remove its cgroup and folder."""
        self.sock.close()
        self.process.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
        shutil.rmtree(self.folder, ignore_errors=True)


_ids = itertools.count(1)


def launch_host(*, insecure: bool, memory_mb: int, processes: int, pin: bool, cpu: int | None,
                folder: Path | None = None) -> LaunchedHost:
    """Start bubblewrap running the zygote (with `insecure` where bubblewrap is missing: the
    zygote alone), in a new cgroup when this process may make one, held on one CPU when `pin`
    (see sandbox_cpu). `folder`: the host's folder, made here when None (the folders of hosts
    whose process was killed are removed first). Raises SandboxUnavailable."""
    problems: list[str] = []
    layers: list[str] = []
    made_folder = folder is None
    if folder is None:
        isolation.remove_stale_host_dirs()        # those of hosts whose process was killed
        folder = Path(tempfile.mkdtemp(prefix=isolation.host_dir_prefix()))
    as_root = os.geteuid() == 0
    parent, child = socket.socketpair()
    zygote_args = [isolation.sandbox_python(), "-S", "-s", "-P", "-m", "autograder.sandbox.zygote",
                   "--fd", str(child.fileno())]
    bwrap = isolation.bwrap_path()
    env = sandbox_env()
    cgroup: isolation.Cgroup | None = None
    try:
        if bwrap is None:
            if not insecure:
                raise SandboxUnavailable("the sandbox cannot be set up: bubblewrap is not installed "
                                         "(apt-get install bubblewrap); pass --insecure to grade without it "
                                         "(not for untrusted submissions)")
            problems.append("bubblewrap: not installed (apt-get install bubblewrap)")
        if bwrap is not None:
            if as_root:
                zygote_args += ["--mount-proc", "--uid", str(isolation.SANDBOX_UID)]
            argv = isolation.bwrap_command(bwrap, zygote_args, as_root=as_root, fd=child.fileno())
            layers += ["bubblewrap", "allow-list-fs"]
        else:
            # Insecure: the zygote alone, seeing this machine's files; numpy from where it is installed.
            env["PYTHONPATH"] = os.pathsep.join([str(Path(isolation.__file__).resolve().parents[2]),
                                                 os.path.dirname(isolation.numpy_dir())])
            if as_root and isolation.readable_by_others(isolation.sandbox_python()):
                zygote_args += ["--uid", str(isolation.SANDBOX_UID)]
            elif as_root:
                problems.append("unprivileged-uid: without bubblewrap the sandbox cannot drop root "
                                "(the interpreter is not readable by other users)")
            argv = zygote_args
        procs: list[str] = []
        if as_root:
            isolation.remove_stale_cgroups(CGROUP_PREFIX)
        made = isolation.Cgroup.create(f"{CGROUP_PREFIX}{os.getpid()}-{next(_ids)}",
                                       pids=processes + 16, memory_bytes=(memory_mb + 512) * 2**20)
        if isinstance(made, isolation.Cgroup):
            cgroup = made
            procs = made.procs_files
            layers.append("cgroup")
        else:
            problems.append(f"cgroup: {made} (processes are then limited by RLIMIT_NPROC, memory by "
                            f"the address-space limit)")
        try:
            with sandbox_cpu(pin, cpu) as held:
                process = HostProcess(argv, env=env, pass_fds=(child.fileno(),),
                                      log_path=folder / "host-stderr.log", cgroup_procs=procs)
        except OSError as exc:
            raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from None
    except BaseException:
        parent.close()
        if cgroup is not None:
            cgroup.remove()
        if made_folder:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        child.close()
    return LaunchedHost(process=process, sock=parent, folder=folder, cpu=held, cgroup=cgroup,
                        layers=layers, problems=problems)


def sandbox_env() -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "NUMEXPR_NUM_THREADS": "1",
        "VECLIB_MAXIMUM_THREADS": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONPATH": isolation.LIB,
        "MPLBACKEND": "Agg",
    }
    for key in ENV_PASS_THROUGH:
        if key in os.environ:
            env[key] = os.environ[key]
    return env



def _current_cpu() -> int | None:
    """The CPU this thread last ran on (field 39 of /proc/thread-self/stat), None if unknown."""
    try:
        with open("/proc/thread-self/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return None


def _quietest_cpu(allowed: set[int]) -> int | None:
    """Of the `allowed` CPUs, the one with the fewest processes held to it alone (sandboxes
    already pinned by other workers), preferring the one this thread runs on."""
    held = dict.fromkeys(allowed, 0)
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            cpus = os.sched_getaffinity(pid)
        except OSError:
            continue
        if len(cpus) == 1:
            (cpu,) = cpus
            if cpu in held:
                held[cpu] += 1
    here = _current_cpu()
    return min(held, key=lambda c: (held[c], c != here), default=None)


@contextlib.contextmanager
def sandbox_cpu(pin: bool, wanted: int | None = None) -> Iterator[int | None]:
    """Processes started inside this block (the sandbox and everything it forks) may run on one
    CPU only, when this thread may use several: `wanted` when it is one of them (a pool gives each
    of its workers its own, see autograder.batch.pool), else the one where the fewest processes are
    held already, ties going to this thread's CPU.

    A call is a round trip between the trusted process and a sandboxed one that wait for each
    other in turn. Woken on another CPU, each reply costs an inter-processor wake-up (~60 us on
    a quiet virtual machine, several times that under load); on the same CPU it is a context
    switch (~4 us). With the sandbox held on one CPU, the scheduler moves the trusted process
    next to it while they talk (`host._on_cpu`), and anywhere else when it computes alone. Only this
    thread's own affinity is changed, and it is put back at once. When this thread may run on
    `wanted` alone (a pool's warm worker holds its whole process there: SandboxHost.hold_caller),
    that CPU is yielded and nothing moves. Yields the CPU (None: not held)."""
    allowed: set[int] | None = None
    cpu: int | None = None
    lock: int | None = None
    if pin:
        with contextlib.suppress(OSError, AttributeError):
            allowed = os.sched_getaffinity(0)
            if allowed == {wanted}:           # the whole worker is held there already (its pool's choice)
                cpu, allowed = wanted, None
            elif len(allowed) > 1:
                if wanted in allowed:
                    cpu = wanted
                else:
                    lock = _lock_cpu_choice()
                    cpu = _quietest_cpu(allowed)
            if allowed is not None and cpu is not None:
                os.sched_setaffinity(0, {cpu})
            else:
                allowed = None
    try:
        yield cpu
    finally:
        if allowed is not None:
            os.sched_setaffinity(0, allowed)
        if lock is not None:
            os.close(lock)          # releases the lock: the new sandbox is now counted


def _lock_cpu_choice() -> int | None:
    """An exclusive lock on a file shared by every grader on this machine, held while a CPU is
    chosen and the sandbox started on it, so that two workers starting together see each other's
    choice. None (no lock) when the file cannot be opened. The descriptor is not inherited."""
    path = os.path.join(tempfile.gettempdir(), CPU_LOCK_NAME)
    try:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


