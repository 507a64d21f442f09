"""A one-student `course autograde` returns once the student's results.json and page are written;
their grades are committed by a detached writer holding the course's gradebook lock, which the next
course command and the real `nbgrader export` wait for. A failed or interrupted commit is reported
by the next command, and the student is graded again."""
from __future__ import annotations

import csv
import fcntl
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.layout import CourseLayout
from autograder.reporting.gradebook import LOCK_FILE, PENDING_DIR
from tests.conftest import ROOT, course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
A = "transformer-block"
STUDENTS = ("ada", "alan")
EXAMPLES = CourseLayout(ROOT / "examples")
WAIT_SECONDS = 600      # generous: a loaded machine


def _course(tmp_path: Path) -> Path:
    return course_with_students(tmp_path / "course", STUDENTS)


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))


def _course_cmd(course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(course)],
                          capture_output=True, text=True, env=_env(), timeout=WAIT_SECONDS)


def _results(course: Path, sid: str) -> dict:
    return json.loads(CourseLayout(course).results_json(sid, A).read_text())


def _auto_scores(course: Path, sid: str) -> list[float]:
    con = sqlite3.connect(course / "gradebook.db")
    try:
        return [r[0] for r in con.execute(
            "SELECT grade.auto_score FROM grade "
            "JOIN submitted_notebook ON grade.notebook_id = submitted_notebook.id "
            "JOIN submitted_assignment ON submitted_notebook.assignment_id = submitted_assignment.id "
            "WHERE submitted_assignment.student_id = ?", (sid,))]
    finally:
        con.close()


def _lock_held(course: Path) -> bool:
    fd = os.open(course / LOCK_FILE, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _wait_for_the_writer(course: Path) -> None:
    end = time.monotonic() + WAIT_SECONDS
    while _lock_held(course) and time.monotonic() < end:
        time.sleep(0.05)
    assert not _lock_held(course), "the background writer did not finish"


class _DatabaseHeld:
    """An exclusive SQLite lock on the gradebook (as another program writing it would hold):
    nothing can be committed while it is held."""

    def __init__(self, course: Path):
        self.con = sqlite3.connect(course / "gradebook.db", isolation_level=None)
        self.con.execute("BEGIN EXCLUSIVE")

    def release(self) -> None:
        if self.con is not None:
            self.con.execute("ROLLBACK")
            self.con.close()
            self.con = None


def _run_writer(course: Path, record: Path) -> subprocess.CompletedProcess:
    """The detached writer on `record`, holding the gradebook lock as the command passes it on."""
    fd = os.open(course / LOCK_FILE, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return subprocess.run([sys.executable, "-m", "autograder.batch.writer", "--course-dir", str(course),
                               "--assignment", A, "--job", str(record), "--lock-fd", str(fd)],
                              pass_fds=(fd,), capture_output=True, text=True, env=_env(), timeout=WAIT_SECONDS)
    finally:
        os.close(fd)


@pytest.fixture
def graded(tmp_path) -> Path:
    """A course whose class was graded once (so its gradebook exists)."""
    course = _course(tmp_path)
    done = _course_cmd(course, "autograde", A)
    assert done.returncode == 0, done.stdout + done.stderr
    return course


def test_the_one_student_command_returns_before_the_commit_and_the_next_command_waits(graded):
    """With the gradebook held by another program, does `course autograde --student` still return
    with results.json and the page written, and does the next command see the grades committed?"""
    held = _DatabaseHeld(graded)
    try:
        done = _course_cmd(graded, "autograde", A, "--student", "ada", "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "committed in the background" in done.stdout
        # the database held, a TA's changes cannot be read without waiting: the table says whose scores it shows
        assert ("gradebook: a TA's changes for ada could not be read now, so the table shows the autograder's "
                "scores") in done.stdout, done.stdout
        doc = _results(graded, "ada")
        assert doc["score"] == 100.0
        assert "grading_key" not in doc["extra_data"], "the key comes only after the commit"
        assert list(CourseLayout(graded).feedback("ada", A).glob("*.html")), "the page is written at once"
        assert (graded / PENDING_DIR / A / "ada.json").is_file()
        assert _lock_held(graded), "the background writer holds the gradebook lock"
    finally:
        held.release()
    after = _course_cmd(graded, "feedback", A, "--student", "ada")
    assert after.returncode == 0, after.stdout + after.stderr
    assert not _lock_held(graded)
    assert _results(graded, "ada")["extra_data"]["grading_key"]
    assert sorted(_auto_scores(graded, "ada")) and sum(_auto_scores(graded, "ada")) == pytest.approx(100.0)
    assert not (graded / PENDING_DIR).exists()
    assert "did not finish" not in after.stderr
    again = _course_cmd(graded, "autograde", A, "--student", "ada")
    assert "unchanged" in again.stdout, again.stdout     # committed, so not graded again


def test_nbgrader_export_sees_the_grade_committed_in_the_background(graded):
    """Run straight after a one-student command, does the real `nbgrader export` (through the
    course's nbgrader_config.py) list the student's new grade?"""
    submission = CourseLayout(graded).submission("alan", A)
    shutil.rmtree(submission)
    shutil.copytree(CourseLayout(graded).submission("ada", A), submission)    # a new, full-marks notebook
    done = _course_cmd(graded, "autograde", A, "--student", "alan")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "committed in the background" in done.stdout
    export = subprocess.run([str(BIN / "nbgrader"), "export", "--to", "grades.csv"], cwd=graded, env=_env(),
                            capture_output=True, text=True, timeout=WAIT_SECONDS)
    assert export.returncode == 0, export.stderr
    with open(graded / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == A}
    assert float(rows["alan"]["score"]) == pytest.approx(_results(graded, "alan")["score"]) == pytest.approx(100.0)


def _damage_tables(db: Path) -> None:
    """Overwrite the first page of every table and index of the SQLite file `db`, leaving its schema readable."""
    conn = sqlite3.connect(db)
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    roots = [page for (page,) in conn.execute("SELECT rootpage FROM sqlite_master WHERE rootpage > 1")]
    conn.close()
    with open(db, "r+b") as fh:
        for page in roots:
            fh.seek((page - 1) * size)
            fh.write(b"\xff" * size)


def test_a_failed_background_commit_is_reported_and_graded_again(graded):
    """When the background commit cannot read the gradebook, does the next command say so, and does
    the next `course autograde` grade that student again and clear the report? (Its tables' pages are
    damaged, its schema left whole: `course autograde` refuses a gradebook whose schema it cannot read.)"""
    db = graded / "gradebook.db"
    saved = db.read_bytes()
    _damage_tables(db)
    done = _course_cmd(graded, "autograde", A, "--student", "ada", "--force")
    assert done.returncode == 0, done.stdout + done.stderr
    _wait_for_the_writer(graded)
    db.write_bytes(saved)
    nxt = _course_cmd(graded, "feedback", A, "--student", "ada")
    assert "the background commit of ada's grades for transformer-block failed (" in nxt.stderr, nxt.stderr
    assert "database disk image is malformed" in nxt.stderr
    assert "grading_key" not in _results(graded, "ada")["extra_data"]
    regrade = _course_cmd(graded, "autograde", A)
    assert regrade.returncode == 0, regrade.stdout + regrade.stderr
    assert any(line.split()[:2] == ["graded", "ada"] for line in regrade.stdout.splitlines()), regrade.stdout
    assert _results(graded, "ada")["extra_data"]["grading_key"]
    assert "background commit" not in _course_cmd(graded, "feedback", A).stderr


def test_a_background_commit_that_fails_as_it_starts_is_reported_as_failed_with_its_reason(graded):
    """When course.yml is changed into an invalid one between `course autograde --student` and the start of
    its background writer, does the next command report that commit as failed, with course.yml's error,
    rather than "did not finish (it was interrupted)"?"""
    from autograder.config import load_course
    from autograder.reporting.gradebook import write_pending

    record = write_pending(load_course(graded), A, "ada", {"result": {}, "copy_from": None, "key": None})
    config = CourseLayout(graded).config
    good = config.read_text()
    config.write_text(good + "colour: blue\n")
    writer = _run_writer(graded, record)
    assert writer.returncode == 1, writer.stderr
    config.write_text(good)
    nxt = _course_cmd(graded, "feedback", A, "--student", "ada")
    assert ("gradebook: the background commit of ada's grades for transformer-block failed (course.yml: colour: "
            "unknown key") in nxt.stderr, nxt.stderr
    assert "interrupted" not in nxt.stderr


def test_a_background_commit_outlives_an_edit_that_breaks_course_yml(graded):
    """When course.yml stops reading (an assignment half added) while grades graded under it are
    being committed, does the background writer commit them under course.yml as it was when they were
    graded (kept in its record), leaving nothing to report?"""
    from autograder.api import graded_result
    from autograder.config import load_course
    from autograder.grading.results import result_to_dict
    from autograder.reporting.gradebook import pending_file, write_pending

    course = load_course(graded)
    result = graded_result(course, course.assignment(A), "ada")
    config = CourseLayout(graded).config
    good = config.read_text()
    record = write_pending(course, A, "ada", {"result": result_to_dict(result), "copy_from": None, "key": None,
                                              "course_yml": good})
    config.write_text(good + "assignments_extra: [\n")          # the instructor is half way through an edit
    writer = _run_writer(graded, record)
    config.write_text(good)
    assert writer.returncode == 0, writer.stderr
    assert not pending_file(course, A, "ada").exists() and not record.with_suffix(".failed").exists()
    assert "background commit" not in _course_cmd(graded, "feedback", A, "--student", "ada").stderr


def test_an_interrupted_background_commit_is_reported(graded):
    """When the background writer is killed before its commit, does the next command say so?"""
    held = _DatabaseHeld(graded)
    try:
        done = _course_cmd(graded, "autograde", A, "--student", "ada", "--force")
        assert done.returncode == 0, done.stdout + done.stderr
        pid = int((graded / LOCK_FILE).read_text().strip())
        assert b"autograder.batch.writer" in Path(f"/proc/{pid}/cmdline").read_bytes()
        os.kill(pid, signal.SIGKILL)
        _wait_for_the_writer(graded)
    finally:
        held.release()
    nxt = _course_cmd(graded, "feedback", A, "--student", "ada")
    assert "did not finish (it was interrupted)" in nxt.stderr, nxt.stderr
    assert "grading_key" not in _results(graded, "ada")["extra_data"]


def _page(course: Path, sid: str) -> Path:
    [page] = CourseLayout(course).feedback(sid, A).glob("*.html")
    return page


@pytest.mark.parametrize("one", [("--student", "ada"), ()], ids=["one-student", "class"])
def test_a_regrade_whose_page_cannot_be_written_is_graded_again_by_the_next_run(graded, one):
    """When ada's new page cannot be written, is her results.json left without its grading key (the
    error line says so), so that the next run grades her again and writes the page, rather than
    calling her unchanged with her old page left in place?"""
    layout = CourseLayout(graded)
    old_page = _page(graded, "ada")
    old_text = old_page.read_text()
    assert '<span class="big">100</span>' in old_text
    for notebook in EXAMPLES.submission("barbara", A).glob("*.ipynb"):    # ada submits again: barbara's work
        shutil.copy(notebook, layout.submission("ada", A) / notebook.name)
    old_page.unlink()
    (old_page / "blocked").mkdir(parents=True)       # a folder where the page goes: it cannot be replaced
    failed = _course_cmd(graded, "autograde", A, *one)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    errors = [line for line in failed.stderr.splitlines() if "ada" in line]
    assert len(errors) == 1 and "writing the feedback page" in errors[0], failed.stderr
    assert errors[0].endswith("not marked as graded: the next `course autograde` grades ada again"), errors[0]
    row = next(line for line in failed.stdout.splitlines() if line.startswith("ada "))
    assert "files not written" in row, failed.stdout
    assert "not saved (a results.json or feedback page could not be written" in failed.stdout, failed.stdout
    _wait_for_the_writer(graded)
    doc = _results(graded, "ada")
    assert doc["score"] == pytest.approx(83.82, abs=0.01) and "grading_key" not in doc["extra_data"]
    assert not (graded / PENDING_DIR / A / "ada.failed").exists()
    shutil.rmtree(old_page)
    again = _course_cmd(graded, "autograde", A, *one)
    assert again.returncode == 0, again.stdout + again.stderr
    assert any(line.startswith("graded") and " ada " in line for line in again.stdout.splitlines()), again.stdout
    assert '<span class="big">83.82</span>' in _page(graded, "ada").read_text()
    _wait_for_the_writer(graded)
    assert _results(graded, "ada")["extra_data"]["grading_key"]
    assert "unchanged" in _course_cmd(graded, "autograde", A, *one).stdout


def test_the_first_one_student_run_of_a_course_says_nothing_of_a_ta_s_changes(tmp_path):
    """On a course with no gradebook yet, does the first `--student` run commit in the background
    without claiming that a TA's changes could not be read (there is nothing to read)?"""
    course = _course(tmp_path)
    assert not (course / "gradebook.db").exists()
    done = _course_cmd(course, "autograde", A, "--student", "ada")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "committed in the background" in done.stdout
    assert "a TA's changes" not in done.stdout + done.stderr, done.stdout
    _wait_for_the_writer(course)
    assert _results(course, "ada")["extra_data"]["grading_key"]
