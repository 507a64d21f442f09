"""Shared fixtures: scratch copies of this course folder, so tests never write into the repository."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
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
               for p in (folder / "autograded").glob("*/transformer-block/results.json")}
    return GradedDemo(folder, proc, results)
