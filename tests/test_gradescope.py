"""`course gradescope`: the bundle's content, and run_autograder grading in a temporary /autograder.

Most tests run the bundle's run_autograder against this project's venv, with the engine bundled in
the zip on its PYTHONPATH. One (root only) runs the bundle as Gradescope does: setup.sh for real
(apt-get, a fresh venv pip installed from PyPI), then run_autograder at its default paths, inside a
bubblewrap container whose /autograder, /opt/course-autograder, /root and /tmp are temporary folders."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest
import yaml

from autograder import gradescope
from autograder.config import load_course
from autograder.layout import EXAMPLES, INSTRUCTOR_CODE, MAX_ID_BYTES, ROSTER_FILE, STUDENT_STEPS, CourseLayout
from autograder.sandbox.isolation import REQUIRED
from conftest import ROOT, copy_course, course_with_students

ASSIGNMENT, PACKAGE, NOTEBOOK = "transformer-block", "transformer_block", "transformer-block.ipynb"
EXAMPLE = CourseLayout(ROOT / EXAMPLES)
VISIBILITIES = {"hidden", "after_due_date", "after_published", "visible"}


@dataclass(frozen=True)
class Built:
    course: CourseLayout                 # the course the bundle was made from
    bundle: gradescope.Bundle


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """The bundle of a course copy that also holds a second assignment, a submission, results and a gradebook."""
    course = CourseLayout(copy_course(tmp_path_factory.mktemp("gs") / "course"))
    data = yaml.safe_load(course.config.read_text())
    data["assignments"].append({"name": "other-hw", "notebooks": ["other.ipynb"], "problems": {"f": {"points": 1}}})
    course.config.write_text(yaml.safe_dump(data, sort_keys=False))
    course.source("other-hw").mkdir(parents=True)
    shutil.copy(course.release(ASSIGNMENT) / NOTEBOOK, course.source("other-hw") / "other.ipynb")
    course.package("other_hw").mkdir()
    (course.package("other_hw") / "reference.py").write_text("ANSWER = 42\n")
    shutil.copytree(EXAMPLE.submission("edsger", ASSIGNMENT), course.submission("edsger", ASSIGNMENT))
    course.autograded("edsger", ASSIGNMENT).mkdir(parents=True)
    (course.root / "gradebook.db").write_bytes(b"")
    bundle = gradescope.build_bundle(course.root, ASSIGNMENT, visibility="after_due_date")
    return Built(course, bundle)


def autograder_root(tmp_path: Path, bundle: gradescope.Bundle) -> Path:
    """A fresh /autograder: the zip extracted into source/, an empty submission/."""
    root = tmp_path / "autograder"
    with zipfile.ZipFile(bundle.path) as zf:
        zf.extractall(root / gradescope.SOURCE)
        for info in zf.infolist():                    # zipfile drops the mode; Gradescope's unzip keeps it
            os.chmod(root / gradescope.SOURCE / info.filename, info.external_attr >> 16 & 0o777)
    (root / gradescope.SUBMISSION).mkdir()
    return root


def run_autograder(root: Path) -> tuple[subprocess.CompletedProcess, dict]:
    env = {**os.environ, gradescope.ROOT_ENV: str(root), gradescope.VENV_ENV: sys.prefix}
    proc = subprocess.run([str(root / gradescope.SOURCE / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=600, cwd=root)
    return proc, json.loads((root / gradescope.RESULTS / "results.json").read_text())


def assert_gradescope_results(doc: dict) -> None:
    """Does `doc` follow Gradescope's results.json specification (the keys it reads, their types)?"""
    assert isinstance(doc["score"], float)
    assert isinstance(doc.get("output", ""), str)
    assert doc.get("visibility", "visible") in VISIBILITIES
    assert doc.get("stdout_visibility", "hidden") in VISIBILITIES
    assert isinstance(doc.get("execution_time", 0), (int, float))
    for test in doc["tests"]:
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
        assert isinstance(test["score"], float) and isinstance(test["max_score"], float)
        assert test["visibility"] in VISIBILITIES and test["status"] in ("passed", "failed")


def test_the_bundle_holds_the_assignment_and_nothing_of_the_rest_of_the_course(built):
    """Are setup.sh, run_autograder, the engine, course.yml, the secret, the release notebook and the
    graders in the zip, and no other assignment, submission, result, gradebook or roster?"""
    names = set(built.bundle.names)
    assert built.bundle.path == built.course.gradescope_bundle(ASSIGNMENT)
    for name in ("setup.sh", "run_autograder", gradescope.SETTINGS, "engine/pyproject.toml", "engine/constraints.txt",
                 "engine/autograder/gradescope.py", "engine/autograder/reporting/templates/feedback.html",
                 "course/course.yml", "course/nbgrader_config.py", f"course/{gradescope.SECRET}",
                 f"course/{INSTRUCTOR_CODE}/__init__.py", f"course/{INSTRUCTOR_CODE}/{PACKAGE}/reference.py",
                 f"course/{INSTRUCTOR_CODE}/{PACKAGE}/graders/test_layer_norm.py"):
        assert name in names, name
    parts = {part for name in names for part in PurePosixPath(name).parts}
    assert not parts & {*STUDENT_STEPS, "other-hw", "other_hw", "gradebook.db", ROSTER_FILE, "__pycache__"}
    with zipfile.ZipFile(built.bundle.path) as zf:
        bundled = yaml.safe_load(zf.read("course/course.yml"))
        assert zf.read(f"course/{gradescope.SECRET}") == (built.course.root / ".course_secret").read_bytes()
        assert json.loads(zf.read(gradescope.SETTINGS)) == {"assignment": ASSIGNMENT, "visibility": "after_due_date"}
        assert zf.getinfo("run_autograder").external_attr >> 16 & 0o111
    assert [a["name"] for a in bundled["assignments"]] == [ASSIGNMENT]
    assert bundled["gradebook"] == "sqlite:///gradebook.db" and bundled["roster"] == ROSTER_FILE
    assert built.bundle.path.stat().st_mode & 0o077 == 0          # it holds the secret


def test_setup_and_run_scripts_parse_and_name_the_bundled_files(built, tmp_path):
    """Do setup.sh and run_autograder pass `bash -n`, and does setup.sh install bubblewrap and the bundled
    engine under its constraints, from files that are in the zip?"""
    root = autograder_root(tmp_path, built.bundle)
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(root / gradescope.SOURCE / script)], check=True)
    setup = (root / gradescope.SOURCE / "setup.sh").read_text()
    for needed in ("apt-get install", "bubblewrap", "libseccomp2", "-m venv",
                   '-c "$source_dir/engine/constraints.txt"', '"$source_dir/engine"', 'course" doctor'):
        assert needed in setup, needed
    assert (root / gradescope.SOURCE / "engine" / "constraints.txt").is_file()


def test_run_autograder_scores_as_course_autograde_does(built, tmp_path):
    """Does a submission graded by run_autograder (its notebook in a subfolder, under another name) score
    exactly what `course autograde --student` gives the same student in the course, rounded to cents (the
    tests adding up to the score), with valid results?"""
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT, "--student", "edsger",
                           "--course-dir", str(built.course.root), "--wait"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    local = json.loads(built.course.results_json("edsger", ASSIGNMENT).read_text())
    assert 0 < local["score"] < local["max_score"]

    root = autograder_root(tmp_path, built.bundle)
    (root / gradescope.SUBMISSION / "work").mkdir()
    shutil.copy(EXAMPLE.submission("edsger", ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / "work" / "hw.ipynb")
    (root / gradescope.METADATA).write_text(json.dumps(
        {"id": 1, "users": [{"email": "edsger@example.edu", "id": 7, "name": "Edsger Dijkstra", "sid": "edsger"}]}))
    proc, doc = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    assert_gradescope_results(doc)
    rounded = gradescope.rounded_scores(local)
    assert (doc["score"], doc["max_score"]) == (rounded["score"], rounded["max_score"])
    assert [(t["name"], t["score"], t["max_score"]) for t in doc["tests"]] == [
        (t["name"], t["score"], t["max_score"]) for t in rounded["tests"]]
    # edsger's split_heads and merge_heads earn a share of their checks: rounded to cents, adding up
    assert local["score"] != doc["score"] == round(local["score"], 2) == _cents_sum(doc["tests"], "score") / 100
    assert doc["extra_data"]["student"] == "edsger" and doc["extra_data"]["seed"] == local["extra_data"]["seed"]
    assert doc["visibility"] == "after_due_date"
    assert {t["visibility"] for t in doc["tests"]} == {"after_due_date"}   # a test's own would override it
    assert doc["output"].startswith("Your notebook work/hw.ipynb was graded as transformer-block.ipynb.")
    # no timestamp.txt on Gradescope, where course.yml's late policy does not apply: no line about it
    assert load_course(built.course.root).assignment(ASSIGNMENT).due is not None
    assert "Late policy" not in proc.stdout and "graded as on time" not in proc.stdout, proc.stdout


def _cents_sum(tests: list[dict], key: str) -> int:
    return sum(round(t[key] * 100) for t in tests)


def _shared(number: str, checks: int, passed: set[int], points: float) -> list[dict]:
    """`checks` tests of problem `number` sharing `points` equally, those in `passed` (from 1) passed."""
    share = points / checks
    return [{"name": f"check {i}", "number": f"{number}.{i}", "score": share if i in passed else 0.0,
             "max_score": share, "status": "passed" if i in passed else "failed"} for i in range(1, checks + 1)]


def test_scores_are_rounded_to_cents_and_the_tests_add_up_to_the_score():
    """With 5 points shared by 9 checks (2 passed) and 22 by 3 (all passed), is every score written in
    whole cents, do a problem's tests add up to its score rounded once and their max_scores to its points,
    does a passed test score its max_score, and is the score their sum less the late penalty?"""
    tests = _shared("1", 9, {1, 3}, 5.0) + _shared("2", 3, {1, 2, 3}, 22.0) + _shared("3", 3, set(), 7.0)
    exact = 5.0 * 2 / 9 + 22.0
    doc = {"score": exact - 0.5, "max_score": 34.0, "tests": tests, "extra_data": {"late_penalty": 0.5}}
    shown = gradescope.rounded_scores(doc)
    assert doc["tests"][0]["score"] == 5 / 9 and doc["score"] == exact - 0.5      # the document given is left as is
    for test in shown["tests"]:
        assert round(test["score"], 2) == test["score"] and round(test["max_score"], 2) == test["max_score"]
        assert (test["score"] == test["max_score"] > 0) == (test["status"] == "passed")
    first = [t for t in shown["tests"] if t["number"].startswith("1.")]
    assert _cents_sum(first, "score") == 111 and _cents_sum(first, "max_score") == 500
    assert [t["score"] for t in shown["tests"] if t["number"].startswith("2.")] == [7.33, 7.34, 7.33]
    assert _cents_sum(shown["tests"], "max_score") == 3400 and shown["max_score"] == 34.0
    assert shown["score"] == 22.61 == (_cents_sum(shown["tests"], "score") - 50) / 100
    assert shown["score"] == round(exact - 0.5, 2)
    assert gradescope.rounded_scores({**doc, "extra_data": {"late_penalty": 40.0}})["score"] == 0.0
    # without tests (a crashed grading, a failure's fallback): the score alone, in cents
    assert gradescope.rounded_scores({"score": 7.333333333333333, "tests": []})["score"] == 7.33
    assert gradescope.rounded_scores({"score": 0.0, "output": "x", "tests": []}) == {"score": 0.0, "output": "x",
                                                                                    "tests": []}


def test_a_broken_notebook_gets_a_valid_results_json(built, tmp_path):
    """Is a notebook that is not valid JSON, without submission metadata, scored 0 with a reason?"""
    root = autograder_root(tmp_path, built.bundle)
    shutil.copy(EXAMPLE.submission("ken", ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / NOTEBOOK)
    proc, doc = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    assert_gradescope_results(doc)
    assert doc["score"] == 0.0 and "not valid notebook JSON" in doc["output"]
    assert doc["extra_data"]["student"] == gradescope.FALLBACK_STUDENT
    assert doc["output"].startswith(f"Gradescope's {gradescope.METADATA} is missing, so this submission was graded "
                                    f"as student 'student'")


def test_unreadable_metadata_grades_as_student_and_says_so_keeping_the_score(built, tmp_path):
    """With a submission_metadata.json that is not JSON, is edsger's notebook still graded (under 'student', its
    score kept) with a line saying so on stdout and at the head of results.json's output, rather than silently?"""
    root = autograder_root(tmp_path, built.bundle)
    shutil.copy(EXAMPLE.submission("edsger", ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / NOTEBOOK)
    (root / gradescope.METADATA).write_text("{truncated", encoding="utf-8")
    proc, doc = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    assert_gradescope_results(doc)
    assert doc["extra_data"]["student"] == gradescope.FALLBACK_STUDENT and doc["score"] > 0
    note = (f"Gradescope's {gradescope.METADATA} is not JSON (Expecting property name enclosed in double quotes: "
            f"line 1 column 2 (char 1)), so this submission was graded as student 'student' rather than under your "
            f"Student ID")
    assert doc["output"].startswith(note)
    assert f"run_autograder: {note}" in proc.stdout


@pytest.mark.parametrize("venv", ["project", "missing"])
def test_a_grader_that_cannot_run_still_writes_results(built, tmp_path, venv):
    """When the bundled course cannot be read, or the venv is missing, is results.json still valid, 0,
    telling the student it is not their notebook's fault, and with the bundle's visibility (after_due_date)?"""
    root = autograder_root(tmp_path, built.bundle)
    shutil.copy(EXAMPLE.submission("edsger", ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / NOTEBOOK)
    (root / gradescope.SOURCE / "course" / "course.yml").write_text("assignments: [")
    env = {**os.environ, gradescope.ROOT_ENV: str(root),
           gradescope.VENV_ENV: sys.prefix if venv == "project" else str(tmp_path / "no-venv")}
    proc = subprocess.run([str(root / gradescope.SOURCE / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0
    doc = json.loads((root / gradescope.RESULTS / "results.json").read_text())
    assert_gradescope_results(doc)
    assert doc["score"] == 0.0 and doc["tests"] == [] and "not a problem in your notebook" in doc["output"]
    assert doc["visibility"] == "after_due_date"


@pytest.mark.parametrize(("files", "taken", "noted"), [
    ({NOTEBOOK: "a", f"sub/{NOTEBOOK}": "b"}, "a", False),          # the top folder's first
    ({f"sub/{NOTEBOOK}": "b", "other.ipynb": "c"}, "b", True),       # the one of that name, in a subfolder
    ({"sub/my work.ipynb": "c"}, "c", True),                         # the only notebook, renamed
    ({"a.ipynb": "a", "b.ipynb": "b"}, None, True),                  # two others: neither guessed, both named
    ({"work/Transformer-Block-Copy1.ipynb": "c", "Untitled.ipynb": "u"}, "c", True),   # the one named like it
    ({"transformer-block-old.ipynb": "o", "Untitled.ipynb": "u"}, None, True),   # a name holding it: not a copy
    ({"__MACOSX/x.ipynb": "m", ".ipynb_checkpoints/y.ipynb": "k"}, None, False),
    ({f"x/{NOTEBOOK}": "x", f"y/{NOTEBOOK}": "y"}, None, True),      # two of that name in subfolders
])
def test_place_notebooks_finds_the_notebook_sensibly(tmp_path, files, taken, noted):
    """Which submitted notebook is graded as the assignment's, and is the student told when it was renamed?"""
    submission, dest = tmp_path / "submission", tmp_path / "dest"
    for name, text in files.items():
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text(text)
    notes = gradescope.place_notebooks(submission, dest, (NOTEBOOK,))
    assert ((dest / NOTEBOOK).read_text() if (dest / NOTEBOOK).exists() else None) == taken
    assert bool(notes) == noted
    if noted and taken is None:                  # the notebooks found are named, so the student can fix it
        seen = [name for name in files if not name.startswith(("__MACOSX", "."))]
        assert len(notes) == 1 and all(name in notes[0] for name in seen), notes


def test_a_zip_named_in_a_missing_folder_or_as_a_folder_is_refused_in_one_line(tmp_path):
    """Does `course gradescope --to` a file in a folder that does not exist, or a folder, exit 2 with one
    line naming it, as `nbgrader export --to` does, making no folder and writing no zip?"""
    course = copy_course(tmp_path / "course")
    (tmp_path / "out").mkdir()
    for to, why in ((tmp_path / "no" / "x.zip", "its folder"), (tmp_path / "out", "is a folder")):
        done = subprocess.run([sys.executable, "-m", "autograder.cli", "gradescope", ASSIGNMENT, "--to", str(to),
                               "--course-dir", str(course)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"course: error: --to {to}: {why}"), done.stderr
        assert lines[0].endswith("; no zip written")
    assert not (tmp_path / "no").exists() and list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize("spoil, why", [
    (lambda nb: nb.write_bytes(b""), "not a readable notebook (Expecting value: line 1 column 1 (char 0)); run "
                                     f"`course release {ASSIGNMENT}` to write it again"),
    (lambda nb: nb.unlink(), f"not found (run `course release {ASSIGNMENT}` first)"),
], ids=["empty", "missing"])
def test_a_release_notebook_that_course_validate_refuses_is_not_packed(tmp_path, spoil, why):
    """With the released notebook empty (0 bytes) or missing, does `course gradescope` refuse in the one line
    `course validate` gives (exit 2), writing no zip, rather than packing it for Gradescope?"""
    course = copy_course(tmp_path / "course")
    released = CourseLayout(course).release(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb"
    spoil(released)
    line = f"course: error: {CourseLayout(course).relative(released)}: {why}"
    for command in (["gradescope", ASSIGNMENT, "--to", str(tmp_path / "a.zip")], ["validate", ASSIGNMENT]):
        done = subprocess.run([sys.executable, "-m", "autograder.cli", *command, "--course-dir", str(course)],
                              capture_output=True, text=True, timeout=300)
        assert (done.returncode, done.stderr.splitlines()) == (2, [line]), done.stdout + done.stderr
    assert not (tmp_path / "a.zip").exists()


def test_a_release_showing_other_points_than_course_yml_is_not_packed(tmp_path):
    """With layer_norm's points raised in course.yml (12 -> 14) after `course release`, does `course gradescope`
    refuse in one line naming the difference and `course release`, writing no zip, rather than bundle a
    notebook that tells students 12 of 100 while Gradescope grades 14 of 102?"""
    course = CourseLayout(copy_course(tmp_path / "course"))
    data = yaml.safe_load(course.config.read_text())
    entry = next(e for e in data["assignments"] if e["name"] == ASSIGNMENT)
    assert entry["problems"]["layer_norm"]["points"] == 12
    entry["problems"]["layer_norm"]["points"] = 14
    course.config.write_text(yaml.safe_dump(data, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "autograder.cli", "gradescope", ASSIGNMENT, "--to",
                           str(tmp_path / "a.zip"), "--course-dir", str(course.root)],
                          capture_output=True, text=True, timeout=300)
    released = course.relative(course.release(ASSIGNMENT) / NOTEBOOK)
    assert (done.returncode, done.stderr.splitlines()) == (2, [
        f"course: error: {released}: layer_norm: grade cell test_layer_norm gives 12 points, course.yml gives 14 "
        f"(run `course release {ASSIGNMENT}`); 2 more differences from course.yml in the release; no zip written"]), \
        done.stdout + done.stderr
    assert not (tmp_path / "a.zip").exists()


def test_place_notebooks_names_what_it_found_when_nothing_fits(tmp_path):
    """With a.ipynb and work/b.ipynb and no transformer-block.ipynb, does the note say exactly that?"""
    submission = tmp_path / "submission"
    (submission / "work").mkdir(parents=True)
    (submission / "a.ipynb").write_text("a")
    (submission / "work" / "b.ipynb").write_text("b")
    assert gradescope.place_notebooks(submission, tmp_path / "dest", (NOTEBOOK,)) == [
        f"Your submission holds no notebook named {NOTEBOOK}, so none was graded as {NOTEBOOK} (it holds a.ipynb "
        f"and work/b.ipynb). Submit your notebook as {NOTEBOOK}."]


def test_place_notebooks_follows_no_link(tmp_path):
    """Is a submitted notebook that is a symbolic link left alone?"""
    submission = tmp_path / "submission"
    submission.mkdir()
    (tmp_path / "secret.ipynb").write_text("secret")
    (submission / NOTEBOOK).symlink_to(tmp_path / "secret.ipynb")
    assert gradescope.place_notebooks(submission, tmp_path / "dest", (NOTEBOOK,)) == []
    assert not (tmp_path / "dest" / NOTEBOOK).exists()


@pytest.mark.parametrize(("users", "sid"), [
    ([{"sid": "s123", "email": "a@b.edu", "id": 5}], "s123"),
    ([{"sid": None, "email": "a@b.edu", "id": 5}], "a@b.edu"),
    ([{"sid": "has space", "email": "", "id": 5}], "5"),
    ([{"name": "x"}, {"sid": "second"}], gradescope.FALLBACK_STUDENT),
    ([{"sid": "../up"}], gradescope.FALLBACK_STUDENT),
    ("not a list", gradescope.FALLBACK_STUDENT),
    ([{"sid": "zoë", "email": "z@b.edu"}], "zoë"),                        # as `course autograde --student zoë`
    ([{"sid": "-s1", "email": "z@b.edu"}], "-s1"),
    ([{"sid": "x" * (MAX_ID_BYTES + 1), "email": "z@b.edu", "id": 5}], "z@b.edu"),
    ([{"sid": "ë" * (MAX_ID_BYTES // 2 + 1), "email": "", "id": 5}], "5"),   # bytes, not characters
    ([{"sid": "a\x1b[2Kb", "email": "z@b.edu"}], "z@b.edu"),
])
def test_student_id_comes_from_the_first_user(users, sid):
    """Is the id the first user's Student ID, else email, else Gradescope id, else a fixed one, taken by the
    rule the course takes student ids by (non-ASCII letters in, a path, control character or an id longer
    than a file name allows out), with a note for the student when a Student ID was given and passed over?"""
    chosen, notes = gradescope.student_id({"users": users})
    assert chosen == sid
    given = users[0].get("sid") if isinstance(users, list) and users else None
    if given and given != sid:
        assert len(notes) == 1 and notes[0].startswith("Your Student ID on Gradescope (") and f"'{sid}'" in notes[0]
        assert "\x1b" not in notes[0] and len(notes[0]) < 300
    elif sid == gradescope.FALLBACK_STUDENT:      # nobody named: said so, as when the metadata cannot be read
        assert notes == [f"Gradescope's {gradescope.METADATA} names no user with a Student ID, email or Gradescope "
                         f"user id, so this submission was graded as student 'student' rather than under your "
                         f"Student ID (its hidden inputs are those drawn for 'student'); your score stands, but "
                         f"please tell your instructor."]
    else:
        assert notes == []


@pytest.mark.parametrize(("content", "why"), [
    (None, "is missing"),
    (b"{not json", "is not JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))"),
    (b"", "is not JSON (Expecting value: line 1 column 1 (char 0))"),
    (b"[1, 2]", "does not hold a JSON object"),
    (b"\xff\xfe{}", "could not be read (UnicodeDecodeError: "),
])
def test_metadata_that_cannot_be_read_is_named_in_the_note_of_the_fallback_id(tmp_path, content, why):
    """Is a submission_metadata.json that is missing, not JSON, not an object or not UTF-8 read as naming nobody,
    with the reason in the one note saying the submission was graded as 'student'; and does a Student ID that
    happens to be 'student' get no such note?"""
    path = tmp_path / gradescope.METADATA
    if content is not None:
        path.write_bytes(content)
    metadata, unread = gradescope._metadata(path)
    assert metadata == {} and unread.startswith(why)
    chosen, notes = gradescope.student_id(metadata, unread)
    assert chosen == gradescope.FALLBACK_STUDENT and len(notes) == 1
    assert notes[0].startswith(f"Gradescope's {gradescope.METADATA} {why}")
    assert "graded as student 'student'" in notes[0]
    assert gradescope.student_id({"users": [{"sid": "student"}]}) == ("student", [])


def test_a_student_id_too_long_for_a_file_name_is_graded_under_the_email(built, tmp_path):
    """Does a 300-character Student ID grade the notebook under the student's email (not crash with "File
    name too long" and score 0), and say so in results.json's output and on stdout?"""
    root = autograder_root(tmp_path, built.bundle)
    shutil.copy(EXAMPLE.submission("edsger", ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / NOTEBOOK)
    (root / gradescope.METADATA).write_text(json.dumps({"users": [{"email": "ed@example.edu", "sid": "7" * 300}]}))
    proc, doc = run_autograder(root)
    assert proc.returncode == 0, proc.stderr
    assert_gradescope_results(doc)
    assert doc["extra_data"]["student"] == "ed@example.edu" and doc["score"] > 0
    note = "graded as student 'ed@example.edu'"
    assert doc["output"].startswith("Your Student ID on Gradescope (") and note in doc["output"].splitlines()[0]
    assert f"longer than {MAX_ID_BYTES} bytes" in doc["output"] and note in proc.stdout


# --------------------------------------------------------------------------- the bundle as Gradescope runs it

STANDARD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"   # Ubuntu's, in Gradescope's image
VENV_FOLDER = PurePosixPath(gradescope.DEFAULT_VENV).parent                       # /opt/course-autograder
IMAGE_HIDDEN = ("proc", "dev", "tmp", "root", VENV_FOLDER.parts[1], PurePosixPath(gradescope.DEFAULT_ROOT).name)


def in_container(image: Path, command: list[str], *, network: bool = True, venv_writable: bool = True) -> list[str]:
    """`command` as Gradescope runs it in its container, as root, with the standard PATH, HOME=/root and
    no other variable, in /autograder: bwrap with a new root (a tmpfs) holding the machine's own folders
    except that /autograder is `image`/autograder, /opt/course-autograder `image`/opt, /root `image`/home
    and /tmp a fresh tmpfs. The machine's /autograder, /opt and /root are never written: the new root's
    mount points are made in its tmpfs. Without `network` the container has loopback only."""
    opt = VENV_FOLDER
    args = ["bwrap", "--die-with-parent", "--unshare-pid", "--tmpfs", "/"]
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name in IMAGE_HIDDEN:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir():
            args += ["--bind", entry.path, entry.path]
        elif entry.is_file():
            args += ["--ro-bind", entry.path, entry.path]
    args += ["--dev-bind", "/dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--tmpfs", str(opt.parent)]
    for entry in sorted(os.scandir(opt.parent) if os.path.isdir(opt.parent) else [], key=lambda e: e.name):
        if entry.name != opt.name:
            args += ["--bind", entry.path, entry.path]
    args += ["--dir", str(opt), "--bind" if venv_writable else "--ro-bind", str(image / "opt"), str(opt),
             "--dir", gradescope.DEFAULT_ROOT, "--bind", str(image / "autograder"), gradescope.DEFAULT_ROOT,
             "--dir", "/root", "--bind", str(image / "home"), "/root", "--chdir", gradescope.DEFAULT_ROOT]
    if not network:
        args.append("--unshare-net")
    return [*args, "--", "env", "-i", f"PATH={STANDARD_PATH}", "HOME=/root", *command]


def machine_state() -> tuple[bool, list[str]]:
    """What the container must leave alone: whether /autograder exists, and what /opt holds."""
    opt = Path(VENV_FOLDER.parent)
    return os.path.lexists(gradescope.DEFAULT_ROOT), sorted(os.listdir(opt)) if opt.is_dir() else []


def image_parent() -> str | None:
    """Where the image goes: the venv is about 600 MB in thousands of files, which a disk mounted with
    `discard` takes most of a minute to delete; so in /dev/shm when it is a large enough tmpfs."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and shutil.disk_usage(shm).free > 4 * 2**30 else None


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="setup.sh runs apt-get, as on Gradescope: root only (CI's first pass)")
@pytest.mark.skipif(shutil.which("apt-get") is None, reason="setup.sh runs apt-get: a Debian or Ubuntu machine only")
def test_setup_sh_and_run_autograder_grade_as_on_gradescope(tmp_path):
    """Built as Gradescope builds its image (run_autograder copied to /autograder, `bash setup.sh` as
    root: apt-get, a venv pip installed in /opt/course-autograder), does the bundle grade at its default
    paths, without network and without writing to the venv, a correct notebook 100/100 and a weak one
    exactly as `course autograde` here (rounded to cents), in valid results.json? (About a minute, most of
    it pip.) Debian stands in for Gradescope's Ubuntu; setup.sh's apt-get works on the machine's own packages (those CI
    installs anyway), everything else on temporary folders, removed at the end."""
    students = ("ada", "barbara")                       # all correct; two mistakes (83.82)
    course = CourseLayout(course_with_students(tmp_path / "course", students))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", ASSIGNMENT, "--course-dir",
                           str(course.root), "--wait"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    local = {s: json.loads(course.results_json(s, ASSIGNMENT).read_text()) for s in students}
    assert local["ada"]["score"] == local["ada"]["max_score"] > local["barbara"]["score"] > 0
    bundle = gradescope.build_bundle(course.root, ASSIGNMENT, to=tmp_path / "autograder.zip")

    before = machine_state()
    with tempfile.TemporaryDirectory(prefix="course-gradescope-image-", dir=image_parent()) as folder:
        image = Path(folder)
        root = autograder_root(image, bundle)
        shutil.copy2(root / gradescope.SOURCE / "run_autograder", root / "run_autograder")  # as Gradescope's build
        (image / "opt").mkdir()
        (image / "home").mkdir()
        started = time.monotonic()
        setup = subprocess.run(in_container(image, ["bash", f"{gradescope.DEFAULT_ROOT}/{gradescope.SOURCE}/setup.sh"]),
                               capture_output=True, text=True, timeout=1500)
        took = time.monotonic() - started
        assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
        assert "course autograde will grade on this machine." in setup.stdout, setup.stdout[-3000:]
        assert (image / "opt" / "venv" / "bin" / "python").exists()
        print(f"setup.sh: {took:.0f} s")

        for student in students:
            for folder_name in (gradescope.SUBMISSION, gradescope.RESULTS, gradescope.WORK):
                shutil.rmtree(root / folder_name, ignore_errors=True)
            (root / gradescope.SUBMISSION).mkdir()
            (root / gradescope.RESULTS).mkdir()
            shutil.copy(course.submission(student, ASSIGNMENT) / NOTEBOOK, root / gradescope.SUBMISSION / NOTEBOOK)
            (root / gradescope.METADATA).write_text(json.dumps(
                {"id": 1, "users": [{"email": f"{student}@example.edu", "id": 7, "name": student, "sid": student}]}))
            started = time.monotonic()
            run = subprocess.run(in_container(image, [f"{gradescope.DEFAULT_ROOT}/run_autograder"], network=False,
                                              venv_writable=False), capture_output=True, text=True, timeout=600)
            print(f"run_autograder ({student}): {time.monotonic() - started:.1f} s")
            assert run.returncode == 0, run.stderr
            doc = json.loads((root / gradescope.RESULTS / "results.json").read_text())
            assert_gradescope_results(doc)
            assert f"all {len(REQUIRED)} required isolation layers applied" in run.stdout, run.stdout[-3000:]
            assert doc["extra_data"]["student"] == student, doc.get("extra_data")
            rounded = gradescope.rounded_scores(local[student])      # in cents (barbara's 83.82 is not exact)
            assert doc["score"] == rounded["score"], (student, doc["score"], local[student]["score"])
            assert (doc["score"] == doc["max_score"] == 100) == (student == "ada"), (student, doc["score"])
            assert [(t["name"], t["score"], t["max_score"]) for t in doc["tests"]] == [
                (t["name"], t["score"], t["max_score"]) for t in rounded["tests"]]
    assert machine_state() == before
