"""A student's autograded/ and feedback/ folders show their current submission only: when a new
submission is graded, the copies and pages of the earlier one that it no longer has go (formgrader
would open the old notebook, annotated with the new report), and files that are not ours stay."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.layout import CourseLayout
from autograder.reporting.annotate import OUTPUT_NAME
from tests.conftest import course_cmd, course_with_students

pytestmark = pytest.mark.slow
A = "transformer-block"
RENAMED = f"{A} (1).ipynb"          # as a browser names a second download of the same file


def _grade_cell_reports(path: Path) -> dict[str, str]:
    """grade id -> the text of our report in that grade cell of the notebook at `path`."""
    nb = nbformat.read(path, as_version=4)
    out = {}
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        for o in cell.get("outputs", []):
            if o.get("ename") == OUTPUT_NAME or OUTPUT_NAME in o.get("text", ""):
                out[grade_id] = "\n".join(o.get("traceback", [])) or o["text"]
    return out


@pytest.mark.parametrize("run", [(), ("--student", "grace", "--wait")], ids=["batch", "one-student"])
def test_a_resubmission_under_another_name_replaces_the_earlier_copy_and_page(tmp_path, run):
    """grace's correct notebook graded, then replaced by john's (wrong) one saved as 'transformer-block (1)'
    with a newer timestamp: after `course autograde` (a batch, or `--student`), do autograded/ and feedback/
    hold the new notebook (annotated with its report) and its page only, the old copy and page gone, while
    a TA's files there and submitted/ stay as they were?"""
    course = course_with_students(tmp_path / "course", ("grace", "john"))
    layout = CourseLayout(course)
    course_cmd(course, "release", A)
    course_cmd(course, "autograde", A)
    copies, pages = layout.autograded("grace", A), layout.feedback("grace", A)
    assert (copies / f"{A}.ipynb").is_file() and (pages / f"{A}.html").is_file()

    submission = layout.submission("grace", A)
    (submission / f"{A}.ipynb").unlink()
    shutil.copy(layout.submission("john", A) / f"{A}.ipynb", submission / RENAMED)
    (submission / "timestamp.txt").write_text("2026-11-16 20:00:00.000000 UTC")
    ta_files = {copies / "ta-notes.txt": "rms_norm: see the office-hours notes\n",
                pages / "ta-notes.txt": "to discuss in class\n",
                pages / "extra-reading.html": "<!DOCTYPE html>\n<html><title>Reading</title></html>\n"}
    for path, text in ta_files.items():
        path.write_text(text)
    submitted_before = sorted(os.listdir(submission))

    out = course_cmd(course, "autograde", A, *run)
    assert "graded    grace" in out, out
    assert sorted(os.listdir(submission)) == submitted_before
    assert sorted(p.name for p in copies.glob("*.ipynb")) == [RENAMED]
    assert "0 / 5 points for rms_norm" in _grade_cell_reports(copies / RENAMED)["test_rms_norm"]
    assert sorted(p.name for p in pages.glob("*.html")) == sorted([f"{A} (1).html", "extra-reading.html"])
    assert '<span class="big">32</span>' in (pages / f"{A} (1).html").read_text()
    for path, text in ta_files.items():
        assert path.read_text() == text, path
