"""A student who left the course, taken off the roster and out of the gradebook (`nbgrader db student remove
--force`, as README says), is not graded back into the gradebook from the folder they left under submitted/:
`course autograde` names the folder in one WARNING line and leaves it as it is, until they are added again.
A student off the roster whom the gradebook never held is graded, flagged, as before."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.layout import EXAMPLES, CourseLayout
from tests.conftest import ROOT, course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"
WARNING = ("WARNING: submitted/alan/transformer-block: not graded: alan was taken out of the gradebook, which had "
           "their grades, and is not on the roster; the folder is left as it is. To grade alan again, add them to "
           "roster.csv (or run `nbgrader db student add alan`)")


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))


def _run(course: Path, *argv: str) -> str:
    done = subprocess.run(list(argv), cwd=course, capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _course_cmd(course: Path, *args: str) -> str:
    return _run(course, sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course))


def _files(folder: Path) -> dict[str, tuple[str, int]]:
    return {p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in folder.iterdir()}


def _students() -> set[str]:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///gradebook.db", "dl-attention") as gb:
        return {s.id for s in gb.students}


def _score(sid: str) -> float:
    from nbgrader.api import Gradebook

    with Gradebook("sqlite:///gradebook.db", "dl-attention") as gb:
        return float(gb.find_submission(A, sid).score)


def test_a_student_taken_out_of_the_course_is_not_graded_back_in(tmp_path, monkeypatch):
    """After alan is taken off the roster and out of the gradebook, does `course autograde` (the batch, and
    `--student alan`) name his folder in one WARNING line and leave it and the gradebook without him, while
    grace, off the roster and never graded, is graded; and once he is added back, are his grades there again?"""
    course = course_with_students(tmp_path / "course", ("ada", "alan"))
    monkeypatch.chdir(course)
    _course_cmd(course, "release", A)
    _course_cmd(course, "autograde", A)
    graded = _score("alan")
    (course / "roster.csv").write_text("id\nada\n")
    _run(course, str(BIN / "nbgrader"), "db", "student", "remove", "alan", "--force")
    folder = CourseLayout(course).submission("alan", A)
    before = _files(folder)
    shutil.copytree(CourseLayout(ROOT / EXAMPLES).submitted_dir / "grace", CourseLayout(course).submitted_dir / "grace")

    out = _course_cmd(course, "autograde", A)
    assert [line for line in out.splitlines() if "WARNING" in line] == [WARNING], out
    assert "alan " not in out.replace(WARNING, ""), out
    assert "grace" in out and "(not on the roster)" in out, out
    assert _students() == {"ada", "grace"}
    alone = _course_cmd(course, "autograde", A, "--student", "alan")
    assert [line for line in alone.splitlines() if "WARNING" in line] == [WARNING], alone
    assert "no submissions found" not in alone, alone
    where = f"{CourseLayout(Path()).submission('<student>', A)}/"
    assert alone.splitlines()[-1] == (f"nothing was graded: 1 submission found under {where}, none gradable: 1 of "
                                      f"a student taken out of the course; each is named above"), alone
    assert _students() == {"ada", "grace"} and _files(folder) == before

    _run(course, str(BIN / "nbgrader"), "db", "student", "add", "alan")
    back = _course_cmd(course, "autograde", A)          # a whole class always waits for its commit
    assert "WARNING" not in back and "alan " in back, back
    assert _score("alan") == graded > 0
