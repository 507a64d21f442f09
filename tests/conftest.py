"""Shared fixtures: scratch copies of this course folder, so tests never write into the repository."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder import layout
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[1]
PROJECT = CourseLayout(ROOT)


def copy_course(dest: Path) -> Path:
    """Copy the course (config, notebooks, instructor code) into `dest`, without generated state."""
    return layout.copy_course(ROOT, dest)


def course_with_students(dest: Path, students: tuple[str, ...]) -> Path:
    """A course copy in `dest` holding the bundled submissions of `students`, who alone are on its roster."""
    course = copy_course(dest)
    examples, submitted = layout.CourseLayout(ROOT / layout.EXAMPLES), layout.CourseLayout(course).submitted_dir
    for sid in students:
        shutil.copytree(examples.submitted_dir / sid, submitted / sid)
    (course / "roster.csv").write_text("id\n" + "\n".join(students) + "\n")
    return course


@pytest.fixture
def course_copy(tmp_path: Path) -> Path:
    return copy_course(tmp_path / "course")


@dataclass(frozen=True)
class GradedDemo:
    folder: Path                          # the scratch course folder
    proc: subprocess.CompletedProcess     # `course autograde` as run
    results: dict                         # student id -> results.json


@pytest.fixture(scope="session")
def graded_demo(tmp_path_factory) -> GradedDemo:
    """The demo class (examples/) graded once per session through the real `course autograde`."""
    from autograder.api import prepare_demo

    folder = prepare_demo(ROOT, tmp_path_factory.mktemp("demo") / "course")
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder)], capture_output=True, text=True, timeout=900)
    results = {p.parts[-3]: json.loads(p.read_text())
               for p in CourseLayout(folder).autograded_dir.glob("*/transformer-block/results.json")}
    return GradedDemo(folder, proc, results)
