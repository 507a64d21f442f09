"""Shared fixtures: scratch copies of this course folder, so tests never write into the repository."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COURSE_PARTS = ("course.yml", "roster.csv", "nbgrader_config.py", "source", "release", "assignments")


def copy_course(dest: Path) -> Path:
    """Copy the course (config, notebooks, instructor code) into `dest`, without generated state."""
    dest.mkdir(parents=True, exist_ok=True)
    for part in COURSE_PARTS:
        src = ROOT / part
        if src.is_dir():
            shutil.copytree(src, dest / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, dest / part)
    return dest


@pytest.fixture
def course_copy(tmp_path: Path) -> Path:
    return copy_course(tmp_path / "course")
