"""A submission whose grading crashed (a worker killed, the engine broken) is named to the TA with its
reason, and graded again by the next run."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.conftest import course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"


def test_a_crashed_grading_is_named_with_its_reason_and_graded_again_next_run(tmp_path, monkeypatch):
    """When ada's grading crashes (an escape sequence in its reason), does the batch print one WARNING line
    with the reason's first line, the escape shown and not sent, saying the next run grades her again; and
    does the next run grade her, without such a line?"""
    from autograder import api
    from autograder.grading import engine

    course = course_with_students(tmp_path / "course", ("ada",))

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("its worker stopped \x1b[2K(exit status -9)\nsecond line")

    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    lines: list[str] = []
    with monkeypatch.context() as patch:
        patch.setattr(engine, "grade_submission", broken)
        first = api.autograde(course, A, workers=1, log=lines.append)
    assert [row.state for row in first.results] == ["crashed"]
    assert [line for line in lines if line.startswith("WARNING")] == [
        "WARNING: ada: grading crashed (RuntimeError: its worker stopped \\x1b[2K(exit status -9)): scored 0 for now; "
        "the next `course autograde` grades ada again"]
    lines.clear()
    again = api.autograde(course, A, workers=1, log=lines.append)
    assert [row.state for row in again.results] == ["graded"] and again.skipped == ()
    assert not [line for line in lines if line.startswith("WARNING")], lines
