"""The batch's gradebook writer process: grades land through reporting.gradebook's functions, and a
gradebook that cannot be opened is reported for every student instead of stopping the batch."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.batch.writer import GradebookProcess, _one_line
from autograder.config import load_course
from autograder.grading.results import SubmissionResult, TestResult
from autograder.layout import CourseLayout

from .test_batch import auto_scores

pytestmark = pytest.mark.slow


def result(course_dir: Path, student: str, score: float) -> SubmissionResult:
    a = load_course(course_dir).assignment("transformer-block")
    first = a.problems[0]
    return SubmissionResult(
        student=student, assignment=a.name, state="graded", seed=1, on_roster=True,
        problems=tuple(p.name for p in a.problems), problem_points=tuple((p.name, p.points) for p in a.problems),
        tests=(TestResult(name=f"test_{first.name}_x", problem=first.name, score=score, max_score=first.points,
                          status="passed" if score else "failed"),))


def test_the_writer_commits_each_result_it_is_sent(course_copy):
    """Are the grades of every result sent to the writer in the gradebook once it has finished?"""
    with GradebookProcess(course_copy, "transformer-block") as gb:
        for sid, score in (("ada", 12.0), ("bob", 0.0)):
            gb.record(result(course_copy, sid, score))
        report = gb.finish()
    assert report.gradebook.recorded == ("ada", "bob") and not report.gradebook.failed
    assert not report.output_errors
    scores = auto_scores(course_copy)
    assert scores[("ada", "test_layer_norm")] == 12.0
    assert scores[("bob", "test_layer_norm")] == 0.0


def test_the_acknowledgement_brings_the_gradebooks_scores_when_a_person_changed_one(course_copy):
    """After a TA set one of ada's scores in the gradebook, does the writer's acknowledgement of her next
    result bring the gradebook's scores (her new auto score, the TA's score), and bob's, without any
    person's change, none?"""
    from nbgrader.api import Gradebook

    a = load_course(course_copy).assignment("transformer-block")
    first = a.problems[0]
    with GradebookProcess(course_copy, a.name) as gb:
        gb.record(result(course_copy, "ada", 12.0))
        assert [ack.review for ack in gb.recorded(wait=True)] == [None]
        gb.finish()
    with Gradebook(f"sqlite:///{course_copy / 'gradebook.db'}", "dl-attention") as book:
        book.find_grade(first.grade_id, a.name, a.name, "ada").manual_score = 14.0
        book.db.commit()
    with GradebookProcess(course_copy, a.name) as gb:
        gb.record(result(course_copy, "ada", 10.0))
        gb.record(result(course_copy, "bob", 3.0))
        ada, bob = gb.recorded(wait=True)
        gb.finish()
    assert ada.error is None and ada.review is not None and bob.review is None
    changed = ada.review.problem(first.name)
    assert (changed.auto_score, changed.manual_score, changed.score) == (10.0, 14.0, 14.0)
    assert ada.review.final_score(0.0) == 14.0 and ada.review.comments == ()


def test_a_gradebook_that_cannot_be_opened_is_reported_for_every_student(course_copy):
    """When the gradebook cannot be opened, is every student's result reported as not written, in one line each?"""
    yml = course_copy / "course.yml"
    yml.write_text(yml.read_text().replace("gradebook: sqlite:///gradebook.db",
                                           "gradebook: sqlite:////nonexistent-folder/gradebook.db"))
    with GradebookProcess(course_copy, "transformer-block") as gb:
        gb.record(result(course_copy, "ada", 12.0))
        gb.record(result(course_copy, "bob", 0.0))
        report = gb.finish()
    assert [who for who, _ in report.gradebook.failed] == ["ada", "bob"]
    assert all("cannot open" in why and "\n" not in why for _, why in report.gradebook.failed)


def test_a_writer_that_stopped_before_the_first_result_gives_its_reason_for_every_student(course_copy):
    """When the writer could not open the gradebook and stopped before the batch sent it anything (a batch's
    writer starts first), is its reason reported for every student, rather than "the gradebook writer
    stopped (exit status 2)"?"""
    (course_copy / "gradebook.db").write_text("not a database\n")
    with GradebookProcess(course_copy, "transformer-block") as gb:
        assert gb._popen is not None
        gb._popen.wait()                                # the writer this test started: gone, its reason sent
        gb.record(result(course_copy, "ada", 12.0))
        gb.record(result(course_copy, "bob", 0.0))
        report = gb.finish()
    assert [who for who, _ in report.gradebook.failed] == ["ada", "bob"]
    for _, why in report.gradebook.failed:
        assert "cannot open (DatabaseError" in why and "file is not a database" in why and "\n" not in why, why


def test_a_writer_that_stops_mid_batch_is_reported_for_every_later_student(course_copy):
    """When the writer process ends in the middle of a batch (killed, out of memory), is every student sent
    after that reported as not written, in one line each, with the batch going on, rather than the
    coordinator stopping with a traceback at the next student?"""
    import os
    import signal

    with GradebookProcess(course_copy, "transformer-block") as gb:
        gb.record(result(course_copy, "ada", 12.0))
        assert [(a.student, a.error) for a in gb.recorded(wait=True)] == [("ada", None)]
        assert gb._popen is not None
        os.kill(gb._popen.pid, signal.SIGKILL)          # the writer this test started
        gb._popen.wait()
        for sid in ("bob", "carol", "dan"):
            gb.record(result(course_copy, sid, 0.0))
        report = gb.finish()
    assert report.gradebook.recorded == ("ada",)
    assert [who for who, _ in report.gradebook.failed] == ["bob", "carol", "dan"]
    assert all("the gradebook writer stopped" in why and "\n" not in why for _, why in report.gradebook.failed)


def test_an_error_line_has_its_control_characters_written_out():
    """Is an error's text (which may quote a roster name or a path) one line whose escape sequences and
    bidirectional overrides are written out rather than acted on by the terminal that shows it?"""
    line = _one_line("gradebook: IntegrityError\n  name 'x\x1b[2K\x1b[1AFAKE\u202e'\r\n  ok")
    assert line == "gradebook: IntegrityError name 'x\\x1b[2K\\x1b[1AFAKE\\u202e' ok"


def _writer_copies(course_dir: Path, student: str, notebook: bytes,
                   extra: dict[str, bytes] | None = None) -> tuple[dict, bytes]:
    """(what tests.batch.writer_peak printed, the autograded copy's bytes) for a submission of `notebook`
    (and the other files `extra`, name -> bytes) sent to a real writer process with its folder to copy
    into autograded/."""
    import json
    import subprocess
    import sys

    from conftest import ROOT

    layout = CourseLayout(course_dir)
    folder = layout.submission(student, "transformer-block")
    folder.mkdir(parents=True)
    (folder / "transformer-block.ipynb").write_bytes(notebook)
    for name, data in (extra or {}).items():
        (folder / name).write_bytes(data)
    out = subprocess.run([sys.executable, "-m", "tests.batch.writer_peak", str(course_dir), student], cwd=ROOT,
                         capture_output=True, text=True, check=True, timeout=300)
    copy = layout.autograded(student, "transformer-block") / "transformer-block.ipynb"
    return json.loads(out.stdout), copy.read_bytes()


def test_the_writer_copies_a_notebook_of_431000_raw_cells_as_a_placeholder_with_bounded_memory(course_copy):
    """Does the writer put a placeholder saying it is too large into autograded/ for a 19 MB notebook of
    431,000 raw cells (over notebooks.MAX_CELLS) without parsing it, its peak memory staying near an
    ordinary student's (parsing it with nbformat took the writer to 811 MB and stalled every later
    student's commit)?"""
    import json

    from conftest import PROJECT

    released = PROJECT.release("transformer-block") / "transformer-block.ipynb"
    normal, copy = _writer_copies(course_copy, "ada", released.read_bytes())
    assert normal["recorded"] == ["ada"] and not normal["output_errors"]
    assert b"course autograde" in copy                       # annotated, as usual
    doc = json.loads(released.read_bytes())
    doc["cells"] += [{"cell_type": "raw", "metadata": {}, "source": ""}] * 431_000
    huge = json.dumps(doc, separators=(",", ":")).encode()
    report, copy = _writer_copies(course_copy, "bob", huge)
    assert report["recorded"] == ["bob"] and not report["output_errors"]
    assert b"is too large to be read for this copy" in copy and len(copy) < len(released.read_bytes())
    assert b'"raw"' not in copy                              # none of the student's cells: never parsed
    # the peak: the writer's own (its parent, tests.batch.writer_peak, holds less than this before it starts it)
    assert report["peak_kb"] < normal["peak_kb"] + 80 * 1024, (normal["peak_kb"], report["peak_kb"])


def test_the_writer_copies_many_large_extra_notebooks_with_bounded_memory(course_copy):
    """Does the writer copy a submission of the assignment's notebook and eight other notebooks of 19 MB
    each (each within limits.notebook_mb) into autograded/, those byte for byte, one at a time: its peak
    memory near an ordinary student's, rather than growing by the 150 MB of the eight (held at once, the
    writer of a submission of 200 such notebooks would need 4 GB)?"""
    import json

    from conftest import PROJECT

    released = (PROJECT.release("transformer-block") / "transformer-block.ipynb").read_bytes()
    normal, _ = _writer_copies(course_copy, "ada", released)
    doc = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "x" * (19 * 1024 * 1024)}],
           "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    extra = {f"notes-{i}.ipynb": json.dumps(doc).replace("x", str(i), 1).encode() for i in range(8)}
    report, copy = _writer_copies(course_copy, "bob", released, extra)
    assert report["recorded"] == ["bob"] and not report["output_errors"]
    assert b"course autograde" in copy                       # the assignment's notebook: annotated
    autograded = CourseLayout(course_copy).autograded("bob", "transformer-block")
    assert all((autograded / name).read_bytes() == data for name, data in extra.items())
    assert report["peak_kb"] < normal["peak_kb"] + 50 * 1024, (normal["peak_kb"], report["peak_kb"])


def test_a_student_whose_feedback_folder_is_blocked_is_one_line_and_the_writer_goes_on(course_copy):
    """When a file stands where ada's feedback folder goes, is that one line of hers (naming the file) while the
    writer, still running, commits her grades and bob's after hers, rather than the writer stopping and every
    later student reported with "the gradebook writer stopped"?"""
    import shutil

    layout = CourseLayout(course_copy)
    examples = CourseLayout(Path(__file__).resolve().parents[2] / "examples")
    for sid in ("ada", "bob"):
        shutil.copytree(examples.submission("ada", "transformer-block"), layout.submission(sid, "transformer-block"))
    blocked = layout.feedback("ada", "transformer-block")
    blocked.parent.mkdir(parents=True)
    blocked.write_text("in the way\n")
    with GradebookProcess(course_copy, "transformer-block") as gb:
        for sid, score in (("ada", 12.0), ("bob", 0.0)):
            gb.record(result(course_copy, sid, score), copy_from=layout.submission(sid, "transformer-block"))
        report = gb.finish()
    assert report.gradebook.recorded == ("ada", "bob") and not report.gradebook.failed
    where = layout.relative(blocked)
    into = layout.relative(layout.feedback_dir)
    assert report.output_errors == (f"ada: copying timestamp.txt and submission_secret.txt into {into}/: "
                                    f"NotADirectoryError: {where} is not a folder",)
    assert (layout.autograded("bob", "transformer-block") / "transformer-block.ipynb").is_file()
