"""`course doctor` and failing closed: the command reports each isolation layer, and `course
autograde` refuses in one line when the sandbox cannot be set up, unless --insecure (then the
missing layers are recorded in results.json and the summary)."""
from __future__ import annotations

import json
import shutil

import pytest

from autograder import api, cli
from autograder.layout import CONFIG_FILE, CourseLayout
from autograder.sandbox import isolation
from conftest import ROOT, as_other_user, copy_course

EXAMPLES = CourseLayout(ROOT / "examples")
ASSIGNMENT = "transformer-block"


def add_ada(course) -> CourseLayout:
    """Copy the example student `ada` into a scratch course; returns its layout."""
    layout = CourseLayout(course)
    shutil.copytree(EXAMPLES.submission("ada", ASSIGNMENT), layout.submission("ada", ASSIGNMENT))
    return layout


def test_doctor_reports_every_layer_and_passes_on_this_machine(capsys):
    """Does `course doctor` list each required layer as applied here and exit 0?"""
    code = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert code == 0, out
    for layer in isolation.REQUIRED:
        assert f"ok  {layer}" in out
    assert "course autograde will grade on this machine." in out


def test_without_bubblewrap_grading_refuses_unless_insecure(monkeypatch, capsys, course_copy):
    """With bubblewrap unavailable: does doctor exit 1, autograde refuse in one line (exit 2,
    nothing written), and autograde --insecure grade while recording what was missing?"""
    monkeypatch.setattr(isolation, "bwrap_path", lambda: None)
    assert cli.main(["doctor"]) == 1
    assert "refuse" in capsys.readouterr().out

    layout = add_ada(course_copy)
    args = ["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bubblewrap" in err[0] and "--insecure" in err[0]
    assert not layout.autograded_dir.exists()

    assert cli.main(args + ["--insecure"]) == 0
    out = capsys.readouterr().out
    assert "Sandbox: INSECURE, missing bubblewrap" in out
    result = json.loads(layout.results_json("ada", ASSIGNMENT).read_text())
    assert "bubblewrap" not in result["extra_data"]["isolation"] and result["score"] > 0


def test_results_record_the_layers_that_applied(capsys, course_copy):
    """With the full sandbox, does every results.json list the layers and the summary say so?"""
    layout = add_ada(course_copy)
    assert cli.main(["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]) == 0
    out = capsys.readouterr().out
    assert f"Sandbox: all {len(isolation.REQUIRED)} required isolation layers applied" in out
    result = json.loads(layout.results_json("ada", ASSIGNMENT).read_text())
    assert set(isolation.REQUIRED) <= set(result["extra_data"]["isolation"])


def test_doctor_names_course_folders_its_user_cannot_write(shared_dir):
    """In a course whose autograded/ was left read-only by another user, does the course check name
    that folder in one line, and pass once the folder may be written?"""
    course = copy_course(shared_dir / "course")
    course.chmod(0o777)                               # the gradebook is created here
    layout = CourseLayout(course)
    layout.autograded_dir.mkdir()
    layout.autograded_dir.chmod(0o555)
    (problem,) = as_other_user(api.course_problems, course)
    assert problem.startswith("autograded cannot be written by uid ") and "dr-xr-xr-x" in problem
    layout.autograded_dir.chmod(0o777)
    assert as_other_user(api.course_problems, course) == ()


def test_doctor_in_a_broken_course_names_the_config_and_exits_1(tmp_path, capsys):
    """With an unreadable course.yml in --course-dir, does doctor say so on a `course:` line and exit 1,
    while the sandbox's layers are still all reported as applied?"""
    (tmp_path / CONFIG_FILE).write_text("assignments: [\n")
    assert cli.main(["doctor", "--course-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"course: {CONFIG_FILE}: line 2: not valid YAML" in out
    assert all(f"ok  {layer}" in out for layer in isolation.REQUIRED)
    assert "refuse to grade in this course folder" in out


@pytest.mark.parametrize("make, says", [
    (lambda path: None, "no such folder"),
    (lambda path: path.write_text("a file\n"), "not a folder"),
    (lambda path: path.mkdir(), f"not a course folder: it holds no {CONFIG_FILE}"),
], ids=["missing", "file", "no-course-yml"])
def test_doctor_with_a_course_dir_that_is_no_course_says_so_and_exits_1(tmp_path, capsys, make, says):
    """With --course-dir naming a folder that does not exist, a file, or a folder without course.yml, does doctor
    say so on a `course:` line and exit 1, rather than saying nothing of the course and exiting 0?"""
    named = tmp_path / "course"
    make(named)
    assert cli.main(["doctor", "--course-dir", str(named)]) == 1
    out = capsys.readouterr().out
    assert f"course: {named}: {says} (--course-dir)" in out.splitlines(), out
    assert "refuse to grade in this course folder" in out


def test_doctor_run_outside_a_course_without_course_dir_checks_the_machine_only(tmp_path, monkeypatch, capsys):
    """Without --course-dir, in a folder that is no course, does doctor check the machine alone (exit 0 here)?"""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if line.startswith("course:")], out


def test_autograde_refuses_in_one_line_when_it_cannot_write_results(capsys, course_copy):
    """With autograded/ a file, does autograde exit 2 with one line naming it, grading nobody?"""
    layout = add_ada(course_copy)
    layout.autograded_dir.write_text("not a folder\n")
    assert cli.main(["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["course: error: cannot write the results: autograded is not a folder"]
    assert layout.autograded_dir.read_text() == "not a folder\n"
    assert not CourseLayout(course_copy).feedback_dir.exists()


def test_doctor_names_a_gradebook_whose_folder_cannot_hold_its_journal(shared_dir):
    """Is a gradebook file anyone may write refused when its folder cannot be written (SQLite's
    journal goes beside it), rather than failing at the first commit?"""
    course = copy_course(shared_dir / "course")
    gradebook = course / "gradebook.db"
    gradebook.write_bytes(b"")
    gradebook.chmod(0o666)
    api.course_problems(course)         # its modules imported here: root's Python is not readable by nobody
    problems = as_other_user(api.course_problems, course)
    assert any(p.startswith(f"{CONFIG_FILE}: gradebook: ") and "SQLite keeps its journal beside the file" in p
               for p in problems), problems


def test_autograde_of_one_student_whose_folder_cannot_be_written_refuses_in_one_line(capsys, course_copy):
    """With only ada to grade and autograded/ada/<assignment> a file, does autograde refuse up front
    (exit 2, one line), while a class batch would grade the others (tests/security/test_files.py)?"""
    layout = add_ada(course_copy)
    layout.autograded("ada", ASSIGNMENT).parent.mkdir(parents=True)
    layout.autograded("ada", ASSIGNMENT).write_text("not a folder\n")
    assert cli.main(["autograde", ASSIGNMENT, "--student", "ada", "--course-dir", str(course_copy)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"course: error: cannot write the results: {layout.relative(layout.autograded('ada', ASSIGNMENT))}"
                   f" is not a folder"]


def test_doctor_says_how_memory_is_bounded_and_the_worst_case_without_a_cgroup(capsys):
    """Does `course doctor` say in one line whether a submission's memory is bounded in all (a cgroup:
    memory_mb + 512) or per process only, then with the worst case, (processes + 1) x memory_mb?"""
    from autograder.config import Limits, load_course

    per_process = api.memory_bound(False, [("hw", Limits(processes=4, memory_mb=1024))])
    assert per_process.startswith("memory: PER PROCESS only on this machine")
    assert "5 x 1,024 MB = 5 GB (hw)" in per_process
    assert "65 x 2,048 MB = 130 GB (the defaults)" in api.memory_bound(False, [])
    assert api.memory_bound(True, []) == "memory: all of a submission's processes together, in a cgroup: 2,560 MB " \
                                         "(the defaults)"
    report = api.doctor(course_dir=ROOT, log=print)
    out = capsys.readouterr().out
    cgroup = any(layer == "cgroup" and applied for layer, applied, _, _ in report.layers)
    limits = load_course(ROOT).assignment(ASSIGNMENT).limits
    assert report.memory == api.memory_bound(cgroup, [(ASSIGNMENT, limits)]) and report.memory in out


def test_doctor_in_a_sound_course_says_what_it_checked_and_names_a_missing_exchange(course_copy):
    """In a course where nothing stops grading, does the course check say what it read, and name an
    exchange folder that does not exist (nbgrader's exchange commands need it, grading does not)?"""
    assert api.course_problems(course_copy) == ()
    (note,) = api.course_notes(course_copy)
    assert note.startswith(f"{CONFIG_FILE} read (assignments: {ASSIGNMENT}); ")
    config = CourseLayout(course_copy).config
    config.write_text(config.read_text(encoding="utf-8") + "exchange: /nonexistent/exchange\n", encoding="utf-8")
    assert api.course_problems(course_copy) == ()
    assert api.course_notes(course_copy)[1] == (
        f"the exchange folder /nonexistent/exchange ({CONFIG_FILE}: exchange) does not exist: nbgrader's "
        f"release_assignment, submit and collect need it (grading does not)")
    assert api.course_notes(course_copy.parent / "not-a-course") == ()


def test_doctor_names_an_assignment_not_set_up_without_stopping_grading(course_copy):
    """With a second assignment declared before its package and notebook exist, does the course check
    find nothing that stops grading the live one, and say in one note what the other lacks?"""
    config = CourseLayout(course_copy).config
    config.write_text(config.read_text(encoding="utf-8") + "  - name: activations\n    notebooks: [activations.ipynb]\n"
                      "    problems:\n      relu: {points: 4}\n", encoding="utf-8")
    assert api.course_problems(course_copy) == ()
    notes = api.course_notes(course_copy)
    assert notes[0].startswith(f"{CONFIG_FILE} read (assignments: {ASSIGNMENT}, activations); ")
    assert notes[1] == (
        "activations is not set up yet, so commands for it stop (those for the other assignments do not): "
        "course.yml: assignments[1].package: assignment activations: folder assignments/activations does not "
        "exist (its reference and graders go there); course.yml: assignments[1].notebooks[0]: assignment "
        "activations: source notebook source/activations/activations.ipynb does not exist")


@pytest.mark.parametrize("content, why", [
    (None, f"not found (run `course release {ASSIGNMENT}` first)"),
    (b"", f"not a readable notebook (Expecting value: line 1 column 1 (char 0)); run `course release {ASSIGNMENT}` "
          f"to write it again"),
    (b'{"metadata": {}}', f"not a readable notebook (no list of cells); run `course release {ASSIGNMENT}` to write "
                          f"it again"),
], ids=["missing", "empty", "no-cells"])
def test_doctor_names_a_released_notebook_autograde_would_refuse_in_its_words(course_copy, capsys, content, why):
    """With the released notebook missing, empty or JSON without cells, does doctor name that file on a `course:`
    line in the words `course autograde` refuses it with, and exit 1?"""
    layout = CourseLayout(course_copy)
    released = layout.release(ASSIGNMENT) / f"{ASSIGNMENT}.ipynb"
    if content is None:
        shutil.rmtree(released.parent)
    else:
        released.write_bytes(content)
    line = f"{layout.relative(released)}: {why}"
    assert api.course_problems(course_copy) == (line,)
    assert cli.main(["autograde", ASSIGNMENT, "--course-dir", str(course_copy)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"course: error: {line}"]
    assert cli.main(["doctor", "--course-dir", str(course_copy)]) == 1
    out = capsys.readouterr().out
    assert f"course: {line}" in out.splitlines() and "refuse to grade in this course folder" in out


def test_doctor_notes_an_assignment_not_released_yet_while_another_is_live(course_copy):
    """With a second assignment set up (its package and source notebook there) but not released, does doctor
    note it without calling the course unable to grade, while no submission awaits it; and name its release
    as a problem once a student has submitted it, or when no assignment is released at all?"""
    layout = CourseLayout(course_copy)
    layout.config.write_text(layout.config.read_text(encoding="utf-8") + "  - name: activations\n    notebooks: "
                             "[activations.ipynb]\n    problems:\n      relu: {points: 4}\n", encoding="utf-8")
    layout.package("activations").mkdir()
    layout.source("activations").mkdir(parents=True)
    (layout.source("activations") / "activations.ipynb").write_text('{"cells": []}\n')
    missing = f"{layout.relative(layout.release('activations') / 'activations.ipynb')}: not found (run `course " \
              f"release activations` first)"
    assert api.course_problems(course_copy) == ()
    assert (f"activations is not released yet and nobody has submitted it, so `course autograde activations` stops "
            f"(those of the other assignments do not): {missing}") in api.course_notes(course_copy)
    layout.submission("ada", "activations").mkdir(parents=True)
    assert api.course_problems(course_copy) == (missing,)
    shutil.rmtree(layout.submitted_dir)
    shutil.rmtree(layout.release(ASSIGNMENT))
    assert api.course_problems(course_copy) == (
        f"{layout.relative(layout.release(ASSIGNMENT) / f'{ASSIGNMENT}.ipynb')}: not found (run `course release "
        f"{ASSIGNMENT}` first)", missing)


def test_doctor_notes_a_release_that_shows_other_points_than_course_yml(course_copy):
    """When course.yml's points changed after `course release`, does doctor note (without failing) what
    `course autograde` warns of: the released notebook, the problem and both numbers?"""
    config = CourseLayout(course_copy).config
    text = config.read_text(encoding="utf-8")
    assert "layer_norm: {points: 12}" in text
    config.write_text(text.replace("layer_norm: {points: 12}", "layer_norm: {points: 10}"), encoding="utf-8")
    assert api.course_problems(course_copy) == ()
    release = CourseLayout(course_copy).relative(CourseLayout(course_copy).release(ASSIGNMENT))
    assert any(note.startswith(f"{release}/{ASSIGNMENT}.ipynb: layer_norm: grade cell ")
               and note.endswith("gives 12 points, course.yml gives 10 (run `course release`); course autograde "
                                 "grades on course.yml's points") for note in api.course_notes(course_copy))
