"""The host: notebook runs with cell limits, a fresh process per problem, restarts from the
template, the per-submission budget, caps on what comes back, batched calls, clean-up."""
from __future__ import annotations

import itertools
import math
import os
import re
import select
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.config import Limits
from autograder.sandbox import host as host_module
from autograder.sandbox import isolation
from autograder.sandbox.host import SandboxHost, SandboxUnavailable, describe_exit
from autograder.sandbox.outcomes import (
    BadReturnValue,
    CallTimeout,
    ChildCrashed,
    FunctionMissing,
    NotebookFailed,
    SandboxError,
    StudentCodeError,
    StudentRaised,
    TimeBudgetExceeded,
)

from .conftest import FAST, LIVE_PROCESSES, cells, descendants_settled, sandbox_processes, settled_count

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


# --------------------------------------------------------------------------- the notebook run

def test_a_cell_that_never_ends_is_stopped_and_later_cells_run(submit):
    """Is an endless cell stopped after cell_seconds, noted, and the notebook run again without it?"""
    started = time.monotonic()
    run = submit(["a = 1", "while True:\n    pass", "b = a + 1", "def f():\n    return b"])
    assert time.monotonic() - started < FAST.cell_seconds + 10
    report = run.report
    assert [c.status for c in report.cells] == ["ok", "timeout", "ok", "ok"]
    assert report.state == "ok" and run.problem("p").call("f").value == 2
    assert "The 2nd code cell (`while True:`) ran longer than 2 s and was stopped" in " ".join(report.notes)


def test_a_cell_that_kills_its_process_is_recorded_and_skipped(submit):
    """Is a cell calling os._exit recorded as crashed (with the exit status) while the other cells
    still define things?"""
    run = submit(["import os\nos._exit(0)", "def f():\n    return 'here'"])
    assert run.report.cell(1).status == "crashed" and "exited with status 0" in run.report.cell(1).message
    assert run.problem("p").call("f").value == "here"


@pytest.mark.parametrize("returncode", [None, 0, 3, -9, -11, -24, -25, -6, -31, -15, -40])
def test_why_a_process_ended_is_one_clause_without_brackets(returncode):
    """Is each reason a process ended free of brackets, as the notes that quote it put it in
    brackets of their own ("(exited with status 3 (did ...))" read badly), and does it say the code?"""
    reason = describe_exit(returncode)
    assert reason and not set("()") & set(reason.replace("os._exit()", ""))
    if returncode is not None:
        assert str(abs(returncode)) in reason


def test_a_template_that_cannot_fork_fails_each_problem_not_the_notebook(submit):
    """When the process holding the notebook's state cannot fork (here the notebook lowered its own
    process limit), does each problem fail as not started, the notebook's state still there?"""
    run = submit(["import resource\nresource.setrlimit(resource.RLIMIT_NPROC, (1, 1))\ndef f():\n    return 1"])
    assert run.report.ok
    for problem in ("p", "q"):
        got = run.problem(problem).call_many([("f", (), {})])[0]
        assert isinstance(got, ChildCrashed), getattr(got, "feedback", got)
        assert "a fresh process for these checks did not start" in got.feedback

def test_the_total_limit_grades_what_the_cells_that_finished_define(submit):
    """When the cells together exceed total_seconds, is the notebook run once more up to the cell
    the time ran out in (the cells after it not run, the slow cells before it left out but for their
    definitions), its functions graded on what the cells that ran define, with a note saying so?"""
    limits = Limits(cell_seconds=3.0, total_seconds=3.0, call_seconds=1.0, memory_mb=1024, submission_seconds=30)
    # the first sleep ends ~2.4 s in (0.6 s to spare), the second would end 3.9 s in; the first does not fit in
    # three quarters of the last run (LAST_RUN_FIT), and so is left out but for its definitions
    started = time.monotonic()
    run = submit(["import time\ndef f():\n    return 1", "def g():\n    return 2\ntime.sleep(2.4)",
                  "time.sleep(1.5)", "def h():\n    return 3"], limits)
    assert time.monotonic() - started < 10, "the last run is bounded too"
    report = run.report
    assert report.state == "ok"
    assert [c.status for c in report.cells] == ["ok", "not_run", "timeout", "not_run"]
    assert run.problem("p").call("f").value == 1
    assert run.problem("q").call("g").value == 2, "a slow cell's definitions are kept"
    with pytest.raises(FunctionMissing) as missing:
        run.problem("r").call("h")
    assert missing.value.feedback == ("`h` is not defined in your notebook: the 4th code cell, which defines it, was "
                                      "not run, as your notebook reached its time limit before it; make the cells "
                                      "above it faster.")
    notes = " ".join(report.notes)
    assert "Your notebook did not finish within its time limit of 3 s: it was run again up to " \
           "the 3rd code cell (`time.sleep(1.5)`), where the time ran out, leaving out 1 slow cell" in notes
    assert "The 4th code cell (`def h`) was not run: the notebook reached its time limit of 3 s before it" in notes
    assert "this slow cell was left out, only its definitions kept (g)" in report.cell(2).note
    assert "was stopped; the notebook was then run again up to this cell, leaving it out" in report.cell(3).note


def test_endless_cells_whose_reruns_use_up_the_total_limit_leave_the_answers_graded(submit):
    """When the notebook is run again after each endless cell until the total limit is reached, is
    it run once more to the end, the endless cells left out (their reruns, not the cells that are
    left, used the time), so that the functions after them are graded too, each endless cell noted?"""
    limits = Limits(cell_seconds=1.0, total_seconds=2.5, call_seconds=1.0, memory_mb=1024, submission_seconds=30)
    started = time.monotonic()
    run = submit(["def f():\n    return 1"] + ["while True:\n    pass"] * 3 + ["def h():\n    return 3"], limits)
    assert time.monotonic() - started < 10
    assert run.report.state == "ok"
    assert [c.status for c in run.report.cells] == ["ok", "timeout", "timeout", "timeout", "ok"]
    assert run.problem("p").call("f").value == 1
    assert run.problem("q").call("h").value == 3
    for cell in (2, 3, 4):
        assert "ran longer than 1 s and was stopped; the notebook was then run again without it" \
            in run.report.cell(cell).note
    assert "Your notebook did not finish within its time limit of 2.5 s, as it was run again after each cell " \
           "stopped at its own limit: it was run once more to the end" in " ".join(run.report.notes)


def test_the_total_limit_with_no_time_left_for_a_last_run_stops_the_notebook(submit):
    """When the submission's budget leaves no time for a last run, is the run a timeout and are
    calls refused clearly?"""
    limits = Limits(cell_seconds=2.0, total_seconds=2.5, call_seconds=1.0, memory_mb=1024, submission_seconds=3.0)
    run = submit(["import time\ndef f():\n    return 1", "time.sleep(1.5)", "time.sleep(1.5)", "time.sleep(1.5)"],
                 limits)
    assert run.report.state == "timeout" and not run.report.ok
    assert [c.status for c in run.report.cells] == ["ok", "ok", "timeout", "not_run"]
    with pytest.raises(NotebookFailed) as info:
        run.problem("p").call("f")
    assert "did not finish within 2.5 s" in info.value.feedback


LAST_RUN_LIMITS = Limits(cell_seconds=2.0, total_seconds=2.5, call_seconds=1.0, memory_mb=1024, submission_seconds=30)


def test_a_slow_cell_of_definitions_alone_runs_whole_in_the_last_run(submit):
    """A cell made of definitions alone that is slow (a decorator that takes 0.9 s, as `import torch`
    can): when the notebook is run once more after its total limit, is that cell run whole, its
    time counted, the cells that define nothing left out instead, so that its function is graded?"""
    run = submit(["import time\ndef slow(fn):\n    time.sleep(0.9)\n    return fn", "@slow\ndef f():\n    return 1",
                  *["time.sleep(0.5)"] * 5], LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    assert run.report.cell(2).status == "ok"
    assert run.problem("p").call("f").value == 1


def test_the_cell_the_time_ran_out_in_runs_whole_when_made_of_definitions_alone(submit):
    """When the time runs out in a slow cell of definitions alone (a decorated `def`), does the last
    run, up to that cell, run it whole, so that its function is graded?"""
    run = submit(["import time\ndef slow(fn):\n    time.sleep(0.9)\n    return fn", "time.sleep(1.0)",
                  "time.sleep(1.0)", "@slow\ndef g():\n    return 2", "def h():\n    return 3"], LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    statuses = [c.status for c in run.report.cells]
    assert statuses[3:] == ["ok", "not_run"] and sorted(statuses[1:3]) == ["not_run", "ok"], statuses
    assert run.problem("p").call("g").value == 2
    assert "was run again up to the 4th code cell (`def g`), where the time ran out" in " ".join(run.report.notes)


def test_the_cell_the_time_ran_out_in_keeps_its_literal_assignments_with_its_definitions(submit):
    """When the time runs out in a cell that sets constants, defines a function reading one and then
    sleeps, does the last run keep the constants with the function, so that it works when graded?"""
    run = submit(["import time", "time.sleep(1.0)", "time.sleep(1.0)",
                  "K = 2\nEPS = 1e-5\ndef f(x):\n    return x * K\ntime.sleep(1.5)", "def h():\n    return 3"],
                 LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    assert [c.status for c in run.report.cells][3:] == ["timeout", "not_run"]
    assert run.report.cells[3].message.endswith("with only its definitions kept (K, EPS, f)")
    assert run.problem("p").call("f", (3,)).value == 6


def test_the_last_run_leaves_out_cells_that_define_nothing_before_slow_answer_cells(submit):
    """A slow answer cell (`K = 2`, a 0.9 s loop, a function using K) before cells that only sleep:
    are the sleeping cells left out first, so that the answer cell runs whole and K is defined?"""
    run = submit(["import time\nK = 2\ntime.sleep(0.9)\ndef f():\n    return K", *["time.sleep(0.5)"] * 5],
                 LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    assert run.report.cell(1).status == "ok"
    assert run.problem("p").call("f").value == 2


def test_the_last_run_keeps_a_slow_cell_that_sets_data_when_leaving_out_the_sleeps_is_enough(submit):
    """A slow cell that sets a name (`W = 5`, then 0.9 s) before a function using it and cells that
    only sleep: are the sleeping cells left out, not the cell setting W (it binds a name, and what
    is kept fits the last run once the sleeps are gone), so that the function is graded?"""
    run = submit(["import time\nW = 5\ntime.sleep(0.9)", "def f():\n    return W", *["time.sleep(0.5)"] * 5],
                 LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    assert run.report.cell(1).status == "ok"
    assert run.problem("p").call("f").value == 5


def test_the_last_run_keeps_whole_a_slow_cell_before_the_time_ran_out_when_it_fits(submit):
    """A cell setting K and taking 1.5 s, then a cell the time runs out in: is the first cell run
    whole in the last run (1.5 s fits in its 2.5 s with a margin), not cut to its definitions, so
    that the function reading K is graded?"""
    run = submit(["import time\nK = 2\ndef f():\n    return K\ntime.sleep(1.5)", "time.sleep(1.5)"], LAST_RUN_LIMITS)
    assert run.report.state == "ok"
    assert [c.status for c in run.report.cells] == ["ok", "timeout"]
    assert run.problem("p").call("f").value == 2


def test_after_a_cell_stopped_at_its_limit_the_last_run_stops_where_the_time_ran_out_when_the_rest_is_slow(submit):
    """An endless cell stopped at its own limit, then slow cells: the time runs out in one of them
    on the rerun. Is the last run cut there (the cells after it not run) rather than run to the
    end, which would not fit, so that the function before them is graded?"""
    limits = Limits(cell_seconds=1.0, total_seconds=2.5, call_seconds=1.0, memory_mb=1024, submission_seconds=30)
    run = submit(["def f():\n    return 1", "while True:\n    pass", *["import time\ntime.sleep(0.9)"] * 4], limits)
    assert run.report.state == "ok"
    statuses = [c.status for c in run.report.cells]
    assert statuses[:2] == ["ok", "timeout"] and statuses[-1] == "not_run", statuses
    assert run.problem("p").call("f").value == 1
    assert "where the time ran out" in " ".join(run.report.notes)


def test_a_last_run_that_runs_out_too_fails_the_notebook_with_one_note_naming_its_own_limit(submit):
    """When the last run runs out of time too (a cell fast the first time, slow the second), is the
    note on grading what ran dropped, leaving only the one that the notebook could not be run to the
    end, and does it name the last run's own limit (half of the budget left, under total_seconds)?"""
    again = "import os, time\nif os.path.exists('mark'):\n    time.sleep(5)\nopen('mark', 'w').close()"
    limits = Limits(cell_seconds=10.0, total_seconds=2.5, call_seconds=1.0, memory_mb=1024, submission_seconds=7.0)
    started = time.monotonic()
    run = submit(["def f():\n    return 1", "import time\ntime.sleep(1.0)", again, "time.sleep(1.6)"], limits)
    assert time.monotonic() - started < 10
    assert run.report.state == "timeout"
    (note,) = run.report.messages
    found = re.search(r"it did not finish within 2\.5 s, nor when run once more within ([0-9.]+) s", note)
    assert found and 1.0 <= float(found[1]) < 2.5, note
    assert "could not be run to the end" in note
    assert f"reached that run's time limit of {found[1]} s" in run.report.cell(3).note
    with pytest.raises(NotebookFailed):
        run.problem("p").call("f")


def test_too_little_memory_for_the_notebook_is_a_clear_failure(host):
    """With an address-space limit below what the warm interpreter already uses, is the outcome a
    crashed run or a sandbox error, never a hang?"""
    started = time.monotonic()
    try:
        run = host.submission(cells("x = [0] * 10**6"), Limits(cell_seconds=2, total_seconds=5, memory_mb=30))
    except SandboxError:
        pass
    else:
        try:
            assert run.report.state == "crashed" or run.report.cell(1).status in ("error", "crashed")
        finally:
            run.close()
    assert time.monotonic() - started < 30


# --------------------------------------------------------------------------- calls, restarts

COUNTER = "_calls = []\ndef counted():\n    _calls.append(1)\n    return len(_calls)"


def test_a_call_made_alone_sees_only_the_notebooks_state_and_is_no_restart(submit):
    """Does call_alone answer from a fresh fork of the notebook's state (not the problem's earlier
    calls), the problem's next call fork afresh too, and neither count as a restart?"""
    run = submit([COUNTER])
    p = run.problem("p")
    assert [p.call("counted").value for _ in range(3)] == [1, 2, 3]
    assert p.call_alone("counted").value == 1, "nothing the problem's calls left behind"
    assert p.call("counted").value == 1, "the problem's process was ended: its next call forks afresh"
    assert p.call("counted").value == 2
    assert run.restarts == 0


THREAD_IN_TEMPLATE = """
import os, threading, time
_state = {"ticks": 0, "seen": 0}
_problem = os.path.join(os.path.dirname(os.getcwd()), "problem")
def _watch():
    while True:
        _state["ticks"] += 1
        if os.path.exists(os.path.join(_problem, "marker")):
            _state["seen"] = 1
        time.sleep(0.0005)
threading.Thread(target=_watch, daemon=True).start()
time.sleep(0.01)

def mark():
    open(os.path.join(os.environ["HOME"], "marker"), "w").close()
    time.sleep(0.1)
    return 0

def seen():
    return [_state["seen"], _state["ticks"]]
"""


def test_a_thread_the_notebook_left_running_does_not_reach_the_problems(submit):
    """With a thread of the notebook still running once it has run (one that watches the problems'
    folder), is every problem forked from a template that no longer changes: a copy of it without
    the thread, which never sees what a problem process wrote?"""
    run = submit([THREAD_IN_TEMPLATE])
    p = run.problem("p")
    first = p.call_alone("seen").value
    assert p.call_alone("mark").value == 0
    time.sleep(0.05)
    second = p.call_alone("seen").value
    assert second == first and first[0] == 0, (first, second)


SUBVERTED_THREAD_CHECK = """
import sys
for _module in list(sys.modules.values()):
    if hasattr(_module, "_threads") and callable(_module._threads):
        _module._threads = lambda: 1          # the template's own check now sees one thread
""" + THREAD_IN_TEMPLATE


def test_a_thread_kept_by_a_template_whose_check_the_notebook_replaced_does_not_reach_the_problems(submit):
    """When the notebook also replaced the template's own count of its threads (it ran in that
    process), does the supervisor, counting them from outside, keep every problem from a template
    with a thread: no problem process sees what another wrote?"""
    run = submit([SUBVERTED_THREAD_CHECK])
    p = run.problem("p")
    outcomes = []
    for name in ("seen", "mark", "seen"):
        try:
            outcomes.append(p.call_alone(name).value)
        except Exception as exc:  # noqa: BLE001 - a template refused is an outcome too
            outcomes.append(type(exc).__name__)
        time.sleep(0.05)
    assert not any(isinstance(o, list) and o[0] == 1 for o in outcomes), outcomes


HOOKS_IN_TEMPLATE = """
import gc, sys
_seen = {"events": 0, "collections": 0, "hook": True}
def _hook(event, args):
    _seen["events"] += 1
try:
    sys.addaudithook(_hook)
except RuntimeError:
    _seen["hook"] = False
gc.callbacks.append(lambda phase, info: _seen.__setitem__("collections", _seen["collections"] + 1))

def seen():
    return [_seen["events"], _seen["collections"]]

def collected():
    gc.collect()
    return seen()
"""


def test_hooks_the_notebook_set_do_not_run_in_the_template(submit):
    """With an audit hook and a gc callback set by the notebook (code that could run in the template on
    its own events and collections, between problems), is the hook never added (no event counted, even
    the notebook's own) and is every process forked alone from the same state?"""
    run = submit([HOOKS_IN_TEMPLATE])
    p = run.problem("p")
    outcomes = [p.call_alone("seen").value for _ in range(3)]
    assert outcomes[0] == outcomes[1] == outcomes[2] and outcomes[0][0] == 0, outcomes
    assert p.call_alone("collected").value == outcomes[0], "a collection calls no callback of the notebook's"


SIGNALS_TO_TEMPLATE = """
import os, signal

def arm():
    os.kill(os.getppid(), signal.SIGUSR1)
    os.kill(os.getppid(), signal.SIGRTMIN)
    return 0

def pending():
    bits = 0
    for line in open("/proc/%d/status" % os.getppid()):
        if line.startswith(("ShdPnd:", "SigPnd:")):
            bits |= int(line.split()[1], 16)
    return [bool(bits >> (signal.SIGUSR1 - 1) & 1), bool(bits >> (signal.SIGRTMIN - 1) & 1)]
"""


def test_a_signal_a_problem_process_sent_the_template_does_not_reach_the_next_one(submit):
    """When a problem process signals the template (which blocks every signal, so they stay pending),
    does a process forked after it find none of them pending there: no bit passes from one problem
    process to the next through the template's pending signals?"""
    run = submit([SIGNALS_TO_TEMPLATE])
    p = run.problem("p")
    assert p.call_alone("pending").value == [False, False]
    assert p.call_alone("arm").value == 0
    assert p.call_alone("pending").value == [False, False]


def test_process_ids_of_problem_processes_do_not_follow_one_another(submit):
    """Where the sandbox reports random-pids (as root: the supervisor may set its namespace's next id),
    is each process forked alone given an id at random, so that one cannot learn from its own id what
    an earlier one did (forked to move the counter, say)? Without the layer, ids come in order."""
    run = submit(["import os\ndef me():\n    return os.getpid()"])
    p = run.problem("p")
    pids = [p.call_alone("me").value for _ in range(6)]
    steps = [b - a for a, b in itertools.pairwise(pids)]
    in_order = all(0 < step < 50 for step in steps)
    assert in_order != ("random-pids" in run.isolation), (pids, run.isolation)
    if os.geteuid() == 0:
        assert "random-pids" in run.isolation


@pytest.mark.parametrize("name", ["spin", "sleep_forever"])
def test_an_endless_call_times_out_and_the_next_call_gets_a_fresh_fork(submit, name):
    """Does a call that never returns raise CallTimeout after ~call_seconds, and the next call run in
    a fresh fork of the template (a restart) without running the notebook again?"""
    run = submit([CRASHERS, "with open('runs.txt', 'a') as fh:\n    fh.write('ran\\n')",
                  "def runs():\n    return open('runs.txt').read().count('ran')"])
    p = run.problem("p")
    started = time.monotonic()
    with pytest.raises(CallTimeout) as info:
        p.call(name)
    assert FAST.call_seconds <= time.monotonic() - started < FAST.call_seconds + 10, "the call limit bounds the wait"
    assert "`" + name + "` did not return within 2 s" in info.value.feedback
    assert p.call("ok", (1,)).value == 2 and run.restarts == 1
    assert p.call("runs").value == 1, "the notebook ran once: restarts fork the template"


@pytest.mark.parametrize("name, reason", [
    ("hard_exit", "exited with status 3"),
    ("segfault", "segmentation fault, signal 11, SIGSEGV"),
])
def test_a_crashing_call_raises_child_crashed_with_the_reason_and_recovers(submit, name, reason):
    """Do os._exit and a segfault in a call raise ChildCrashed saying why, and the next call work?"""
    run = submit([CRASHERS])
    p = run.problem("p")
    with pytest.raises(ChildCrashed) as info:
        p.call(name)
    assert reason in info.value.feedback and f"while running `{name}`" in info.value.feedback
    assert "the template reaped process" in info.value.detail and "template alive after: True" in info.value.detail
    assert p.call("ok", (np.zeros(2),)).value.tolist() == [1.0, 1.0]


ENDS_ITS_TEMPLATE = """
import os, signal
def end_both():
    os.kill(os.getppid(), signal.SIGKILL)      # the process this problem was forked from
    os._exit(5)
def ok():
    return 1
"""


def test_a_call_that_ends_its_template_too_is_a_crash_the_instructor_can_trace(submit):
    """When a call kills the process its problem was forked from and then its own, does the
    student read that it stopped, the instructor that the template could not say how, and does
    the next problem fail as the notebook's state being gone?"""
    run = submit([ENDS_ITS_TEMPLATE])
    with pytest.raises(ChildCrashed) as info:
        run.problem("a").call("end_both")
    assert info.value.feedback.startswith("The process running your notebook stopped while running `end_both`: "
                                          "it stopped")
    assert "the template did not answer" in info.value.detail
    assert "template alive after: False" in info.value.detail      # waited until the supervisor saw it end
    assert "and so did the process holding your notebook's state" in info.value.feedback
    with pytest.raises(NotebookFailed) as failed:
        run.problem("b").call("ok")
    assert "holding your notebook's state stopped" in str(failed.value)


def test_a_memory_bomb_ends_in_memory_error_or_crash_never_a_hang(submit):
    """Does a call allocating without bound end quickly (MemoryError or crash) under the memory limit?"""
    run = submit([CRASHERS], Limits(cell_seconds=2, total_seconds=10, call_seconds=10, memory_mb=400))
    p = run.problem("p")
    started = time.monotonic()
    with pytest.raises((StudentRaised, ChildCrashed)) as info:
        p.call("memory_bomb")
    assert time.monotonic() - started < 10, "the memory limit ends it long before the call limit would"
    if isinstance(info.value, StudentRaised):
        assert info.value.type_name == "MemoryError"
    with pytest.raises(StudentRaised, match="MemoryError"):
        p.call("huge")
    assert p.call("ok", (1,)).value == 2


def test_a_function_that_failed_twice_is_not_called_again(submit):
    """After a function timed out twice, do its later calls fail at once (saying so)?"""
    run = submit([CRASHERS])
    p = run.problem("p")
    for _ in range(2):
        with pytest.raises(CallTimeout) as stopped:
            p.call("spin")
        assert stopped.value.called               # made, and stopped
    started = time.monotonic()
    with pytest.raises(CallTimeout) as info:
        p.call("spin")
    assert time.monotonic() - started < 1.0
    assert not info.value.called                  # not made: the checks that needed it say so (checks.no_result)
    assert info.value.feedback == ("`spin` was not called: it had timed out twice before, each time running "
                                   "longer than 2 s; is there an endless loop?")
    assert "stopped" not in str(info.value)
    assert p.call("ok", (1,)).value == 2
    for _ in range(2):
        with pytest.raises(ChildCrashed):
            p.call("hard_exit")
    with pytest.raises(ChildCrashed) as crashed:
        p.call("hard_exit")
    assert crashed.value.feedback.startswith("`hard_exit` was not called: it stopped the process running your "
                                             "notebook twice before; the last time, exited with status 3")


def test_restarts_are_capped_per_submission(submit):
    """Once max_restarts fresh processes were used up, do further calls of that problem fail at once
    with the reason, while another problem still gets its first process?"""
    limits = Limits(cell_seconds=2, total_seconds=10, call_seconds=1, memory_mb=1024, max_restarts=1)
    run = submit([CRASHERS], limits)
    p = run.problem("p")
    with pytest.raises(ChildCrashed):
        p.call("hard_exit")
    with pytest.raises(ChildCrashed, match="segmentation fault"):   # the one restart, crashing again
        p.call("segfault")
    started = time.monotonic()
    with pytest.raises(ChildCrashed, match=r"^`ok` was not called: the process running your functions was "
                                           r"restarted 1 time already, the most allowed\.$"):
        p.call("ok", (1,))
    assert time.monotonic() - started < 1.0 and run.restarts == 1
    assert run.problem("r").call("ok", (1,)).value == 2         # a problem's first process is not a restart


def test_one_budget_covers_the_whole_submission(submit):
    """Does the per-submission wall-clock budget stop calls that each stay under call_seconds, and
    fail later calls at once?"""
    limits = Limits(cell_seconds=2, total_seconds=10, call_seconds=1.5, memory_mb=1024,
                    submission_seconds=4, max_restarts=100)
    run = submit(["import time\ndef slow(i):\n    time.sleep(1.0)\n    return i"], limits)
    started = time.monotonic()
    outcomes = []
    for i in range(10):
        try:
            outcomes.append(run.problem(f"p{i}").call("slow", (i,)).value)
        except TimeBudgetExceeded as exc:
            outcomes.append(exc)
    assert time.monotonic() - started < 4 + 5, "the budget bounds the submission"
    assert 2 <= sum(isinstance(o, int) for o in outcomes) <= 4
    assert isinstance(outcomes[-1], TimeBudgetExceeded)
    assert "allowed per submission" in outcomes[-1].feedback


# --------------------------------------------------------------------------- caps

def test_a_returned_value_over_the_cap_is_refused_and_the_grader_stays_small(submit):
    """Is a return larger than return_mb refused in the child (a clear BadReturnValue) while the
    grader never holds it?"""
    limits = Limits(cell_seconds=5, total_seconds=20, call_seconds=10, memory_mb=1024, return_mb=1)
    run = submit(["import numpy as np\ndef big():\n    return np.ones(300_000)\n"
                  "def fine():\n    return np.ones(100_000)\n"
                  "def numbers():\n    return [1.0 / 3] * 300_000"], limits)
    p = run.problem("p")
    with pytest.raises(BadReturnValue, match="more than 1 MB"):
        p.call("big")
    assert p.call("fine").value.shape == (100_000,)
    with pytest.raises(BadReturnValue, match="more than 4 MB of non-array data"):
        p.call("numbers")


def test_a_forged_oversized_frame_is_refused_before_it_is_read(submit):
    """If student code writes a frame header announcing 1 TB straight to its socket, is the reply
    refused at once (no allocation, no wait) and the next call served by a fresh process?"""
    forger = """
import gc, struct
from autograder.sandbox import protocol
def forge():
    for chan in [o for o in gc.get_objects() if type(o) is protocol.Channel]:
        try:
            protocol._sock_sendall(chan.sock, struct.pack("!Q", 2**40))
        except OSError:
            continue                                   # a channel of the template, closed here
    import time
    time.sleep(60)
def ok():
    return 1
"""
    run = submit([forger])
    p = run.problem("p")
    started = time.monotonic()
    with pytest.raises(BadReturnValue, match="exceeds the limit"):
        p.call("forge")
    assert time.monotonic() - started < 5
    assert p.call("ok").value == 1


def test_printed_output_is_capped_in_the_child_and_in_the_grader(submit):
    """With 400 cells each printing 64 KiB, does the grader keep only a bounded amount of output?"""
    limits = Limits(cell_seconds=5, total_seconds=60, call_seconds=5, memory_mb=1024, output_kb=4)
    run = submit(["print('x' * 65536)"] * 400 + ["def f():\n    print('y' * 100_000)\n    return 1"], limits)
    kept = sum(len(c.stdout) for c in run.report.cells)
    assert all(len(c.stdout) <= 4 * 1024 + 200 for c in run.report.cells)
    assert kept <= 9 * 4 * 1024 + 400
    result = run.problem("p").call("f")
    assert result.value == 1 and len(result.stdout) <= 4 * 1024 + 200 and "dropped" in result.stdout


# --------------------------------------------------------------------------- batched calls

def test_call_many_answers_in_order_in_one_round_trip(submit):
    """Does call_many return a value or an error per call, in order, an error not stopping the rest?"""
    run = submit(["def f(x):\n    return x * 2\ndef bad():\n    raise KeyError('k')"])
    out = run.problem("p").call_many([("f", (1,), {}), ("bad", (), {}), ("nope", (), {}), ("f", (), {"x": 4})])
    assert out[0].value == 2 and out[3].value == 8
    assert isinstance(out[1], StudentRaised) and out[1].type_name == "KeyError"
    assert isinstance(out[2], FunctionMissing)


BATCHED = """
calls = 0

def bump():
    global calls
    calls += 1
    return calls

def boom():
    raise ValueError('no')

def spin():
    while True:
        pass
"""


def _outcomes(answers):
    return [(type(a).__name__, a.value if hasattr(a, "value") else a.feedback) for a in answers]


def test_call_many_after_a_hang_makes_the_later_calls_as_one_by_one_would(submit):
    """When one call of a batch hangs, are the calls after it made in a fresh process (one restart),
    exactly as the same calls made one by one?"""
    calls = [("bump", (), {}), ("spin", (), {}), ("bump", (), {}), ("bump", (), {})]
    batched = submit([BATCHED])
    p = batched.problem("p")
    together = p.call_many(calls)
    alone = submit([BATCHED])
    q = alone.problem("p")
    one_by_one = []
    for name, args, kwargs in calls:
        try:
            one_by_one.append(q.call(name, args, kwargs))
        except StudentCodeError as exc:
            one_by_one.append(exc)
    assert _outcomes(together) == _outcomes(one_by_one)
    assert [v for _, v in _outcomes(together)][2:] == [1, 2]     # the fresh process counts from 0
    assert isinstance(together[1], CallTimeout) and batched.restarts == alone.restarts == 1


def test_call_many_does_not_call_a_function_that_failed_too_often(submit):
    """Is a function that hung twice refused inside a batch (not made, no restart), the calls around
    it made as one by one would?"""
    run = submit([BATCHED])
    p = run.problem("p")
    for _ in range(2):
        got = p.call_many([("spin", (), {})])[0]
        assert isinstance(got, CallTimeout), getattr(got, "detail", got)    # how an ending was learnt, if not
    out = p.call_many([("bump", (), {}), ("spin", (), {}), ("bump", (), {})])
    assert out[0].value == 1 and out[2].value == 2
    assert isinstance(out[1], CallTimeout)
    assert out[1].feedback.startswith("`spin` was not called: it had timed out twice")
    assert run.restarts == 2


def test_call_many_stop_at_error_makes_no_call_after_the_first_failure(submit):
    """With stop_at_error, does the batch end with the first error and the sandbox make no call
    after it (the next call sees the state as calls made one by one would have left it)?"""
    run = submit([BATCHED])
    p = run.problem("p")
    out = p.call_many([("bump", (), {}), ("boom", (), {}), ("bump", (), {})], stop_at_error=True)
    assert len(out) == 2 and out[0].value == 1 and isinstance(out[1], StudentRaised)
    assert p.call("bump").value == 2
    out = p.call_many([("bump", (), {}), ("boom", (), {}), ("bump", (), {})])
    assert [o.value for o in (out[0], out[2])] == [3, 4]
    out = p.call_many([("bump", (), {}), ("spin", (), {}), ("bump", (), {})], stop_at_error=True)
    assert len(out) == 2 and isinstance(out[1], CallTimeout) and run.restarts == 0   # no process for the rest
    assert p.call("bump").value == 1 and run.restarts == 1


def test_prefetch_answers_in_one_round_trip_and_take_gives_each_answer(submit):
    """Are calls made ahead answered in one round trip, in order (an error not stopping the rest),
    each answer given back by take while the process that answered still runs?"""
    run = submit([BATCHED])
    p = run.problem("p")
    aheads = p.prefetch([("bump", (), {}), ("boom", (), {}), ("bump", (), {})])
    assert [type(p.take(a)).__name__ for a in aheads] == ["CallResult", "StudentRaised", "CallResult"]
    assert [a.answer.value for a in (aheads[0], aheads[2])] == [1, 2] and p.forks == 1
    assert p.prefetch([("bump", (), {})]) == []           # nothing is made ahead once the problem has a process


def test_prefetch_on_the_running_process_makes_a_later_wave_of_calls(submit):
    """With `running`, are calls made ahead by the problem's running process (its state kept), in
    one round trip, and none when it has no process or a hang made ahead waits to be taken?"""
    run = submit([BATCHED])
    p = run.problem("p")
    assert p.prefetch([("bump", (), {})], running=True) == [] and p.forks == 0    # no process yet
    assert p.call("bump").value == 1
    aheads = p.prefetch([("bump", (), {}), ("spin", (), {}), ("bump", (), {})], running=True)
    assert len(aheads) == 2 and p.forks == 1 and isinstance(aheads[1].answer, CallTimeout)
    assert p.take(aheads[0]).value == 2                  # the same process: its state kept
    assert p.prefetch([("bump", (), {})], running=True) == []     # the hang is not taken yet
    assert isinstance(p.take(aheads[1]), CallTimeout) and len(run.failures["spin"]) == 1
    assert p.call("bump").value == 1 and run.restarts == 1


def test_prefetch_stops_at_a_hang_charged_only_when_taken(submit):
    """When a call made ahead hangs, do the answers stop there, the calls made in turn before it is
    taken go to a fresh process that is no restart, and taking it charge the hang (the next call a
    restart)?"""
    run = submit([BATCHED])
    p = run.problem("p")
    aheads = p.prefetch([("bump", (), {}), ("spin", (), {}), ("bump", (), {})])
    assert len(aheads) == 2 and isinstance(aheads[1].answer, CallTimeout) and aheads[1].ended
    assert p.take(aheads[0]).value == 1 and run.failures == {} and run.restarts == 0
    assert p.call("bump").value == 1 and run.restarts == 0      # in turn, before the hang: no restart
    assert isinstance(p.take(aheads[1]), CallTimeout) and len(run.failures["spin"]) == 1
    assert p.call("bump").value == 1 and run.restarts == 1      # after the hang: a restart


def test_a_hang_made_ahead_lends_its_time_until_taken_or_its_problem_closes(submit):
    """Is the time a hang made ahead took (call_seconds) given back to the submission's budget until its check
    takes it, and charged again then, or when its problem closes with it never taken?"""
    limits = Limits(cell_seconds=2, total_seconds=10, call_seconds=1, memory_mb=1024)
    run = submit([BATCHED], limits)
    p = run.problem("p")
    base = run.deadline
    aheads = p.prefetch([("bump", (), {}), ("spin", (), {})])
    assert aheads[-1].ended and 0.9 <= run.deadline - base <= 1.0
    assert p.take(aheads[0]).value == 1 and 0.9 <= run.deadline - base <= 1.0
    assert isinstance(p.take(aheads[1]), CallTimeout) and run.deadline == pytest.approx(base, abs=1e-9)
    q = run.problem("q")
    base = run.deadline
    assert q.prefetch([("spin", (), {})])[-1].ended and 0.9 <= run.deadline - base <= 1.0
    run.problem("r")                    # q closes, its hang never taken
    assert run.deadline == pytest.approx(base, abs=1e-9)


def test_a_process_found_ended_as_a_wave_is_sent_lends_no_more_than_a_call_may_take(submit):
    """When the process ended by itself between waves (seconds before the next wave is sent), is the time
    given back for that ending measured from the wave, never the grader's time since the last call, and
    never more than call_seconds?"""
    limits = Limits(cell_seconds=2, total_seconds=10, call_seconds=1, memory_mb=1024)
    run = submit([BATCHED + "\nimport os, threading\ndef arm():\n    threading.Timer(0.1, os._exit, (3,)).start()\n"
                  "    return 0\n"], limits)
    p = run.problem("p")
    assert p.call("arm").value == 0
    time.sleep(1.5)                     # the grader's own time; the process ended after 0.1 s of it
    base = run.deadline
    aheads = p.prefetch([("bump", (), {}), ("bump", (), {})], running=True)
    assert aheads and aheads[-1].ended, aheads
    assert aheads[-1].seconds <= limits.call_seconds and run.deadline - base <= limits.call_seconds


def test_prefetch_answer_of_a_process_that_ended_since_is_not_taken(submit):
    """When a call made in turn crashes the process that answered calls made ahead, does take refuse
    the answers (None: the call is made again, in a restarted process)?"""
    run = submit([BATCHED + "\nimport os\ndef die():\n    os._exit(3)\n"])
    p = run.problem("p")
    aheads = p.prefetch([("bump", (), {}), ("bump", (), {})])
    assert p.take(aheads[0]).value == 1
    with pytest.raises(ChildCrashed):
        p.call("die")
    assert p.take(aheads[1]) is None
    assert p.call("bump").value == 1 and run.restarts == 1


def test_prefetch_reaching_the_failure_cap_refuses_the_function_after_it_is_taken(submit):
    """When the hang made ahead is a function's second, is the function capped once the hang is
    taken (refused, no restart), and not before?"""
    run = submit([BATCHED])
    first = run.problem("p")
    assert isinstance(first.call_many([("spin", (), {})])[0], CallTimeout)
    p = run.problem("q")
    aheads = p.prefetch([("bump", (), {}), ("spin", (), {}), ("spin", (), {})])
    assert len(aheads) == 2 and len(run.failures["spin"]) == 1
    assert isinstance(p.take(aheads[1]), CallTimeout) and len(run.failures["spin"]) == 2
    with pytest.raises(CallTimeout, match=r"^`spin` was not called: it had timed out twice before"):
        p.call("spin")
    assert run.restarts == 0
    assert p.take(aheads[0]) is None                    # its process ended with the hang, now charged


def test_answers_made_ahead_are_held_only_up_to_a_byte_budget(submit):
    """When calls made ahead return more than the budget (return_mb, at least 1 MB) in all, are
    the answers past it read and dropped, not held (their checks make the calls again in turn, in
    the same process, no restart), and a hang past it not charged until made in turn?"""
    big = "\nimport numpy as np\ndef big(i):\n    return np.full(100_000, float(i))\n"   # 0.8 MB
    run = submit([BATCHED + big], Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=2.0, memory_mb=1024,
                                        submission_seconds=60.0, return_mb=1.0))
    p = run.problem("p")
    aheads = p.prefetch([("big", (i,), {}) for i in range(4)])
    assert len(aheads) == 1 and float(p.take(aheads[0]).value[0]) == 0.0
    assert [float(p.call("big", (i,)).value[0]) for i in (1, 2, 3)] == [1.0, 2.0, 3.0] and p.forks == 1
    q = run.problem("q")
    aheads = q.prefetch([("big", (0,), {}), ("big", (1,), {}), ("spin", (), {}), ("bump", (), {})])
    assert len(aheads) == 1 and run.failures == {} and run.restarts == 0
    assert float(q.take(aheads[0]).value[0]) == 0.0
    assert q.call("bump").value == 1 and run.restarts == 0       # a fresh process, no restart
    with pytest.raises(CallTimeout):
        q.call("spin")
    assert len(run.failures["spin"]) == 1


# --------------------------------------------------------------------------- fresh state per problem

STATEFUL = """
import os, time
counter = 0
with open('from_notebook.txt', 'w') as fh:
    fh.write('notebook')

def bump():
    global counter
    counter += 1
    return counter

def leave_traces():
    with open(os.path.join(os.environ['HOME'], 'left.txt'), 'w') as fh:
        fh.write('left by a problem')
    pid = os.fork()
    if pid == 0:
        os.setsid()
        if os.fork() == 0:
            time.sleep(600)
        os._exit(0)
    os.waitpid(pid, 0)
    return sorted(int(p) for p in os.listdir('/proc') if p.isdigit())

def look():
    home = os.environ['HOME']
    return os.listdir(home), open('from_notebook.txt').read(), live_processes(3), os.getcwd()

def write_notebook_folder():
    try:
        with open('from_notebook.txt', 'w') as fh:
            fh.write('changed')
        return 'written'
    except OSError as exc:
        return exc.strerror
""" + LIVE_PROCESSES


def test_each_problem_starts_from_the_state_the_notebook_left(submit):
    """Does a global changed during one problem's checks keep its notebook value in the next problem?"""
    run = submit([STATEFUL])
    a = run.problem("a")
    assert [a.call("bump").value for _ in range(3)] == [1, 2, 3]
    b = run.problem("b")
    assert b.call("bump").value == 1


def test_files_and_processes_a_problem_leaves_are_gone_before_the_next(submit):
    """Are a file written to HOME and a setsid daemon started by one problem gone when the next
    problem starts, while the notebook's own files stay readable (and read-only)?"""
    run = submit([STATEFUL])
    procs_a = run.problem("a").call("leave_traces").value
    assert len(procs_a) >= 4                               # supervisor, template, problem, daemon
    files, content, procs_b, _ = run.problem("b").call("look").value
    assert files == [] and content == "notebook"
    assert len(procs_b) == 3, "only the supervisor, the template and this problem's process"
    assert run.problem("c").call("write_notebook_folder").value == "Read-only file system"


MARKS = """
import os
def mark_home(secret):
    home = os.environ['HOME']
    done = []
    try:
        os.setxattr(home, 'user.carried', secret.encode())     # tmpfs keeps user xattrs (Linux 6.6+)
        done.append('xattr')
    except OSError:
        pass
    os.utime(home, ns=(123456789, 987654321))
    done.append('times')
    return done

def read_home_marks():
    home = os.environ['HOME']
    try:
        carried = os.getxattr(home, 'user.carried').decode()
    except OSError:
        carried = None
    st = os.stat(home)
    return carried, st.st_atime_ns, st.st_mtime_ns, os.listdir(home)
"""


def test_nothing_a_problem_leaves_on_its_emptied_folder_reaches_the_next(submit):
    """Do an extended attribute and times that one problem's code sets on its HOME folder (left
    empty) stay out of the next problem's HOME, so that they cannot carry data between problems?"""
    run = submit([MARKS])
    assert "times" in run.problem("a").call("mark_home", ["from problem a"]).value
    carried, atime, mtime, files = run.problem("b").call("read_home_marks").value
    assert carried is None and (atime, mtime) != (123456789, 987654321) and files == []


SIGNALLED = """
import os, signal
received = []
def _note(sig, frame):
    received.append(sig)
for _s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGRTMIN, signal.SIGRTMIN + 1):
    signal.signal(_s, _note)

def signal_parent():
    for sig in (signal.SIGUSR1, signal.SIGRTMIN, signal.SIGUSR2, signal.SIGRTMIN + 1):
        os.kill(os.getppid(), sig)       # the template: a handler of the notebook's would run there
    return os.getppid()

def received_so_far():
    return list(received)

def still_handled():
    os.kill(os.getpid(), signal.SIGUSR1)
    return list(received)
"""


def test_signals_a_problem_sends_its_template_reach_no_later_problem(submit):
    """Does a signal that one problem's code sends to the process its problems are forked from
    stay out of the next problem's state (a notebook's handler would otherwise record it there),
    while a problem process still runs the notebook's handlers for its own signals?"""
    run = submit([SIGNALLED])
    run.problem("a").call("signal_parent")
    assert run.problem("b").call("received_so_far").value == []
    assert run.problem("c").call("still_handled").value == [int(signal.SIGUSR1)]


SQUEEZED = """
import os, resource
def squeeze(target):
    pid = os.getppid() if target == "template" else 1
    done = []
    for res, value in ((resource.RLIMIT_NOFILE, 41), (resource.RLIMIT_FSIZE, 12345678)):
        try:
            resource.prlimit(pid, res, (value, resource.prlimit(pid, res)[1]))
            done.append(res)
        except OSError:
            pass
    for call in (lambda: os.setpriority(os.PRIO_PROCESS, pid, 13), lambda: os.setpriority(os.PRIO_PGRP, 0, 14)):
        try:
            call()
            done.append('nice')
        except OSError:
            pass
    return done

def own():
    resource.setrlimit(resource.RLIMIT_NOFILE, (40, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    os.setpriority(os.PRIO_PROCESS, 0, 1)
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.getpriority(os.PRIO_PROCESS, 0)

def limits():
    return resource.getrlimit(resource.RLIMIT_NOFILE), resource.getrlimit(resource.RLIMIT_FSIZE), \
        os.getpriority(os.PRIO_PROCESS, 0)
"""


def test_a_problem_cannot_change_the_limits_or_priority_of_its_template_or_supervisor(submit):
    """Are a problem's own limits and priority its own to lower, while those of the template (which
    the next problem inherits) and of the supervisor (PID 1) are out of its reach?"""
    run = submit([SQUEEZED])
    before = run.problem("a").call("limits").value
    assert run.problem("b").call("squeeze", ["supervisor"]).value == []
    assert run.problem("c").call("squeeze", ["template"]).value == []
    assert run.problem("d").call("limits").value == before
    assert run.problem("e").call("own").value == (40, 1)


def test_student_code_cannot_leave_the_cpus_its_sandbox_is_held_on(submit):
    """Does student code that asks for other CPUs (here: the ones it has) get EPERM, so that a
    sandbox held on one CPU keeps its processes there, off other workers' sandboxes?"""
    run = submit(["import os\ndef widen():\n    before = sorted(os.sched_getaffinity(0))\n"
                  "    try:\n        os.sched_setaffinity(0, set(before))\n        return 'changed'\n"
                  "    except PermissionError:\n        return sorted(os.sched_getaffinity(0)) == before\n"])
    assert run.problem("a").call("widen").value is True


# --------------------------------------------------------------------------- host lifecycle

def test_closing_a_run_leaves_no_process_behind():
    """After close(), are the submission's processes (daemons included) gone, leaving the host's,
    and after the host closes, its own?"""
    before = settled_count()
    with SandboxHost() as h:
        h.start()
        baseline = settled_count()
        run = h.submission(cells(STATEFUL), FAST)
        run.problem("a").call("leave_traces")
        assert len(sandbox_processes()) >= baseline + 4     # supervisor, template, problem, daemon
        run.close()
        assert descendants_settled(baseline) == baseline
    assert descendants_settled(before) == before


def test_the_zygote_is_recycled_after_n_submissions():
    """With recycle_after=2, is a fresh zygote started for the third submission (same layers)?"""
    with SandboxHost(recycle_after=2) as h:
        h.start()
        layers = h.info.layers
        for _ in range(3):
            h.submission(cells("def f():\n    return 1"), FAST).close()
        assert h.starts == 2
        run = h.submission(cells("def f():\n    return 1"), FAST)
        assert run.problem("p").call("f").value == 1 and set(layers) <= set(run.isolation)
        run.close()


def test_a_host_that_died_is_replaced_at_the_next_submission():
    """If the host process is killed from outside, does the next submission start a new one?"""
    with SandboxHost() as h:
        h.start()
        h._process.kill()
        run = h.submission(cells("def f():\n    return 2"), FAST)
        assert run.problem("p").call("f").value == 2 and h.starts == 2
        run.close()


def test_without_bubblewrap_the_host_refuses_unless_insecure(monkeypatch):
    """With bubblewrap missing, does start() refuse in one line naming the fix and --insecure, and
    does insecure mode still grade, recording what is missing?"""
    monkeypatch.setattr(isolation, "bwrap_path", lambda: None)
    with pytest.raises(SandboxUnavailable) as info:
        SandboxHost().start()
    message = str(info.value)
    assert "\n" not in message and "apt-get install bubblewrap" in message and "--insecure" in message
    with SandboxHost(insecure=True) as h:
        got = h.start()
        assert "bubblewrap" not in got.layers and any(m.startswith("bubblewrap") for m in got.missing)
        run = h.submission(cells("def f(x):\n    return x + 1"), FAST)
        assert run.problem("p").call("f", (1,)).value == 2
        assert "bubblewrap" not in run.isolation
        run.close()


def test_a_submission_whose_sandbox_lacks_a_layer_is_not_run(host, monkeypatch):
    """If a required layer is missing for one submission (though the host started complete), is
    that submission refused before any of its code runs?"""
    monkeypatch.setattr(isolation, "REQUIRED", isolation.REQUIRED + ("imaginary-layer",))
    with pytest.raises(SandboxError, match="lacks imaginary-layer; it was not run"):
        host.submission(cells("open('/tmp/notebook/ran', 'w')"), FAST)


def test_a_bubblewrap_that_cannot_start_is_refused_with_the_reason(monkeypatch, tmp_path):
    """When bubblewrap fails (here: user namespaces not permitted), does start() raise one line
    quoting bubblewrap and pointing at user namespaces?"""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create a new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(isolation, "bwrap_path", lambda: str(fake))
    with pytest.raises(SandboxUnavailable) as info:
        SandboxHost().start()
    message = str(info.value)
    assert "\n" not in message and "No permissions to create a new namespace" in message
    assert "user namespaces" in message


def test_a_grader_path_visible_inside_is_caught_by_the_probe(monkeypatch):
    """If the filesystem plan let one of the grader's paths in, does the start-up probe notice from
    inside and refuse (the allow-list is checked, not assumed)?"""
    project = str(Path(isolation.__file__).resolve().parents[2])
    seen_at = str(Path.home() / "course-under-test")     # outside /tmp, which the sandbox covers with its own
    plan = isolation.allow_list
    monkeypatch.setattr(isolation, "allow_list", lambda: [*plan(), isolation.Mount("ro-bind", project, seen_at)])
    monkeypatch.setattr(host_module, "_grader_paths", lambda: [seen_at])
    with pytest.raises(SandboxUnavailable, match=f"allow-list-fs: {seen_at} is visible inside the sandbox"):
        SandboxHost().start()


def test_a_notebook_of_many_cells_is_sent_in_chunks_and_runs_in_order(submit):
    """Do 2,500 cells (more than one chunk) all run, in order, with a hanging cell in a later chunk
    stopped and skipped like any other?"""
    sources = [f"x = {i}" for i in range(2500)]
    sources[2100] = "while True:\n    pass"
    sources.append("def last():\n    return x")
    run = submit(sources, Limits(cell_seconds=2, total_seconds=60, call_seconds=2, memory_mb=1024))
    statuses = [c.status for c in run.report.cells]
    assert statuses.count("ok") == 2500 and statuses[2100] == "timeout"
    assert run.problem("p").call("last").value == 2499


def test_numpys_global_random_state_is_fresh_in_every_submission(submit):
    """With numpy.random imported once in the zygote, does each submission still start from its
    own random state (as a first import would give it), and generators seeded alike agree?"""
    source = ("import numpy as np\n"
              "def draw():\n    return [float(np.random.rand()), float(np.random.default_rng(3).random())]")
    first = submit([source]).problem("p").call("draw").value
    second = submit([source]).problem("p").call("draw").value
    assert first[0] != second[0] and first[1] == second[1]


def test_each_submission_starts_from_a_state_as_numpy_random_seed_makes_it(submit):
    """Is numpy's global random state of a submission the one numpy.random.seed() makes in a fresh
    import (first key word 0x80000000, position 623, no kept Gaussian), with a key of its own?"""
    source = ("import numpy as np\n"
              "def state():\n    name, key, pos, has_gauss, gauss = np.random.get_state()\n"
              "    return [name, int(key[0]), int(pos), int(has_gauss), float(gauss), key[1:].tobytes().hex()]")
    first = submit([source]).problem("p").call("state").value
    second = submit([source]).problem("p").call("state").value
    assert first[:5] == second[:5] == ["MT19937", 0x80000000, 623, 0, 0.0]
    assert first[5] != second[5]


def test_a_batch_gets_each_next_submissions_processes_started_ahead():
    """From a host's second submission on, are the next submission's processes started while it is
    graded, used by the next one, and replaced when its limits differ or they died meanwhile?"""
    source = ["def f():\n    return 41 + 1"]
    with SandboxHost() as h:
        h.start()
        for _ in range(2):
            with h.submission(cells(*source), FAST) as run:
                assert run.problem("p").call("f").value == 42
        spare = h._spare
        assert spare is not None                      # started for the third submission
        with h.submission(cells(*source), FAST) as run:
            assert run.sid == spare.sid and run.problem("p").call("f").value == 42
        other = Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=2.0, memory_mb=768,
                       submission_seconds=60.0)
        spare = h._spare
        with h.submission(cells(*source), other) as run:      # other limits: started afresh
            assert run.sid != spare.sid and run.problem("p").call("f").value == 42
        spare = h._spare
        assert spare is not None
        h._kill_submission(spare.sid)                       # its processes end: the next one starts afresh
        poller = select.poll()
        poller.register(spare.nb, select.POLLHUP | select.POLLRDHUP)
        assert poller.poll(30_000), "the killed template's socket was not closed"
        with h.submission(cells(*source), other) as run:
            assert run.sid != spare.sid and run.problem("p").call("f").value == 42
            assert run.report.state == "ok"


def test_processes_killed_as_soon_as_they_were_asked_for_all_end():
    """When a submission's processes are killed right after they were asked for (while the
    zygote may still be starting them), does every one of them end, the first template included?"""
    with SandboxHost() as h:
        h.start()
        for i in range(60):
            spare = h._request(FAST)
            time.sleep((i % 20) * 0.0002)                     # kill at a different moment of its start
            h._kill_submission(spare.sid)
            poller = select.poll()
            poller.register(spare.nb, select.POLLHUP | select.POLLRDHUP)
            assert poller.poll(20_000), "a template outlived its killed submission"
            spare.close()
            h._kills_answered()
        with h.submission(cells("def f():\n    return 7"), FAST) as run:
            assert run.problem("p").call("f").value == 7


def test_a_single_submission_starts_nothing_ahead():
    """Does a host that graded one submission leave nothing running for a next one?"""
    with SandboxHost() as h:
        h.start()
        with h.submission(cells("x = 1"), FAST):
            pass
        assert h._spare is None


def test_a_started_host_can_have_its_first_submissions_processes_started_before_it_is_known():
    """After start (the probe passed), does `prepare` start a submission's processes that the first
    submission then uses, its notebook running in them as in any other?"""
    with SandboxHost() as h:
        h.start()
        h.prepare(FAST)
        spare = h._spare
        assert spare is not None
        with h.submission(cells("def f():\n    return 41 + 1"), FAST) as run:
            assert run.sid == spare.sid and run.problem("p").call("f").value == 42
            assert run.report.state == "ok"
        assert h._spare is None                       # one submission: nothing more started ahead


def test_a_host_started_from_a_process_launched_earlier_checks_its_layers_and_grades():
    """Does a host given a process started before it (process.launch_host, as a worker does before
    its imports) probe it like one it started itself, and is a launched process it cannot use
    (the host was closed) ended rather than left running?"""
    from autograder.sandbox.process import launch_host

    settings = {"insecure": False, "memory_mb": 2048, "processes": 64, "pin": True, "cpu": None}
    with SandboxHost() as h:
        info = h.start(launch_host(**settings))
        assert info.complete and "bubblewrap" in info.layers
        with h.submission(cells("def f():\n    return 7"), FAST) as run:
            assert run.problem("p").call("f").value == 7
    closed = SandboxHost()
    closed.close()
    launched = launch_host(**settings)
    with pytest.raises(RuntimeError, match="closed"):
        closed.start(launched)
    assert not launched.process.alive and not launched.folder.exists()


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to choose")
def test_a_sandbox_given_a_cpu_is_held_on_that_one_and_not_held_without_pinning():
    """Is a host given a CPU (as a pool gives each of its workers its own) held on that CPU,
    whatever the load elsewhere, and is a host with pinning off left to the scheduler?"""
    source = "import os\ndef cpus():\n    return sorted(os.sched_getaffinity(0))"
    allowed = sorted(os.sched_getaffinity(0))
    for pin, wanted, expected in ((True, allowed[-1], [allowed[-1]]), (False, allowed[-1], allowed)):
        with SandboxHost(pin=pin, cpu=wanted) as h:
            h.start()
            with h.submission(cells(source), FAST) as run:
                assert run.problem("p").call("cpus").value == expected
            assert h.cpu == (wanted if pin else None)


def test_the_sandbox_runs_on_one_cpu_and_calls_leave_the_callers_affinity_as_it_was(host, submit):
    """Is the sandbox held on the one CPU the host chose, and is the calling thread's own CPU
    set unchanged after a call (it is held on the sandbox's CPU only during the round trip)?"""
    before = os.sched_getaffinity(0)
    run = submit(["import os\ndef cpus():\n    return sorted(os.sched_getaffinity(0))"])
    inside = run.problem("p").call("cpus").value
    assert os.sched_getaffinity(0) == before
    if len(before) > 1:
        assert host.cpu in before
        assert inside == [host.cpu]
    else:
        assert host.cpu is None
        assert inside == sorted(before)


HOLD_CALLER = """
import json, os, sys, threading
from autograder.config import Limits
from autograder.notebooks import cell_label
from autograder.sandbox.host import SandboxHost

source = "import os\\ndef cpus():\\n    return sorted(os.sched_getaffinity(0))"
limits = Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=2.0, memory_mb=1024, submission_seconds=60.0)
threading.Thread(target=threading.Event().wait, args=(120,), daemon=True).start()   # a thread of its own
with SandboxHost(cpu=int(sys.argv[1])) as h:
    h.start()
    held = h.hold_caller(process=sys.argv[2] == "process")
    others = [int(t) for t in os.listdir("/proc/self/task") if int(t) != threading.get_native_id()]
    threads = [sorted(os.sched_getaffinity(0)), sorted({tuple(sorted(os.sched_getaffinity(t))) for t in others})]
    moves = []
    setaffinity = os.sched_setaffinity
    os.sched_setaffinity = lambda *a: (moves.append(a), setaffinity(*a))[1]
    with h.submission([{"index": 1, "label": cell_label(1, source), "source": source}], limits) as run:
        inside = run.problem("p").call("cpus").value
print(json.dumps({"held": held, "cpu": h.cpu, "threads": threads, "inside": inside, "moves": len(moves)}))
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: nothing to choose")
@pytest.mark.parametrize("scope", ["process", "thread"])
def test_a_caller_held_on_the_sandboxs_cpu_makes_calls_without_moving(scope):
    """After hold_caller (a pool's warm worker: its whole process; a Dask worker: its grading
    thread), is the caller held on the sandbox's CPU, the other threads held with it or left
    alone, the sandbox still there, and a call made with no affinity change at all?"""
    import json
    import subprocess

    allowed = sorted(os.sched_getaffinity(0))
    cpu = allowed[-1]
    done = subprocess.run([sys.executable, "-c", HOLD_CALLER, str(cpu), scope], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    others = [cpu] if scope == "process" else allowed
    assert seen == {"held": True, "cpu": cpu, "threads": [[cpu], [others]], "inside": [cpu], "moves": 0}


def test_the_folder_of_a_killed_grader_is_swept_by_the_next_host(tmp_path):
    """When a grader holding a started host is killed (no close), or exits without closing it,
    is no host folder left once the next host starts?"""
    import subprocess

    script = ("import os, sys, time\n"
              "from autograder.sandbox.host import SandboxHost\n"
              "h = SandboxHost()\n"
              "h.start()\n"
              "print(h._dir, flush=True)\n"
              "if sys.argv[1] == 'wait':\n"
              "    time.sleep(600)\n")
    env = dict(os.environ, TMPDIR=str(tmp_path))
    killed = subprocess.Popen([sys.executable, "-c", script, "wait"], stdout=subprocess.PIPE, env=env, text=True)
    left = Path(killed.stdout.readline().strip())
    assert left.parent == tmp_path and left.is_dir()
    killed.kill()
    killed.wait()
    assert left.is_dir()                                  # nobody removed it: the process was killed
    ended = subprocess.run([sys.executable, "-c", script, "exit"], capture_output=True, env=env, text=True,
                           timeout=300)
    assert ended.returncode == 0, ended.stderr[-2000:]
    assert not Path(ended.stdout.strip()).exists()        # never closed: removed when its process exited
    assert not left.exists()                              # the killed one's: swept when that host started
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("autograder-host-")] == []


def test_a_cell_stopped_partway_keeps_its_definitions(submit):
    """A cell with functions around a loop that never ends, and one around an os._exit: is each stopped and
    noted, and the notebook run again with those cells' functions and imports alone, so they can be called?"""
    run = submit(["def f():\n    return 1\nwhile True:\n    pass\ndef g():\n    return math.pi\nimport math",
                  "import os\ndef h():\n    return 'h'\nos._exit(3)", "def k():\n    return f() + 1"])
    assert [c.status for c in run.report.cells] == ["timeout", "crashed", "ok"]
    assert run.report.cells[0].message == ("ran longer than 2 s and was stopped; the notebook was then run again with "
                                           "only the cell's definitions kept from it (f, g, math), the rest of the "
                                           "cell not run")
    assert run.report.cells[1].message == ("stopped the process running the notebook: exited with status 3, as when "
                                           "code calls os._exit() or otherwise ends its process; the notebook was "
                                           "then run again with only the cell's definitions kept from it (os, h), "
                                           "the rest of the cell not run")
    p = run.problem("p")
    assert [p.call(name).value for name in ("f", "g", "h", "k")] == [1, math.pi, "h", 2]


def test_an_assignment_after_the_endless_loop_that_would_raise_is_not_kept(submit):
    """An endless loop, then `K = 1 / 0` (never reached in the first run), then a constant and a function:
    is the division left out of the run again, so that it cannot raise there and lose the function?"""
    run = submit(["while True:\n    pass\nK = 1 / 0\nJ = 3\ndef f():\n    return J"])
    assert [c.status for c in run.report.cells] == ["timeout"]
    assert "only the cell's definitions kept from it (J, f)" in run.report.cells[0].message
    assert run.problem("p").call("f", ()).value == 3


def test_a_cell_stopped_partway_keeps_its_assignments_of_literals(submit):
    """A cell setting constants around a function that reads them, then looping forever: is the notebook
    run again with the literal constants kept beside the function, and one worked out with an operator
    (which could fail when run without what it reads, and lose the function after it) left out?"""
    run = submit(["import math", "K = 2\nTAU = 6.283\nHALF = TAU / 2\nrows = list(range(K))\n"
                  "def f(x):\n    return x * K + TAU\nwhile True:\n    pass"])
    assert [c.status for c in run.report.cells] == ["ok", "timeout"]
    assert "only the cell's definitions kept from it (K, TAU, f)" in run.report.cells[1].message
    assert math.isclose(run.problem("p").call("f", (1,)).value, 2 + 6.283)


def test_a_cell_whose_definitions_alone_hang_too_is_left_out(submit):
    """When a stopped cell's definitions hang too (a default argument that never ends), is the cell left
    out on the third run, said so once, and the other cells' functions still there?"""
    run = submit(["import itertools\ndef f(x=sum(itertools.count())):\n    return x\nwhile True:\n    pass",
                  "def g():\n    return 2"])
    assert [c.status for c in run.report.cells] == ["timeout", "ok"]
    assert run.report.cells[0].message == ("ran longer than 2 s and was stopped; so were its definitions alone, and "
                                           "the notebook was then run again without it")
    assert run.problem("p").call("g").value == 2
