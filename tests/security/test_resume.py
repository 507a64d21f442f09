"""Grades survive: a batch killed with SIGKILL half-way and run again ends with every grade present
exactly once; unchanged submissions under unchanged graders are not graded again (unless --force),
and the summary names them; a change to a submission, the graders or course.yml grades again."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .harness import ASSIGNMENT, NB, ROOT, expected_rows, gradebook_rows, load_results

sys.path.insert(0, str(ROOT / "tests"))
from autograder.layout import CourseLayout
from conftest import course_with_students

pytestmark = pytest.mark.slow

STUDENTS = ("ada", "alan", "barbara", "donald", "edsger", "frances", "grace")


def _course(tmp_path: Path) -> Path:
    return course_with_students(tmp_path / "course", STUDENTS)


def _command(course: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT, "--course-dir", str(course), *extra]


def _env() -> dict[str, str]:
    return dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))


def _run(course: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(_command(course, *extra), capture_output=True, text=True, env=_env(), timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc


def _committed(course: Path, sid: str) -> bool:
    """results.json carries its grading key: the writer has committed the student's grades."""
    doc = load_results(course, sid)
    return doc is not None and bool(doc["extra_data"].get("grading_key"))


def _done(course: Path) -> set[str]:
    return {sid for sid in STUDENTS if _committed(course, sid)}


def _log_states(stdout: str) -> dict[str, str]:
    """{student: "graded" | "unchanged"} from the per-student log lines."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("graded", "unchanged") and parts[1] in STUDENTS:
            out[parts[1]] = parts[0]
    return out


def _exactly_once(course: Path) -> None:
    con = sqlite3.connect(course / "gradebook.db")
    try:
        per_student = dict(con.execute(
            "SELECT student.id, COUNT(*) FROM submitted_assignment JOIN student "
            "ON submitted_assignment.student_id = student.id GROUP BY student.id").fetchall())
        duplicates = con.execute(
            "SELECT notebook_id, cell_id, COUNT(*) FROM grade GROUP BY notebook_id, cell_id "
            "HAVING COUNT(*) > 1").fetchall()
    finally:
        con.close()
    assert per_student == dict.fromkeys(STUDENTS, 1)
    assert duplicates == []
    rows = gradebook_rows(course)
    for sid in STUDENTS:
        assert rows[sid] == expected_rows(load_results(course, sid)), sid


def _hold(course: Path, sid: str, seconds: float) -> None:
    """Give `sid`'s notebook a first cell that sleeps: grading stays on that student for `seconds`."""
    nb = CourseLayout(course).submitted_dir / sid / ASSIGNMENT / NB
    doc = json.loads(nb.read_text())
    doc["cells"].insert(0, {"cell_type": "code", "execution_count": None, "id": "hold", "metadata": {},
                            "outputs": [], "source": f"import time\ntime.sleep({seconds})"})
    nb.write_text(json.dumps(doc))


def test_sigkill_mid_batch_then_rerun_grades_the_rest_with_every_grade_once(tmp_path):
    """Killed with SIGKILL after a few students, does a rerun grade only the others and leave each grade once?"""
    course = _course(tmp_path)
    first, held = set(STUDENTS[:3]), STUDENTS[3]
    _hold(course, held, 10)      # one worker, in student order: the kill lands while it grades `held`
    proc = subprocess.Popen(_command(course, "--workers", "1"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env(), start_new_session=True)
    try:
        end = time.monotonic() + 600
        while not first <= _done(course) and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    before = _done(course)
    assert before == first, f"the batch was not stopped half-way, after {sorted(first)}: {sorted(before)}"
    assert set(gradebook_rows(course)) >= before       # grades were committed as each student was graded

    rerun = _run(course)
    states = _log_states(rerun.stdout)
    assert {s for s, st in states.items() if st == "unchanged"} == before
    assert {s for s, st in states.items() if st == "graded"} == set(STUDENTS) - before
    assert f"--force to regrade): {', '.join(sorted(before))}" in rerun.stdout
    _exactly_once(course)


def _writer_pid(parent: int) -> int | None:
    """The gradebook writer process started by `parent` (found through /proc), or None yet."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and b"autograder.batch.writer" in argv:
            return int(entry.name)
    return None


def test_results_written_before_the_commit_are_graded_again_after_a_kill(tmp_path):
    """With the gradebook writer held before it commits, are results.json and the page written at
    once without the grading key, and is that student graded again (grades once) after a SIGKILL?"""
    course = _course(tmp_path)
    layout = CourseLayout(course)
    results = layout.results_json("ada", ASSIGNMENT)
    _run(course, "--student", "alan", "--wait")         # the gradebook exists ...
    held = sqlite3.connect(course / "gradebook.db", isolation_level=None)
    held.execute("BEGIN EXCLUSIVE")                     # ... and nothing can commit to it before the SIGSTOP
    proc = subprocess.Popen(_command(course, "--student", "ada", "--wait"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=_env(), start_new_session=True)
    try:
        end = time.monotonic() + 600
        writer = None
        while writer is None and proc.poll() is None and time.monotonic() < end:
            writer = _writer_pid(proc.pid)
            time.sleep(0.005)
        assert writer is not None, "the gradebook writer was not seen"
        os.kill(writer, signal.SIGSTOP)     # it can read nothing and commit nothing from now on
        while not results.is_file() and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.02)
        early = load_results(course, "ada")
        pages = list(layout.feedback("ada", ASSIGNMENT).glob("*.html"))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        held.execute("ROLLBACK")
        held.close()
    assert early is not None, "results.json was not written before the gradebook's commit"
    assert "grading_key" not in early["extra_data"]
    assert pages, "the feedback page was not written before the gradebook's commit"
    assert "ada" not in gradebook_rows(course)

    rerun = _run(course, "--student", "ada", "--wait")
    assert _log_states(rerun.stdout) == {"ada": "graded"}
    assert _committed(course, "ada")
    assert load_results(course, "ada")["score"] == early["score"]
    assert gradebook_rows(course)["ada"] == expected_rows(load_results(course, "ada"))
    assert _log_states(_run(course, "--student", "ada", "--wait").stdout) == {"ada": "unchanged"}


def test_unchanged_batch_is_not_graded_again_unless_forced(tmp_path):
    """Is a second run on unchanged submissions all 'unchanged', and does --force grade everyone again, same scores?"""
    course = _course(tmp_path)
    first = _run(course)
    assert set(_log_states(first.stdout).values()) == {"graded"}
    scores = {sid: load_results(course, sid)["score"] for sid in STUDENTS}
    second = _run(course)
    assert set(_log_states(second.stdout).values()) == {"unchanged"}
    assert "Not graded again" in second.stdout
    assert {sid: load_results(course, sid)["score"] for sid in STUDENTS} == scores
    forced = _run(course, "--force")
    assert set(_log_states(forced.stdout).values()) == {"graded"}
    assert "Not graded again" not in forced.stdout
    assert {sid: load_results(course, sid)["score"] for sid in STUDENTS} == scores
    _exactly_once(course)


def test_a_changed_submission_graders_or_course_entry_grades_again(tmp_path):
    """Does editing one notebook regrade that student only, and editing a grader or course.yml regrade everyone?"""
    course = _course(tmp_path)
    _run(course)
    nb = CourseLayout(course).submission("ada", ASSIGNMENT) / NB
    nb.write_bytes(nb.read_bytes().replace(b'"cells": [', b'"cells": [ ', 1))
    states = _log_states(_run(course).stdout)
    assert states == {sid: "graded" if sid == "ada" else "unchanged" for sid in STUDENTS}

    grader = course / "assignments" / "transformer_block" / "graders" / "test_silu.py"
    grader.write_text(grader.read_text() + "\n# a comment changes the graders' version\n")
    assert set(_log_states(_run(course).stdout).values()) == {"graded"}

    config = yaml.safe_load((course / "course.yml").read_text())
    config["assignments"][0]["problems"]["silu"]["points"] = 6
    (course / "course.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    assert set(_log_states(_run(course).stdout).values()) == {"graded"}
    assert load_results(course, "ada")["max_score"] == 101
    _exactly_once(course)


def test_a_changed_release_or_imported_helper_grades_again_and_another_package_does_not(tmp_path):
    """Does a release made again with a changed given cell grade everyone again without --force, saying that the
    release is among what changed, the new scores reflecting it; does a change to a helper module outside the
    assignment's package that a grader imports grade everyone again; and does a change to another
    assignment's package, which nothing imports, leave them unchanged?"""
    import nbformat

    course = course_with_students(tmp_path / "course", STUDENTS[:2])
    layout = CourseLayout(course)
    _run(course)
    scores = {sid: load_results(course, sid)["score"] for sid in STUDENTS[:2]}
    release = layout.release(ASSIGNMENT) / NB
    nb = nbformat.read(release, as_version=4)
    setup = next(cell for cell in nb.cells if cell.metadata.get("nbgrader", {}).get("grade_id") == "setup")
    setup.source += "\nnp.sqrt = np.square   # a given cell's bug\n"
    nbformat.write(nb, release)
    again = _run(course)
    assert set(_log_states(again.stdout).values()) == {"graded"}, again.stdout
    assert f"the release in {layout.relative(layout.release(ASSIGNMENT))}/" in again.stdout.splitlines()[0]
    assert all(load_results(course, sid)["score"] < scores[sid] for sid in scores)

    helper = layout.package("transformer_block").parent / "common.py"
    helper.write_text("EXTRA = 0.0\n")
    grader = layout.graders("transformer_block") / "test_silu.py"
    grader.write_text("from assignments.common import EXTRA  # noqa: F401\n" + grader.read_text())
    assert set(_log_states(_run(course).stdout).values()) == {"graded"}
    helper.write_text("EXTRA = 1.0\n")
    assert set(_log_states(_run(course).stdout).values()) == {"graded"}

    other = layout.package("activations")
    (other / "graders").mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "graders" / "test_relu.py").write_text("def test_relu():\n    pass\n")
    assert set(_log_states(_run(course).stdout).values()) == {"unchanged"}


def test_gradebook_lost_after_grading_is_refilled_without_grading_again(tmp_path):
    """If the gradebook is deleted after a batch, does a rerun put every grade back without grading again?"""
    course = _course(tmp_path)
    _run(course)
    (course / "gradebook.db").unlink()
    states = _log_states(_run(course).stdout)
    assert set(states.values()) == {"unchanged"}
    _exactly_once(course)
