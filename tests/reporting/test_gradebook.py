"""Grades into a real SQLite nbgrader gradebook, read back with nbgrader's API and `nbgrader export`."""
from __future__ import annotations

import csv
import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, MissingEntry

from autograder.reporting.gradebook import record_grades

from .conftest import NOTEBOOK, POINTS, check, make_assignment, make_course, submission

BIN = Path(sys.executable).parent
STEM = Path(NOTEBOOK).stem


@pytest.fixture(autouse=True)
def alembic_on_path(monkeypatch):
    """nbgrader creates a new gradebook by running `alembic`: the venv's bin goes first."""
    monkeypatch.setenv("PATH", os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))


@pytest.fixture(scope="session")
def empty_gradebook(tmp_path_factory) -> Path:
    """A new, empty gradebook made once (nbgrader runs `alembic` for each new database)."""
    path = tmp_path_factory.mktemp("template") / "gradebook.db"
    env_path = os.environ.get("PATH", "")
    os.environ["PATH"] = os.pathsep.join([str(BIN), env_path])
    try:
        Gradebook(f"sqlite:///{path}", "dl-attention").close()
    finally:
        os.environ["PATH"] = env_path
    return path


@pytest.fixture
def course(tmp_path, assignment, empty_gradebook):
    course = make_course(tmp_path, assignment)
    shutil.copyfile(empty_gradebook, tmp_path / "gradebook.db")
    return course


def release_into(course, assignment):
    """What `nbgrader generate_assignment` leaves in the db: the assignment, its notebook, its grade cells."""
    with Gradebook(course.gradebook_url, course.course_id) as gb:
        gb.add_assignment(assignment.name, duedate="2026-12-14 23:59:00 UTC")
        gb.add_notebook(STEM, assignment.name)
        for p in assignment.problems:
            gb.add_grade_cell(p.grade_id, STEM, assignment.name, max_score=p.points, cell_type="code")


def release_with_a_commented_cell(course, assignment):
    """The release, with a solution cell (cell-7f3a, the student's split_heads) a person can comment on."""
    from nbgrader.api import SolutionCell, SourceCell

    release_into(course, assignment)
    with Gradebook(course.gradebook_url) as gb:
        nb = gb.find_notebook(STEM, assignment.name)
        gb.db.add(SolutionCell(name="cell-7f3a", notebook=nb))
        gb.db.add(SourceCell(name="cell-7f3a", notebook=nb, cell_type="code", locked=False,
                             source="def split_heads(x, n_heads):\n    raise NotImplementedError()\n"))
        gb.db.commit()


def auto_scores(course, assignment, student):
    with Gradebook(course.gradebook_url, course.course_id) as gb:
        return {p.name: gb.find_grade(p.grade_id, STEM, assignment.name, student).auto_score
                for p in assignment.problems}


def test_problem_scores_land_in_the_released_grade_cells(course, assignment, ada, bob):
    """Does each problem's score become its grade cell's auto_score, for every student?"""
    release_into(course, assignment)
    report = record_grades(course, assignment, [ada, bob])
    assert report.ok and report.recorded == ("ada", "bob") and report.created == ()
    assert auto_scores(course, assignment, "ada") == {"layer_norm": 15.0, "split_heads": 10.0, "silu": 5.0}
    assert auto_scores(course, assignment, "bob") == {"layer_norm": 7.5, "split_heads": 0.0, "silu": 5.0}
    with Gradebook(course.gradebook_url) as gb:
        sub = gb.find_submission(assignment.name, "bob")
        assert sub.score == 12.5 and sub.max_score == 30.0 and not sub.needs_manual_grade


def test_students_off_the_roster_are_recorded(course, assignment, bob):
    """Is a student who is not on the roster (and not in the db) still recorded?"""
    assert bob.on_roster is False
    release_into(course, assignment)
    record_grades(course, assignment, [bob])
    with Gradebook(course.gradebook_url) as gb:
        assert gb.find_student("bob").id == "bob"


def test_missing_assignment_is_created_from_the_course_config(course, assignment, ada):
    """With an empty gradebook, are the assignment, notebook and one grade cell per problem created?"""
    report = record_grades(course, assignment, [ada])
    assert report.created == ("assignment transformer-block", f"notebook transformer-block/{STEM}",
                              *(f"grade cell transformer-block/{STEM}/test_{p}" for p, _ in POINTS))
    with Gradebook(course.gradebook_url) as gb:
        nb = gb.find_notebook(STEM, assignment.name)
        assert {(c.name, c.max_score, c.cell_type) for c in nb.grade_cells} == {
            (f"test_{p}", pts, "code") for p, pts in POINTS}
        assert gb.find_assignment(assignment.name).course_id == "dl-attention"
    assert auto_scores(course, assignment, "ada")["layer_norm"] == 15.0


def test_regrading_replaces_auto_scores_and_keeps_manual_ones(course, assignment, ada, bob):
    """On a resubmission's regrade, are auto scores replaced while a grader's manual score is kept and flagged?"""
    release_into(course, assignment)
    record_grades(course, assignment, [bob])
    with Gradebook(course.gradebook_url) as gb:
        gb.find_grade("test_silu", STEM, assignment.name, "bob").manual_score = 4.0
        gb.db.commit()
    regraded = submission("bob", list(ada.tests))
    assert record_grades(course, assignment, [regraded], review_again=True).ok
    with Gradebook(course.gradebook_url) as gb:
        silu = gb.find_grade("test_silu", STEM, assignment.name, "bob")
        assert (silu.auto_score, silu.manual_score, silu.needs_manual_grade) == (5.0, 4.0, True)
        assert gb.find_grade("test_layer_norm", STEM, assignment.name, "bob").auto_score == 15.0
        assert len(gb.find_assignment(assignment.name).submissions) == 1


@pytest.mark.parametrize("how", ["sql", "api"])
def test_a_tas_graded_flag_stays_until_the_score_under_it_is_new(course, assignment, ada, bob, monkeypatch, how):
    """When a TA saves scores in formgrader (manual score set, needs_manual_grade cleared), does recording the
    same results again (an unchanged submission read back), through plain SQL or nbgrader's API, leave the
    flags as the TA left them, so that nbgrader still lists the submissions as graded? And is the flag raised
    again for a resubmission or new graders (`review_again`), or when the automatic score under it changed,
    and a crash without a person's score flagged as before?"""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from autograder.reporting import gradebook_sql
    from autograder.reporting.gradebook import GradebookWriter

    if how == "api":
        monkeypatch.setattr(gradebook_sql.SqlGradebook, "open", classmethod(lambda cls, course, a: None))

    def record(result, **kw):
        with GradebookWriter(course, assignment) as writer:
            assert writer.plain_sql == (how == "sql")
            assert writer.record(result, **kw) is None

    def flags(student):
        with Gradebook(course.gradebook_url, course.course_id) as gb:
            return {p.name: gb.find_grade(p.grade_id, STEM, assignment.name, student).needs_manual_grade
                    for p in assignment.problems}

    def listed():
        """needs_manual_grade of each submission, as formgrader's list of submissions reads it."""
        config = Config()
        config.Exchange.root = str(course.root / "exchange")
        coursedir = CourseDirectory(root=str(course.root), db_url=course.gradebook_url, course_id=course.course_id)
        return {s["student"]: s["needs_manual_grade"]
                for s in NbGraderAPI(coursedir, config=config).get_submissions(assignment.name)}

    release_into(course, assignment)
    for result in (ada, bob):
        record(result)
    with Gradebook(course.gradebook_url, course.course_id) as gb:       # what formgrader's save does
        for student, problem in (("ada", "layer_norm"), ("bob", "silu")):
            grade = gb.find_grade(f"test_{problem}", STEM, assignment.name, student)
            grade.manual_score, grade.needs_manual_grade = 4.0, False
        gb.db.commit()
    for result in (ada, bob):
        record(result)
    assert listed() == {"ada": False, "bob": False}
    assert flags("ada") == {"layer_norm": False, "split_heads": False, "silu": False}
    record(bob, review_again=True)
    assert flags("bob") == {"layer_norm": False, "split_heads": False, "silu": True}
    changed = dataclasses.replace(ada, tests=tuple(dataclasses.replace(t, score=0.0) if t.problem == "layer_norm"
                                                   else t for t in ada.tests))
    record(changed)
    assert flags("ada") == {"layer_norm": True, "split_heads": False, "silu": False}
    assert listed() == {"ada": True, "bob": True}
    record(dataclasses.replace(ada, state="crashed"))
    assert flags("ada") == dict.fromkeys(("layer_norm", "split_heads", "silu"), True)


@pytest.mark.parametrize("how", ["sql", "api"])
def test_a_cleared_flag_on_extra_credit_or_an_unreadable_notebook_stays_until_review_is_due(
        course, assignment, ada, monkeypatch, how):
    """When a TA clears the flag on a grade with extra credit only, or on an unreadable notebook's grade
    (formgrader's save of an empty score), does recording the same result again leave it cleared, and a
    resubmission raise it again for both?"""
    from autograder.reporting import gradebook_sql
    from autograder.reporting.gradebook import GradebookWriter

    if how == "api":
        monkeypatch.setattr(gradebook_sql.SqlGradebook, "open", classmethod(lambda cls, course, a: None))
    unreadable = dataclasses.replace(ada, student="una", unreadable_notebooks=(STEM + ".ipynb",))

    def record(result, **kw):
        with GradebookWriter(course, assignment) as writer:
            assert writer.plain_sql == (how == "sql")
            assert writer.record(result, **kw) is None

    def flag(student, problem):
        with Gradebook(course.gradebook_url, course.course_id) as gb:
            return gb.find_grade(f"test_{problem}", STEM, assignment.name, student).needs_manual_grade

    release_into(course, assignment)
    assert {p.notebook for p in assignment.problems} == {STEM + ".ipynb"}
    record(ada)
    record(unreadable)
    assert (flag("ada", "silu"), flag("una", "silu")) == (False, True)
    with Gradebook(course.gradebook_url, course.course_id) as gb:       # what formgrader's save does
        grade = gb.find_grade("test_silu", STEM, assignment.name, "ada")
        grade.extra_credit, grade.needs_manual_grade = 2.0, False
        gb.find_grade("test_silu", STEM, assignment.name, "una").needs_manual_grade = False
        gb.db.commit()
    record(ada)
    record(unreadable)
    assert (flag("ada", "silu"), flag("una", "silu")) == (False, False)
    record(ada, review_again=True)
    record(unreadable, review_again=True)
    assert (flag("ada", "silu"), flag("una", "silu")) == (True, True)


def test_a_crashed_submission_is_flagged_for_manual_grading(course, assignment, cy):
    """Does a crashed result leave no automatic score and ask for a person to look?"""
    release_into(course, assignment)
    assert record_grades(course, assignment, [cy]).recorded == ("cy",)
    with Gradebook(course.gradebook_url) as gb:
        grade = gb.find_grade("test_layer_norm", STEM, assignment.name, "cy")
        assert grade.auto_score is None and grade.needs_manual_grade
        assert gb.find_submission(assignment.name, "cy").needs_manual_grade


def test_a_failing_submission_is_rolled_back_and_reported_while_others_land(course, assignment, ada, bob):
    """When one submission cannot be written, is only it rolled back and reported?"""
    release_into(course, assignment)
    broken = submission("cal", [check("layer_norm", "test_layer_norm_a", 15.0, 15.0),
                                check("silu", "test_silu_a", "lots", 5.0)])  # fails after two grades are set
    wrong = dataclasses.replace(submission("dee"), assignment="another-assignment")
    report = record_grades(course, assignment, [ada, broken, wrong, bob])
    assert report.recorded == ("ada", "bob")
    assert [who for who, _ in report.failed] == ["cal", "dee"]
    assert report.failed[0][1].startswith("TypeError")
    assert [m.split(":")[0] for m in report.messages] == ["cal", "dee"]     # one line per failure
    assert "another-assignment" in report.failed[1][1]
    with Gradebook(course.gradebook_url) as gb:
        assert sorted(s.id for s in gb.students) == ["ada", "bob"]
        assert len(gb.find_assignment(assignment.name).submissions) == 2
        for student in ("cal", "dee"):
            with pytest.raises(MissingEntry):
                gb.find_student(student)


def test_a_failed_regrade_keeps_the_previous_grades(course, assignment, bob):
    """When a regrade fails half-way, are the grades from before still there, untouched?"""
    release_into(course, assignment)
    record_grades(course, assignment, [bob])
    broken = submission("bob", [check("layer_norm", "test_layer_norm_a", 15.0, 15.0),
                                check("silu", "test_silu_a", "lots", 5.0)])
    assert [who for who, _ in record_grades(course, assignment, [broken]).failed] == ["bob"]
    assert auto_scores(course, assignment, "bob") == {"layer_norm": 7.5, "split_heads": 0.0, "silu": 5.0}


def test_a_new_gradebook_is_created_even_without_alembic_on_path(tmp_path, assignment, ada, monkeypatch):
    """Does recording into a gradebook that does not exist yet work when PATH lacks the venv's bin?"""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    course = make_course(tmp_path, assignment)
    assert record_grades(course, assignment, [ada]).recorded == ("ada",)
    assert os.environ["PATH"] == "/usr/bin:/bin"
    assert auto_scores(course, assignment, "ada")["silu"] == 5.0


def test_nbgrader_export_lists_our_scores(tmp_path, course, assignment, ada, bob, cy):
    """Does the real `nbgrader export`, run from the course folder, list the scores we recorded?"""
    release_into(course, assignment)
    assert record_grades(course, assignment, [ada, bob, cy]).ok
    (tmp_path / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.root = {str(tmp_path)!r}\n"
        f"c.CourseDirectory.db_url = {course.gradebook_url!r}\n", encoding="utf-8")
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    done = subprocess.run([str(BIN / "nbgrader"), "export"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"ada", "bob", "cy"}
    assert {s: float(r["score"]) for s, r in rows.items()} == {"ada": 30.0, "bob": 12.5, "cy": 0.0}
    assert {r["assignment"] for r in rows.values()} == {"transformer-block"}
    assert {float(r["max_score"]) for r in rows.values()} == {30.0}


# --------------------------------------------------------------------------- course.yml -> gradebook

def with_roster(course, tmp_path, text: str):
    roster = tmp_path / "roster.csv"
    roster.write_text(text, encoding="utf-8")
    return dataclasses.replace(course, roster_file=roster)


def test_the_roster_reaches_the_gradebook_with_names_and_emails(tmp_path, course, assignment, ada):
    """Is every roster student created with first and last name and email, and updated when the roster changes?"""
    course = with_roster(course, tmp_path, "id,first_name,last_name,email\n"
                                           "ada,Ada,Lovelace,ada@example.edu\nnora,Nora,Noether,nora@example.edu\n")
    report = record_grades(course, assignment, [ada])
    assert "student nora" in report.created
    with Gradebook(course.gradebook_url) as gb:
        nora = gb.find_student("nora")
        assert (nora.first_name, nora.last_name, nora.email) == ("Nora", "Noether", "nora@example.edu")
        with pytest.raises(MissingEntry):
            gb.find_submission(assignment.name, "nora")
    course = with_roster(course, tmp_path, "id,first_name,last_name,email\nnora,Nora,Noether,emmy@example.edu\n")
    assert record_grades(course, assignment, []).created == ("student nora: email",)
    with Gradebook(course.gradebook_url) as gb:
        assert gb.find_student("nora").email == "emmy@example.edu"
        assert gb.find_student("ada").email == "ada@example.edu", "a student who left the roster is kept"


def test_a_blank_roster_cell_clears_the_gradebooks_value_and_a_missing_column_leaves_it(tmp_path, course, assignment):
    """Is a name, email or LMS user id blanked in the roster cleared in the gradebook (each change named),
    and are the gradebook's values left as they are by a roster without those columns (names only, or one
    id per line), with nothing to change?"""
    full = "id,first_name,last_name,email,lms_user_id\nnora,Nora,Noether,wrong@example.edu,999\n"
    course = with_roster(course, tmp_path, full)
    record_grades(course, assignment, [])
    course = with_roster(course, tmp_path, "id,first_name,last_name,email,lms_user_id\nnora,Nora,,,\n")
    assert sorted(record_grades(course, assignment, []).created) == [
        "student nora: email cleared", "student nora: last_name cleared", "student nora: lms_user_id cleared"]
    with Gradebook(course.gradebook_url) as gb:
        nora = gb.find_student("nora")
        assert (nora.first_name, nora.last_name, nora.email, nora.lms_user_id) == ("Nora", None, None, None)
    course = with_roster(course, tmp_path, full)
    assert len(record_grades(course, assignment, []).created) == 3
    for text in ("id,first_name\nnora,Nora\n", "id\nnora\n"):
        course = with_roster(course, tmp_path, text)
        assert record_grades(course, assignment, []).created == (), text
        with Gradebook(course.gradebook_url) as gb:
            nora = gb.find_student("nora")
            assert (nora.last_name, nora.email, nora.lms_user_id) == ("Noether", "wrong@example.edu", "999"), text


def test_changed_points_update_the_gradebook_max_scores(course, assignment, ada):
    """After course.yml gives silu 8 points instead of 5, does the next batch correct the grade cell?"""
    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    changed = make_assignment(points=(("layer_norm", 15.0), ("split_heads", 10.0), ("silu", 8.0)))
    report = record_grades(course, changed, [])
    assert report.created == (f"grade cell transformer-block/{STEM}/test_silu: max score 5 -> 8",)
    with Gradebook(course.gradebook_url) as gb:
        assert gb.find_assignment(assignment.name).max_score == 33.0
        assert gb.find_submission(assignment.name, "ada").max_score == 33.0


def test_the_due_date_and_an_extension_reach_the_gradebook(course, ada):
    """Does the assignment get course.yml's due date, and a student's extension become nbgrader's extension?"""
    import datetime as dt

    from autograder.config import Extension

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    assignment = dataclasses.replace(make_assignment(), due=due, extensions={"ada": Extension(days=2, hours=6)})
    record_grades(course, assignment, [dataclasses.replace(ada, submitted_at="2026-12-16T12:00:00+00:00")])
    with Gradebook(course.gradebook_url) as gb:
        sub = gb.find_submission(assignment.name, "ada")
        assert gb.find_assignment(assignment.name).duedate == dt.datetime(2026, 12, 14, 23, 59)
        assert sub.extension == dt.timedelta(days=2, hours=6)
        assert sub.duedate == dt.datetime(2026, 12, 17, 5, 59)
        assert sub.total_seconds_late == 0, "nbgrader's own lateness counts from the extended due date"


def test_a_changed_due_date_is_told_as_the_page_shows_times(course, ada):
    """When course.yml moves the due date, does the release's line give the old and new dates to the second,
    in UTC, as the feedback page and the summary write times?"""
    import datetime as dt

    from autograder.reporting.gradebook import NotebookCells, apply_release

    due = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)
    first = dataclasses.replace(make_assignment(), due=due)
    release_into(course, first)
    record_grades(course, first, [ada])
    grade = {p.grade_id: {"max_score": p.points, "cell_type": "code"} for p in first.problems}
    spec = NotebookCells(STEM, None, {"grade": grade, "solution": {}, "task": {}, "source": {}})
    later = dataclasses.replace(first, due=due + dt.timedelta(days=1, seconds=30))
    changes = apply_release(course, later, (spec,))
    assert (f"assignment {first.name}: due date 2026-12-14 23:59:00 UTC -> 2026-12-15 23:59:30 UTC"
            in changes), changes


def test_a_ta_override_and_comment_are_read_back(course, assignment, ada):
    """Are a manual score entered in the gradebook and a comment on a solution cell read back per problem?"""
    from autograder.reporting.gradebook import review_of

    release_with_a_commented_cell(course, assignment)
    record_grades(course, assignment, [ada])
    assert review_of(course, assignment, "ada").changed is False
    with Gradebook(course.gradebook_url) as gb:
        gb.find_grade("test_layer_norm", STEM, assignment.name, "ada").manual_score = 12.0
        gb.find_comment("cell-7f3a", STEM, assignment.name, "ada").manual_comment = "  Nice reshape.  "
        gb.db.commit()
    review = review_of(course, assignment, "ada")
    assert review.changed and review.raw_score == 27.0
    assert review.problem("layer_norm").overridden and review.problem("layer_norm").auto_score == 15.0
    assert review.comments == (("split_heads", "Nice reshape."),)
    assert review_of(course, assignment, "nobody") is None


def test_a_release_adds_cells_after_submissions_and_refuses_to_drop_graded_ones(course, assignment, ada):
    """With a submission recorded, does recording a release add its new cells (and their empty grade rows),
    while a release that drops a graded cell is refused, naming the cell, with nothing changed?"""
    from autograder.errors import ReleaseError
    from autograder.reporting.gradebook import NotebookCells, apply_release, check_release

    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    grade = {p.grade_id: {"max_score": p.points, "cell_type": "code"} for p in assignment.problems}
    spec = NotebookCells(STEM, None, {"grade": grade, "solution": {"layer_norm_solution": {}}, "task": {},
                                      "source": {"setup": {"cell_type": "code", "locked": True, "source": "x = 1",
                                                           "checksum": "abc"}}})
    check_release(course, assignment, (spec,))
    changes = apply_release(course, assignment, (spec,))
    assert f"solution cell transformer-block/{STEM}/layer_norm_solution" in changes
    with Gradebook(course.gradebook_url) as gb:
        assert gb.find_comment("layer_norm_solution", STEM, assignment.name, "ada").manual_comment is None
        assert gb.find_source_cell("setup", STEM, assignment.name).source == "x = 1"
    dropped = dataclasses.replace(spec, cells={**spec.cells, "grade": {k: v for k, v in grade.items()
                                                                       if k != "test_silu"}})
    with pytest.raises(ReleaseError, match=f"no longer has grade cell {STEM}/test_silu, which submissions have"):
        check_release(course, assignment, (dropped,))
    with pytest.raises(ReleaseError, match="test_silu: submissions have grades"):
        apply_release(course, assignment, (dropped,))
    assert auto_scores(course, assignment, "ada")["silu"] == 5.0


def test_a_release_that_drops_a_graded_notebook_says_to_put_it_back_in_course_yml(course, assignment, ada):
    """When course.yml names the assignment's notebook otherwise after grading (`notebooks: [act.ipynb]`), is
    the release refused naming the graded notebook, and told to put its file back in the assignment's
    `notebooks` in course.yml, rather than in the source notebook (a notebook is no cell of one)?"""
    from autograder.errors import ReleaseError
    from autograder.reporting.gradebook import NotebookCells, check_release

    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    renamed = dataclasses.replace(assignment, notebooks=("act.ipynb",), problems=tuple(
        dataclasses.replace(p, notebook="act.ipynb") for p in assignment.problems))
    grade = {p.grade_id: {"max_score": p.points, "cell_type": "code"} for p in renamed.problems}
    spec = NotebookCells("act", None, {"grade": grade, "solution": {}, "task": {}, "source": {}})
    with pytest.raises(ReleaseError) as refused:
        check_release(course, renamed, (spec,))
    assert str(refused.value).endswith(
        f"transformer-block: the new release no longer has notebook {STEM}, which submissions have grades or "
        f"comments for; put {NOTEBOOK} back in the `notebooks` of assignment transformer-block in course.yml, or "
        f"run `course release transformer-block --drop-grades` to remove it with those grades and comments "
        f"(nothing was changed)"), refused.value
    assert auto_scores(course, assignment, "ada")["silu"] == 5.0


def test_a_release_told_to_drop_grades_removes_a_graded_cell_with_its_grades(course, assignment, ada):
    """With `--drop-grades` (a grade_id renamed after grading), is the refusal's advice followed: the cell
    the release no longer has goes with the grades submissions had for it, and its line says so?"""
    from nbgrader.api import MissingEntry

    from autograder.errors import ReleaseError
    from autograder.reporting.gradebook import NotebookCells, apply_release, check_release

    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    renamed = dataclasses.replace(assignment, problems=tuple(
        dataclasses.replace(p, grade_id="test_silu_v2") if p.name == "silu" else p for p in assignment.problems))
    grade = {p.grade_id: {"max_score": p.points, "cell_type": "code"} for p in renamed.problems}
    spec = NotebookCells(STEM, None, {"grade": grade, "solution": {}, "task": {}, "source": {}})
    with pytest.raises(ReleaseError, match="or run `course release transformer-block --drop-grades` to remove it"):
        check_release(course, renamed, (spec,))
    changes = apply_release(course, renamed, (spec,), drop_grades=True)
    assert (f"removed grade cell {STEM}/test_silu with the grades and comments submissions had for it"
            in "; ".join(changes))
    with Gradebook(course.gradebook_url) as gb:
        with pytest.raises(MissingEntry):
            gb.find_grade("test_silu", STEM, assignment.name, "ada")
        assert gb.find_grade("test_silu_v2", STEM, assignment.name, "ada").auto_score is None
        assert gb.find_grade("test_layer_norm", STEM, assignment.name, "ada").auto_score == 15.0


def test_each_grade_row_is_the_one_nbgraders_find_grade_returns(course, assignment, ada, bob):
    """Does the one-query lookup of a submission's grade rows give, for every grade cell, the row
    nbgrader's find_grade gives, fall back to find_grade for a task cell, and raise MissingEntry
    for a cell that is not there?"""
    from nbgrader.api import TaskCell

    from autograder.reporting.gradebook import _grade, _grades_of

    release_into(course, assignment)
    with Gradebook(course.gradebook_url) as gb:
        gb.db.add(TaskCell(name="task_essay", notebook=gb.find_notebook(STEM, assignment.name), max_score=2.0,
                           cell_type="markdown"))
        gb.db.commit()
    record_grades(course, assignment, [ada, bob])
    task = dataclasses.replace(assignment.problems[0], grade_id="task_essay")
    gone = dataclasses.replace(assignment.problems[0], grade_id="test_not_released")
    with Gradebook(course.gradebook_url) as gb:
        for student in ("ada", "bob"):
            grades = _grades_of(gb, assignment.name, student)
            assert len(grades) == len(assignment.problems)
            for p in (*assignment.problems, task):
                found = _grade(gb, grades, p, assignment.name, student)
                assert found is gb.find_grade(p.grade_id, STEM, assignment.name, student)
                assert found.cell.name == p.grade_id and found.student.id == student
            with pytest.raises(MissingEntry):
                _grade(gb, grades, gone, assignment.name, student)
        assert _grades_of(gb, assignment.name, "nobody") == {}


def test_opening_for_a_batch_completes_exactly_the_submissions_missing_rows(course, assignment, ada, bob, cy):
    """When a submission lacks a grade row, a comment row or a whole notebook row (nbgrader added a cell,
    or another tool wrote it), does opening the gradebook for a batch give it those rows back, and only it?"""
    from nbgrader.api import Notebook, SolutionCell, SubmittedNotebook

    from autograder.reporting.gradebook import GradebookWriter, _incomplete

    release_into(course, assignment)
    with Gradebook(course.gradebook_url) as gb:
        gb.db.add(SolutionCell(name="layer_norm_solution", notebook=gb.find_notebook(STEM, assignment.name)))
        gb.db.commit()
    record_grades(course, assignment, [ada, bob, cy])

    def rows() -> dict[str, tuple[int, int, int]]:
        with Gradebook(course.gradebook_url) as gb:
            out = {}
            for sub in gb.find_assignment(assignment.name).submissions:
                out[sub.student.id] = (len(sub.notebooks), sum(len(n.grades) for n in sub.notebooks),
                                       sum(len(n.comments) for n in sub.notebooks))
            return out

    full = rows()
    assert full == dict.fromkeys(("ada", "bob", "cy"), (1, 3, 1))
    with Gradebook(course.gradebook_url) as gb:
        gb.db.delete(gb.find_grade("test_silu", STEM, assignment.name, "ada"))
        gb.db.delete(gb.find_comment("layer_norm_solution", STEM, assignment.name, "bob"))
        gb.db.add(Notebook(name="extra", assignment=gb.find_assignment(assignment.name)))
        gb.db.commit()
        incomplete = sorted(s.student.id for s in _incomplete(gb, gb.find_assignment(assignment.name)))
        assert incomplete == ["ada", "bob", "cy"]          # the new notebook is missing from every submission
        extra = gb.find_notebook("extra", assignment.name)
        for sub in gb.find_assignment(assignment.name).submissions:
            if sub.student.id == "cy":
                gb.db.add(SubmittedNotebook(notebook=extra, assignment=sub))
        gb.db.commit()
        incomplete = sorted(s.student.id for s in _incomplete(gb, gb.find_assignment(assignment.name)))
        assert incomplete == ["ada", "bob"]
    assert rows() == {"ada": (1, 2, 1), "bob": (1, 3, 0), "cy": (2, 3, 1)}
    with GradebookWriter(course, assignment):
        pass
    assert rows() == dict.fromkeys(("ada", "bob", "cy"), (2, 3, 1))
    with Gradebook(course.gradebook_url) as gb:
        assert _incomplete(gb, gb.find_assignment(assignment.name)) == []


def test_a_regrade_through_plain_sql_reviews_as_nbgrader_reads_it(course, assignment, ada, bob):
    """When the gradebook is in step with course.yml, does a batch write through plain SQL, and is the
    review it returns (override, extra credit, comment) the one nbgrader's API reads back afterwards?"""
    from autograder.reporting.gradebook import GradebookWriter, review_of

    release_with_a_commented_cell(course, assignment)
    record_grades(course, assignment, [ada, bob])
    with Gradebook(course.gradebook_url) as gb:
        gb.find_grade("test_layer_norm", STEM, assignment.name, "ada").manual_score = 12.0
        gb.find_grade("test_silu", STEM, assignment.name, "ada").extra_credit = 1.0
        gb.find_comment("cell-7f3a", STEM, assignment.name, "ada").manual_comment = "  Nice reshape.\n"
        gb.db.commit()
    regraded = dataclasses.replace(ada, late_penalty=2.0, submitted_at="2026-12-15T01:00:00+01:00")
    with GradebookWriter(course, assignment) as writer:
        assert writer.plain_sql and writer.created == ()
        assert writer.record(regraded, review_again=True) is None
        assert writer.record(dataclasses.replace(bob, state="crashed")) is None
        written = writer.review("ada")
    assert written == review_of(course, assignment, "ada")
    assert written.comments == (("split_heads", "Nice reshape."),) and written.raw_score == 28.0
    with Gradebook(course.gradebook_url) as gb:
        sub = gb.find_submission(assignment.name, "ada")
        assert str(sub.timestamp) == "2026-12-15 00:00:00" and sub.notebooks[0].late_submission_penalty == 2.0
        grade = gb.find_grade("test_layer_norm", STEM, assignment.name, "ada")
        assert (grade.auto_score, grade.manual_score, grade.needs_manual_grade) == (15.0, 12.0, True)
        assert gb.find_grade("test_silu", STEM, assignment.name, "bob").auto_score is None
        assert gb.find_submission(assignment.name, "bob").needs_manual_grade


def test_a_gradebook_out_of_step_with_course_yml_is_synced_through_nbgrader_first(course, assignment, ada):
    """When course.yml changes something in the gradebook (a new cell's max score, a student missing
    rows), is that done through nbgrader's API before the batch goes on through plain SQL?"""
    from autograder.reporting.gradebook import GradebookWriter

    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    with Gradebook(course.gradebook_url) as gb:
        gb.find_grade_cell("test_silu", STEM, assignment.name).max_score = 1.0
        gb.db.delete(gb.find_grade("test_silu", STEM, assignment.name, "ada"))
        gb.db.commit()
    with GradebookWriter(course, assignment) as writer:
        assert writer.plain_sql
        assert writer.created == (f"grade cell {assignment.name}/{STEM}/test_silu: max score 1 -> 5",)
        assert writer.record(ada) is None
    assert auto_scores(course, assignment, "ada")["silu"] == 5.0


def test_a_writer_killed_inside_a_submission_leaves_no_half_of_it(course, assignment, ada, bob):
    """When the writing process dies in the middle of a submission's transaction, is every submission
    committed before it there, and of the one it was writing nothing (a new student) or only the
    grades from before (a re-grade)?"""
    from autograder.grading.results import SubmissionResult
    from autograder.reporting.gradebook import GradebookWriter

    release_into(course, assignment)
    record_grades(course, assignment, [bob])
    before = auto_scores(course, assignment, "bob")
    for dying in (dataclasses.replace(bob, student="cal"), dataclasses.replace(ada, student="bob")):
        pid = os.fork()
        if pid == 0:                                  # the writer: commits ada, dies inside `dying`
            try:
                with GradebookWriter(course, assignment) as writer:
                    ok = writer.plain_sql and writer.record(ada) is None
                    score = SubmissionResult.problem_score

                    def die_at_silu(result, name, ok=ok, score=score):
                        if name == "silu":
                            os._exit(3 if ok else 4)   # rows of `dying` written, not committed
                        return score(result, name)

                    SubmissionResult.problem_score = die_at_silu
                    writer.record(dying)
            finally:
                os._exit(5)
        assert os.waitpid(pid, 0)[1] >> 8 == 3
        assert auto_scores(course, assignment, "ada") == {"layer_norm": 15.0, "split_heads": 10.0, "silu": 5.0}
        assert auto_scores(course, assignment, "bob") == before
        with Gradebook(course.gradebook_url) as gb:
            assert sorted(s.id for s in gb.students) == ["ada", "bob"]
            assert sorted(s.student.id for s in gb.find_assignment(assignment.name).submissions) == ["ada", "bob"]


def test_alembic_head_is_the_revision_alembic_heads_names():
    """Is the head read from nbgrader's migration scripts the one `alembic heads` (nbgrader's way) gives?"""
    import nbgrader.api

    from autograder.reporting.gradebook import alembic_head

    real = getattr(nbgrader.api.get_alembic_version, "__wrapped__", nbgrader.api.get_alembic_version)
    assert alembic_head() == real()


def test_a_new_gradebook_is_created_without_running_alembic(tmp_path, assignment, ada, monkeypatch):
    """Does creating a gradebook skip nbgrader's `alembic heads` process, with the same alembic_version row?"""
    import sqlite3

    import nbgrader.api

    from autograder.reporting.gradebook import alembic_head

    head = alembic_head()
    started = []

    def no_process(*args, **kwargs):
        started.append(args)
        raise OSError("no alembic process expected")

    monkeypatch.setattr(nbgrader.api.sp, "check_output", no_process)
    course = make_course(tmp_path, assignment)
    assert record_grades(course, assignment, [ada]).recorded == ("ada",)
    assert started == []
    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
    assert auto_scores(course, assignment, "ada")["silu"] == 5.0


@pytest.mark.parametrize("scripts, head", [
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision: str = 'b'\ndown_revision = 'a'\n"}, "b"),
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision = 'b'\ndown_revision = 'a'\n",
      "c.py": "revision = 'c'\ndown_revision = 'a'\n"}, None),                       # two heads
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision = 'b'\ndown_revision = 'x'\n"}, None),
    ({"a.py": "revision = 'a'\ndown_revision = None\ndepends_on = 'z'\n"}, None),
    ({"a.py": "revision = 'a'\ndown_revision = None\nbranch_labels = ('x',)\n"}, None),
    ({"a.py": "revision = 'a' + ''\ndown_revision = None\n"}, None),                  # not a literal
    ({"a.py": "revision = 'a'\nrevision = 'b'\ndown_revision = None\n"}, None),
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "down_revision = 'a'\n"}, None),
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision, down_revision = 'b', 'a'\n"}, None),
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision = 'b'\ndown_revision = ('a',)\n",
      "__init__.py": "revision = 'i'\ndown_revision = 'b'\n", ".#c.py": "revision = 'c'\ndown_revision = 'b'\n",
      "notes.txt": "revision = 'n'\n"}, "b"),                                      # files alembic does not load
    ({"a.py": "revision = 'a'\ndown_revision = None\n", "b.py": "revision = 'b'\ndown_revision = 'a'\n(\n"}, None),
    ({}, None),
])
def test_alembic_head_leaves_anything_but_one_plain_history_to_alembic(tmp_path, scripts, head):
    """Is a head named only for scripts that set their revisions as plain literals in one single-headed history?"""
    from autograder.reporting.gradebook import alembic_head

    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
    assert alembic_head(tmp_path) == head


def test_a_release_that_changes_points_says_what_stays_from_before(course, assignment, ada):
    """When a release changes a problem's points after grading, does its line say the graded submissions
    keep their old scores until the next autograde, and name a TA's score now above the new points?"""
    from autograder.reporting.gradebook import _regrade_note

    release_into(course, assignment)
    record_grades(course, assignment, [ada])
    with Gradebook(course.gradebook_url) as gb:
        gb.find_grade("test_silu", STEM, assignment.name, "ada").manual_score = 4.5
        gb.db.commit()
        row = gb.find_assignment(assignment.name)
        cell = gb.find_grade_cell("test_silu", STEM, assignment.name)
        assert _regrade_note(row, cell, assignment, 4.0) == (
            "; the 1 submission graded before keeps its old scores until `course autograde transformer-block`"
            "; TA scores above 4 points, left as they are: ada (4.5)")
        assert "TA scores" not in _regrade_note(row, cell, assignment, 5.0)


def test_a_reason_shared_by_many_students_is_one_line_naming_them():
    """When the gradebook fails the same way for many students (it cannot be opened: a full disk), is that one
    line naming the first few and how many more, while reasons of one or two students keep a line each?"""
    from autograder.reporting.gradebook import GradebookReport

    full = "gradebook sqlite:///gradebook.db: cannot open (OperationalError: database or disk is full)"
    report = GradebookReport(failed=(*((f"s{i}", full) for i in range(8)), ("zoe", "TypeError: bad score"),
                                     ("yan", "TypeError: bad score")))
    assert report.messages == (f"8 students (s0, s1, s2, s3, s4 and 3 more): {full}",
                               "zoe: TypeError: bad score", "yan: TypeError: bad score")


def test_a_database_error_is_the_drivers_own_words_without_the_statement():
    """Is SQLAlchemy's error shown as the driver's one line, without the SQL statement and the link it adds?"""
    import sqlalchemy

    from autograder.reporting.gradebook import db_error

    engine = sqlalchemy.create_engine("sqlite://")
    with engine.connect() as conn, pytest.raises(sqlalchemy.exc.OperationalError) as info:
        conn.execute(sqlalchemy.text("SELECT a FROM nowhere"))
    assert db_error(info.value) == "OperationalError: no such table: nowhere"
    assert "[SQL:" not in db_error(info.value) and "sqlalche.me" not in db_error(info.value)
