"""A submission folder moved away while its submission is graded, and back once the batch is over (a copy
or a sync into submitted/ meanwhile): the result read mid-change is not kept as the result of the
submission as it is, so the next `course autograde` grades it again."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from autograder.layout import CourseLayout
from tests.conftest import course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"


def test_a_submission_moved_away_while_graded_is_graded_again_once_back(tmp_path, monkeypatch):
    """ada's folder is moved out of submitted/ as her submission is being graded (so the grading reads
    none) and put back after the batch: does the batch say so in a WARNING, and does the next run grade
    her again (her full score) rather than keep the 0 as unchanged?"""
    from autograder import api
    from autograder.grading import engine

    course = course_with_students(tmp_path / "course", ("ada",))
    folder = CourseLayout(course).submitted_dir / "ada"
    aside = tmp_path / "ada-aside"
    grade = engine.grade_submission

    def moved_away(*args: object, **kwargs: object) -> object:
        folder.rename(aside)
        return grade(*args, **kwargs)

    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    lines: list[str] = []
    with monkeypatch.context() as patch:
        patch.setattr(engine, "grade_submission", moved_away)
        first = api.autograde(course, A, workers=1, log=lines.append)
    aside.rename(folder)
    assert [row.score for row in first.results] == [0.0], first.results
    assert [line for line in lines if line.startswith("WARNING: ada: the submission changed while it was graded")]
    again = api.autograde(course, A, workers=1)
    assert again.skipped == () and [row.score for row in again.results] == [100.0], again.results
