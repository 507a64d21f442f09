"""What student code cannot do from inside the sandbox (real bubblewrap, as root or as an ordinary
user): see the grader's files or processes, reach the network, gain privileges, leave processes
behind, stall or kill the grader."""
from __future__ import annotations

import errno
import importlib.util
import os
import signal
import socket
from pathlib import Path

import pytest

from autograder.config import Limits
from autograder.sandbox import isolation
from autograder.sandbox.outcomes import NotebookFailed

from .conftest import FAST, LIVE_PROCESSES, cells, sandbox_processes, settled_count

ROOT = Path(__file__).resolve().parents[2]

SYSCALLS = r'''
import ctypes, errno, mmap, os
libc = ctypes.CDLL(None, use_errno=True)

def errno_of(result):
    return 0 if result == 0 else ctypes.get_errno()

def try_mount():
    return errno_of(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, None))

def try_umount():
    return errno_of(libc.umount2(b"/proc", 2))

def try_remount_rw():
    return errno_of(libc.mount(None, b"/", None, 32, None))

def try_ptrace():
    return errno_of(libc.ptrace(16, os.getppid(), None, None))     # PTRACE_ATTACH

def try_setns():
    fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
    return errno_of(libc.setns(fd, 0))

def try_unshare():
    return errno_of(libc.unshare(0x10000000 | 0x00020000))          # new user + mount namespace

def try_keyctl():
    return errno_of(libc.syscall(250, 1, 0, 0, 0, 0))

def try_bpf():
    return errno_of(libc.syscall(321, 0, 0, 0))

def try_dumpable():
    return errno_of(libc.prctl(4, 1, 0, 0, 0))

def try_shared_memory():
    try:
        mmap.mmap(-1, 4096, flags=mmap.MAP_SHARED)
        return 0
    except OSError as exc:
        return exc.errno

def try_exec():
    try:
        os.execv("/usr/bin/python3.11", ["python3"])
    except OSError as exc:
        return exc.errno

def try_pipe():
    try:
        os.pipe()
        return 0
    except OSError as exc:
        return exc.errno

def status():
    return {k: v.strip() for k, v in (line.split(":", 1) for line in open("/proc/self/status"))
            if k in ("Uid", "Gid", "CapEff", "CapPrm", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")}
'''


@pytest.fixture(scope="module")
def box(host):
    run = host.submission(cells(SYSCALLS), FAST)
    yield run.problem("attacks")
    run.close()


@pytest.mark.parametrize("name", ["try_mount", "try_umount", "try_remount_rw", "try_ptrace", "try_setns",
                                  "try_unshare", "try_keyctl", "try_bpf", "try_dumpable", "try_shared_memory",
                                  "try_exec", "try_pipe"])
def test_dangerous_system_calls_are_refused(box, name):
    """Do mount, umount2, remounting /, ptrace, setns, unshare, keyctl, bpf, becoming dumpable,
    MAP_SHARED memory, exec and new pipes fail with EPERM (the seccomp filter)?"""
    assert box.call(name).value == errno.EPERM


def test_student_code_has_no_privileges(box):
    """Does student code run as a non-root uid with every capability set empty, no_new_privs and
    a seccomp filter?"""
    st = box.call("status").value
    assert st["Uid"].split()[0] != "0" and st["Gid"].split()[0] != "0"
    for caps in ("CapEff", "CapPrm", "CapBnd", "CapAmb"):
        assert int(st[caps], 16) == 0, caps
    assert st["NoNewPrivs"] == "1" and st["Seccomp"] == "2"


def test_the_filesystem_is_an_allow_list(submit, tmp_path):
    """Is nothing of the course folder, this project, the home folders or the grader's temporary
    files visible, / read-only, and the only writable place the submission's own scratch?"""
    course = tmp_path / "course"
    course.mkdir()
    (course / "gradebook.db").write_text("scores")
    probe = f"""
import os
def look():
    seen = {{p: os.path.exists(p) for p in ({str(course)!r}, {str(ROOT)!r}, {str(tmp_path)!r}, "/home",
                                          "/etc/passwd", "/work", "/dev/shm")}}
    writes = {{}}
    for path in ({str(course / 'gradebook.db')!r}, "/evil.py", "/usr/lib/evil.so", "/dev/evil", "here.txt",
                 os.path.join(os.environ["HOME"], "mine.txt")):
        try:
            with open(path, "w") as fh:
                fh.write("x")
            writes[path] = "written"
        except OSError as exc:
            writes[path] = exc.errno
    root = sorted(os.listdir("/root")) if os.path.isdir("/root") else []
    return sorted(os.listdir("/")), seen, writes, root
"""
    run = submit([probe])
    top, seen, writes, root = run.problem("p").call("look").value
    assert set(top) <= {"usr", "lib", "lib64", "bin", "sbin", "etc", "root", "sandbox", "dev", "proc", "tmp"}
    assert set(root) <= {".pyenv"}, "of a home folder, only the interpreter's own folder (where it lives there)"
    assert not any(seen.values()), seen
    home = os.path.join("/tmp", "problem", "mine.txt")
    assert writes.pop(home) == "written"
    assert writes.pop("here.txt") == errno.EROFS, "the notebook's folder is read-only for the problems"
    assert all(v in (errno.ENOENT, errno.EROFS, errno.EACCES) for v in writes.values()), writes
    assert (course / "gradebook.db").read_text() == "scores"


def test_the_notebook_can_write_only_to_its_own_scratch(submit, tmp_path):
    """While the notebook runs, can it write in its working folder but nowhere outside the sandbox?"""
    target = tmp_path / "results.json"
    target.write_text("{}")
    run = submit([f"""
import os
open("weights.txt", "w").write("1 2 3")
try:
    open({str(target)!r}, "w").write("forged")
    forged = True
except OSError:
    forged = False
def outcome():
    return forged, open("weights.txt").read()
"""])
    assert run.problem("p").call("outcome").value == (False, "1 2 3")
    assert target.read_text() == "{}"


def test_the_grader_environment_is_not_visible(host, monkeypatch):
    """Are the grader's environment variables absent inside the sandbox?"""
    monkeypatch.setenv("AUTOGRADER_TEST_SECRET", "do-not-leak")
    run = host.submission(cells("import os\ndef env():\n    return dict(os.environ)"), FAST)
    try:
        env = run.problem("p").call("env").value
    finally:
        run.close()
    assert "AUTOGRADER_TEST_SECRET" not in env
    assert env["OPENBLAS_NUM_THREADS"] == "1" and env["PYTHONHASHSEED"] == "0"


def test_no_network(submit):
    """Is a listener on the grader's loopback unreachable, and a socket refused outright?"""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    run = submit([f"""
import socket
def connect():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=0.5).close()
        return "connected"
    except OSError as exc:
        return exc.errno
"""])
    try:
        assert run.problem("p").call("connect").value == errno.EPERM
    finally:
        listener.close()


def test_proc_shows_only_the_submission_and_hides_the_parents(submit):
    """Does /proc list only the submission's own processes, with the supervisor's and template's
    environment and memory unreadable (no /proc/<ppid>/... way out)?"""
    run = submit(["""
import os
def look():
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    out = {}
    for pid in (1, os.getppid()):
        for what in ("environ", "mem", "root/etc", "cwd", "fd"):
            try:
                path = f"/proc/{pid}/{what}"
                if what in ("root/etc", "cwd", "fd"):
                    os.listdir(path)
                else:
                    open(path, "rb").read(1)
                out[f"{pid}/{what}"] = "readable"
            except OSError as exc:
                out[f"{pid}/{what}"] = exc.errno
    return pids, os.getppid(), out
"""])
    pids, ppid, out = run.problem("p").call("look").value
    assert len(pids) == 3 and 1 in pids and ppid in pids, pids     # supervisor, template, this process
    assert all(v in (errno.EACCES, errno.EPERM) for v in out.values()), out


def test_killing_the_parents_cannot_stop_the_grader(host):
    """When student code SIGKILLs its parent, PID 1 and every process it can (kill(-1)), and tries
    the grader's own pid, does the grader carry on, that submission fail clearly and the next one work?"""
    code = f"""
import os, signal
def kill_all():
    for target in (os.getppid(), 1, -1):
        try:
            os.kill(target, signal.SIGKILL)
        except OSError:
            pass
    return "alive"
def grader_pid():
    try:
        os.kill({os.getpid()}, signal.SIGKILL)
        return "signalled"
    except OSError as exc:
        return exc.errno
"""
    run = host.submission(cells(code), FAST)
    try:
        assert run.problem("a").call("grader_pid").value in (errno.ESRCH, "signalled")
        try:
            run.problem("b").call("kill_all")
        except Exception:  # noqa: BLE001 - the call's own process is among those killed
            pass
        with pytest.raises(NotebookFailed, match="stopped after the notebook ran"):
            run.problem("c").call("grader_pid")
    finally:
        run.close()
    os.kill(os.getpid(), 0)                              # still here
    nxt = host.submission(cells("def f():\n    return 'next student'"), FAST)
    assert nxt.problem("p").call("f").value == "next student"
    nxt.close()


def test_a_fork_bomb_stays_at_the_process_limit_and_dies_with_the_submission(host):
    """Does a fork bomb of setsid children stop at the process limit, the grader stay responsive,
    and no process of it survive the submission?"""
    before = settled_count()
    bomb = """
import os, time
made = failed = 0
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        failed += 1
        continue
    if pid == 0:
        os.setsid()
        time.sleep(600)
        os._exit(0)
    made += 1
def outcome():
    return made, failed, len(live_processes(3))
""" + LIVE_PROCESSES
    limits = Limits(cell_seconds=10, total_seconds=30, call_seconds=5, memory_mb=1024, processes=16)
    run = host.submission(cells(bomb), limits)
    try:
        assert run.report.cell(1).status == "ok"
        peak = len(sandbox_processes())
        made, failed, visible = run.problem("p").call("outcome").value
        assert made <= 16 and failed >= 300 - 16
        assert visible == 3, "the bomb's children were killed before the first problem started"
        assert peak - before <= 16 + 6
    finally:
        run.close()
    assert settled_count() == before


def test_a_setsid_daemon_does_not_outlive_its_submission(host):
    """Is a double-fork + setsid daemon started by the notebook gone once the submission closes
    (and already before the first problem's checks)?"""
    before = settled_count()
    daemon = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal_name = "daemon"
        while True:
            time.sleep(1)
    os._exit(0)
time.sleep(0.2)
def procs():
    return len([p for p in os.listdir("/proc") if p.isdigit()])
"""
    run = host.submission(cells(daemon), FAST)
    assert settled_count() >= before + 3                     # supervisor, template, daemon
    assert run.problem("p").call("procs").value == 3
    run.close()
    assert settled_count() == before


def test_students_share_nothing_across_submissions(host):
    """Is a file one submission leaves in /tmp (or its HOME) invisible to the next submission?"""
    first = host.submission(cells("import os\nopen('/tmp/notebook/note.txt', 'w').write('from ada')\n"
                                  "def where():\n    return os.listdir('/tmp/notebook')"), FAST)
    assert first.problem("p").call("where").value == ["note.txt"]
    second = host.submission(cells("import os\ndef where():\n    return os.listdir('/tmp/notebook')"), FAST)
    try:
        assert second.problem("p").call("where").value == []
    finally:
        first.close()
        second.close()


def test_signals_to_the_zygote_or_host_are_out_of_reach(host):
    """Can student code see any process of the host outside its own submission (by pid)?"""
    run = host.submission(cells("import os\ndef probe(pids):\n"
                                "    out = []\n"
                                "    for p in pids:\n"
                                "        try:\n"
                                "            os.kill(p, 0)\n"
                                "            out.append(p)\n"
                                "        except OSError:\n"
                                "            pass\n"
                                "    return out"), FAST)
    try:
        assert run.problem("p").call("probe", (list(range(4, 200)),)).value == []
    finally:
        run.close()
    assert signal.SIGKILL                                   # the grader is still here to assert


# --------------------------------------------------------------------------- the plan, from outside

def test_the_allow_list_holds_no_course_or_project_path():
    """Does the sandbox's filesystem plan bind only system libraries, the interpreter, numpy and the
    sandbox's own modules (no course folder, no other engine module, nothing writable)?"""
    mounts = isolation.allow_list()
    assert all(m.kind in ("ro-bind", "dev-bind", "symlink", "tmpfs") for m in mounts)
    modules = {f"{isolation.LIB}/autograder/{name}" for name in isolation.ENGINE_MODULES} | {
        f"{isolation.LIB}/autograder/sandbox/{name}" for name in isolation.CHILD_MODULES}
    engine = {m.dest for m in mounts if "/autograder/" in m.source and "__pycache__" not in m.dest}
    assert engine == modules
    bytecode = {m.dest for m in mounts if "__pycache__" in m.dest}     # only theirs, read-only
    assert bytecode <= {importlib.util.cache_from_source(dest) for dest in modules}
    assert all(m.kind == "ro-bind" for m in mounts if m.dest in bytecode)
    assert not any(m.source.startswith(str(ROOT / d)) for m in mounts
                   for d in ("assignments", "source", "release", "examples", "tests"))
    assert {m.dest for m in mounts if m.kind == "dev-bind"} == {f"/dev/{d}" for d in
                                                                ("null", "zero", "full", "random", "urandom")}


def test_the_bubblewrap_command_unshares_everything_and_ends_read_only():
    """Does the command line unshare PID, network, IPC and UTS (and the user namespace unless root),
    die with its parent, start a new session and remount / read-only?"""
    args = isolation.bwrap_command("/usr/bin/bwrap", ["python"], as_root=False, fd=5)
    for flag in ("--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--die-with-parent", "--new-session"):
        assert flag in args
    assert args[args.index("--remount-ro") + 1] == "/" and args[-1] == "python"
    assert "--unshare-user" not in isolation.bwrap_command("/usr/bin/bwrap", ["python"], as_root=True, fd=5)


def test_the_seccomp_programs_are_classic_bpf():
    """Are both filters non-empty BPF programs (8-byte instructions), the student's the larger?"""
    host_filter, student_filter = isolation.seccomp_programs()
    assert len(host_filter) % 8 == 0 and len(student_filter) % 8 == 0
    assert 0 < len(host_filter) < len(student_filter)


def test_a_cgroup_is_made_only_by_root_and_removed_again():
    """As root, is a cgroup with pids and memory limits created and removed; otherwise is the
    reason given?"""
    made = isolation.Cgroup.create(f"autograder-test-{os.getpid()}", pids=32, memory_bytes=2**30)
    if os.geteuid() != 0:
        assert made == "not running as root"
        return
    assert isinstance(made, isolation.Cgroup), made
    try:
        assert all(Path(f).exists() for f in made.procs_files)
    finally:
        made.remove()
    assert not any(d.exists() for d in made.dirs)


def test_a_closed_host_leaves_no_cgroup_behind():
    """As root, is the host's cgroup emptied and removed when the host closes (none when not root)?"""
    from autograder.sandbox.host import SandboxHost

    with SandboxHost() as h:
        h.start()
        cgroup = h._cgroup
        assert (cgroup is not None) == (os.geteuid() == 0)
    if cgroup is not None:
        assert not any(d.exists() for d in cgroup.dirs)


ORDINARY = '''
import collections, concurrent.futures, csv, ctypes, dataclasses, datetime, decimal, functools, hashlib, itertools
import json, logging, math, multiprocessing, pathlib, pickle, random, re, statistics, tempfile, threading, uuid
import numpy as np

def work():
    a = np.random.default_rng(0).standard_normal((300, 300))
    w = np.linalg.eigh(a @ a.T)[0]
    spectrum = np.abs(np.fft.fft(a[0])).sum()
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "a.npy"
        np.save(path, a)
        same = bool(np.array_equal(np.load(path), a))
    logging.getLogger("student").warning("a warning")
    return float(w.max()) > 0, float(spectrum) > 0, same, len(str(uuid.uuid4()))
'''


def test_ordinary_student_code_is_not_caught_by_the_filter(submit):
    """Do the usual imports, numpy linear algebra and FFT, a thread, temporary files and np.save/load
    all work under the seccomp filter and the read-only notebook folder? (Limits roomier than
    FAST: the imports and the linear algebra take seconds on a loaded machine, and this is not a
    test of limits.)"""
    run = submit([ORDINARY], Limits(cell_seconds=20.0, total_seconds=60.0, call_seconds=20.0, memory_mb=1024,
                                    submission_seconds=120.0))
    assert run.report.cell(1).status == "ok", run.report.cell(1).message
    assert run.problem("p").call("work").value == (True, True, True, 36)


# --------------------------------------------------------------------------- host folders left behind

def _host_dir(base: Path, name: str) -> Path:
    d = base / name
    d.mkdir()
    (d / "host-stderr.log").write_text("zygote said something")
    return d


def test_host_folders_of_ended_processes_are_swept_and_live_ones_kept(tmp_path):
    """Are the folders of hosts whose process ended (or whose pid now names another process)
    removed, while those of running processes, of other names and links are left alone?"""
    import subprocess
    import sys

    ended = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    started = isolation.process_start(ended.pid)
    assert started is not None
    ended.kill()
    ended.wait()
    me, mine = os.getpid(), isolation.process_start(os.getpid())
    gone = _host_dir(tmp_path, f"autograder-host-{ended.pid}-{started}-abc")
    reused = _host_dir(tmp_path, f"autograder-host-{me}-{int(mine) + 1}-abc")
    live = _host_dir(tmp_path, f"autograder-host-{me}-{mine}-abc")
    recent_legacy = _host_dir(tmp_path, "autograder-host-k2j3h4l5")
    old_legacy = _host_dir(tmp_path, "autograder-host-q9w8e7r6")
    os.utime(old_legacy, (0, 0))
    other = _host_dir(tmp_path, "something-else")
    target = _host_dir(tmp_path, "target")
    link = tmp_path / f"autograder-host-{ended.pid}-{started}-link"
    link.symlink_to(target)

    assert isolation.remove_stale_host_dirs(str(tmp_path)) == 3
    assert not gone.exists() and not reused.exists() and not old_legacy.exists()
    assert live.exists() and recent_legacy.exists() and other.exists()
    assert link.is_symlink() and (target / "host-stderr.log").exists()


def test_a_host_names_its_folder_after_its_process():
    """Does a host's folder name carry its process's pid and start time (what the sweep reads)?"""
    prefix = isolation.host_dir_prefix()
    assert prefix == f"autograder-host-{os.getpid()}-{isolation.process_start(os.getpid())}-"
