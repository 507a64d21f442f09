"""Submitted files: only regular files are read, no link is followed, copies never go through a
link, and one student's unreadable or odd files never stop the batch."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.api import _copy_for_formgrader, _output_dir, submissions
from autograder.config import load_course
from autograder.grading.lateness import submission_time
from autograder.notebooks import RefusedFile, find_submission_notebooks, load_notebook, read_regular

from .harness import ASSIGNMENT, NB, ROOT, load_results

sys.path.insert(0, str(ROOT / "tests"))
from autograder.layout import EXAMPLES, CourseLayout
from conftest import copy_course


def _notebook(path: Path, source: str = "x = 1") -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell(source))
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def test_a_symlinked_notebook_is_refused_with_a_reason(tmp_path):
    """Is a notebook that is a symbolic link (even to a readable notebook) refused, naming the file?"""
    real = _notebook(tmp_path / "other" / NB)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / NB).symlink_to(real)
    found, notes = find_submission_notebooks(folder, (NB,))
    assert found == {NB: None}
    assert notes == (f"{NB} is a symbolic link, not a regular file, so it was not graded; submit the notebook "
                     f"file itself.",)
    loaded = load_notebook(folder / NB, max_mb=5)
    assert not loaded.readable and "symbolic link" in loaded.notes[0]


def test_a_symlink_does_not_stand_in_for_a_renamed_notebook(tmp_path):
    """With the expected notebook missing, is a symlink under another name not graded in its place?"""
    real = _notebook(tmp_path / "secret.ipynb")
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "renamed.ipynb").symlink_to(real)
    found, notes = find_submission_notebooks(folder, (NB,))
    assert found == {NB: None}
    assert any("renamed.ipynb is a symbolic link" in n for n in notes)


def test_a_fifo_or_folder_in_place_of_a_notebook_is_refused_without_blocking(tmp_path):
    """Are a named pipe and a folder named like the notebook refused at once (no read that blocks)?"""
    os.mkfifo(tmp_path / NB)
    (tmp_path / "b.ipynb").mkdir()
    found, notes = find_submission_notebooks(tmp_path, (NB,))
    assert found == {NB: None}
    assert any("named pipe" in n for n in notes) and any("b.ipynb is a folder" in n for n in notes)
    with pytest.raises(RefusedFile, match="named pipe"):
        read_regular(tmp_path / NB, 1000)


def test_reading_stops_at_the_size_limit(tmp_path):
    """Is a file over the byte limit refused without being read whole?"""
    path = tmp_path / "big.ipynb"
    path.write_bytes(b"x" * 5000)
    with pytest.raises(RefusedFile, match="over the"):
        read_regular(path, 4999)
    assert read_regular(path, 5000) == b"x" * 5000


def test_a_symlinked_timestamp_is_not_read(tmp_path):
    """Is a timestamp.txt that links to /dev/zero ignored with a note (and never read)?"""
    (tmp_path / "timestamp.txt").symlink_to("/dev/zero")
    when, note = submission_time(tmp_path)
    assert when is None and "symbolic link" in note


def test_copies_for_formgrader_never_follow_links(tmp_path):
    """Are only regular notebooks copied, and is an output folder that became a link replaced, not followed?"""
    submitted = CourseLayout(tmp_path).submitted_dir
    _notebook(submitted / NB)
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (submitted / "other.ipynb").symlink_to(secret)
    (submitted / "timestamp.txt").symlink_to(secret)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sid").symlink_to(elsewhere)
    target = _output_dir(tmp_path, "out", "sid", ASSIGNMENT)
    _copy_for_formgrader(submitted, target, max_bytes=10**6)
    assert sorted(p.name for p in target.iterdir()) == [NB]
    assert not (tmp_path / "out" / "sid").is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_symlinked_student_folders_are_listed_so_they_can_be_refused(course_copy):
    """Is a student folder that is a symbolic link listed (to be refused), not followed into another student's?"""
    _notebook(CourseLayout(course_copy).submission("ada", ASSIGNMENT) / NB)
    (CourseLayout(course_copy).submitted_dir / "eve").symlink_to("ada")
    listed = submissions(load_course(course_copy), ASSIGNMENT)
    assert [sid for sid, _ in listed] == ["ada", "eve"]


def test_a_student_folder_linked_to_one_without_the_assignment_is_refused_not_unreadable(course_copy):
    """Is submitted/<student> linked to a folder lacking the assignment (`ln -s /etc submitted/eve`)
    refused as a link, never called unreadable (which would keep earlier grades and exit 1), and can
    `--student eve` name it?"""
    from autograder.api import _refusal, _unreadable

    course = load_course(course_copy)
    (course.layout.submitted_dir).mkdir(parents=True, exist_ok=True)
    (course_copy.parent / "elsewhere").mkdir()
    (course.layout.submitted_dir / "eve").symlink_to(course_copy.parent / "elsewhere")
    folder = course.layout.submission("eve", ASSIGNMENT)
    assert not folder.exists()
    assert _unreadable(course, folder) is None
    assert "submitted/eve is a symbolic link" in (_refusal(course, folder) or "")
    assert submissions(course, ASSIGNMENT, "eve") == [("eve", folder)]
    assert [sid for sid, _ in submissions(course, ASSIGNMENT)] == ["eve"]


@pytest.mark.slow
def test_a_linked_student_folder_is_one_warning_and_the_same_exit_every_run(tmp_path):
    """Does each run say once, in a WARNING, that a linked student folder was refused as a symbolic
    link, and exit the same way every time (not unreadable the second time)?"""
    from autograder import api

    course = copy_course(tmp_path / "course")
    submitted = CourseLayout(course).submitted_dir
    submitted.mkdir(parents=True, exist_ok=True)
    (tmp_path / "elsewhere").mkdir()
    (submitted / "eve").symlink_to(tmp_path / "elsewhere")
    for _ in range(2):
        lines: list[str] = []
        batch = api.autograde(course, ASSIGNMENT, workers=1, log=lines.append)
        warned = [ln for ln in lines if "eve" in ln and "WARNING" in ln]
        assert len(warned) == 1 and "refused: submitted/eve is a symbolic link" in warned[0], lines
        assert not any("could not be read" in ln for ln in lines), lines
        assert not batch.unreadable and not batch.grader_failed
        assert [r.student for r in batch.results] == ["eve"] and batch.results[0].score == 0


@pytest.mark.slow
def test_one_students_odd_files_never_stop_the_batch(tmp_path):
    """With linked, piped, unreadable-output and linked-folder submissions, are all the others still graded?"""
    course = copy_course(tmp_path / "course")
    sub = CourseLayout(course).submitted_dir
    example = CourseLayout(ROOT / EXAMPLES).submission("ada", ASSIGNMENT)
    for sid in ("ada", "zed"):
        shutil.copytree(example, sub / sid / ASSIGNMENT)
    (sub / "bob" / ASSIGNMENT).mkdir(parents=True)
    (sub / "bob" / ASSIGNMENT / NB).symlink_to(sub / "ada" / ASSIGNMENT / NB)
    (sub / "cy" / ASSIGNMENT).mkdir(parents=True)
    os.mkfifo(sub / "cy" / ASSIGNMENT / NB)
    (sub / "eve").symlink_to("ada")
    (sub / "fay" / ASSIGNMENT).mkdir(parents=True)
    shutil.copyfile(sub / "ada" / ASSIGNMENT / NB, sub / "fay" / ASSIGNMENT / NB)
    (CourseLayout(course).autograded_dir / "fay").mkdir(parents=True)
    (CourseLayout(course).autograded("fay", ASSIGNMENT)).write_text("a file where a folder should be")
    env = dict(os.environ, PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ["PATH"])
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT,
                           "--course-dir", str(course)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr        # fay's results could not be written
    assert "output: fay: " in proc.stderr
    assert load_results(course, "ada")["score"] == load_results(course, "zed")["score"] == 100
    for sid, reason in (("bob", "symbolic link"), ("cy", "named pipe"), ("eve", "symbolic link")):
        doc = load_results(course, sid)
        assert doc["score"] == 0 and reason in doc["output"], (sid, doc["output"])
    assert not (CourseLayout(course).autograded_dir / "eve").is_symlink()
    assert sorted(p.name for p in (CourseLayout(course).autograded("bob", ASSIGNMENT)).iterdir()) == ["results.json"]
