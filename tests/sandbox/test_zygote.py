"""Inside the sandbox: the process tree of a submission (supervisor as PID 1, template, one
process per problem) and what a problem process inherits: no graders, no stray descriptors,
one thread."""
from __future__ import annotations

from autograder.config import Limits

from .conftest import FAST, cells

INSPECT = """
import os, socket, sys
def modules():
    return sorted(m for m in sys.modules if m.split(".")[0] in ("autograder", "assignments", "pytest",
                                                                  "_pytest", "nbgrader", "yaml", "jinja2"))
def fds():
    return sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
def tree():
    threads = [line for line in open("/proc/self/status") if line.startswith("Threads:")][0].split()[1]
    return os.getpid(), os.getppid(), socket.gethostname(), int(threads), os.getcwd(), os.environ["HOME"]
"""


def test_a_problem_process_holds_only_the_sandbox_modules(submit):
    """Has the process answering calls imported nothing of the grading side (graders, pytest,
    nbgrader, reference answers)?"""
    mods = submit([INSPECT]).problem("p").call("modules").value
    assert set(mods) <= {"autograder", "autograder.text", "autograder.sandbox", "autograder.sandbox.linux",
                         "autograder.sandbox.protocol", "autograder.sandbox.child", "autograder.sandbox.zygote"}


def test_a_problem_process_inherits_no_stray_descriptors(submit):
    """Does a problem process hold only stdin/stdout/stderr (to /dev/null) and its own socket?"""
    fds = submit([INSPECT]).problem("p").call("fds").value
    assert len(fds) == 5 and fds[:3] == [0, 1, 2]       # the socket and listdir's own descriptor


def test_the_process_tree_of_a_submission(submit):
    """Is the supervisor PID 1, the template its child, the problem process the template's child,
    with one thread (OpenBLAS pinned), the hostname 'sandbox', the notebook's folder as cwd and a
    separate HOME?"""
    run = submit([INSPECT])
    pid, ppid, hostname, threads, cwd, home = run.problem("p").call("tree").value
    assert ppid == 2 and pid > 2 and hostname == "sandbox" and threads == 1
    assert cwd == "/tmp/notebook" and home == "/tmp/problem"


NAMES = """
import os, random
first = random.random()
def names():
    return [open(f"/proc/{pid}/comm").read().strip() for pid in (1, 2, os.getpid())]
def drawn():
    return first
"""


def test_each_process_of_a_submission_is_named_by_its_role(submit):
    """Do the supervisor, the template and a problem process carry their roles' names (what ps,
    top and perf show, and what tools/sandbox_roles.py adds up by)?"""
    names = submit([NAMES]).problem("p").call("names").value
    assert names == ["sbx-supervisor", "sbx-template", "sbx-problem"]


def test_each_notebook_draws_its_own_random_numbers(submit):
    """Does each submission's notebook start from its own `random` state (the template is forked
    without Python's at-fork handlers and reseeds `random` itself), not the zygote's?"""
    draws = {submit([NAMES]).problem("p").call("drawn").value for _ in range(3)}
    assert len(draws) == 3


def test_a_cell_timeout_starts_a_new_template(submit):
    """After a cell hangs, is the notebook run again by a fresh template (not the one that hung)?"""
    run = submit([INSPECT, "while True:\n    pass"])
    _, ppid, *_ = run.problem("p").call("tree").value
    assert run.report.cell(2).status == "timeout" and ppid > 2


def test_runs_of_one_host_are_separate_namespaces(host):
    """Do two open submissions each see themselves as PID 1's children in their own namespace?"""
    a = host.submission(cells(INSPECT), FAST)
    b = host.submission(cells(INSPECT), FAST)
    try:
        assert a.problem("p").call("tree").value[1] == b.problem("p").call("tree").value[1] == 2
    finally:
        a.close()
        b.close()


FORK_STATE = """
import random, threading
def draw():
    return random.random()
def in_a_thread():
    out = []
    t = threading.Thread(target=lambda: out.append(threading.get_ident()))
    t.start()
    t.join()
    return [len(out), threading.active_count(), threading.current_thread() is threading.main_thread()]
"""


def test_each_problem_process_reseeds_the_random_module(submit):
    """Does every problem process draw its own `random` numbers, as after os.fork (the template
    forks without Python's at-fork handlers and reseeds `random` itself)?"""
    run = submit([FORK_STATE])
    draws = [run.problem(f"p{i}").call("draw").value for i in range(3)]
    assert len(set(draws)) == 3


def test_threads_work_in_a_problem_process_forked_either_way(submit):
    """Can a problem process start and join a thread, both when the template has one thread (a
    plain fork(2)) and when the notebook left a thread running in it (os.fork)?"""
    one = submit([FORK_STATE]).problem("p").call("in_a_thread").value
    busy = submit([FORK_STATE, "import time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()"])
    two = busy.problem("p").call("in_a_thread").value
    assert one == two == [1, 1, True]


def test_the_reseed_leaves_what_numpy_random_seed_leaves():
    """Does the zygote's reseed, written straight into numpy's generator, change what
    numpy.random.seed() changes (a fresh key, its first word 0x80000000) and nothing else, and
    does it fall back to numpy.random.seed() when the state's address is not known?"""
    import numpy as np

    from autograder.sandbox import zygote

    saved, address = np.random.get_state(), zygote._mt_state
    try:
        np.random.seed()
        np.random.random(5)                             # a position other than the first
        zygote._mt_state = zygote._find_mt_state()
        assert zygote._mt_state is not None
        keys = []
        for known in (True, True, False):
            before = np.random.get_state()
            if not known:
                zygote._mt_state = None
            zygote._reseed()
            name, key, pos, has_gauss, gauss = np.random.get_state()
            assert (name, int(key[0]), pos, has_gauss, gauss) == ("MT19937", 0x80000000, before[2], 0, 0.0)
            keys.append(key.tobytes())
        assert len(set(keys)) == 3
        np.random.standard_normal()
        assert zygote._find_mt_state() is None          # a kept Gaussian: numpy.random.seed() instead
    finally:
        np.random.set_state(saved)
        zygote._mt_state = address


SIGNAL_REBOUND = """
import signal
def _refuse(*args, **kwargs):
    raise RuntimeError("the notebook's own signal helper ran")
signal._int_to_enum = _refuse
def answer():
    return 42
"""


def test_problems_are_served_when_the_notebook_rebinds_the_signal_module(submit):
    """Is a problem process started without running anything the notebook rebound in `signal`
    (the template gives each problem the notebook's signal mask back through `_signal`'s own
    function, bound before the notebook ran, not `signal.pthread_sigmask`, whose wrapper looks up
    the module's helpers when called)?"""
    assert submit([SIGNAL_REBOUND]).problem("p").call("answer").value == 42


ZOMBIES = """
import os
if os.fork() == 0:
    os._exit(0)                    # the notebook's own child: a zombie of the template once it ended
def zombies():
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = open(f"/proc/{name}/stat").read()
            except OSError:
                continue
            if stat[stat.rindex(")") + 2] == "Z":
                found.append(int(name))
    return os.getpid(), found
"""


def test_ended_problem_processes_are_reaped_by_the_template(submit):
    """Does the template reap every problem process that ended (and the notebook's own ended
    children), so that many problems in a row never leave zombies behind nor run into a small
    process limit?"""
    limits = Limits(**{**FAST.__dict__, "processes": 3})
    run = submit([ZOMBIES], limits)
    pids = set()
    for k in range(40):
        pid, zombies = run.problem(f"p{k}").call("zombies").value
        pids.add(pid)
        assert len(zombies) <= 1, zombies     # at most the problem process before this one, not yet reaped
    assert len(pids) == 40


SIGNAL_MASK = """
import signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1, signal.SIGTERM})
def blocked():
    line = [line for line in open("/proc/self/status") if line.startswith("SigBlk:")][0]
    bits = int(line.split()[1], 16)
    return sorted(n + 1 for n in range(64) if bits >> n & 1)
"""


def test_a_problem_process_gets_the_notebook_signal_mask_back(submit):
    """Does each problem process start with exactly the signals the notebook blocked blocked (the
    template blocks every signal between problems), in the first problem and in later ones?"""
    import signal

    run = submit([SIGNAL_MASK])
    for k in range(3):
        assert run.problem(f"p{k}").call("blocked").value == sorted([signal.SIGUSR1, signal.SIGTERM])


STDIO_TAMPERED = """
import os
kept = [os.open("out.txt", os.O_WRONLY | os.O_CREAT), os.open(".", os.O_RDONLY)]    # left open
os.dup2(kept[0], 1)                        # and stdout pointing at one of them
def stdio():
    fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    return fds, [os.readlink(f"/proc/self/fd/{fd}") for fd in fds[:3]]
"""


def test_a_problem_process_gets_fresh_stdio_whatever_the_notebook_left(submit):
    """When the notebook pointed stdout at a file and left descriptors open, does a problem process
    still hold /dev/null on 0-2 and nothing else but its own socket? And when it closed stdin (the
    problem's socket then arrives as descriptor 0, and stays), /dev/null on 1 and 2?"""
    run = submit([STDIO_TAMPERED])
    for k in range(2):
        fds, targets = run.problem(f"p{k}").call("stdio").value
        assert targets == ["/dev/null"] * 3
        assert len(fds) == 5 and fds[:3] == [0, 1, 2]       # the socket and listdir's own descriptor
    run = submit([STDIO_TAMPERED + "os.close(0)\n"])
    for k in range(2):
        fds, targets = run.problem(f"p{k}").call("stdio").value
        assert targets[0].startswith("socket:") and targets[1:] == ["/dev/null"] * 2
        assert len(fds) == 4 and fds[:3] == [0, 1, 2]
