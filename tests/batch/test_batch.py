"""A class graded by warm workers: the same results whatever the number of workers, one process
writing the gradebook (which the real `nbgrader export` reads), and a grading process that never
imports nbgrader."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.api import prepare_demo
from autograder.config import load_course
from autograder.layout import CourseLayout
from tests.conftest import ROOT, course_with_students

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
TIMINGS = ("execution_time", "duration", "timestamp", "graded_at")


def without_timings(value):
    """A results.json document less what depends on the clock (run times, when it was written)."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def results_of(folder: Path) -> dict[str, dict]:
    return {p.parts[-3]: without_timings(json.loads(p.read_text()))
            for p in CourseLayout(folder).autograded_dir.glob("*/transformer-block/results.json")}


def auto_scores(folder: Path) -> dict[tuple[str, str], float | None]:
    """(student, grade cell) -> auto_score, as nbgrader's gradebook holds them."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
        return {(s.id, grade.name): grade.auto_score
                for s in gb.students for sub in s.submissions for nb in sub.notebooks for grade in nb.grades}


@pytest.fixture(scope="module")
def serial(tmp_path_factory, graded_demo) -> Path:
    """The demo class graded by one worker (a worker process of its own: `--workers 1` for several
    submissions), with the same course secret (hence the same hidden inputs) as `graded_demo`."""
    folder = prepare_demo(ROOT, tmp_path_factory.mktemp("serial") / "course")
    secret = load_course(graded_demo.folder).secret_file
    shutil.copy2(secret, load_course(folder).secret_file)
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder), "--workers", "1"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    return folder


def test_two_workers_give_the_same_results_as_one(graded_demo, serial):
    """Are results.json and the gradebook the same, graded by two worker processes or by one?"""
    assert graded_demo.proc.returncode == 0, graded_demo.proc.stderr
    parallel = results_of(graded_demo.folder)
    assert len(parallel) == 13
    assert parallel == results_of(serial)
    assert auto_scores(graded_demo.folder) == auto_scores(serial)


def test_the_batch_reports_progress_in_plain_lines_when_piped(graded_demo):
    """Piped, does `course autograde` print progress lines (count, rate, time left) and no bar, on stderr (stdout
    holds the report alone)?"""
    assert "progress: " not in graded_demo.proc.stdout
    lines = [line for line in graded_demo.proc.stderr.splitlines() if line.startswith("progress: ")]
    assert lines and lines[-1].startswith("progress: 13/13 submissions (")
    assert any("left)" in line for line in lines[:-1])
    assert "\r" not in graded_demo.proc.stdout + graded_demo.proc.stderr


def test_nbgrader_export_reads_the_gradebook_the_batch_wrote(graded_demo, tmp_path):
    """Does the real `nbgrader export` list every student's total from the batch's gradebook?"""
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(graded_demo.folder)!r}\n"
        f"c.CourseDirectory.db_url = 'sqlite:///{graded_demo.folder / 'gradebook.db'}'\n", encoding="utf-8")
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    done = subprocess.run([str(BIN / "nbgrader"), "export", "--to", str(tmp_path / "grades.csv")], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == "transformer-block"}
    assert set(rows) >= set(graded_demo.results)
    for sid, doc in graded_demo.results.items():
        extra = doc["extra_data"]
        assert float(rows[sid]["score"]) == pytest.approx(doc["score"], abs=1e-3), sid
        assert float(rows[sid]["late_submission_penalty"] or 0) == pytest.approx(extra["late_penalty"], abs=1e-3), sid


def test_grading_a_student_does_not_import_nbgrader(tmp_path):
    """Does the process that grades (one worker, in-process) write results without importing nbgrader
    or nbformat, leaving the gradebook to its writer process?"""
    folder = prepare_demo(ROOT, tmp_path / "course")
    script = (
        "import sys\n"
        "from autograder import api\n"
        f"batch = api.autograde({str(folder)!r}, 'transformer-block', student='ada', workers=1)\n"
        "from autograder.reporting.summary import StudentRow\n"
        "assert batch.results[0].score == 100.0, batch.results\n"
        "assert isinstance(batch.results[0], StudentRow), type(batch.results[0])\n"
        "assert not batch.gradebook_errors and not batch.output_errors, (batch.gradebook_errors, batch.output_errors)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('nbgrader', 'nbformat', 'nbclient')))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")])))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    layout = CourseLayout(folder)
    written = json.loads(layout.results_json("ada", "transformer-block").read_text())
    assert written["score"] == 100.0 and written["extra_data"]["grading_key"]   # rewritten after the commit
    assert (layout.autograded("ada", "transformer-block") / "transformer-block.ipynb").is_file()
    grades = auto_scores(folder)
    assert grades and all(score is not None for (sid, _), score in grades.items() if sid == "ada")
    assert sum(score or 0 for score in grades.values()) == 100.0


def test_names_with_control_characters_reach_no_terminal_or_report_as_they_are(tmp_path):
    """Do a stray file, a renamed notebook and a student folder whose names hold escape sequences and
    a newline show them written out (`\\x1b`) in the batch's output, results.json and the page, the
    folder refused as a student id, while the others are graded and the batch exits 0?"""
    folder = course_with_students(tmp_path / "course", ("ada", "alan"))
    layout = CourseLayout(folder)
    evil = layout.submission("ev\x1b[2Kil", "transformer-block")
    shutil.copytree(layout.submission("ada", "transformer-block"), evil)
    fake = "x\x1b[2K\x1b[1A\x1b[32mFAKE\x1b[0m\x1b]0;pwned\x07.txt"
    (layout.submission("alan", "transformer-block") / fake).write_text("")
    ada = layout.submission("ada", "transformer-block")
    (ada / "transformer-block.ipynb").rename(ada / "tb\n\x1b[31m.ipynb")

    done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not any(c in done.stdout + done.stderr for c in "\x1b\x07"), done.stdout + done.stderr
    assert "/x\\x1b[2K\\x1b[1A\\x1b[32mFAKE\\x1b[0m\\x1b]0;pwned\\x07.txt: not a notebook" in done.stdout
    assert "/ev\\x1b[2Kil: the folder's name holds a control character" in done.stdout
    scores = {sid: r["score"] for sid, r in results_of(folder).items()}
    assert sorted(scores) == ["ada", "alan"] and scores["ada"] == 100.0
    written = layout.results_json("ada", "transformer-block").read_text()
    assert "tb\\\\x0a\\\\x1b[31m.ipynb" in written and "\\n\\u001b" not in written
    page = next(layout.feedback("ada", "transformer-block").glob("*.html"))
    assert page.name == "tb\\x0a\\x1b[31m.html" and "\x1b" not in page.read_text()
    assert {sid for sid, _ in auto_scores(folder)} == {"ada", "alan"}


def test_a_folder_named_as_no_roster_id_can_be_is_skipped_with_a_line_and_the_batch_goes_on(tmp_path):
    """Folders laid out by hand from an LMS download, "smith,j" and "a b", name ids the roster refuses (so no
    roster could list them, nor an export match them): does the batch name each in one line saying what to
    do, grade the others, keep them out of the gradebook and exit 0?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    for sid in ("smith,j", "a b"):
        shutil.copytree(layout.submission("ada", "transformer-block"), layout.submission(sid, "transformer-block"))

    done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")])))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (done.stdout + done.stderr).splitlines()
    for sid, what in (("smith,j", "a ','"), ("a b", "a space")):
        assert [line for line in lines if sid in line] == [
            f"not graded: {layout.relative(layout.submitted_dir / sid)}: the folder's name holds {what}, which no "
            f"roster id may hold, so nothing in it was graded; rename it to the student's id"], done.stdout
    assert sorted(results_of(folder)) == ["ada"]
    assert {sid for sid, _ in auto_scores(folder)} == {"ada"}


def test_names_and_text_that_are_not_utf8_cost_only_their_own_submission(tmp_path):
    """Do a student folder and a notebook whose names are not UTF-8, and a notebook holding a lone
    surrogate escape, each get a reason, while the batch grades everyone and exits 0?"""
    folder = course_with_students(tmp_path / "course", ("ada",))
    layout = CourseLayout(folder)
    notebook = layout.submission("ada", "transformer-block") / "transformer-block.ipynb"
    odd_folder = os.fsencode(layout.submitted_dir) + b"/zo\xeb/transformer-block"
    os.makedirs(odd_folder)
    shutil.copy(notebook, odd_folder + b"/transformer-block.ipynb")
    layout.submission("wen", "transformer-block").mkdir(parents=True)
    shutil.copy(notebook, os.fsencode(layout.submission("wen", "transformer-block")) + b"/w\xe9rk.ipynb")
    surrogate = json.loads(notebook.read_text())
    surrogate["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["\ud800"]})
    layout.submission("sue", "transformer-block").mkdir(parents=True)
    (layout.submission("sue", "transformer-block") / "transformer-block.ipynb").write_text(json.dumps(surrogate))
    submitted = {p: p.read_bytes() for p in layout.submitted_dir.rglob("*") if p.is_file()}

    done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                           "--course-dir", str(folder)], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted/zo\\xeb: the folder's name is not valid UTF-8" in done.stdout
    scores = {sid: r["score"] for sid, r in results_of(folder).items()}
    assert scores == {"ada": 100.0, "sue": 100.0, "wen": 0.0}
    wen = json.loads(layout.results_json("wen", "transformer-block").read_text())
    assert wen["extra_data"]["state"] == "graded"
    assert "w\\xe9rk.ipynb: its file name is not valid UTF-8, so it was not graded" in wen["output"]
    # sue's copy for the formgrader is annotated, her lone surrogate written as U+FFFD (UTF-8 has no form for
    # it); her submitted notebook keeps it (checked below: the submitted files are unchanged)
    sue_copy = (layout.autograded("sue", "transformer-block") / "transformer-block.ipynb").read_bytes()
    assert sue_copy != (layout.submission("sue", "transformer-block") / "transformer-block.ipynb").read_bytes()
    assert "".join(json.loads(sue_copy.decode("utf-8"))["cells"][-1]["source"]) == "\ufffd"
    assert {p: p.read_bytes() for p in layout.submitted_dir.rglob("*") if p.is_file()} == submitted
