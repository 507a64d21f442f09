"""Shared fixtures: scratch copies of this course folder, so tests never write into the repository."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder import layout
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[1]
PROJECT = CourseLayout(ROOT)


def copy_course(dest: Path) -> Path:
    """Copy the course (config, notebooks, instructor code) into `dest`, without generated state."""
    return layout.copy_course(ROOT, dest)


@pytest.fixture
def course_copy(tmp_path: Path) -> Path:
    return copy_course(tmp_path / "course")
