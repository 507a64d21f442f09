"""The graders' replay benchmark: it replays exactly what was recorded, and runs on a small class
(no timings checked)."""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import bench_graders as bench  # noqa: E402

from autograder.layout import EXAMPLES, CourseLayout  # noqa: E402
from autograder.sandbox.outcomes import FunctionMissing  # noqa: E402


def test_a_replay_gives_the_recorded_answers_in_order_and_refuses_any_other():
    """Does a replay return each recorded value, raise each recorded error, and stop at a call
    the real run did not make?"""
    replay = bench.Replay([("call", "double", 4, "meta"), ("call", "square", FunctionMissing("square"), None)])
    assert replay.for_problem("double").double(2) == 4
    assert replay.last_call == "meta"
    with pytest.raises(FunctionMissing):
        replay["square"](3)
    assert isinstance(replay.last_error, FunctionMissing) and replay.last_call is None
    with pytest.raises(RuntimeError, match="diverged"):
        replay.double(2)
    other = bench.Replay([("call", "double", 4, None)])
    with pytest.raises(RuntimeError, match="diverged"):
        other.square(2)


def test_the_benchmark_runs_on_a_small_class(course_copy, capsys):
    """On two example submissions, does the benchmark record, replay with the same outcomes, and report?"""
    examples, course = CourseLayout(ROOT / EXAMPLES), CourseLayout(course_copy)
    for student in ("ada", "alan"):
        shutil.copytree(examples.submitted_dir / student, course.submitted_dir / student)
    assert bench.main([str(course_copy), "--repeat", "1"]) == 0
    assert "2 submissions, 1 replay rounds: graders' CPU" in capsys.readouterr().out
