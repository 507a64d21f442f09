"""The `course` command: one-line errors with exit code 2, never a traceback."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from autograder.layout import CourseLayout


def course(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=300)


@pytest.mark.parametrize("args, message", [
    (["autograde", "no-such-assignment"],
     "course.yml: no assignment named 'no-such-assignment' (known: transformer-block)"),
    (["autograde", "transformer-block", "--student", "nobody"],
     f"{CourseLayout(Path()).submission('nobody', 'transformer-block')}: no such submission folder"),
    (["validate", "transformer-block"], "release/transformer-block/transformer-block.ipynb: not found"),
])
def test_cli_user_errors_are_one_line(course_copy, args, message):
    """Does each mistake on the command line or in the course folder give one line and exit code 2?"""
    if args[0] == "validate":
        (CourseLayout(course_copy).release("transformer-block") / "transformer-block.ipynb").unlink()
    proc = course(*args, "--course-dir", str(course_copy))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_cli_course_dir_defaults_to_the_current_folder(course_copy):
    """Does the command find course.yml in the current folder when --course-dir is not given?"""
    proc = course("autograde", "transformer-block", cwd=course_copy)
    assert proc.returncode == 0, proc.stderr
    assert "no submissions found under submitted/<student>/transformer-block/" in proc.stdout


def test_cli_help_is_written_for_its_users():
    """Does `course --help` describe what the command does and list its commands, not the module's notes?"""
    proc = course("--help")
    assert proc.returncode == 0
    assert "Release, check and grade the notebook assignments" in proc.stdout
    for command in ("release", "validate", "autograde", "demo"):
        assert command in proc.stdout
    assert "argument parsing only" not in proc.stdout, "the module docstring is for developers"
