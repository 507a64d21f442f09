"""The grader session's calls made ahead: each problem's first calls in one round trip, with the
outcomes, messages, restarts and failure counts of calls made one by one, whatever hangs, crashes
or raises among them."""
from __future__ import annotations

import dataclasses
import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from autograder.config import Assignment, Course, Limits, Problem, Tolerance
from autograder.errors import CourseError
from autograder.grading import engine
from autograder.grading import session as session_module
from autograder.grading.plugin import InstructorFolder
from autograder.grading.proxy import StudentProxy
from autograder.grading.session import OPTIONAL_PLUGINS, GraderSession, InstructorCode, pytest_args
from autograder.layout import CourseLayout
from autograder.notebooks import cell_label
from autograder.sandbox import host as host_module
from autograder.sandbox.host import SandboxHost

LIMITS = Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=1.0, memory_mb=1024, max_restarts=5)
TOL = {"float64": Tolerance(1e-7, 1e-9), "float32": Tolerance(1e-4, 1e-5)}

NOTEBOOK = """
import os

calls = 0

def f(x):
    return 2 * x

def bump():
    global calls
    calls += 1
    return calls

def spin(x):
    while True:
        pass

def die(x):
    os._exit(3)

def boom(x):
    raise ValueError('no ' + str(x))
"""


@pytest.fixture(scope="module")
def host():
    with SandboxHost() as h:
        h.start()
        yield h


def assignment(*problems: str, limits: Limits = LIMITS) -> Assignment:
    return Assignment(name="hw", package="hw", notebooks=("hw.ipynb",),
                      problems=tuple(Problem(p, 1, f"test_{p}", "hw.ipynb", TOL) for p in problems), limits=limits)


class Traffic:
    """Counts round trips (and the calls answered) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch):
        self.round_trips = 0
        real = host_module.ProblemHandle._round_trip

        def counted(handle, chan, calls, *rest, **options):
            self.round_trips += 1
            return real(handle, chan, calls, *rest, **options)
        monkeypatch.setattr(host_module.ProblemHandle, "_round_trip", counted)


def grade(host, tmp_path: Path, graders: dict[str, str], *, ahead: bool, notebook: str = NOTEBOOK,
          limits: Limits = LIMITS):
    """Every check's (name, status, output) and the run's restarts and failure counts."""
    folder = tmp_path / ("ahead" if ahead else "one_by_one")
    folder.mkdir()
    for problem, body in graders.items():
        (folder / f"test_{problem}.py").write_text(textwrap.dedent(body))
    cells = [{"index": 1, "label": cell_label(1, notebook), "source": notebook}]
    with GraderSession(assignment(*graders, limits=limits), InstructorCode(None, None, folder), ahead=ahead) \
            as session, StudentProxy(host.submission(cells, limits)) as proxy:
        graded = session.run({"hw.ipynb": proxy}, seed=1)
        run = proxy._run
        assert not graded.broken
        return ([(c.name.split("::")[-1], c.status, c.output) for c in graded.checks],
                run.restarts, {k: len(v) for k, v in run.failures.items()})


def both(host, tmp_path, graders, monkeypatch, limits: Limits = LIMITS, notebook: str = NOTEBOOK):
    traffic = Traffic(monkeypatch)
    alone = grade(host, tmp_path, graders, ahead=False, limits=limits, notebook=notebook)
    trips_alone, traffic.round_trips = traffic.round_trips, 0
    ahead = grade(host, tmp_path, graders, ahead=True, limits=limits, notebook=notebook)
    return ahead, alone, traffic.round_trips, trips_alone


VALUES = {"f": """
    import pytest

    @pytest.mark.parametrize("x", [1, 2, 3, 4])
    def test_f_doubles(student, x):
        assert student.f(x) == 2 * x

    def test_f_wrong_on_purpose(student):
        assert student.f(5) == 11, "f(5) is off"

    def test_f_raises(student):
        try:
            student.boom(1)
        finally:                          # the metadata of this check's call, not an earlier check's
            assert student.last_call is None and student.last_error is not None, "stale metadata"

    def test_f_no_call(student):
        assert True
"""}


def test_first_calls_go_in_one_round_trip_with_the_same_outcomes(host, tmp_path, monkeypatch):
    """Do a problem's checks make their first calls in one round trip, and get the outcomes calls
    made one by one give (values, a raised error, a failed check)?"""
    ahead, alone, trips, trips_alone = both(host, tmp_path, VALUES, monkeypatch)
    assert ahead == alone
    assert (trips, trips_alone) == (1, 6)
    outcomes = {name: status for name, status, _ in ahead[0]}
    assert outcomes["test_f_raises"] == "failed" and outcomes["test_f_wrong_on_purpose"] == "failed"
    assert outcomes["test_f_doubles[1]"] == "passed"


HANG = {"f": """
    def test_f_before(student):
        assert student.f(1) == 2
        assert student.f(2) == 4          # a further call: made after the hang made ahead

    def test_f_spins(student):
        student.spin(1)

    def test_f_after(student):
        assert student.f(3) == 6

    def test_f_spins_again(student):
        student.spin(2)

    def test_f_spins_once_too_often(student):
        student.spin(3)

    def test_f_last(student):
        assert student.f(4) == 8
"""}


def test_a_hang_made_ahead_costs_what_it_costs_one_by_one(host, tmp_path, monkeypatch):
    """When a call made ahead hangs, do the checks before it, the one that made it and those after
    it get the outcomes, restarts and failure counts of calls made one by one (the function capped
    after two hangs)?"""
    ahead, alone, trips, trips_alone = both(host, tmp_path, HANG, monkeypatch)
    assert ahead == alone
    statuses = [status for _, status, _ in ahead[0]]
    assert statuses == ["passed", "failed", "passed", "failed", "failed", "passed"]
    assert "was not called: it had timed out twice before" in ahead[0][4][2]
    assert ahead[1] == 2 and ahead[2] == {"spin": 2}
    assert trips < trips_alone


CRASH = {"f": """
    def test_f_before(student):
        assert student.f(1) == 2
        assert student.f(2) == 4          # the next wave: made after the crash, in the fresh process

    def test_f_dies(student):
        student.die(1)

    def test_f_after(student):
        assert student.f(3) == 6

    def test_f_counts_afresh(student):
        assert student.bump() == 1, "a fresh process after the crash"
"""}


def test_a_crash_made_ahead_costs_what_it_costs_one_by_one(host, tmp_path, monkeypatch):
    """When a call made ahead crashes its process, is the crash charged to the check that made it
    (one restart, one failure), the checks before and after it unaffected?"""
    ahead, alone, _, _ = both(host, tmp_path, CRASH, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["passed", "failed", "passed", "passed"]
    assert ahead[1] == 1 and ahead[2] == {"die": 1}


LATER_CRASH = {"f": """
    def test_f_first(student):
        # several calls at once are made in turn, not ahead: the crash ends the process that
        # answered the next checks' first calls
        value, crash = student.call_many([("f", (1,), {}), ("die", (1,), {})])
        assert value == 2
        raise crash

    def test_f_second(student):
        assert student.f(2) == 4

    def test_f_third(student):
        assert student.bump() == 1, "a fresh process after the crash"
"""}


def test_answers_made_ahead_by_a_process_that_ended_since_are_made_again(host, tmp_path, monkeypatch):
    """When a later call of an earlier check crashes the process, are the next checks' calls made
    again in a fresh process (restarted, as one by one), not answered by the process that ended?"""
    ahead, alone, _, _ = both(host, tmp_path, LATER_CRASH, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["failed", "passed", "passed"]
    assert ahead[1] == 1


CAPPED = {"f": """
    def test_f_a(student):
        student.spin(1)

    def test_f_b(student):
        student.spin(2)
""", "g": """
    def test_g_spin(student):
        student.spin(3)

    def test_g_f(student):
        assert student.f(1) == 2
"""}


def test_a_function_capped_in_an_earlier_problem_is_not_called_ahead(host, tmp_path, monkeypatch):
    """Is a function that hung too often refused in a later problem's checks (not made ahead), the
    other calls made as one by one?"""
    ahead, alone, _, _ = both(host, tmp_path, CAPPED, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["failed", "failed", "failed", "passed"]
    assert "was not called: it had timed out twice before" in ahead[0][2][2]


STATEFUL = {"f": """
    def test_f_one(student):
        assert student.bump() == 1
        assert student.bump() == 3, "the second check's first call came in between"

    def test_f_two(student):
        assert student.bump() == 2
"""}


def test_a_problems_first_calls_reach_its_process_before_the_checks_later_calls(host, tmp_path, monkeypatch):
    """With calls made ahead, does a function with hidden state see the checks' first calls before
    their later ones (the order docs/grading.md describes)?"""
    ahead, alone, _, _ = both(host, tmp_path, STATEFUL, monkeypatch)
    assert [status for _, status, _ in ahead[0]] == ["passed", "passed"]
    assert [status for _, status, _ in alone[0]] == ["failed", "failed"]


WAVES = {"f": """
    import pytest

    @pytest.mark.parametrize("x", [1, 2, 3])
    def test_f_three_calls(student, x):
        assert student.f(x) == 2 * x
        assert student.f(10 * x) == 20 * x
        assert student.f(100 * x) == 200 * x, "the third call"

    def test_f_fails_at_its_second_call(student):
        assert student.f(7) == 14
        student.boom(7)

    def test_f_hangs_at_its_third_call(student):
        assert student.f(8) == 16
        assert student.f(9) == 18
        student.spin(9)
"""}


def test_later_calls_of_the_checks_go_in_waves_with_the_same_outcomes(host, tmp_path, monkeypatch):
    """Are the checks' second calls made together in one round trip, then their third calls, with
    the outcomes, restarts and failure counts of calls made one by one (a raised error, a hang)?"""
    ahead, alone, trips, trips_alone = both(host, tmp_path, WAVES, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["passed", "passed", "passed", "failed", "failed"]
    assert ahead[2] == {"spin": 1}
    assert (trips, trips_alone) == (3, 14)


BIG = {"f": """
    import numpy as np
    import pytest

    @pytest.mark.parametrize("k", [1, 2, 3])
    def test_f_big(student, k):
        x = np.full(50_000, float(k))       # 400 KB each way
        assert (student.f(x) == 2 * x).all()
        assert (student.f(x + 1) == 2 * x + 2).all()
"""}


def test_checks_whose_answers_come_to_the_bytes_held_ahead_go_on_to_their_ends_in_turn(host, tmp_path, monkeypatch):
    """Once the replies read for a problem's waiting checks come to more than answers made ahead
    may hold (here 1 MB: three answers of 400 KB), does each check go on to its end in turn, its
    later calls made one by one, with the outcomes calls made one by one give?"""
    ahead, alone, trips, trips_alone = both(host, tmp_path, BIG, monkeypatch, dataclasses.replace(LIMITS, return_mb=1))
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["passed"] * 3
    # the first calls together (the third answer read and dropped), then the third made again, and
    # each second call in turn
    assert (trips, trips_alone) == (5, 6)


IN_TURN = {"f": """
    ended = []

    def test_f_first(student):
        assert student.f(1) == 2
        assert student.f(2) == 4          # a later wave: the next check goes on meanwhile
        ended.append("first")

    def test_f_second(student):
        assert student.f(3) == 6
        student.after_earlier_checks()
        assert ended == ["first"], f"went on before the first check ended: {ended}"
"""}


def test_a_check_may_wait_for_the_checks_before_it_to_end(host, tmp_path, monkeypatch):
    """Does a check that asks to go on only after the checks before it have ended (to read what
    the submission's checks share, as Expect does before its diagnosis) find them ended?"""
    ahead, alone, _, _ = both(host, tmp_path, IN_TURN, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["passed", "passed"]


# `halve` stops its process on a negative number, and works otherwise
SOMETIMES_CRASHES = NOTEBOOK + """
def halve(x):
    if x < 0:
        os._exit(3)
    return x / 2
"""

LATER_CHECKS_CRASH = """
    def halve(student, x):
        return student.halve(x)

    def halve_in_turn(student, x):
        [half] = student.call_many([("halve", (x,), {{}})])     # several calls at once: made in turn
        return half

    def test_f_halves_three_times(student):
        assert student.halve(2) == 1
        assert student.halve(4) == 2      # one by one: made before the next checks' crashes
        assert student.halve(6) == 3

    def test_f_halves_minus_one(student):
        assert {halve}(student, -1) == -0.5

    def test_f_halves_minus_two(student):
        assert {halve}(student, -2) == -1

    def test_f_dies(student):
        student.die(1)
"""


@pytest.mark.parametrize("halve, max_restarts", [
    ("halve", 5), ("halve", 1), ("halve_in_turn", 5),
])
def test_a_later_checks_crashes_cost_an_earlier_check_nothing(host, tmp_path, monkeypatch, halve, max_restarts):
    """A check's later calls go in waves with the next checks' calls: when those crash, is the
    earlier check still graded as one by one, where it ends before they start (not refused because
    the function was capped after two crashes, or the restarts were used up, by the checks after it)?"""
    graders = {"f": LATER_CHECKS_CRASH.format(halve=halve)}
    limits = dataclasses.replace(LIMITS, max_restarts=max_restarts)
    ahead, alone, _, _ = both(host, tmp_path, graders, monkeypatch, limits, SOMETIMES_CRASHES)
    assert ahead == alone
    assert ahead[0][0] == ("test_f_halves_three_times", "passed", "")


HANG_TO_THE_END = """
    def test_f_before(student):
        assert student.f(1) == 2          # answered ahead, before the hang{later}

    def test_f_spins(student):
        student.spin(1)                   # runs until the submission's time is spent

    def test_f_after(student):
        assert student.f(3) == 6
"""


@pytest.mark.parametrize("later", [
    "\n        assert student.f(2) == 4          # one by one: made before the next check's hang",
    "",
], ids=["a_later_call", "no_later_call"])
def test_the_time_a_hang_made_ahead_spends_costs_an_earlier_check_nothing(host, tmp_path, monkeypatch, later):
    """A call made ahead that hangs spends the submission's time before the earlier checks' later
    calls are made, and before their answers made ahead are taken: when it runs until that time is
    spent, is the earlier check still graded as one by one, where its calls were all made before
    the hang began (and the hang, and the checks after it, as one by one: the time ran out)?"""
    limits = dataclasses.replace(LIMITS, call_seconds=10.0, submission_seconds=2.0)
    graders = {"f": HANG_TO_THE_END.format(later=later)}
    ahead, alone, _, _ = both(host, tmp_path, graders, monkeypatch, limits)
    assert ahead == alone
    assert ahead[0][0] == ("test_f_before", "passed", "")
    assert [status for _, status, _ in ahead[0][1:]] == ["failed", "failed"]
    assert all("longer than the 2 s allowed per submission" in output for _, _, output in ahead[0][1:])
    assert ahead[1] == 1 and ahead[2] == {"spin": 1}


MIXED = {"f": """
    import pytest
    from autograder.grading.checks import Expect

    def test_f_plain(student):
        assert student.f(1) == 2

    def test_f_fails_before_calling(student):
        raise AssertionError("no call made")

    def test_f_makes_no_call(student):
        assert True

    def test_f_pair(student, expect):
        assert expect.call_each(student.f, (2,), (3,)) == [4, 6]

    def test_f_another(student):
        assert student.f(4) == 8
        assert student.f(5) == 10

    @pytest.fixture
    def seven():
        return 7

    def test_f_with_its_own_fixture(student, seven):
        assert student.f(seven) == 14

    def test_f_after_pytests_own(student):
        assert student.f(8) == 16
"""}


def test_checks_without_a_plain_first_call_run_in_turn_among_those_made_ahead(host, tmp_path, monkeypatch):
    """Among checks whose first calls are made ahead, do a check that fails before calling, one that
    calls nothing, one that starts with several calls at once (call_each) and one that pytest's own
    protocol runs keep the outcomes they have one by one?"""
    ahead, alone, trips, trips_alone = both(host, tmp_path, MIXED, monkeypatch)
    assert ahead == alone
    assert [status for _, status, _ in ahead[0]] == ["passed", "failed", "passed", "passed", "passed", "passed",
                                                   "passed"]
    # one by one: 1 + 1 (call_each) + 2 + 1 + 1; ahead: f(1) and f(4) together, call_each, f(5), then the rest
    assert (trips, trips_alone) == (5, 6)


def test_check_greenlets_are_kept_for_later_checks_and_submissions(host, tmp_path, monkeypatch):
    """Are the greenlets that run checks made ahead made once per session (parked between checks,
    given the next problem's and the next submission's checks), each submission still getting the
    outcomes calls made one by one give?"""
    made = []

    class Counted(session_module.greenlet):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)
    monkeypatch.setattr(session_module, "greenlet", Counted)
    graders = {**VALUES, "g": MIXED["f"].replace("test_f_", "test_g_")}
    alone = grade(host, tmp_path, graders, ahead=False)
    assert not made
    folder = tmp_path / "kept"
    folder.mkdir()
    for problem, body in graders.items():
        (folder / f"test_{problem}.py").write_text(textwrap.dedent(body))
    cells = [{"index": 1, "label": cell_label(1, NOTEBOOK), "source": NOTEBOOK}]
    with GraderSession(assignment(*graders), InstructorCode(None, None, folder), ahead=True) as session:
        for _ in range(3):
            with StudentProxy(host.submission(cells, LIMITS)) as proxy:
                graded = session.run({"hw.ipynb": proxy}, seed=1)
                run = proxy._run
                assert ([(c.name.split("::")[-1], c.status, c.output) for c in graded.checks],
                        run.restarts, {k: len(v) for k, v in run.failures.items()}) == alone
    # problem f's 7 checks wait together at most: 7 greenlets in all, not one per check and submission
    assert 0 < len(made) <= 7


UNITTEST = """
    import unittest

    class TestAsACase(unittest.TestCase):
        def test_case_passes(self):
            self.assertEqual(1 + 1, 2)
"""


def test_a_unittest_case_among_the_graders_is_collected(host, tmp_path):
    """Is a unittest.TestCase in a grader module still collected as a check (pytest's unittest
    plugin, left out for graders that never name unittest, is kept for these)?"""
    checks, _, _ = grade(host, tmp_path, {"f": UNITTEST}, ahead=True)
    assert [name for name, _, _ in checks] == ["test_case_passes"]
    assert "no:unittest" not in pytest_args(tmp_path / "ahead")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "test_f.py").write_text("def test_f(student):\n    pass\n")
    assert "no:unittest" in pytest_args(tmp_path / "plain")


PYTEST_FIXTURES = """
    import logging
    import warnings

    def test_f_with_pytests_fixtures(student, tmp_path, tmpdir, monkeypatch, recwarn, caplog, capsys):
        monkeypatch.setenv("GRADER_SEES", "1")
        (tmp_path / "x").write_text("y")
        assert tmpdir.join("x").read() == "y"
        warnings.warn("noted", UserWarning)
        assert len(recwarn) == 1
        logging.getLogger("grader").warning("logged")
        assert "logged" in caplog.text
        print("printed")
        assert capsys.readouterr().out == "printed\\n"
        assert student.f(1) == 2
"""


def test_graders_asking_for_pytests_own_fixtures_get_them(host, tmp_path):
    """Are pytest's optional plugins (left out of a session whose graders never name their
    fixtures) kept for graders that ask for tmp_path, tmpdir, monkeypatch, recwarn, caplog and
    capsys, so that those checks run and pass as under plain pytest?"""
    checks, _, _ = grade(host, tmp_path, {"f": PYTEST_FIXTURES}, ahead=True)
    assert [(name, status) for name, status, _ in checks] == [("test_f_with_pytests_fixtures", "passed")]
    kept = pytest_args(tmp_path / "ahead")
    for plugin in ("legacypath", "tmpdir", "monkeypatch", "recwarn", "logging", "capture"):
        assert f"no:{plugin}" not in kept
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "test_f.py").write_text("def test_f(student):\n    pass\n")
    plain = pytest_args(tmp_path / "plain")
    for plugin, _ in OPTIONAL_PLUGINS:
        assert f"no:{plugin}" in plain


@pytest.mark.parametrize(("body", "message"), [
    ("import numpy as np\n\n\ndef relu(x:\n    return x\n",
     "assignments/hw/reference.py, line 4: SyntaxError: '(' was never closed"),
    ("def relu(x):\n    return x\n\n\nraise ValueError('oops')\n",
     "assignments/hw/reference.py, line 5: ValueError: oops"),
    ("import numpy as np\nimport nosuchmodule_for_a_test\n",
     "assignments/hw/reference.py, line 2: ModuleNotFoundError: No module named 'nosuchmodule_for_a_test'"),
    ("def scale():\n    return 1 / 0\n\n\nFACTOR = scale()\n",
     "assignments/hw/reference.py, line 2: ZeroDivisionError: division by zero"),
], ids=["syntax", "raises", "missing-module", "inner-frame"])
def test_an_instructor_module_that_fails_to_import_is_one_line_naming_its_file_and_line(tmp_path, body, message):
    """Is reference.py (or mistakes.py) failing on import a CourseError of one line naming the file
    relative to the course, the line of its innermost frame in that file, and the error?"""
    file = tmp_path / "reference.py"
    file.write_text(body)
    spec = importlib.util.spec_from_file_location(f"reference_{tmp_path.name}", file)
    with pytest.raises((SyntaxError, ValueError, ImportError, ZeroDivisionError)) as raised:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    error = session_module.import_failure(raised.value, "reference.py", InstructorFolder(tmp_path, "assignments/hw"))
    assert isinstance(error, CourseError)
    assert str(error) == message


def test_instructor_code_changed_since_or_of_another_course_is_imported_afresh(tmp_path, monkeypatch):
    """In a process that grades on and on (a Dask worker), is each course's own reference.py used when two
    courses take turns, and is a reference.py changed since it was imported imported again?"""
    import os
    import sys

    from autograder.config import load_course
    from autograder.grading.session import load_instructor_code
    from autograder.layout import CourseLayout
    from conftest import copy_course

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(session_module, "_IMPORTED", dict(session_module._IMPORTED))
    held = {n: m for n, m in sys.modules.items() if n == "assignments" or n.startswith("assignments.")}
    a, b = copy_course(tmp_path / "a"), copy_course(tmp_path / "b")

    def mark(folder: Path, value: str, stamp: int) -> None:
        reference = CourseLayout(folder).package("transformer_block") / "reference.py"
        reference.write_text(reference.read_text() + f"\nCOURSE_MARK = {value!r}\n")
        os.utime(reference, ns=(stamp, stamp))

    def marked(folder: Path) -> str:
        course = load_course(folder)
        return load_instructor_code(course, course.assignment("transformer-block")).reference.COURSE_MARK

    try:
        mark(a, "a", 10**18)
        mark(b, "b", 10**18)
        assert [marked(a), marked(b), marked(a)] == ["a", "b", "a"]
        mark(a, "a, changed", 10**18 + 10**9)
        assert marked(a) == "a, changed"
    finally:
        for name in [n for n in sys.modules if n == "assignments" or n.startswith("assignments.")]:
            del sys.modules[name]
        sys.modules.update(held)


def test_a_notebook_past_its_total_limit_scores_its_answers_with_a_note(host, tmp_path):
    """A notebook whose answer cells come first and whose later cells together run past the total
    limit (each under the cell limit): do its answers get their points, with notes naming the cells
    that were not run and why, rather than 0 for every problem?"""
    layout = CourseLayout(tmp_path)
    graders = layout.graders("hw")
    graders.mkdir(parents=True)
    (graders / "test_double.py").write_text("def test_double(student):\n    assert student.double(3) == 6\n")
    limits = dataclasses.replace(LIMITS, cell_seconds=1.0, total_seconds=1.5, submission_seconds=20.0)
    a = assignment("double", limits=limits)
    course = Course(root=tmp_path, name="t", course_id="t", assignments=(a,), roster_file=None,
                    gradebook_url="sqlite://", secret_file=tmp_path / ".secret")
    folder = layout.submission("ada", "hw")
    folder.mkdir(parents=True)
    sources = ["def double(x):\n    return 2 * x", *["import time\ntime.sleep(0.6)"] * 4]
    (folder / "hw.ipynb").write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": s, "metadata": {}, "outputs": [], "execution_count": None} for s in sources]}))
    with GraderSession(a, InstructorCode(None, None, graders)) as session:
        result = engine.grade_submission(course, a, "ada", folder, seed=1, host=host, session=session, released={})
    assert result.state == "graded" and result.score == result.max_score == 1, result.notes
    notes = "\n".join(result.notes)
    assert "Your notebook did not finish within its time limit of 1.5 s: it was run again up to the " in notes
    assert "The 5th code cell (`import time`) was not run: the notebook reached its time limit of 1.5 s before it" \
        in notes
