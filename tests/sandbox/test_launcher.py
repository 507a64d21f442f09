"""The launcher: limits, timeouts, crashes and recovery, isolation, cleanup, trusted substitutes."""
from __future__ import annotations

import gc
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.config import Limits
from autograder.sandbox.launcher import Sandbox
from autograder.sandbox.outcomes import CallTimeout, ChildCrashed, NotebookFailed, StudentRaised

from .conftest import FAST, cells, group_members, reaped

CRASHERS = """
import os, ctypes, time
import numpy as np

def ok(x):
    return x + 1

def spin():
    while True:
        pass

def sleep_forever():
    time.sleep(1000)

def hard_exit():
    os._exit(3)

def segfault():
    return ctypes.string_at(0)

def memory_bomb():
    hoard = []
    while True:
        hoard.append(np.ones(10**7))

def huge():
    return np.ones((10**6, 10**6))
"""


def test_a_cell_that_never_ends_is_stopped_and_later_cells_run(sandbox_factory):
    """Is an endless cell stopped after cell_seconds, noted, and the notebook run again without it?"""
    started = time.monotonic()
    sb = sandbox_factory(["a = 1", "while True:\n    pass", "b = a + 1", "def f():\n    return b"])
    report = sb.start()
    assert time.monotonic() - started < FAST.cell_seconds + 3
    assert [c.status for c in report.cells] == ["ok", "timeout", "ok", "ok"]
    assert report.state == "ok" and sb.call("f").value == 2
    assert "cell 2 ran longer than 1 s and was stopped" in " ".join(report.notes)


def test_a_cell_that_kills_the_process_is_recorded_and_skipped(sandbox_factory):
    """Is a cell calling os._exit recorded as crashed while the other cells still define things?"""
    sb = sandbox_factory(["import os\nos._exit(0)", "def f():\n    return 'here'"])
    report = sb.start()
    assert report.cell(1).status == "crashed" and "exited with status 0" in report.cell(1).message
    assert sb.call("f").value == "here"


def test_the_total_limit_stops_the_notebook_and_calls_say_why(sandbox_factory):
    """When the cells together exceed total_seconds, is the run a timeout and are calls refused clearly?"""
    limits = Limits(cell_seconds=1.0, total_seconds=1.5, call_seconds=1.0, memory_mb=1024)
    sb = sandbox_factory(["import time\ndef f():\n    return 1", "time.sleep(0.8)", "time.sleep(0.8)",
                          "time.sleep(0.8)"], limits)
    started = time.monotonic()
    report = sb.start()
    assert time.monotonic() - started < 8, "the total limit bounds the run"
    assert report.state == "timeout" and not report.ok
    assert [c.status for c in report.cells] == ["ok", "ok", "timeout", "not_run"]
    with pytest.raises(NotebookFailed) as info:
        sb.call("f")
    assert "did not finish within 1.5 s" in info.value.feedback


def test_a_child_that_cannot_start_is_a_crashed_run(sandbox_factory):
    """With too little memory to import numpy, is the run 'crashed' with notes, not an exception?"""
    sb = sandbox_factory(["x = 1"], Limits(cell_seconds=2, total_seconds=5, call_seconds=1, memory_mb=30))
    report = sb.start()
    assert report.state == "crashed" and report.cells[0].status == "not_run"
    assert "could not be run" in report.notes[-1]
    with pytest.raises(NotebookFailed):
        sb.call("anything")


@pytest.mark.parametrize("name", ["spin", "sleep_forever"])
def test_an_endless_call_times_out_and_a_restart_recovers(sandbox_factory, name):
    """Does a call that never returns raise CallTimeout after ~call_seconds, with restart() recovering?"""
    sb = sandbox_factory([CRASHERS])
    sb.start()
    started = time.monotonic()
    with pytest.raises(CallTimeout) as info:
        sb.call(name)
    assert FAST.call_seconds <= time.monotonic() - started < FAST.call_seconds + 5, "the call limit bounds the wait"
    assert "`" + name + "` did not return within 1 s" in info.value.feedback
    assert not sb.alive
    with pytest.raises(ChildCrashed):
        sb.call("ok", (1,))
    sb.restart()
    assert sb.call("ok", (1,)).value == 2 and sb.starts == 2


@pytest.mark.parametrize("name, reason", [
    ("hard_exit", "exited with status 3"),
    ("segfault", "segmentation fault (signal 11, SIGSEGV)"),
])
def test_a_crashing_call_raises_child_crashed_and_a_restart_recovers(sandbox_factory, name, reason):
    """Do os._exit and a segfault in a call raise ChildCrashed with the reason, then recover on restart?"""
    sb = sandbox_factory([CRASHERS])
    sb.start()
    with pytest.raises(ChildCrashed) as info:
        sb.call(name)
    assert reason in info.value.feedback and f"while running `{name}`" in info.value.feedback
    if name == "segfault":
        assert "Segmentation fault" in info.value.detail     # faulthandler's trace, instructor only
    sb.restart()
    assert sb.call("ok", (np.zeros(2),)).value.tolist() == [1.0, 1.0]


def test_a_memory_bomb_ends_in_memory_error_or_crash_never_a_hang(sandbox_factory):
    """Does a call allocating without bound end quickly (MemoryError or crash) under the memory limit?"""
    limits = Limits(cell_seconds=2, total_seconds=10, call_seconds=5, memory_mb=400)
    sb = sandbox_factory([CRASHERS], limits)
    sb.start()
    started = time.monotonic()
    with pytest.raises((StudentRaised, ChildCrashed)) as info:
        sb.call("memory_bomb")
    assert time.monotonic() - started < 10, "the memory limit ends it long before the call limit would"
    if isinstance(info.value, StudentRaised):
        assert info.value.type_name == "MemoryError"
        assert sb.call("ok", (1,)).value == 2
    with pytest.raises(StudentRaised, match="MemoryError"):
        if not sb.alive:
            sb.restart()
        sb.call("huge")


def test_limits_and_environment_inside_the_child(sandbox_factory):
    """Are rlimits set, the environment scrubbed, threads pinned to 1 and cwd a private folder?"""
    probe = """
import os, resource
def probe():
    lim = {name: resource.getrlimit(getattr(resource, name))
           for name in ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")}
    return lim, dict(os.environ), os.getcwd(), os.getsid(0) == os.getpid()
"""
    os.environ["AUTOGRADER_TEST_SECRET"] = "do-not-leak"
    try:
        sb = sandbox_factory([probe], env_extra={"EXTRA": "1"})
        report = sb.start()
    finally:
        del os.environ["AUTOGRADER_TEST_SECRET"]
    lim, env, cwd, session_leader = sb.call("probe").value
    assert lim["RLIMIT_AS"] == (1024 * 2**20, 1024 * 2**20)
    assert lim["RLIMIT_FSIZE"][0] == 64 * 2**20 and lim["RLIMIT_NOFILE"] == (64, 64)
    assert lim["RLIMIT_CORE"] == (0, 0) and 0 < lim["RLIMIT_CPU"][0] < 1000
    assert "AUTOGRADER_TEST_SECRET" not in env and env["EXTRA"] == "1"
    assert env["OPENBLAS_NUM_THREADS"] == env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"
    assert env["HOME"] == cwd and env["PYTHONHASHSEED"] == "0"
    assert session_leader
    assert {"rlimits", "process-group", "scrubbed-env", "private-tmp"} <= set(report.isolation)
    sb.close()
    assert not Path(cwd).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_as_root_the_child_has_no_network(sandbox_factory):
    """Running as root, is the child in its own network namespace (a local listener is unreachable)?"""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    probe = f"""
import socket
def connect():
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=0.5).close()
        return "connected"
    except OSError as exc:
        return type(exc).__name__
"""
    sb = sandbox_factory([probe])
    report = sb.start()
    assert "netns" in report.isolation
    assert sb.call("connect").value != "connected"
    listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_hidden_paths_are_invisible_to_the_child(sandbox_factory, tmp_path):
    """Are folders and files passed as `hide` empty/blank inside the child, and untouched outside?"""
    secret_dir = tmp_path / "answers"
    secret_dir.mkdir()
    (secret_dir / "reference.py").write_text("ANSWER = 42\n")
    secret_file = tmp_path / ".course_secret"
    secret_file.write_text("s3cret")
    probe = f"""
import os
def look():
    return os.listdir({str(secret_dir)!r}), open({str(secret_file)!r}).read()
"""
    sb = sandbox_factory([probe], hide=[secret_dir, secret_file])
    report = sb.start()
    assert "hidden-paths" in report.isolation
    assert sb.call("look").value == ([], "")
    assert (secret_dir / "reference.py").read_text() == "ANSWER = 42\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="mount namespaces need root")
def test_as_root_only_the_working_folder_is_writable(sandbox_factory, tmp_path):
    """Running as root, can the child write in its working folder but nowhere else (grader files, gradebook)?"""
    target = tmp_path / "gradebook.db"
    target.write_text("scores")
    probe = f"""
import os
def scribble():
    results = []
    for path in ("here.txt", {str(target)!r}, {str(tmp_path / 'new.txt')!r}):
        try:
            with open(path, "w") as fh:
                fh.write("x")
            results.append("written")
        except OSError as exc:
            results.append(exc.errno)
    return results
"""
    sb = sandbox_factory([probe])
    report = sb.start()
    assert "readonly-fs" in report.isolation
    import errno
    assert sb.call("scribble").value == ["written", errno.EROFS, errno.EROFS]
    assert target.read_text() == "scores"


def test_close_leaves_no_process_behind(sandbox_factory):
    """After close(), are the child and everything it started in its group gone and reaped?"""
    sb = sandbox_factory(["import subprocess\nkids = [subprocess.Popen(['sleep', '60']) for _ in range(3)]",
                          "def f():\n    return 1"])
    sb.start()
    pid = sb.pid
    assert len(group_members(pid, settle=0)) == 4
    sb.close()
    assert group_members(pid) == [] and reaped(pid)


def test_timeouts_and_crashes_leave_no_process_behind(sandbox_factory):
    """After a call timeout and a crash, is every child process of the group gone and reaped?"""
    sb = sandbox_factory([CRASHERS + "\nimport subprocess\nkid = subprocess.Popen(['sleep', '60'])"])
    pids = []
    sb.start()
    pids.append(sb.pid)
    with pytest.raises(CallTimeout):
        sb.call("spin")
    sb.restart()
    pids.append(sb.pid)
    with pytest.raises(ChildCrashed):
        sb.call("segfault")
    for pid in pids:
        assert group_members(pid) == [] and reaped(pid)


def test_a_dropped_sandbox_is_cleaned_up():
    """If a Sandbox is garbage-collected without close(), is its child killed anyway?"""
    sb = Sandbox(cells("x = 1"), FAST)
    sb.start()
    pid = sb.pid
    del sb
    gc.collect()
    assert group_members(pid) == [] and reaped(pid)


# --------------------------------------------------------------------------- substitutes

BLOCK = """
import numpy as np

def layer_norm(x, gamma, beta, eps=1e-5):
    return x * 0                                   # wrong on purpose

def pre_ln_block(x, params):
    h = layer_norm(x, params["g"], params["b"])
    return x + h

def uses_missing(x):
    return multi_head_attention(x) * 2

def bad_arguments(x):
    return layer_norm(x, None, lambda: 0)
"""


def trusted_layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True) + eps) + beta


def test_a_substitute_answers_calls_made_inside_student_code(sandbox_factory):
    """Does pre_ln_block see the trusted layer_norm during the call, and its own one afterwards?"""
    sb = sandbox_factory([BLOCK])
    sb.start()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4, 8))
    params = {"g": rng.standard_normal(8), "b": rng.standard_normal(8)}
    got = sb.call("pre_ln_block", (x, params), substitutes={"layer_norm": trusted_layer_norm}).value
    np.testing.assert_allclose(got, x + trusted_layer_norm(x, params["g"], params["b"]))
    assert np.array_equal(sb.call("pre_ln_block", (x, params)).value, x)
    assert np.array_equal(sb.call("layer_norm", (x, 1.0, 0.0)).value, x * 0)


def test_a_substitute_can_provide_a_name_the_notebook_lacks(sandbox_factory):
    """Is a substituted name usable during the call even if the notebook never defined it, and gone after?"""
    sb = sandbox_factory([BLOCK])
    sb.start()
    got = sb.call("uses_missing", (np.ones(3),), substitutes={"multi_head_attention": lambda x: x * 10}).value
    assert got.tolist() == [20.0, 20.0, 20.0]
    with pytest.raises(StudentRaised, match="NameError"):
        sb.call("uses_missing", (np.ones(3),))


def test_errors_of_a_substitute_reach_the_student_code(sandbox_factory):
    """If the trusted callable raises on the student's arguments, does the student code see that exception?"""
    sb = sandbox_factory([BLOCK])
    sb.start()

    def strict(x, gamma, beta):
        raise ValueError("gamma must be an array")

    with pytest.raises(StudentRaised) as info:
        sb.call("pre_ln_block", (np.ones((1, 8)), {"g": 1, "b": 0}), substitutes={"layer_norm": strict})
    assert (info.value.type_name, info.value.message) == ("ValueError", "gamma must be an array")
    with pytest.raises(StudentRaised) as info2:
        sb.call("bad_arguments", (np.ones(2),), substitutes={"layer_norm": trusted_layer_norm})
    assert info2.value.type_name == "TypeError" and "can only be given numbers" in info2.value.message


def test_time_in_trusted_callbacks_is_not_charged_to_the_call(sandbox_factory):
    """Does a call whose trusted callback takes longer than call_seconds still succeed?"""
    sb = sandbox_factory([BLOCK])
    sb.start()

    def slow(x, gamma, beta):
        time.sleep(FAST.call_seconds * 1.3)
        return x

    got = sb.call("pre_ln_block", (np.ones(2), {"g": 1, "b": 0}), substitutes={"layer_norm": slow}).value
    assert got.tolist() == [2.0, 2.0]


def test_the_child_cannot_call_trusted_code_it_was_not_given(sandbox_factory):
    """Is a forged callback for a name outside this call's substitutes refused?"""
    forger = """
from autograder.sandbox import protocol
import gc
def forge():
    chan = next(o for o in gc.get_objects() if isinstance(o, protocol.Channel))
    chan.send({"op": "callback", "name": "secret", "args": [], "kwargs": {}})
    return chan.recv(trusted=False)
"""
    sb = sandbox_factory([forger])
    sb.start()
    reply = sb.call("forge", substitutes={"layer_norm": trusted_layer_norm}).value
    assert reply["op"] == "error" and "not available" in reply["message"]
