"""Inside the sandbox: the long-lived zygote and the processes it forks for each submission.

Started by the trusted side (`autograder.sandbox.host`), normally inside bubblewrap:

    python -S -s -P -m autograder.sandbox.zygote --fd N [--uid U] [--mount-proc]

Imports only the standard library, numpy and `autograder.sandbox.{linux, protocol, child}`; it
never sees graders, reference answers or other students' files. Process tree, per host:

    zygote        numpy and the child module imported; never runs student code; answers the
                  trusted side on its control socket ("submission" + the supervisor's socket and
                  the first template's, "kill")
      supervisor  forked by the zygote straight into the submission's new user, PID, mount,
                  IPC and UTS namespaces, as their PID 1 (where the kernel does not allow that,
                  a submission process in between makes them and forks it): mounts a fresh
                  /proc and the private scratch, starts the first template unasked (later ones
                  on request) and, between problems, kills every other process of the
                  submission (it keeps its capabilities in the submission's user namespace and
                  never runs student code); exits, taking the namespace with it, at end of stream
        template  drops every capability, sets no_new_privs, non-dumpable, rlimits and the
                  seccomp filter, runs the notebook, then forks ...
          problem   one per problem (and per restart), answering calls on its own socket

With `--uid` (the host was started by root) the zygote first mounts /proc for bubblewrap's PID
namespace and drops to that unprivileged uid, group list and capabilities included.
"""
from __future__ import annotations

import _random
import _signal  # type: ignore[import-not-found]  # the C functions signal wraps; no stubs
import ctypes
import functools
import gc
import os
import random
import resource
import select
import signal
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from autograder.sandbox import linux

if TYPE_CHECKING:
    from collections.abc import Callable

    from autograder.sandbox.protocol import Channel

SCRATCH = "/tmp"                  # the submission's tmpfs; the notebook and the problems get one each below it
NOTEBOOK_DIR = "notebook"         # the notebook's working folder (read-only once the notebook ran)
PROBLEM_DIR = "problem"           # a problem's writable HOME/TMPDIR, emptied between problems
SWEEP_ROUNDS = 500
# the submission's own namespaces (bubblewrap's, around the zygote, hold the network's)
SUBMISSION_NAMESPACES = (linux.CLONE_NEWUSER | linux.CLONE_NEWPID | linux.CLONE_NEWNS | linux.CLONE_NEWIPC
                         | linux.CLONE_NEWUTS)
HANDED_OVER = 75                  # a template's exit code once a single-threaded copy of it serves the problems
HANDOVER_SECONDS = 5.0            # how long that copy waits for the supervisor to take it as the template
LINGER_WAIT = 0.005               # seconds a sweep waits for a killed problem process before moving on
# Each process names itself by its role (its comm: what ps, top and perf show; `tools/sandbox_roles.py`
# adds up CPU by these names). A student's code may rename its own process: a name is for
# accounting, never for a decision.
ROLE_NAMES = {"zygote": "sbx-zygote", "submission": "sbx-submission", "supervisor": "sbx-supervisor",
              "template": "sbx-template", "problem": "sbx-problem"}

# Bound now: the notebook runs in the template and may rebind functions of `os` before the
# template forks problem processes with these.
_fork, _waitpid, _exit, _close, _chdir = os.fork, os.waitpid, os._exit, os.close, os.chdir
_WNOHANG = os.WNOHANG
_open, _dup2, _closerange, _environ = os.open, os.dup2, os.closerange, os.environ
_DEVNULL, _O_RDWR, _FD_CEILING, _fsencode = b"/dev/null", os.O_RDWR, 1 << 16, os.fsencode
_gc_freeze, _gc_callbacks = gc.freeze, gc.callbacks
# Signal functions from _signal, not signal: signal's are Python wrappers that turn every signal
# number and handler they return into enum members through the module's globals (which the notebook
# may rebind): ~40 copied pages of enum machinery in every problem process (pthread_sigmask), ~0.45
# ms and ~70 pages in every supervisor (setting each handler back to its default).
_sigmask, _SIG_BLOCK, _SIG_SETMASK = _signal.pthread_sigmask, _signal.SIG_BLOCK, _signal.SIG_SETMASK
_ALL_SIGNALS = _signal.valid_signals()
_sigpending, _sigtimedwait = _signal.sigpending, _signal.sigtimedwait
_libc_sigmask = getattr(ctypes.PyDLL(None, use_errno=True), "pthread_sigmask", None)    # PyDLL: the GIL held
_WORD_BITS = 8 * ctypes.sizeof(ctypes.c_ulong)
_SigsetWords = ctypes.c_ulong * (1024 // _WORD_BITS)
_partial, _c_int = functools.partial, ctypes.c_int
_stat, _task_dir = os.stat, "/proc/self/task"
_libc_fork = ctypes.PyDLL(None, use_errno=True).fork     # PyDLL: called with the GIL held
_get_errno = ctypes.get_errno
_seed_random, _random_inst = _random.Random.seed, random._inst
# Each role's name call, made once here: in a freshly forked process, making it (a partial and
# its ctypes arguments) would copy ~30 more pages of the zygote's heap.
_name_problem = linux.namer(ROLE_NAMES["problem"])
_name_template = linux.namer(ROLE_NAMES["template"])
_name_supervisor = linux.namer(ROLE_NAMES["supervisor"])


def _threads() -> int:
    """How many threads this process has (0 when /proc cannot tell): the link count of
    /proc/self/task is two plus that number. One stat call: reading and splitting
    /proc/self/stat made ~50 objects, whose pages every fork had copied again."""
    try:
        links = _stat(_task_dir).st_nlink
    except OSError:
        return 0
    return links - 2 if links > 2 else 0


def _pid_max() -> int | None:
    """The kernel's largest process id (None when it cannot be read, or too small to scatter in)."""
    try:
        with open("/proc/sys/kernel/pid_max", "rb") as fh:
            value = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    return value if value > 4096 else None


def _drain_signals() -> None:
    """Take every signal pending for the template (it blocks them all): a problem process could
    otherwise signal the template and a later one read that in /proc/<parent>/status, a channel
    between problems (say, from a composite's process to the processes its building blocks' calls
    are made again in, alone). One sigpending call when there is none."""
    if not _sigpending():
        return
    for _ in range(1 << 20):                       # real-time signals queue, up to RLIMIT_SIGPENDING
        if _sigtimedwait(_ALL_SIGNALS, 0) is None:
            return


def _threads_of(pid: int) -> int:
    """How many threads process `pid` has, seen from outside it (0 when /proc cannot tell): what the
    supervisor checks of a template, whose own code the notebook may have replaced."""
    try:
        links = _stat(f"/proc/{pid}/task").st_nlink
    except OSError:
        return 0
    return links - 2 if links > 2 else 0


def _fork_bare() -> int:
    """Fork a problem process (from the template) or a template (from the supervisor). With one
    thread, fork(2) is called straight from libc: Python's at-fork handlers are skipped, and
    with them ~150 copied pages and ~0.4 ms of CPU in every child. Of those handlers,
    `threading`'s only renews locks no other thread can hold (there is none) and `random`'s
    reseeds its global generator, which is done here the cheap way (as the handler does, minus
    its Python-level wrapper). Handlers a notebook registered itself (os.register_at_fork) do not
    run in the problem process. With more threads (a notebook that started one), os.fork as usual."""
    if _threads() != 1:
        return _fork()
    pid = int(_libc_fork())
    if pid < 0:
        errno = _get_errno()
        raise OSError(errno, os.strerror(errno))
    if pid == 0:
        _seed_random(_random_inst, None)
        _random_inst.gauss_next = None      # type: ignore[attr-defined]  # as Random.seed does
    return pid


def _drop_privileges(uid: int) -> None:
    """From root to `uid`: no supplementary groups, no capabilities (bounding set included)."""
    for cap in range(linux.last_capability() + 1):
        linux.prctl(linux.PR_CAPBSET_DROP, cap)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)           # clears the permitted and effective sets
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("the uid did not change")


def _descendants(root: int) -> dict[int, tuple[str, int]]:
    """pid -> (state, parent pid) of every process below `root` (read from /proc)."""
    parent: dict[int, int] = {}
    state: dict[int, str] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open(f"/proc/{name}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            text = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        fields = text[text.rindex(b")") + 2:].split(None, 2)
        if len(fields) < 2:
            continue
        pid = int(name)
        parent[pid] = int(fields[1])
        state[pid] = fields[0].decode("ascii", "replace")
    out = {}
    for pid in parent:
        p, hops = pid, 0
        while p in parent and hops < 10_000:
            p = parent[p]
            hops += 1
            if p == root:
                out[pid] = (state[pid], parent[pid])
                break
    return out


def _reaped() -> Iterator[tuple[int, int]]:
    """(pid, returncode) of every child that has ended, reaping it (never blocks)."""
    while True:
        try:
            pid, status = _waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, _returncode(status)


def _drain_children() -> None:
    """Reap every child that has ended (never blocks), keeping nothing of how: what `_reaped`
    does without its generator, tuples and return codes, for the template's fork path, where
    each object made is a page of its heap written again after every fork."""
    while True:
        try:
            pid, _ = _waitpid(-1, _WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when process `pid` ends (None where the kernel has none)."""
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None


def _wait_ended(handles: list[int], seconds: float) -> None:
    """Wait until every process behind these pidfds has ended (at most `seconds`); close them."""
    try:
        poller = select.poll()
        for handle in handles:
            poller.register(handle, select.POLLIN)
        left = len(handles)
        end = time.monotonic() + seconds
        while left > 0:
            wait = end - time.monotonic()
            if wait <= 0:
                break
            ready = poller.poll(int(wait * 1000) + 1)
            for handle, _ in ready:
                poller.unregister(handle)
                left -= 1
    finally:
        for handle in handles:
            os.close(handle)


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return -1


def _problem_fds(fd: int) -> None:
    """`_only_fds(fd)` in a problem process, the same system calls made without its set and list
    arithmetic or a path to encode: each object made here would land on a page of the template's
    heap that this process then copies."""
    if fd <= 2:
        _only_fds(fd)
        return
    devnull = _open(_DEVNULL, _O_RDWR)
    _dup2(devnull, 0)
    _dup2(devnull, 1)
    _dup2(devnull, 2)
    _closerange(3, fd)                  # /dev/null's descriptor too, when it is not one of 0-2
    _closerange(fd + 1, _FD_CEILING)


def _sigmask_setter(mask: set[int]) -> Callable[[], object] | None:
    """A call that sets this thread's signal mask to `mask`, its arguments built once here:
    libc's pthread_sigmask on a prebuilt sigset_t (glibc's: 1024 bits, signal n at bit n - 1),
    returning 0 on success. _signal.pthread_sigmask would also build the old mask as a set of
    ints: ~20 copied pages in every problem process. None where libc has no such function."""
    if _libc_sigmask is None:
        return None
    words = _SigsetWords()
    for sig in mask:
        if 0 < sig <= 1024:
            words[(sig - 1) // _WORD_BITS] |= 1 << ((sig - 1) % _WORD_BITS)
    return _partial(_libc_sigmask, _c_int(_SIG_SETMASK), words, None)


def _only_fds(*keep: int) -> None:
    """fd 0-2 to /dev/null, every other descriptor closed except `keep`."""
    devnull = _open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        if fd not in keep and fd != devnull:
            _dup2(devnull, fd)
    start = 3
    for fd in sorted(set(keep)) + [_FD_CEILING]:
        if fd >= start:
            _closerange(start, fd)
            start = fd + 1


def _mountinfo() -> dict[str, str]:
    out = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 5:
                    out[fields[4]] = fields[5]
    except OSError:
        pass
    return out


# --------------------------------------------------------------------------- the zygote

class Zygote:
    def __init__(self, chan: Channel, config: dict[str, Any]):
        self.chan = chan
        self.student_filter = bytes(config["student_filter"]) if config.get("student_filter") is not None else b""
        self.namespaces = bool(config.get("namespaces", True))
        self.children: dict[int, int] = {}          # submission id -> pid of its submission process
        self.ended: set[int] = set()                 # submission processes reaped before they were recorded
        self.alive: dict[int, int] = {}              # pid of a supervisor started by _start_isolated -> see there
        layers, problems = [], []
        host_filter = config.get("host_filter")
        try:
            linux.set_no_new_privs()
            if host_filter is not None:
                linux.apply_seccomp(bytes(host_filter))
        except OSError as exc:
            problems.append(f"host seccomp filter: {exc.strerror}")
        linux.set_dumpable(False)
        st = linux.status()
        uid = st.get("Uid", "").split()
        if uid and all(u != "0" for u in uid):
            layers.append("unprivileged-uid")
        if st.get("CapEff", "") and int(st["CapEff"], 16) == 0 and int(st.get("CapBnd", "1"), 16) == 0:
            layers.append("no-capabilities-host")
        if self._network_is_loopback_only():
            layers.append("no-network")
        self.hello = {"op": "hello", "pid": os.getpid(), "layers": layers, "problems": problems,
                      "python": sys.version.split()[0]}
        _signal.signal(_signal.SIGCHLD, self._reap)

    @staticmethod
    def _network_is_loopback_only() -> bool:
        try:
            with open("/proc/net/dev") as f:
                names = [line.split(":")[0].strip() for line in f.readlines()[2:]]
        except OSError:
            return False
        return names == ["lo"] or names == []

    def _reap(self, *_: object) -> None:
        for pid, _code in _reaped():
            self._release(pid)
            ids = [key for key, value in self.children.items() if value == pid]
            for key in ids:
                del self.children[key]
            if not ids:
                self.ended.add(pid)

    def serve(self) -> int:
        from autograder.sandbox import protocol

        self.chan.send(self.hello)
        while True:
            try:
                msg = self.chan.recv(trusted=False)
            except EOFError:
                break
            op = msg["op"]
            if op == "submission":
                fds = self.chan.recv_fds(2 if msg.get("template") is True else 1)
                self._start(msg, fds[0], fds[1] if len(fds) > 1 else None)
            elif op == "kill":
                pid = self.children.get(int(msg.get("id", -1)))
                if pid is not None:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                self.chan.send({"op": "killed", "id": msg.get("id")})
            else:
                raise protocol.ProtocolError(f"unknown op {op!r}")
        for pid in list(self.children.values()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return 0

    def _start(self, msg: dict[str, Any], sup_fd: int, nb_fd: int | None) -> None:
        pid = self._start_isolated(msg, sup_fd, nb_fd) if self.namespaces else None
        if pid is None:
            pid = self._start_forked(msg, sup_fd, nb_fd)
            if pid is None:
                return
        _close_all(sup_fd, nb_fd)
        if pid in self.ended:                        # it ended already: never signal that pid later
            self.ended.discard(pid)
            self._release(pid)
        else:
            self.children[int(msg["id"])] = pid
        self.chan.send({"op": "started", "id": msg["id"], "pid": pid})

    def _start_isolated(self, msg: dict[str, Any], sup_fd: int, nb_fd: int | None) -> int | None:
        """The submission's supervisor forked straight into its new namespaces (see
        `linux.fork_into`); None where that cannot be done (then `_start_forked`)."""
        if _threads() != 1:
            return None
        uid, gid = os.getuid(), os.getgid()          # inside, before the maps are written, they read 65534
        # The supervisor must not outlive this process, even when this one ends between the fork
        # and the supervisor's parent-death signal: this process holds the pipe's write end until
        # the supervisor ends, and the supervisor, once its signal is set, looks whether it is open.
        alive_r, alive_w = os.pipe()
        try:
            pid = linux.fork_into(SUBMISSION_NAMESPACES, signal.SIGCHLD)
        except OSError:
            _close_all(alive_r, alive_w)
            return None
        if pid == 0:
            code = 70
            try:
                self._leave()
                os.close(alive_w)
                code = _namespace_init(alive_r, sup_fd, nb_fd, msg, self.student_filter, uid, gid)
            finally:
                os._exit(code)
        os.close(alive_r)
        self.alive[pid] = alive_w
        return pid

    def _start_forked(self, msg: dict[str, Any], sup_fd: int, nb_fd: int | None) -> int | None:
        """The submission process (which makes the namespaces and forks the supervisor into them)."""
        zygote = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:                  # e.g. the process limit: this submission fails, not the host
            _close_all(sup_fd, nb_fd)
            self.chan.send({"op": "error", "id": msg.get("id"), "message": f"fork: {exc.strerror}"})
            return None
        if pid == 0:
            code = 70
            try:
                self._leave()
                code = _submission(sup_fd, nb_fd, msg, self.student_filter, self.namespaces, zygote)
            finally:
                os._exit(code)
        return pid

    def _leave(self) -> None:
        """In a child just forked from the zygote: drop what only the zygote uses (its SIGCHLD
        handler, its channel, the pipes that tell other supervisors it lives)."""
        _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
        self.chan.close()
        for held in self.alive.values():
            os.close(held)

    def _release(self, pid: int) -> None:
        held = self.alive.pop(pid, None)
        if held is not None:
            os.close(held)


# --------------------------------------------------------------------------- one submission

def _close_all(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _hung_up(fd: int) -> bool:
    """Whether every write end of the pipe whose read end is `fd` is closed."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(0))


MT_KEY_BYTES = 624 * 4             # an MT19937 state in memory: uint32 key[624], then int pos
_mt_state: int | None = None       # address of numpy's global MT19937 state (see _find_mt_state)


def _find_mt_state() -> int | None:
    """In the zygote: where the MT19937 state of numpy's global RandomState lies in memory (the
    same address in every fork), checked against what numpy.random.get_state() says is there;
    None when it does not match, or when the state keeps a Gaussian (which numpy.random.seed()
    would drop): then _reseed calls numpy.random.seed()."""
    import numpy

    try:
        address = int(numpy.random.mtrand.get_bit_generator().ctypes.state_address)
        name, key, pos, has_gauss, _ = numpy.random.get_state(legacy=True)
        raw = ctypes.string_at(address, MT_KEY_BYTES + 4)
    except (AttributeError, TypeError, ValueError):
        return None
    if (name != "MT19937" or has_gauss != 0 or raw[:MT_KEY_BYTES] != numpy.asarray(key).astype("=u4").tobytes()
            or int.from_bytes(raw[MT_KEY_BYTES:], sys.byteorder, signed=True) != pos):
        return None
    return address


def _reseed() -> None:
    """numpy's global random state, seeded afresh for this submission (as a first import of
    numpy.random would): a fork of the zygote would otherwise start from the zygote's. What
    numpy.random.seed() does (a new key from the system's entropy, its first word 0x80000000; the
    position as it was; no kept Gaussian, and the zygote keeps none), written straight into the
    generator's memory: seed() runs ~600 Python-level steps and copies ~100 pages of this process,
    ~0.7 ms of every submission."""
    if _mt_state is None:
        import numpy

        numpy.random.seed()
        return
    ctypes.memmove(_mt_state, os.urandom(MT_KEY_BYTES), MT_KEY_BYTES)
    ctypes.c_uint32.from_address(_mt_state).value = 0x80000000


def _map_own_ids(uid: int, gid: int) -> None:
    """In a user namespace just made: map this process's uid and gid to themselves (nothing else)."""
    try:
        linux.set_dumpable(True)          # writing our own uid_map needs it
        linux.write_file("/proc/self/setgroups", "deny")
        linux.write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        linux.write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    finally:
        linux.set_dumpable(False)


def _namespace_init(alive_r: int, sup_fd: int, nb_fd: int | None, msg: dict[str, Any], student_filter: bytes,
                    uid: int, gid: int) -> int:
    """The supervisor when the zygote forked it straight into the submission's namespaces (it is
    their PID 1): the parent-death signal, the uid and gid maps, then the supervisor's work."""
    _name_supervisor()
    linux.set_parent_death_signal(signal.SIGKILL)
    if _hung_up(alive_r):
        return 1                                # the zygote ended meanwhile: nothing to supervise
    os.close(alive_r)
    _reseed()
    problems: list[str] = []
    layers: list[str] = []
    try:
        _map_own_ids(uid, gid)
        layers += ["user-namespace", "ipc-namespace", "uts-namespace"]
    except OSError as exc:
        problems.append(f"per-submission namespaces: {exc.strerror or exc}")
        return Supervisor(sup_fd, msg, student_filter, layers, problems, isolated=False, first_template=nb_fd,
                          ours=2).serve()
    return Supervisor(sup_fd, msg, student_filter, layers, problems, isolated=True, first_template=nb_fd,
                      ours=2).serve()


def _submission(sup_fd: int, nb_fd: int | None, msg: dict[str, Any], student_filter: bytes, namespaces: bool,
                zygote: int) -> int:
    """The submission process, where the zygote cannot fork straight into new namespaces (see
    `_namespace_init`): new namespaces, then the supervisor as their PID 1 (which starts the
    first template at once on `nb_fd` when the trusted side sent one)."""
    linux.set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != zygote:
        return 1
    linux.set_name(ROLE_NAMES["submission"])
    _reseed()
    problems: list[str] = []
    layers: list[str] = []
    isolated = False
    if namespaces:
        uid, gid = os.getuid(), os.getgid()
        try:
            linux.unshare(SUBMISSION_NAMESPACES)
            _map_own_ids(uid, gid)
            isolated = True
            layers += ["user-namespace", "ipc-namespace", "uts-namespace"]
        except OSError as exc:
            problems.append(f"per-submission namespaces: {exc.strerror or exc}")
    if not isolated:
        return Supervisor(sup_fd, msg, student_filter, layers, problems, isolated=False, first_template=nb_fd).serve()
    # The supervisor must not outlive this process, even when this one is killed between the fork
    # and the supervisor's own parent-death signal: it holds a pipe's write end for its lifetime,
    # and the supervisor, once its signal is set, looks whether the write end is still open.
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.close(alive_w)
            linux.set_parent_death_signal(signal.SIGKILL)
            if _hung_up(alive_r):
                code = 1                        # killed meanwhile: nothing to supervise
            else:
                os.close(alive_r)
                code = Supervisor(sup_fd, msg, student_filter, layers, problems, isolated=True,
                                  first_template=nb_fd, ours=3).serve()
        finally:
            os._exit(code)
    os.close(alive_r)
    _close_all(sup_fd, nb_fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return 0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1
        except ChildProcessError:
            return 1


def _only_default_handlers() -> None:
    """Every signal back to its default action, SIGCHLD's handler excepted (set next). The
    supervisor is PID 1 of the submission's PID namespace, and the kernel passes a signal sent
    from inside the namespace to it only when it has a handler for it: Python's own SIGINT
    handler (KeyboardInterrupt) would let the student's code end the supervisor, and with it
    the submission, as a sandbox failure rather than the student's."""
    for sig in _signal.valid_signals():
        if sig != _signal.SIGCHLD and callable(_signal.getsignal(sig)):
            _signal.signal(sig, _signal.SIG_DFL)


class Supervisor:
    """PID 1 of a submission: scratch, templates, and killing whatever a problem left behind."""

    def __init__(self, sup_fd: int, msg: dict[str, Any], student_filter: bytes, layers: list[str],
                 problems: list[str], *, isolated: bool, first_template: int | None = None, ours: int = 3):
        from autograder.sandbox import protocol

        _name_supervisor()
        self.protocol = protocol
        self.chan = protocol.Channel.from_fd(sup_fd)
        self.limits = dict(msg.get("limits") or {})
        self.student_filter = student_filter
        self.layers = layers
        self.problems = problems
        self.isolated = isolated
        self.ours = ours                            # processes of the submission's user namespace not the student's
        self.template: int | None = None
        self.first_template = first_template       # socket for a template to start without being asked
        self.exits: dict[int, int] = {}             # pid -> returncode of children reaped here
        self.frozen = False
        self.handover: int | None = None            # read end of the pipe the template names its successor on
        self.pid_max = _pid_max()                    # None: process ids are not scattered (_scatter_pids)
        self.pids_scattered = False
        self.lingering = False                      # a process signalled by the last sweep may not have ended yet
        self.dirs_made: list[str] = []
        self.problem_times: tuple[int, int, int] | None = None     # the problems' folder's times as mounted
        scratch_mb = int(self.limits.get("scratch_mb", 64))
        self.tmpfs_options = f"size={scratch_mb}m,mode=0700,nr_inodes=4096"
        if isolated:
            linux.set_parent_death_signal(signal.SIGKILL)
            self.scratch = SCRATCH
            self._mount_private()
        else:
            import tempfile

            linux.prctl(36, 1)                      # PR_SET_CHILD_SUBREAPER: orphans come back here
            self.scratch = tempfile.mkdtemp(prefix="autograder-submission-")
            self.dirs_made.append(self.scratch)
            for d in (NOTEBOOK_DIR, PROBLEM_DIR):
                os.mkdir(os.path.join(self.scratch, d), 0o700)
        self.notebook_dir = os.path.join(self.scratch, NOTEBOOK_DIR)
        self.problem_dir = os.path.join(self.scratch, PROBLEM_DIR)
        _only_default_handlers()
        _signal.signal(_signal.SIGCHLD, self._reap)

    def _mount_private(self) -> None:
        try:
            linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)
            self.layers.append("mount-namespace")
        except OSError as exc:
            self.problems.append(f"private mounts: {exc.strerror}")
            return
        try:
            linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
            if os.getpid() == 1 and sorted(p for p in os.listdir("/proc") if p.isdigit()) == ["1"]:
                self.layers += ["pid-namespace", "fresh-proc"]
        except OSError as exc:
            self.problems.append(f"a fresh /proc: {exc.strerror}")
        try:
            flags = linux.MS_NOSUID | linux.MS_NODEV
            linux.mount("tmpfs", SCRATCH, "tmpfs", flags, "size=1m,mode=0755,nr_inodes=64")
            for d in (NOTEBOOK_DIR, PROBLEM_DIR):
                path = os.path.join(SCRATCH, d)
                os.mkdir(path, 0o700)
                if d == PROBLEM_DIR:
                    self._mount_problem_dir(path)
                else:
                    linux.mount("tmpfs", path, "tmpfs", flags, self.tmpfs_options)
            linux.mount(None, SCRATCH, None, linux.MS_REMOUNT | linux.MS_RDONLY | flags)
            self.layers.append("private-scratch")
        except OSError as exc:
            self.problems.append(f"private scratch: {exc.strerror}")
        try:
            linux.sethostname("sandbox")
        except OSError:
            pass

    # ---- process bookkeeping
    def _scatter_pids(self) -> None:
        """Set the submission's PID namespace to hand out its next process id at random: ids come
        in order, so a problem process that forks to move the counter (or just notes its own id)
        could tell a later one what it did (that one forked alone, say, for a building block's
        call made again), a channel between problems. Done where this process may (it holds the
        capability over the namespace it made: as root); `self.pids_scattered` says whether it could."""
        if self.pid_max is None:
            return
        try:
            fd = os.open("/proc/sys/kernel/ns_last_pid", os.O_WRONLY)
            try:
                os.write(fd, str(300 + int.from_bytes(os.urandom(4), "big") % (self.pid_max - 600)).encode())
            finally:
                os.close(fd)
            self.pids_scattered = True
        except (OSError, ValueError):
            self.pid_max = None                    # not here: never tried again

    def _reap(self, *_: object) -> None:
        for pid, code in _reaped():
            self.exits[pid] = code
            if pid == self.template:
                self.template = self._successor() if code == HANDED_OVER else None

    def _successor(self) -> int | None:
        """The template's single-threaded copy, once the template handed over to it (see
        `_hand_over`): the pid the template wrote, if it is a live child of this process (as the
        template's orphan, it is). Read once; the pipe is closed."""
        fd, self.handover = self.handover, None
        if fd is None:
            return None
        try:
            raw = os.read(fd, 8)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(raw) != 8:
            return None
        pid = int.from_bytes(raw, "big")
        found = _descendants(os.getpid()).get(pid)
        if found is None or found[1] != os.getpid() or found[0] in ("Z", "X"):
            return None
        return pid if _threads_of(pid) <= 1 else None     # a copy with threads is no successor (swept)

    def _sweep(self, keep: set[int], *, linger: int = 0) -> tuple[int, bool]:
        """SIGKILL every process below this one except `keep`, until none is left.
        With `linger`, up to that many children of the template (problem processes) signalled
        here may still be on their way out when this returns (a process with SIGKILL pending
        runs no more code, and one that was about to start a child is caught by the next look);
        any other process is waited for. Sets `self.lingering` to whether one may still be on
        its way out.
        Returns (processes signalled, whether the submission is clean)."""
        me = os.getpid()
        killed: set[int] = set()
        for round_ in range(SWEEP_ROUNDS):
            found = _descendants(me)
            live = [pid for pid, (st, _) in found.items() if pid not in keep and st not in ("Z", "X")]
            new = [pid for pid in live if pid not in killed]
            may_linger = len(live) <= linger and all(found[pid][1] == self.template for pid in live)
            if not live or (not new and may_linger):
                self.lingering = bool(live)
                return len(killed), True
            handles = []
            for pid in live:
                handle = _pidfd(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(pid)
                except ProcessLookupError:
                    pass
                if handle is not None:
                    handles.append(handle)
            self._reap()
            if may_linger:
                # A problem process on its way out (it closed its socket) is usually gone within
                # a millisecond: waiting that long spares remounting its folder (see
                # _reset_problem_dir). Then look once more.
                if len(handles) == len(live):
                    _wait_ended(handles, LINGER_WAIT)
                else:
                    for handle in handles:
                        os.close(handle)
                continue
            if len(handles) == len(live):   # wait until each has ended, then look again for any it started
                _wait_ended(handles, 0.05 if round_ < 20 else 0.5)
            else:
                for handle in handles:
                    os.close(handle)
                time.sleep(0.0001 if round_ < 20 else 0.005)   # a killed process turns zombie within microseconds
        self.lingering = True
        return len(killed), False

    # ---- requests
    def serve(self) -> int:
        chan = self.chan
        if self.first_template is not None:
            self._start_template(self.first_template)
            self.first_template = None
        self._scatter_pids()
        if self.pids_scattered:
            self.layers.append("random-pids")
        chan.send({"op": "up", "layers": self.layers, "problems": self.problems})
        while True:
            try:
                msg = chan.recv(trusted=False)
            except (EOFError, OSError):
                break
            op = msg["op"]
            if op == "template":
                fds = chan.recv_fds(1)
                self._sweep(set())
                self._start_template(fds[0])
                chan.send({"op": "template"})
            elif op == "clean":
                self._reap()
                self._scatter_pids()
                if self.template is not None and _threads_of(self.template) > 1:
                    self.template = None       # a thread in it could change what the next problem starts from
                exits = dict(self.exits)
                killed, clean = self._sweep({self.template} if self.template else set(), linger=1)
                frozen = self._freeze() if not self.frozen else True
                fresh = self._reset_problem_dir()
                chan.send({"op": "clean", "killed": killed, "clean": clean and fresh, "frozen": frozen,
                           "exits": {str(k): v for k, v in exits.items()},
                           "template_alive": self.template is not None})
            elif op == "stop":
                killed, clean = self._sweep(set())
                self._reap()
                chan.send({"op": "stopped", "killed": killed, "clean": clean,
                           "exits": {str(k): v for k, v in self.exits.items()}})
            else:
                break
        self._sweep(set())
        self._cleanup()
        return 0

    def _cleanup(self) -> None:
        if not self.isolated:
            import shutil

            for d in self.dirs_made:
                shutil.rmtree(d, ignore_errors=True)

    def _freeze(self) -> bool:
        """Make the notebook's folder read-only for the problems (a read-only bind mount over it)."""
        self.frozen = True
        if not self.isolated:
            return False
        try:
            linux.mount(self.notebook_dir, self.notebook_dir, None, linux.MS_BIND)
            linux.mount(None, self.notebook_dir, None,
                        linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)
            return True
        except OSError:
            return False

    def _reset_problem_dir(self) -> bool:
        """A fresh, empty writable folder for the next problem (left as it is when it is still
        as fresh, empty, ours, mode 0700, and no process that could still write to it is on its
        way out)."""
        if self.isolated:
            if not self.lingering and self._problem_dir_untouched():
                return True
            try:
                linux.umount(self.problem_dir)
                self._mount_problem_dir(self.problem_dir)
                return True
            except OSError:
                return False
        import shutil

        shutil.rmtree(self.problem_dir, ignore_errors=True)
        try:
            os.mkdir(self.problem_dir, 0o700)
        except OSError:
            return False
        return True

    def _mount_problem_dir(self, path: str) -> None:
        """A fresh tmpfs for the problems' HOME, and the times of its folder as mounted. Without
        atime updates: only a change made to it moves its times (see _problem_dir_untouched)."""
        linux.mount("tmpfs", path, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOATIME, self.tmpfs_options)
        st = os.stat(path)
        self.problem_times = (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns)

    def _problem_dir_untouched(self) -> bool:
        """Is the problems' folder as it was mounted? Empty is not enough: a problem's code could
        leave data in the folder's own extended attributes (user.*, an ACL) or times for the next
        problem to read (any such change also moves its ctime, which no one can set). `security.*`
        attributes are the system's (an LSM's label), not the student's to set."""
        try:
            st = os.stat(self.problem_dir)
            return (st.st_mode & 0o7777 == 0o700 and st.st_uid == os.getuid() and st.st_gid == os.getgid()
                    and (st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns) == self.problem_times
                    and not os.listdir(self.problem_dir)
                    and all(name.startswith("security.") for name in os.listxattr(self.problem_dir)))
        except OSError:
            return False

    def _start_template(self, nb_fd: int) -> None:
        if self.handover is not None:
            os.close(self.handover)
        read, write = os.pipe()
        os.set_blocking(read, False)
        pid = _fork_bare()
        if pid == 0:
            code = 70
            try:
                _signal.signal(_signal.SIGCHLD, _signal.SIG_DFL)
                os.close(read)
                code = _template(nb_fd, self.limits, self.student_filter, self.notebook_dir,
                                 self.problem_dir, isolated=self.isolated, ours=self.ours, handover_fd=write)
            finally:
                os._exit(code)
        os.close(nb_fd)
        os.close(write)
        self.handover = read
        self.template = pid


# --------------------------------------------------------------------------- template and problems

def _rlimits(limits: dict[str, Any], isolated: bool, ours: int) -> list[str]:
    mb = 2**20
    cpu = int(limits.get("cpu_seconds", 600))
    wanted = [
        (resource.RLIMIT_AS, int(limits.get("memory_mb", 2048)) * mb),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, int(limits.get("file_mb", 64)) * mb),
        (resource.RLIMIT_NOFILE, int(limits.get("open_files", 64))),
        (resource.RLIMIT_CORE, 0),
    ]
    layers = ["rlimits"]
    if isolated:
        # Counted per (user namespace, uid): in the submission's own user namespace this is the
        # submission's process count, in which `ours` are not the student's: the supervisor and the
        # template (and the submission process, where the zygote could not fork the supervisor
        # straight into the namespaces).
        wanted.append((resource.RLIMIT_NPROC, int(limits.get("processes", 64)) + ours))
        layers.append("process-limit")
    for res, value in wanted:
        _, hard = resource.getrlimit(res)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(res, (value, value))
    return layers


def _hand_over(handover_fd: int) -> bool:
    """Once the notebook has run: make sure the process the problems are forked from runs nothing
    of the notebook's any more. A thread the notebook left running (or a timer's helper thread)
    would keep changing the template's memory between problems, which every later problem
    process inherits: one that watches the problems' folder could tell a process forked alone
    for a wiring's block call what an earlier problem process did. With more than one thread,
    the template forks a copy of itself (threads do not survive fork), names it to the
    supervisor on `handover_fd` and exits, taking its threads with it; the copy, once the
    supervisor has reaped the template and so taken the copy as the template (its orphan is the
    supervisor's child), serves the problems. True in the process that is to serve them; False
    when the copy cannot take over (then the notebook's state is lost, as when a template ends)."""
    if _threads() <= 1:                            # the usual case: one stat call
        _close(handover_fd)
        return True
    template, supervisor = os.getpid(), os.getppid()
    try:
        pid = _fork()                              # os.fork: Python's state made right for one thread
    except OSError:
        return False
    if pid != 0:
        try:
            os.write(handover_fd, pid.to_bytes(8, "big"))
        finally:
            _exit(HANDED_OVER)
    _close(handover_fd)
    end = time.monotonic() + HANDOVER_SECONDS
    proc = f"/proc/{template}"
    while True:                                    # its /proc entry goes when the supervisor reaps it
        try:
            _stat(proc)
        except FileNotFoundError:
            break
        except OSError:
            return False
        if time.monotonic() > end:
            return False
        time.sleep(0.0002)
    linux.set_parent_death_signal(signal.SIGKILL)
    # a fork handler of the notebook's could have started a thread in this copy too
    return os.getppid() == supervisor and _threads() == 1


def _template(nb_fd: int, limits: dict[str, Any], student_filter: bytes, notebook_dir: str, problem_dir: str, *,
              isolated: bool, ours: int = 3, handover_fd: int | None = None) -> int:
    from autograder.sandbox import child, protocol

    _name_template()
    linux.set_parent_death_signal(signal.SIGKILL)
    os.setsid()
    if handover_fd is None:
        handover_fd = _open(_DEVNULL, _O_RDWR)
    _only_fds(nb_fd, handover_fd)
    chan = protocol.Channel.from_fd(nb_fd)
    layers: list[str] = []
    try:
        os.chdir(notebook_dir)
        # item by item: environ.update() would first test its empty positional argument against
        # the Mapping ABC, whose caches it writes (~100 copied pages in every template)
        os.environ["HOME"] = os.environ["TMPDIR"] = notebook_dir
        layers += _rlimits(limits, isolated, ours)
        linux.set_dumpable(True)
        linux.write_file("/proc/self/oom_score_adj", "1000")    # under memory pressure, student code goes first
        linux.drop_capabilities()
        linux.set_no_new_privs()
        linux.set_dumpable(False)
        if student_filter:
            linux.apply_seccomp(student_filter)
    except OSError as exc:
        chan.send({"op": "setup_failed", "error": f"{exc.strerror or exc}"})
        return 71
    st = linux.status()
    if all(int(st.get(k, "1") or "1", 16) == 0 for k in ("CapEff", "CapPrm", "CapInh", "CapBnd", "CapAmb")):
        layers.append("no-capabilities")
    if st.get("NoNewPrivs") == "1":
        layers.append("no-new-privs")
    if st.get("Seccomp") == "2":
        layers.append("seccomp")
    if linux.prctl(3) == 0:                       # PR_GET_DUMPABLE
        layers.append("non-dumpable")
    chan.send({"op": "hello", "pid": os.getpid(), "layers": layers})
    runner = child.Runner(chan)
    channel = protocol.Channel.from_fd
    if not runner.run_notebook(_partial(_hand_over, handover_fd)):
        return 0

    exits: dict[int, int] = {}                     # problem processes that ended: pid -> returncode

    def collect() -> None:
        exits.update(_reaped())

    def reap(pid: int) -> int | None:
        """How problem process `pid` ended (it closed its socket, so it is on its way out)."""
        end = time.monotonic() + 2.0
        while pid not in exits and time.monotonic() < end:
            collect()
            time.sleep(0.001)
        return exits.pop(pid, None)

    def fork(fd: int) -> None:
        _drain_children()                  # how earlier problem processes ended is not asked after a fork
        _drain_signals()
        exits.clear()
        try:
            pid = _fork_bare()
        except OSError:                    # (e.g. the process limit): this problem does not start,
            _close(fd)                     # the host hears so as its socket closes; the template stays
            return
        if pid == 0:
            code = 70
            try:
                if set_mask is None or set_mask() != 0:     # (signals pending for the template are not inherited)
                    _sigmask(_SIG_SETMASK, notebook_mask)
                _name_problem()
                _problem_fds(fd)
                _chdir(notebook_path)              # again: the read-only view mounted after the notebook ran
                runner.serve_calls(channel(fd))
                code = 0
            finally:
                _exit(code)
        _close(fd)

    # The problems' HOME and TMPDIR, set once here rather than in every problem process (where
    # student code could change them anyway, as a thread the notebook left could here).
    _environ["HOME"] = _environ["TMPDIR"] = problem_dir
    # Every object the notebook left is moved out of the collector's reach: a collection in a
    # problem process then walks only what that process made, instead of writing to (and so
    # copying) every page of the inherited heap.
    _gc_freeze()
    # A collection in the template would call the notebook's gc callbacks there, between problems:
    # code of the notebook's changing the state the next problem is forked from.
    _gc_callbacks.clear()
    # No signal reaches the template from now on: a handler the notebook installed would run here,
    # between problems, and change the state every later problem is forked from (a problem's code
    # signalling its parent could so pass data to the next problem). Each problem process gets
    # the notebook's mask back.
    notebook_mask = _sigmask(_SIG_BLOCK, _ALL_SIGNALS)
    set_mask = _sigmask_setter(notebook_mask)
    notebook_path = _fsencode(notebook_dir)
    runner.serve_forks(fork, reap)
    return 0


# --------------------------------------------------------------------------- entry point

def _import_numpy_random() -> None:
    """Import numpy.random without OpenSSL. numpy.random imports `secrets`, which takes
    compare_digest from `hmac`, which imports `hashlib` and `_hashlib` and with them libcrypto:
    ~12 ms at start and a dozen memory areas (half a MiB of relocated data) that every fork of
    this process would copy and tear down. While numpy.random is imported, `hmac` is a stand-in
    holding only the compare_digest Python uses where OpenSSL is absent (the same constant-time
    comparison, from `_operator`); then it is forgotten, so that student code importing `hmac`
    or `hashlib` gets them whole, with OpenSSL, as in a fresh Python."""
    import _operator
    import types

    stand_in = None
    if "hmac" not in sys.modules:
        stand_in = types.ModuleType("hmac")
        stand_in.compare_digest = _operator._compare_digest     # type: ignore[attr-defined]
        sys.modules["hmac"] = stand_in
    try:
        import numpy.random  # noqa: F401
    finally:
        if stand_in is not None and sys.modules.get("hmac") is stand_in:
            del sys.modules["hmac"]


def _refuse_audit_hooks(event: str, _args: tuple[object, ...]) -> None:
    """An audit hook, added before any notebook runs, that keeps a notebook from adding its own
    (`sys.addaudithook` adds no hook when an earlier one raises RuntimeError for that event). A
    notebook's hook would run its code in the template after the notebook has run, on the template's
    own events (each fork is a ctypes call, which is audited), so that the processes forked from it
    could differ from one another by what they are forked for."""
    if event == "sys.addaudithook":
        raise RuntimeError("audit hooks are not available where notebooks are graded")


def main(argv: list[str]) -> int:
    fd = int(argv[argv.index("--fd") + 1])
    linux.set_name(ROLE_NAMES["zygote"])
    if "--mount-proc" in argv:
        linux.mount("proc", "/proc", "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
    if "--uid" in argv:
        _drop_privileges(int(argv[argv.index("--uid") + 1]))
    os.environ["OPENBLAS_NUM_THREADS"] = "1"      # before numpy: children fork from this process
    # imported once here, shared by every fork; numpy.random explicitly, as numpy imports it lazily
    # (~10 ms in every notebook that seeds a generator)
    _import_numpy_random()
    global _mt_state
    _mt_state = _find_mt_state()

    from autograder.sandbox import child, protocol

    child.warm_up()                               # specialised bytecode for every fork (see warm_up)
    sys.addaudithook(_refuse_audit_hooks)         # before any notebook: see _refuse_audit_hooks
    gc.collect(1)                                 # the warm-up's leftovers, before they are frozen
    gc.freeze()                                   # the same for every fork of this process
    chan = protocol.Channel.from_fd(fd)
    config = chan.recv(trusted=False)
    if config.get("op") != "config":
        return 2
    return Zygote(chan, config).serve()


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))
