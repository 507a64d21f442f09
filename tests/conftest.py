"""Shared fixtures: scratch copies of this course folder, so tests never write into the repository."""
from __future__ import annotations

import json
import os
import pickle
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
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


def course_cmd(course: Path, *args: str) -> str:
    """`course ARGS --course-dir COURSE` run as a TA runs it (this venv's tools on PATH); its stdout,
    after asserting it succeeded."""
    bin_dir = Path(sys.executable).parent
    done = subprocess.run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)],
                          capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def course_copy(tmp_path: Path) -> Path:
    return copy_course(tmp_path / "course")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A temporary folder every user may enter (tmp_path's parents are this user's alone)."""
    with tempfile.TemporaryDirectory(prefix="course-shared-") as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def as_other_user(fn: Callable[..., object], *args: object) -> object:
    """fn(*args) in a forked child that owns none of the test's files: the user `nobody` when the tests
    run as root (who may write anywhere), else this user, whose read-only folders then stand for
    someone else's. Returns what fn returned (pickled back); an exception in it fails the test."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:                                    # the child: never returns into pytest
        try:
            os.close(read)
            if os.geteuid() == 0:
                nobody = pwd.getpwnam("nobody")
                os.setgroups([])
                os.setgid(nobody.pw_gid)
                os.setuid(nobody.pw_uid)
            data = pickle.dumps(("returned", fn(*args)))
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            data = pickle.dumps(("raised", f"{type(exc).__name__}: {exc}"))
        with os.fdopen(write, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as inp:
        data = inp.read()
    os.waitpid(pid, 0)
    kind, value = pickle.loads(data)
    assert kind == "returned", value
    return value


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
