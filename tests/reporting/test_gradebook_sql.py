"""Plain-SQL gradebook rows against the rows nbgrader's API writes for the same results."""
from __future__ import annotations

import dataclasses
import shutil
import sqlite3

import pytest
from nbgrader.api import Gradebook, SolutionCell, SourceCell, TaskCell

from autograder.config import Extension
from autograder.reporting import gradebook_sql
from autograder.reporting.gradebook import GradebookWriter

from .conftest import make_course
from .test_gradebook import STEM, alembic_on_path, empty_gradebook, release_into  # noqa: F401 - fixtures

ROWS = {   # every row a submission has, ids replaced by the names they stand for
    "submitted_assignment": "SELECT s.student_id, s.timestamp, s.extension FROM submitted_assignment s",
    "submitted_notebook": "SELECT sa.student_id, n.name, sn.flagged, sn.late_submission_penalty "
                          "FROM submitted_notebook sn JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
                          "JOIN notebook n ON sn.notebook_id = n.id",
    "grade": "SELECT sa.student_id, c.name, g.auto_score, g.manual_score, g.extra_credit, g.needs_manual_grade "
             "FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id "
             "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell c ON g.cell_id = c.id",
    "comment": "SELECT sa.student_id, c.name, r.auto_comment, r.manual_comment "
               "FROM comment r JOIN submitted_notebook sn ON r.notebook_id = sn.id "
               "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell c ON r.cell_id = c.id",
    "student": "SELECT id, first_name, last_name, email, lms_user_id FROM student",
}


def rows(course) -> dict[str, list[tuple]]:
    db = sqlite3.connect(course.root / "gradebook.db")
    try:
        return {table: sorted(db.execute(query), key=repr) for table, query in ROWS.items()}
    finally:
        db.close()


def released(tmp_path, name, assignment, empty_gradebook):  # noqa: F811 - the fixture's value
    """A course whose gradebook has the release, a task cell and a commented solution cell."""
    root = tmp_path / name
    root.mkdir()
    course = make_course(root, assignment)
    shutil.copyfile(empty_gradebook, root / "gradebook.db")
    release_into(course, assignment)
    with Gradebook(course.gradebook_url) as gb:
        nb = gb.find_notebook(STEM, assignment.name)
        gb.db.add(TaskCell(name="task_essay", notebook=nb, max_score=2.0, cell_type="markdown"))
        gb.db.add(SolutionCell(name="cell-7f3a", notebook=nb))
        gb.db.add(SourceCell(name="cell-7f3a", notebook=nb, cell_type="code", locked=False, source="def f(): ...\n"))
        gb.db.commit()
    return course


@pytest.mark.parametrize("again", [False, True])
def test_first_grades_and_regrades_leave_the_rows_nbgraders_api_leaves(tmp_path, assignment, empty_gradebook,  # noqa: F811
                                                                       ada, bob, cy, monkeypatch, again):
    """For submissions the gradebook did not have (graded, late, with an extension, crashed), and for the
    same ones graded again, are the rows plain SQL writes the rows nbgrader's API writes?"""
    assignment = dataclasses.replace(assignment, extensions={"bob": Extension(days=2.0)})
    late = dataclasses.replace(ada, late_penalty=1.5, submitted_at="2026-12-15T01:00:00+01:00")
    results = [late, bob, cy]
    courses = {}
    for how in ("sql", "api"):
        course = courses[how] = released(tmp_path, how, assignment, empty_gradebook)
        with monkeypatch.context() as patch:
            if how == "api":
                patch.setattr(gradebook_sql.SqlGradebook, "open", classmethod(lambda cls, course, a: None))
            for _ in range(2 if again else 1):
                with GradebookWriter(course, assignment) as writer:
                    assert writer.plain_sql == (how == "sql")
                    assert [writer.record(r) for r in results] == [None, None, None]
                    reviews = [writer.review(r.student) for r in results]
        courses[how + "-reviews"] = reviews
    assert rows(courses["sql"]) == rows(courses["api"])
    assert courses["sql-reviews"] == courses["api-reviews"]
    assert len(rows(courses["sql"])["grade"]) == 3 * (len(assignment.problems) + 1)


def test_a_regrade_without_a_usable_timestamp_clears_the_earlier_one(tmp_path, assignment, empty_gradebook,  # noqa: F811
                                                                   ada, monkeypatch):
    """When a submission graded late is graded again from a folder whose timestamp.txt is gone or
    unreadable (so on time, no penalty), does the gradebook drop the earlier time, through plain SQL
    and through nbgrader's API alike, rather than keep showing the submission late?"""
    late = dataclasses.replace(ada, late_penalty=1.5, submitted_at="2026-12-15T01:00:00+01:00")
    unread = dataclasses.replace(ada, timestamp_problem="timestamp.txt could not be read as a time")
    for how in ("sql", "api"):
        course = released(tmp_path, how, assignment, empty_gradebook)
        with monkeypatch.context() as patch:
            if how == "api":
                patch.setattr(gradebook_sql.SqlGradebook, "open", classmethod(lambda cls, course, a: None))
            for result, stamp in ((late, "2026-12-15 00:00:00.000000"), (unread, None)):
                with GradebookWriter(course, assignment) as writer:
                    assert writer.plain_sql == (how == "sql") and writer.record(result) is None
                (row,) = rows(course)["submitted_assignment"]
                (notebook,) = rows(course)["submitted_notebook"]
                assert row[1] == stamp, (how, row)
                assert notebook[3] == (result.late_penalty or None), (how, notebook)


def test_the_journal_is_kept_only_while_the_batch_writes(tmp_path, assignment, empty_gradebook, ada, bob):  # noqa: F811
    """While a batch writes, is SQLite's journal file kept between submissions (PERSIST), and once it
    is done is the gradebook back in nbgrader's DELETE mode with no journal file left; and is a
    gradebook someone put in WAL mode left in it?"""
    course = released(tmp_path, "sql", assignment, empty_gradebook)
    journal = course.root / "gradebook.db-journal"
    with GradebookWriter(course, assignment) as writer:
        assert writer.record(ada) is None and journal.exists()
        assert writer.record(bob) is None
    assert not journal.exists()
    db = sqlite3.connect(course.root / "gradebook.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    with GradebookWriter(course, assignment) as writer:
        assert writer.plain_sql and writer.record(ada) is None
    db = sqlite3.connect(course.root / "gradebook.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_regrade_adds_missing_rows_and_keeps_a_persons_grades_as_nbgraders_api_does(
        tmp_path, assignment, empty_gradebook, ada, bob, monkeypatch):  # noqa: F811
    """Graded again after rows of one submission went missing (a grade row, the comment row) and a
    person graded another of its cells, are the rows plain SQL writes the rows nbgrader's API
    writes, and is the other submission's row left alone?"""
    courses = {}
    for how in ("sql", "api"):
        course = courses[how] = released(tmp_path, how, assignment, empty_gradebook)
        with GradebookWriter(course, assignment) as writer:
            assert [writer.record(r) for r in (ada, bob)] == [None, None]
        db = sqlite3.connect(course.root / "gradebook.db")
        ada_rows = ("SELECT {0}.id FROM {0} JOIN submitted_notebook sn ON {0}.notebook_id = sn.id "
                    "JOIN submitted_assignment sa ON sn.assignment_id = sa.id WHERE sa.student_id = 'ada'")
        # by the cells' names: their ids are random, and differ between the two gradebooks
        grades = [row[0] for row in db.execute(
            "SELECT grade.id FROM grade JOIN submitted_notebook sn ON grade.notebook_id = sn.id "
            "JOIN submitted_assignment sa ON sn.assignment_id = sa.id JOIN base_cell c ON grade.cell_id = c.id "
            "WHERE sa.student_id = 'ada' ORDER BY c.name")]
        db.execute("DELETE FROM grade WHERE id = ?", (grades[0],))
        db.execute("UPDATE grade SET manual_score = 0.5, extra_credit = 1.0 WHERE id = ?", (grades[1],))
        db.execute(f"DELETE FROM comment WHERE id IN ({ada_rows.format('comment')})")
        db.commit()
        db.close()
        with monkeypatch.context() as patch:
            if how == "api":
                patch.setattr(gradebook_sql.SqlGradebook, "open", classmethod(lambda cls, course, a: None))
            with GradebookWriter(course, assignment) as writer:
                assert writer.plain_sql == (how == "sql")
                assert writer.record(ada) is None
                courses[how + "-review"] = writer.review("ada")
    assert rows(courses["sql"]) == rows(courses["api"])
    assert courses["sql-review"] == courses["api-review"]
    assert any(r[3] == 0.5 for r in rows(courses["sql"])["grade"])


def test_a_regrade_reads_every_row_through_an_index(tmp_path, assignment, empty_gradebook, ada, bob):  # noqa: F811
    """Does regrading a submission (its grades, its comment rows, a person's comments for the review)
    read no table from end to end, so that a regrade's cost does not grow with the class?"""
    course = released(tmp_path, "sql", assignment, empty_gradebook)
    with GradebookWriter(course, assignment) as writer:
        assert [writer.record(r) for r in (ada, bob)] == [None, None]
    with Gradebook(course.gradebook_url) as gb:
        gb.find_comment("cell-7f3a", STEM, assignment.name, "ada").manual_comment = "Nice reshape."
        gb.db.commit()
    statements: list[str] = []
    with GradebookWriter(course, assignment) as writer:
        assert writer.plain_sql
        writer._sql.conn.set_trace_callback(statements.append)
        assert writer.record(ada) is None
        assert [text for _, text in writer.review("ada").comments] == ["Nice reshape."]
        writer._sql.conn.set_trace_callback(None)
        per_submission = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert any("FROM comment" in s for s in per_submission), "the review's comments were not read"
        scans = {}
        for statement in per_submission:
            plan = writer._sql.conn.execute("EXPLAIN QUERY PLAN " + statement).fetchall()
            full = [row[-1] for row in plan if row[-1].startswith("SCAN ")]
            if full:
                scans[statement] = full
    assert scans == {}


def test_holds_grades_says_whether_recording_a_result_again_would_change_its_grades(
        tmp_path, assignment, empty_gradebook, ada, bob, cy):  # noqa: F811
    """Read without the course's lock, does the gradebook hold a result once it is recorded (a crashed one
    too), and not before, nor for other scores, another late penalty, a student never recorded, a grade row
    gone, or a gradebook that is not an SQLite file?"""
    course = released(tmp_path, "sql", assignment, empty_gradebook)
    late = dataclasses.replace(ada, late_penalty=1.5)
    assert not gradebook_sql.holds_grades(course, assignment, late)
    with GradebookWriter(course, assignment) as writer:
        assert [writer.record(r) for r in (late, cy)] == [None, None]
    assert gradebook_sql.holds_grades(course, assignment, late)
    assert gradebook_sql.holds_grades(course, assignment, cy)
    assert not gradebook_sql.holds_grades(course, assignment, ada), "another late penalty"
    assert not gradebook_sql.holds_grades(course, assignment, dataclasses.replace(bob, student="ada",
                                                                                   late_penalty=1.5))
    assert not gradebook_sql.holds_grades(course, assignment, bob), "never recorded"
    db = sqlite3.connect(course.root / "gradebook.db")
    db.execute("DELETE FROM grade WHERE id IN (SELECT g.id FROM grade g JOIN base_cell c ON c.id = g.cell_id "
               "JOIN submitted_notebook sn ON sn.id = g.notebook_id JOIN submitted_assignment sa "
               "ON sa.id = sn.assignment_id WHERE sa.student_id = 'cy' AND c.name = 'test_silu')")
    db.commit()
    db.close()
    assert not gradebook_sql.holds_grades(course, assignment, cy), "a grade row gone"
    elsewhere = dataclasses.replace(course, gradebook_url="postgresql://somewhere/gradebook")
    assert not gradebook_sql.holds_grades(elsewhere, assignment, late)
    assert gradebook_sql.has_person_review(elsewhere, assignment.name, "ada") is None
    assert gradebook_sql.person_reviewed(elsewhere, assignment.name) is None


def test_a_gradebook_not_made_yet_holds_no_person_s_review(tmp_path, assignment):
    """Before a course's first grading there is no gradebook file: is that read as "no review" (nothing
    to tell the TA about), while a gradebook file that is not one still cannot tell?"""
    course = make_course(tmp_path, assignment)
    assert not (tmp_path / "gradebook.db").exists()
    assert gradebook_sql.has_person_review(course, assignment.name, "ada") is False
    assert gradebook_sql.person_reviewed(course, assignment.name) == frozenset()
    (tmp_path / "gradebook.db").write_text("not a database\n")
    assert gradebook_sql.has_person_review(course, assignment.name, "ada") is None
    assert gradebook_sql.person_reviewed(course, assignment.name) is None


def test_the_students_a_gradebook_holds_are_read_once_it_has_a_submission(tmp_path, assignment, empty_gradebook,  # noqa: F811
                                                                          ada, bob):
    """Does `gradebook_students` name every student the gradebook holds (one without a submission too),
    without the one taken out of it, and say it cannot tell (None) while the gradebook has no submission
    of the assignment (started afresh) or for a database that is not an SQLite file?"""
    course = released(tmp_path, "sql", assignment, empty_gradebook)
    assert gradebook_sql.gradebook_students(course, assignment.name) is None
    with GradebookWriter(course, assignment) as writer:
        assert writer.record(ada) is None and writer.record(bob) is None
    with Gradebook(course.gradebook_url) as gb:
        gb.add_student("zoe")
        gb.remove_student("ada")
    assert gradebook_sql.gradebook_students(course, assignment.name) == {"bob", "zoe"}
    assert gradebook_sql.gradebook_students(course, "another-assignment") is None
    elsewhere = dataclasses.replace(course, gradebook_url="postgresql://grader@db.example/gradebook")
    assert gradebook_sql.gradebook_students(elsewhere, assignment.name) is None


def test_a_gradebook_file_that_is_no_database_or_a_damaged_one_is_told_from_a_sound_one(tmp_path, assignment,
                                                                                        empty_gradebook):  # noqa: F811
    """Does `unreadable_file` give SQLite's error for a gradebook file that is not a database (random bytes)
    or whose schema pages are damaged, and None for a sound gradebook, an empty file (SQLite makes a new
    database of it), a missing one and a database that is not SQLite?"""
    course = released(tmp_path, "sql", assignment, empty_gradebook)
    db = tmp_path / "sql" / "gradebook.db"
    assert gradebook_sql.unreadable_file(course) is None
    sound = db.read_bytes()
    db.write_bytes(bytes(range(256)) * 20)
    assert "file is not a database" in str(gradebook_sql.unreadable_file(course))
    db.write_bytes(sound[:100] + b"\x00" * (len(sound) - 100))     # the header kept, the schema's page gone
    assert "malformed" in str(gradebook_sql.unreadable_file(course))
    db.write_bytes(b"")
    assert gradebook_sql.unreadable_file(course) is None
    db.unlink()
    assert gradebook_sql.unreadable_file(course) is None
    elsewhere = dataclasses.replace(course, gradebook_url="postgresql://grader@db.example/gradebook")
    assert gradebook_sql.unreadable_file(elsewhere) is None
