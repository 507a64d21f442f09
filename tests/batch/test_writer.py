"""The batch's gradebook writer process: grades land through reporting.gradebook's functions, and a
gradebook that cannot be opened is reported for every student instead of stopping the batch."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.batch.writer import GradebookProcess
from autograder.config import load_course
from autograder.grading.results import SubmissionResult, TestResult

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
