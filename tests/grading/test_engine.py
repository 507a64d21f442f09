"""Each step of grading one submission on its own (load, run notebooks, run graders, score, apply
the late policy, build the result), with small stand-ins where a step meets the sandbox: every
test here runs in milliseconds. The whole pipeline with the real sandbox is exercised by the batch
tests (tests/test_autograde_corpus.py, tests/test_demo.py)."""
from __future__ import annotations

import dataclasses
import datetime as dt
import json
import textwrap
from pathlib import Path

import pytest

from autograder.config import Assignment, Course, LatePolicy, Limits, Problem, Tolerance
from autograder.grading import engine
from autograder.grading.results import CheckOutcome, TestResult
from autograder.grading.session import GraderRun, GraderSession, InstructorCode
from autograder.layout import CourseLayout
from autograder.sandbox.outcomes import CellOutcome, ExecutionReport, NotebookFailed

TOL = {"float64": Tolerance(1e-7, 1e-9), "float32": Tolerance(1e-4, 1e-5)}
NB = "hw.ipynb"
DUE = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def assignment(**points: float) -> Assignment:
    return Assignment(name="hw", package="hw", notebooks=(NB,), due=DUE,
                      late_policy=LatePolicy(grace_minutes=0, penalty_per_day=0.25, max_late_days=2),
                      problems=tuple(Problem(n, p, f"test_{n}", NB, TOL) for n, p in points.items()),
                      limits=Limits(max_notes=4))


def course(root: Path, a: Assignment) -> Course:
    return Course(root=root, name="t", course_id="t", assignments=(a,), roster_file=None,
                  gradebook_url="sqlite://", secret_file=root / ".secret")


def notebook(*cells: tuple[str, dict]) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": src, "metadata": meta, "outputs": [], "execution_count": None}
        for src, meta in cells]})


def test_load_reads_notebooks_files_notes_and_the_submission_time(tmp_path):
    """Does `load` give the code cells (test cells marked), the files relative to the course, and the timestamp?"""
    a = assignment(double=2)
    folder = CourseLayout(tmp_path).submission("ada", "hw")
    folder.mkdir(parents=True)
    test_meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_double", "points": 2}}
    (folder / NB).write_text(notebook(("def double(x):\n    return 2 * x", {}), ("assert double(1) == 2", test_meta)))
    (folder / "timestamp.txt").write_text("2026-12-02 13:00:00 UTC")
    sub = engine.load(course(tmp_path, a), a, "ada", folder)
    (name, nb), = sub.notebooks
    assert name == NB and [c.test_of for c in nb.cells] == ["", "test_double"]
    assert sub.files == ("submitted/ada/hw/hw.ipynb",)
    assert sub.submitted_at == dt.datetime(2026, 12, 2, 13, 0, tzinfo=dt.UTC) and sub.time_note == ""
    assert sub.notes == ()


def test_load_turns_a_broken_file_into_a_note(tmp_path):
    """Is an unreadable notebook an unreadable entry with a note, and an unreadable timestamp a note of its own?"""
    folder = tmp_path / "hw"
    folder.mkdir()
    (folder / NB).write_text("{not json")
    (folder / "timestamp.txt").write_text("yesterday")
    a = assignment(double=2)
    sub = engine.load(course(tmp_path, a), a, "bob", folder)
    assert not sub.notebooks[0][1].readable and "not valid notebook JSON" in sub.notes[0]
    assert sub.submitted_at is None and "timestamp.txt could not be read" in sub.time_note


@pytest.mark.parametrize("make, unread", [
    (lambda p: p.write_bytes(b""), True),                               # empty
    (lambda p: p.write_text(notebook(("x = 1", {}))[:40]), True),      # truncated JSON
    (lambda p: p.write_bytes(bytes(range(256)) * 4), True),            # binary
    (lambda p: p.mkdir(), True),                                       # a folder in its place
    (lambda p: p.symlink_to(p.parent / "elsewhere.ipynb"), True),      # a link in its place
    (lambda p: p.write_text(notebook(("x = 1", {})) + " " * 2 * 1024 * 1024), True),   # over notebook_mb
    (lambda p: None, False),                                           # not submitted
    (lambda p: p.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": []})),
     False),                                                           # a notebook with no code cells
    (lambda p: p.write_text(notebook(("x = 1", {}))), False),
])
def test_a_notebook_that_cannot_be_read_is_flagged_for_the_ta(tmp_path, make, unread):
    """Is a notebook that is there but cannot be read as one (empty, truncated, binary, a folder or a
    link in its place, too big) named in the result, kept in results.json and read back, and flagged
    `notebook unreadable` in the summary, unlike one missing or a notebook without code cells, so that
    such a zero stands out from a real one?"""
    from autograder.reporting.results_json import result_from_json, to_results_json
    from autograder.reporting.summary import StudentRow, format_summary

    folder = tmp_path / "hw"
    folder.mkdir()
    make(folder / NB)
    a = dataclasses.replace(assignment(double=2), limits=Limits(max_notes=4, notebook_mb=1))
    sub = engine.load(course(tmp_path, a), a, "bob", folder)
    assert sub.unread == ((NB,) if unread else ())
    result = engine.build_result(a, sub, engine.Scored(tests=()), engine.LatePenalty(0.0), seed=3, on_roster=True,
                                 notes=sub.notes, isolation=(), seconds=0)
    assert result_from_json(to_results_json(result))[0].unreadable_notebooks == sub.unread
    assert StudentRow.of(result).notebook_unread == unread
    assert ("notebook unreadable" in format_summary([result], a).splitlines()[2]) == unread


class FakeRun:
    """A submission run that ran its cells (none failed) and answers no calls."""
    restarts = 1
    isolation = ("bubblewrap", "seccomp")

    def __init__(self, cells):
        self.cells = tuple(cells)
        self.report = ExecutionReport(
            cells=tuple(CellOutcome(c.index, "ok", label=c.label) for c in self.cells), seconds=0.0, state="ok",
            isolation=self.isolation, messages=("a note from the run",))
        self.closed = False

    def close(self):
        self.closed = True


class FakeHost:
    def __init__(self):
        self.runs: list[FakeRun] = []

    def submission(self, cells, limits, *, deadline=None):
        self.runs.append(FakeRun(cells))
        return self.runs[-1]


def test_run_notebooks_skips_replaced_test_cells_and_closes_the_processes(tmp_path):
    """Does `run_notebooks` run all but the replaced test cells, prefix the run's notes, and close the run after?"""
    folder = tmp_path / "hw"
    folder.mkdir()
    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_double"}}
    other = {"nbgrader": {"grade": True, "solution": False, "grade_id": "test_bonus"}}
    (folder / NB).write_text(notebook(("x = 1", {}), ("assert x", meta), ("assert x", other)))
    a = assignment(double=2)
    sub = engine.load(course(tmp_path, a), a, "ada", folder)
    host = FakeHost()
    with engine.run_notebooks(sub, host, a.limits, deadline=0.0, replaced=frozenset({"test_double"})) as run:
        assert [c.index for c in host.runs[0].cells] == [0, 2] and run.skipped_cells == 1
        assert run.notes == (f"{NB}: a note from the run",)
        assert run.restarts() == 1 and run.isolation() == ("bubblewrap", "seccomp")
        assert not host.runs[0].closed
    assert host.runs[0].closed


def test_run_notebooks_leaves_out_unchanged_released_cells_nothing_graded_reads(tmp_path):
    """Given the release, does `run_notebooks` leave out an unchanged public check whose names nothing
    reads, and run it once the student changed it?"""
    layout = CourseLayout(tmp_path)
    check = "y = double(3)\nassert y == 6, 'double(3) should be 6'"
    answer = ("def double(x):\n    return 2 * x", {"nbgrader": {"grade": False, "solution": True, "grade_id": "d"}})
    layout.release("hw").mkdir(parents=True)
    (layout.release("hw") / NB).write_text(notebook(("def double(x):\n    raise NotImplementedError()", answer[1]),
                                                    (check, {})))
    a = assignment(double=2)
    c = course(tmp_path, a)
    released = engine.released_cells(c, a)
    assert set(released) == {NB} and "double" in released[NB].grader_names
    for source, runs in ((check, [0]), (check + "\n", [0, 1])):
        folder = layout.submission("ada", "hw")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / NB).write_text(notebook(answer, (source, {})))
        host = FakeHost()
        with engine.run_notebooks(engine.load(c, a, "ada", folder), host, a.limits, deadline=0.0,
                                  released=released) as run:
            assert [cell.index for cell in host.runs[0].cells] == runs
            assert run.skipped_cells == 2 - len(runs)



def test_run_notebooks_runs_an_earlier_copy_of_a_replaced_test_cell(tmp_path):
    """A test cell the hidden graders replace, copied and pasted above itself (its nbgrader metadata with it)
    and rewritten into a helper the answer calls: as nbgrader's DeduplicateIds keeps the last cell with an id,
    is only the last left out as the test cell, the copy above it run as any code cell?"""
    layout = CourseLayout(tmp_path)
    answer = {"nbgrader": {"grade": False, "solution": True, "grade_id": "d"}}
    test = {"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "test_double", "points": 2}}
    layout.release("hw").mkdir(parents=True)
    (layout.release("hw") / NB).write_text(notebook(("def double(x):\n    raise NotImplementedError()", answer),
                                                    ("assert double(1) == 2", test)))
    a = assignment(double=2)
    c = course(tmp_path, a)
    folder = layout.submission("ada", "hw")
    folder.mkdir(parents=True)
    (folder / NB).write_text(notebook(("def double(x):\n    return _twice(x)", answer),
                                      ("def _twice(x):\n    return 2 * x", test), ("assert double(1) == 2", test)))
    host = FakeHost()
    with engine.run_notebooks(engine.load(c, a, "ada", folder), host, a.limits, deadline=0.0,
                              replaced=engine.replaced_test_cells(a), released=engine.released_cells(c, a)) as run:
        assert [cell.index for cell in host.runs[0].cells] == [0, 1] and run.skipped_cells == 1

class NoGraders:
    """A grader session with no checks."""

    def run(self, proxies, seed):
        return GraderRun(checks=(), broken=())


def test_grade_submission_plans_cells_with_the_release_it_is_given(tmp_path, monkeypatch):
    """Given what the release holds (a worker reads it once), does `grade_submission` leave out the
    cells that says it may, without reading the release again; and read it itself when not given?"""
    layout = CourseLayout(tmp_path)
    check = "y = double(3)\nassert y == 6"
    answer = ("def double(x):\n    return 2 * x", {"nbgrader": {"grade": False, "solution": True, "grade_id": "d"}})
    layout.release("hw").mkdir(parents=True)
    (layout.release("hw") / NB).write_text(notebook(answer, (check, {})))
    a = assignment(double=2)
    c = course(tmp_path, a)
    folder = layout.submission("ada", "hw")
    folder.mkdir(parents=True)
    (folder / NB).write_text(notebook(answer, (check, {})))
    released = engine.released_cells(c, a)
    reads = []
    read_release = engine.released_cells
    monkeypatch.setattr(engine, "released_cells", lambda *args: reads.append(args) or read_release(*args))
    for given, ran, read in ((released, [0], 0), ({}, [0, 1], 0), (None, [0], 1)):
        host = FakeHost()
        result = engine.grade_submission(c, a, "ada", folder, seed=1, host=host, session=NoGraders(),
                                         released=given)
        assert [cell.index for cell in host.runs[0].cells] == ran and len(reads) == read
        assert result.state == "graded"
        reads.clear()


def test_run_notebooks_stands_in_for_an_unreadable_notebook(tmp_path):
    """Does an unreadable notebook start no process, its functions failing with the reason?"""
    folder = tmp_path / "hw"
    folder.mkdir()
    (folder / NB).write_text("")
    a = assignment(double=2)
    sub = engine.load(course(tmp_path, a), a, "ada", folder)
    host = FakeHost()
    with engine.run_notebooks(sub, host, a.limits, deadline=0.0) as run:
        proxy = run.by_notebook[NB]
        with pytest.raises(NotebookFailed, match="empty file"):
            proxy.for_problem("double").double(2)
    assert host.runs == []


def test_run_graders_runs_the_sessions_checks_against_the_proxies(tmp_path):
    """Does `run_graders` hand the execution's proxies to the session and return its checks?"""
    graders = tmp_path / "graders"
    graders.mkdir()
    (graders / "test_double.py").write_text(textwrap.dedent("""
        def test_double_doubles(student):
            '''Does double double?'''
            assert student.double(3) == 6
    """))

    class Proxy:
        restarts, isolation = 0, ()

        def for_problem(self, problem):
            return self

        def double(self, x):
            return 2 * x

    a = assignment(double=2)
    with GraderSession(a, InstructorCode(None, None, graders)) as session:
        run = engine.run_graders(engine.Execution(proxies=((NB, Proxy()),), notes=()), session, seed=5)
    assert [(c.name, c.status, c.description) for c in run.checks] == \
        [("test_double.py::test_double_doubles", "passed", "Does double double?")]


def outcome(problem: str, name: str, weight: float, status: str = "passed", **kw) -> CheckOutcome:
    return CheckOutcome(name=f"test_{problem}.py::{name}", problem=problem, weight=weight, status=status, **kw)


def test_score_shares_points_by_weight_in_course_order_and_names_grader_errors():
    """Does `score` share each problem's points by weight, order tests as course.yml does, and list grader errors?"""
    a = assignment(first=10, second=4)
    run = GraderRun(checks=(
        outcome("second", "b", 1.0, "failed", output="off"),
        outcome("first", "a1", 3.0),
        outcome("first", "a2", 1.0, "failed", internal_error=True, detail="Traceback ...\nKeyError: 'x'"),
        outcome("second", "c", 1.0),
    ), broken=())
    scored = engine.score(run, a)
    assert [(t.name.split("::")[1], t.score, t.max_score) for t in scored.tests] == \
        [("a1", 7.5, 7.5), ("a2", 0.0, 2.5), ("b", 0.0, 2.0), ("c", 2.0, 2.0)]
    assert scored.raw_score == 9.5
    assert scored.grader_errors == ("test_first.py::a2: KeyError: 'x'",)


def test_score_keeps_the_diagnosis_seen_in_more_checks():
    """When two diagnoses match in one check and one of them also elsewhere, is only the wider one kept?"""
    a = assignment(first=4)
    run = GraderRun(checks=(outcome("first", "a", 1.0, "failed", diagnoses=("first.x", "first.y"), hints=("X", "Y")),
                            outcome("first", "b", 1.0, "failed", diagnoses=("first.x",), hints=("X",))), broken=())
    assert [t.diagnoses for t in engine.score(run, a).tests] == [("first.x",), ("first.x",)]


def test_score_keeps_which_diagnoses_are_a_probes_localised_stages():
    """Does a test keep which of its diagnoses are a probe's localised stages, and drop a pruned one from them?"""
    a = assignment(first=4)
    run = GraderRun(checks=(
        outcome("first", "a", 1.0, "failed", diagnoses=("first.x", "first.stage"), hints=("X", "S"),
                stages=("first.stage",)),
        outcome("first", "b", 1.0, "failed", diagnoses=("first.x",), hints=("X",)),
        outcome("first", "c", 1.0, "failed", diagnoses=("first.other",), hints=("O",), stages=("first.other",)),
    ), broken=())
    assert [(t.diagnoses, t.stages) for t in engine.score(run, a).tests] == \
        [(("first.x",), ()), (("first.x",), ()), (("first.other",), ("first.other",))]


NEEDS_MHA = "Not graded: this check needs your `mha`, which failed on its inputs (it raised ValueError)."


def test_a_check_not_graded_for_a_block_that_waits_for_a_failing_block_names_that_one():
    """When `block` is not graded because its `mha` is not graded because its `split` fails its own
    checks, does block's message name `split` and its problem's number, from the outcomes alone?"""
    a = assignment(split=10, merge=5, mha=20, block=20)
    run = GraderRun(checks=(
        outcome("split", "s", 1.0, "failed", output="split returned shape (2, 3)"),
        outcome("merge", "m", 1.0),
        outcome("mha", "a1", 1.0, "not_graded", output="Not graded: ... `split` ...", needs="split"),
        outcome("mha", "a2", 1.0, "failed", output="mha raised ValueError"),
        outcome("block", "b", 1.0, "not_graded", output=NEEDS_MHA, needs="mha"),
    ), broken=())
    tests = {t.name.split("::")[1]: t for t in engine.score(run, a).tests}
    assert tests["b"].output == (f"{NEEDS_MHA} Your `split` also fails its own checks (problem 1), and `mha` builds "
                                 f"on it: fix that first.")
    assert tests["a1"].output == "Not graded: ... `split` ..."      # its own block is named already
    assert (tests["b"].score, tests["b"].status) == (0.0, "not_graded")


def test_no_root_cause_is_named_when_the_blocks_below_pass_or_wait_in_a_circle():
    """Is nothing added when the block's own blocks pass their checks, or when blocks wait for each other?"""
    a = assignment(split=10, mha=20, block=20)
    passing = GraderRun(checks=(
        outcome("split", "s", 1.0),
        outcome("mha", "a1", 1.0, "not_graded", output="x", needs="split"),
        outcome("block", "b", 1.0, "not_graded", output=NEEDS_MHA, needs="mha"),
    ), broken=())
    circle = GraderRun(checks=(
        outcome("split", "s", 1.0, "not_graded", output="y", needs="mha"),
        outcome("mha", "a1", 1.0, "not_graded", output="x", needs="split"),
        outcome("block", "b", 1.0, "not_graded", output=NEEDS_MHA, needs="mha"),
    ), broken=())
    for run in (passing, circle):
        assert [t.output for t in engine.score(run, a).tests if t.problem == "block"] == [NEEDS_MHA]


def test_the_restart_note_counts_in_words():
    """Does the restart note say "1 time" and "2 times", never "time(s)", and tell the submission's
    restarts in all apart from how often one function may fail ("twice") before it is not called?"""
    assert "restarted 1 time in all after" in engine.restart_note(1)
    assert "restarted 4 times in all after" in engine.restart_note(4)
    assert "A function that hung or crashed twice was not called again" in engine.restart_note(4)


def test_apply_late_policy_takes_a_share_per_started_day_and_everything_past_the_last_day():
    """Is a submission 1.5 days late charged 2 days' share, one 3 days late charged everything, one on time nothing?"""
    a = assignment(first=10)
    on_time = engine.apply_late_policy(80.0, a, DUE - dt.timedelta(hours=1), "ada")
    late = engine.apply_late_policy(80.0, a, DUE + dt.timedelta(hours=36), "ada")
    too_late = engine.apply_late_policy(80.0, a, DUE + dt.timedelta(days=3), "ada")
    assert (on_time.points, on_time.note) == (0.0, "")
    assert late.points == 40.0
    assert "Submitted 1 day 12 hours after the due date, counted as 2 days: late penalty of 50%" in late.note
    assert too_late.points == 80.0 and too_late.note == (
        "Submitted 3 days after the due date, past the last accepted day: late penalty of 100% (80 points, all "
        "of the autograder's score).")
    assert engine.apply_late_policy(80.0, a, None, "ada").points == 0.0


def submission(tmp_path: Path) -> engine.Submission:
    return engine.Submission(student="ada", folder=tmp_path, notebooks=(), files=("submitted/ada/hw/hw.ipynb",),
                             notes=(), submitted_at=DUE)


def test_every_result_says_when_it_was_graded_in_utc(tmp_path: Path):
    """Do a graded result and a crashed one carry the time they were made, in UTC to the second?"""
    a = assignment(first=10)
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    graded = engine.build_result(a, submission(tmp_path), engine.Scored(tests=()), engine.LatePenalty(0.0), seed=1,
                                 on_roster=True, notes=(), isolation=(), seconds=0)
    crashed = engine.crashed_result(a, "ada", 1, True, "the worker stopped")
    after = dt.datetime.now(dt.UTC)
    for result in (graded, crashed):
        when = dt.datetime.fromisoformat(result.graded_at)
        assert when.utcoffset() == dt.timedelta(0) and when.microsecond == 0, result.graded_at
        assert before <= when <= after


def test_build_result_graded_with_penalty_notes_capped():
    """Does a graded result carry tests, grader errors, the penalty and at most max_notes notes?"""
    a = assignment(first=10)
    test = TestResult("test_first.py::a", "first", 10.0, 10.0, "passed")
    scored = engine.Scored(tests=(test,), grader_errors=("x: boom",))
    result = engine.build_result(a, submission(Path()), scored, engine.LatePenalty(2.5, "late!"), seed=3,
                                 on_roster=False, notes=("n1", "n2"), isolation=("seccomp",), seconds=0.1234)
    assert (result.state, result.raw_score, result.late_penalty, result.score) == ("graded", 10.0, 2.5, 7.5)
    assert result.grader_errors == ("x: boom",) and result.crash_reason == "" and result.grader_failed
    assert result.notes == ("n1", "n2", "late!") and result.submitted_at == DUE.isoformat()
    assert (result.seed, result.on_roster, result.isolation, result.execution_time) == (3, False, ("seccomp",), 0.123)
    assert dt.datetime.fromisoformat(result.graded_at).utcoffset() == dt.timedelta(0)
    many = engine.build_result(a, submission(Path()), scored, engine.LatePenalty(0.0), seed=3, on_roster=True,
                               notes=tuple(f"n{i}" for i in range(9)), isolation=(), seconds=0)
    assert len(many.notes) == 4 and many.notes[-1].startswith("... and 6 more notes")


def test_the_most_notes_course_yml_allows_are_all_shown_in_the_reports():
    """With `limits.max_notes` at its largest (the default), are the notes a result keeps exactly those
    results.json and the page show (the summary's count is theirs), none cut again by the report caps?"""
    import dataclasses

    from autograder.reporting.bounds import bound_result

    a = dataclasses.replace(assignment(first=10), limits=Limits())
    scored = engine.Scored(tests=(TestResult("test_first.py::a", "first", 10.0, 10.0, "passed"),))
    result = engine.build_result(a, submission(Path()), scored, engine.LatePenalty(0.0), seed=3, on_roster=True,
                                 notes=tuple(f"cell {i} failed" for i in range(45)), isolation=(), seconds=0)
    assert len(result.notes) == Limits().max_notes and result.notes[-1].startswith("... and 6 more notes")
    assert bound_result(result).notes == result.notes


def test_an_unread_timestamp_reaches_the_instructor():
    """Is why a timestamp.txt was not read (so no late penalty) kept in the result for the instructor:
    in results.json's extra_data, read back, and a flag of the batch's summary row?"""
    import dataclasses

    from autograder.reporting.results_json import result_from_json, to_results_json
    from autograder.reporting.summary import StudentRow, format_summary

    a = assignment(first=10)
    why = "timestamp.txt could not be read as a time ('2026-12-02 13:00:00 XYZ': ...)"
    unread = dataclasses.replace(submission(Path()), submitted_at=None, time_note=why)
    scored = engine.Scored(tests=(TestResult("test_first.py::a", "first", 10.0, 10.0, "passed"),))
    result = engine.build_result(a, unread, scored, engine.LatePenalty(0.0), seed=3, on_roster=True,
                                 notes=(why,), isolation=(), seconds=0)
    assert result.timestamp_problem == why and result.submitted_at == ""
    doc = to_results_json(result)
    assert doc["extra_data"]["timestamp_problem"] == why
    assert result_from_json(doc)[0].timestamp_problem == why
    assert StudentRow.of(result).timestamp_problem == why
    assert "timestamp unread" in format_summary([result], a).splitlines()[2]


def test_build_result_crashed_when_the_graders_could_not_run():
    """Is a broken grader run a crashed result with the reason, no tests and no penalty?"""
    a = assignment(first=10)
    scored = engine.Scored(tests=(), broken=("graders could not be collected: test_x.py: SyntaxError",))
    result = engine.build_result(a, submission(Path()), scored, engine.LatePenalty(0.0), seed=1, on_roster=True,
                                 notes=(), isolation=(), seconds=0)
    assert result.state == "crashed" and result.crash_reason.startswith("graders could not be collected")
    assert result.tests == () and result.grader_errors == () and result.score == 0 and result.grader_failed


@pytest.mark.parametrize("weights, why", [
    ((3.0, -1.0), "test_first.py::b: weight -1.0: a check's weight is a finite number, 0 or more"),
    ((3.0, float("nan")), "test_first.py::b: weight nan: a check's weight is a finite number, 0 or more"),
    ((0.0, 0.0), "all checks of problem first weigh 0, so none of its 4 points can be scored"),
    ((1e308, 1e308), "the weights of problem first's checks add up to more than can be shared out"),
], ids=["negative", "nan", "all-zero", "overflow"])
def test_score_refuses_weights_that_cannot_share_out_a_problems_points(weights, why):
    """Are checks whose weights would score a problem past its points (a negative one), or not share
    them out at all (nan, all 0, a sum past a float), refused as broken grading with no test scored,
    rather than a failing check of weight -1 giving its passing neighbour 6 of 4 points?"""
    run = GraderRun(checks=(outcome("first", "a", weights[0]), outcome("first", "b", weights[1], "failed"),
                            outcome("second", "c", 1.0)), broken=())
    scored = engine.score(run, assignment(first=4, second=2))
    assert scored.tests == () and len(scored.broken) == 1, scored
    assert scored.broken[0].startswith(f"the checks' weights cannot share out the points: {why}"), scored.broken
