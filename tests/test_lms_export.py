"""`nbgrader export --CourseCsvExport.lms=canvas|moodle|blackboard`: the grades as an LMS's grade import reads them,
from a real gradebook graded once by `course autograde` (ada submits; nora, on the roster, does not), with a
second assignment in the gradebook and a TA's override of one of ada's grades."""
from __future__ import annotations

import csv
import dataclasses
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.config import RosterStudent, load_course
from autograder.errors import ExportError
from autograder.reporting.lms_export import blackboard_column_problem, canvas_name, lms_table
from conftest import course_with_students

A = "transformer-block"
QUIZ = "quiz-1"                           # in the gradebook only, due after the assignment (so listed after it)
BIN = Path(sys.executable).parent
ROSTER = ("id,first_name,last_name,email,lms_user_id,sis_user_id,sis_login_id,section\n"
          'ada,Ada,"Lovelace, Countess",ada@example.edu,4211,S-0001,alovelace,"Sec 1, Tue"\n'
          "nora,Nora,Noether,nora@example.edu,,,,\n")
OVERRIDE = 8.0                            # the TA's layer_norm score for ada (the autograder gives 12)


@dataclasses.dataclass(frozen=True)
class Exported:
    folder: Path
    auto_score: float                     # ada's layer_norm auto score
    before: list[list[str]]               # the Canvas file before the TA's override
    canvas: list[list[str]]               # ... and after it
    moodle: list[list[str]]
    moodle_log: str                       # the Moodle export's stderr (nbgrader's log: its warnings)
    blackboard: list[list[str]]
    blackboard_log: str
    blackboard_bytes: bytes
    filtered: list[list[str]]             # Canvas, --assignment transformer-block --student ada
    long: dict[str, dict[str, str]]       # the plain export's transformer-block rows, by student id
    canvas_bytes: bytes


def export(folder: Path, name: str, *options: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]))
    return subprocess.run([str(BIN / "nbgrader"), "export", "--to", name, *options], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def records(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Exported:
    import datetime as dt

    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path_factory.mktemp("lms") / "course", ("ada",))
    (folder / "roster.csv").write_text(ROSTER, encoding="utf-8")
    graded = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", A, "--course-dir", str(folder)],
                            capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stdout + graded.stderr
    url = load_course(folder).gradebook_url
    with Gradebook(url) as gb:
        gb.add_assignment(QUIZ, duedate=dt.datetime(2099, 1, 1))
    runs = {"before.csv": export(folder, "before.csv", "--CourseCsvExport.lms=canvas")}
    with Gradebook(url) as gb:                                  # as formgrader saves a TA's score
        grade = gb.find_grade("test_layer_norm", A, A, "ada")
        auto_score = grade.auto_score
        grade.manual_score = OVERRIDE
        gb.db.commit()
    runs["canvas.csv"] = export(folder, "canvas.csv", "--CourseCsvExport.lms=canvas")
    runs["moodle.csv"] = export(folder, "moodle.csv", "--CourseCsvExport.lms=moodle")
    runs["blackboard.csv"] = export(folder, "blackboard.csv", "--CourseCsvExport.lms=blackboard")
    runs["filtered.csv"] = export(folder, "filtered.csv", "--CourseCsvExport.lms=canvas", f"--assignment={A}",
                                  "--student=ada")
    runs["long.csv"] = export(folder, "long.csv")
    for name, done in runs.items():
        assert done.returncode == 0, (name, done.stderr[-2000:])
    with open(folder / "long.csv", newline="", encoding="utf-8") as fh:
        long = {r["student_id"]: r for r in csv.DictReader(fh) if r["assignment"] == A}
    return Exported(folder, auto_score, records(folder / "before.csv"), records(folder / "canvas.csv"),
                    records(folder / "moodle.csv"), runs["moodle.csv"].stderr, records(folder / "blackboard.csv"),
                    runs["blackboard.csv"].stderr, (folder / "blackboard.csv").read_bytes(),
                    records(folder / "filtered.csv"), long, (folder / "canvas.csv").read_bytes())


def test_canvas_export_header_and_points_possible_row_are_canvas_s(exported):
    """Does the Canvas file start with exactly Canvas's five student columns and one column per assignment,
    then a `Points Possible` row of each assignment's maximum, and hold one row per student and nothing else?"""
    assert exported.canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A, QUIZ]
    assert exported.canvas[1] == ["Points Possible", "", "", "", "", "100.0", "0.0"]
    assert [r[3] for r in exported.canvas[2:]] == ["alovelace", "nora"]
    assert {len(r) for r in exported.canvas} == {7}
    assert not exported.canvas_bytes.startswith("\ufeff".encode()) and b"\r\n" not in exported.canvas_bytes


def test_canvas_export_scores_are_the_gradebooks_with_the_override_and_zero_without_a_submission(exported):
    """Is ada's Canvas score the plain export's final score (after the TA's override, which moved it by
    exactly the override's change), and nora, who did not submit, 0 for both assignments?"""
    ada_before, ada, nora = exported.before[2], exported.canvas[2], exported.canvas[3]
    assert float(ada[5]) == float(exported.long["ada"]["score"]) > 0
    assert float(ada[5]) - float(ada_before[5]) == pytest.approx(OVERRIDE - exported.auto_score)
    assert exported.auto_score != OVERRIDE
    assert (ada[6], nora[5], nora[6]) == ("0.0", "0.0", "0.0")
    assert float(exported.long["nora"]["score"]) == 0.0


def test_canvas_export_name_with_a_comma_reads_back_through_csv_reader(exported):
    """Is "Lovelace, Countess, Ada" written quoted, so that csv.reader gives it back as one field?"""
    assert b'"Lovelace, Countess, Ada",4211,' in exported.canvas_bytes
    assert exported.canvas[2][0] == "Lovelace, Countess, Ada" and exported.canvas[3][0] == "Noether, Nora"


def test_canvas_export_maps_roster_ids_to_the_sis_columns(exported):
    """Do the roster's lms_user_id, sis_user_id, sis_login_id and section fill ID, SIS User ID, SIS Login ID
    and Section, and does a student without them get their student id as SIS Login ID?"""
    assert exported.canvas[2][:5] == ["Lovelace, Countess, Ada", "4211", "S-0001", "alovelace", "Sec 1, Tue"]
    assert exported.canvas[3][:5] == ["Noether, Nora", "", "", "nora", ""]


def test_canvas_export_keeps_only_the_assignment_and_student_asked_for(exported):
    """With --assignment and --student, does the Canvas file hold that assignment's column and that
    student's row alone?"""
    assert exported.filtered[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", A]
    assert exported.filtered[1] == ["Points Possible", "", "", "", "", "100.0"]
    assert exported.filtered[2:] == [exported.canvas[2][:6]]


def test_moodle_export_has_identifier_columns_and_no_points_row(exported):
    """Does the Moodle file give names, Username and email, then the same scores as the Canvas file, with
    every row after the header a student (Moodle stops at a row matching no user), and leave out ID number,
    which nora has none of, with one warning line naming the column and her?"""
    assert exported.moodle[0] == ["First name", "Last name", "Username", "Email address", A, QUIZ]
    assert exported.moodle[1] == ["Ada", "Lovelace, Countess", "alovelace", "ada@example.edu",
                                  *exported.canvas[2][5:]]
    assert exported.moodle[2] == ["Nora", "Noether", "nora", "nora@example.edu", "0.0", "0.0"]
    assert len(exported.moodle) == 3
    warned = [ln for ln in exported.moodle_log.splitlines() if "ID number" in ln]
    assert len(warned) == 1 and "ID number: left out of the Moodle file, since nora has none" in warned[0], \
        exported.moodle_log
    assert "WARNING" in warned[0] and "Traceback" not in exported.moodle_log


def test_blackboard_export_has_its_download_s_columns_and_every_field_quoted(exported):
    """Does the Blackboard file start with the columns Blackboard's own download begins with (Last Name, First
    Name, Username, Student ID) and one column per assignment headed by its name, hold a row per student with
    the same scores as the Canvas file (0 for nora, who did not submit), every field in quotes as Blackboard
    asks of a comma-delimited file, and read back through csv.reader as written?"""
    assert exported.blackboard[0] == ["Last Name", "First Name", "Username", "Student ID", A, QUIZ]
    assert exported.blackboard[1] == ["Lovelace, Countess", "Ada", "alovelace", "S-0001", *exported.canvas[2][5:]]
    assert exported.blackboard[2] == ["Noether", "Nora", "nora", "", "0.0", "0.0"]
    assert len(exported.blackboard) == 3
    lines = exported.blackboard_bytes.decode("utf-8").splitlines()
    assert lines[0] == f'"Last Name","First Name","Username","Student ID","{A}","{QUIZ}"'
    assert lines[2] == '"Noether","Nora","nora","","0.0","0.0"'
    assert b"\r\n" not in exported.blackboard_bytes and not exported.blackboard_bytes.startswith("\ufeff".encode())
    warned = [ln for ln in exported.blackboard_log.splitlines() if "Points possible" in ln]
    assert len(warned) == 1 and f"({A} 100.0, {QUIZ} 0.0)" in warned[0], exported.blackboard_log
    assert "Traceback" not in exported.blackboard_log


def test_lms_setting_with_an_unknown_value_is_refused_in_one_line(exported):
    """Does `--CourseCsvExport.lms=sakai` exit 2 with one line naming the setting and its values,
    writing no file?"""
    done = export(exported.folder, "bad.csv", "--CourseCsvExport.lms=sakai")
    assert done.returncode == 2
    errors = [ln for ln in done.stderr.splitlines() if "CourseCsvExport.lms" in ln]
    assert errors == ["nbgrader export: CourseCsvExport.lms is 'sakai'; expected one of nbgrader, canvas, "
                      "moodle, blackboard"], done.stderr
    assert "Traceback" not in done.stderr and not (exported.folder / "bad.csv").exists()


def test_lms_table_names_and_logins_without_roster_columns():
    """For a student on no roster and one with names only, is the Canvas name "Last, First" or the id, the
    SIS Login ID the student id, and the score rounded as in the plain export?"""
    rows = [{"student_id": "x1", "first_name": None, "last_name": None, "email": None, "assignment": A,
             "score": 97.10924299999999},
            {"student_id": "y2", "first_name": "=Yan", "last_name": "", "email": "y@e.edu", "assignment": A,
             "score": 0.0}]
    table = lms_table("canvas", [(A, 100.0)], rows, {"y2": RosterStudent("y2", "=Yan")}, {},
                      include_unrostered=True).records
    assert table[2:] == [["x1", "", "", "x1", "", "97.109243"], ["'=Yan", "", "", "y2", "", "0.0"]]
    assert canvas_name({"student_id": "z", "first_name": "Zoë", "last_name": "Ångström"}) == "Ångström, Zoë"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(lms_table("moodle", [(A, 100.0)], rows, {}, {}).records)
    assert out.getvalue().splitlines() == ["First name,Last name,Username,transformer-block", ",,x1,97.109243",
                                           "'=Yan,,y2,0.0"]


LOGIN_AT = {"canvas": 3, "moodle": 2, "blackboard": 2}          # the login's column in each file
FIRST_ROW = {"canvas": 2, "moodle": 1, "blackboard": 1}         # the first student's row (Canvas: its points row)


def _row(sid: str, email: str | None = None, first: str = "", last: str = "") -> dict:
    return {"student_id": sid, "first_name": first, "last_name": last, "email": email, "assignment": A, "score": 1.0}


def _roster(*students: RosterStudent) -> dict[str, RosterStudent]:
    return {s.id: s for s in students}


@pytest.mark.parametrize("blank", ["first", "later", "off-roster"])
def test_moodle_file_never_has_an_empty_id_number_or_email_in_a_row(blank):
    """Moodle's import keeps the previous row's user when the mapped field is empty (a first such row stops
    the import, a later one credits the student before it): is a column with an empty cell in any row (first,
    later, a student on no roster) left out, one warning line naming it and who lacks it, Username kept, and
    a column every row fills kept?"""
    full = [RosterStudent("ada", sis_user_id="S1"), RosterStudent("bob", sis_user_id="S2"),
            RosterStudent("cy", sis_user_id="S3")]
    rows = [_row("ada", "ada@e.edu"), _row("bob", "bob@e.edu"), _row("cy", "cy@e.edu")]
    if blank == "first":
        full[0], rows[0] = RosterStudent("ada"), _row("ada", " ")
        who = "ada has"
    elif blank == "later":
        full[2], rows[2] = RosterStudent("cy"), _row("cy", None)
        who = "cy has"
    else:
        rows.append(_row("zed"))
        who = "zed has"
    got = lms_table("moodle", [(A, 100.0)], rows, _roster(*full), {}, include_unrostered=True)
    assert got.records[0] == ["First name", "Last name", "Username", A]
    assert [r[2] for r in got.records[1:]] == [r["student_id"] for r in rows]
    assert [w.split(", or fill")[0] for w in got.warnings if w.startswith(("ID number", "Email address"))] == [
        f"ID number: left out of the Moodle file, since {who} none (Moodle's import gives a row whose ID number is "
        f"empty the grades of the row before it); map Username",
        f"Email address: left out of the Moodle file, since {who} none (Moodle's import gives a row whose Email "
        f"address is empty the grades of the row before it); map Username"]
    assert len(got.warnings) == 2 + (blank == "off-roster")
    full_file = lms_table("moodle", [(A, 100.0)], rows[:2] if blank == "off-roster" else
                          [_row(s.id, f"{s.id}@e.edu") for s in full], _roster(
                              *(RosterStudent(s.id, sis_user_id=f"S-{s.id}") for s in full)), {})
    assert full_file.records[0] == ["First name", "Last name", "Username", "ID number", "Email address", A]
    assert all(all(r[2:5]) for r in full_file.records[1:]) and full_file.warnings == ()


def test_moodle_leaves_out_a_column_no_student_has_without_a_word_and_names_who_lacks_one_sorted():
    """A roster without sis_user_id (or a gradebook without emails) gives no student an ID number (an email):
    is that column left out of the Moodle file with no warning, while a column some students have and others
    lack is left out with a warning naming those who lack it, sorted ignoring case (not in gradebook order)?"""
    rows = [_row("zed", "z@e.edu"), _row("Ada", "a@e.edu"), _row("bob", "b@e.edu")]
    got = lms_table("moodle", [(A, 100.0)], rows, _roster(*(RosterStudent(r["student_id"]) for r in rows)), {})
    assert got.records[0] == ["First name", "Last name", "Username", "Email address", A]
    assert got.warnings == ()
    got = lms_table("moodle", [(A, 100.0)], [_row(r["student_id"]) for r in rows], {}, {})
    assert got.records[0] == ["First name", "Last name", "Username", A] and got.warnings == ()
    rows.append(_row("cy", "c@e.edu"))
    roster = _roster(*(RosterStudent(r["student_id"]) for r in rows[:3]), RosterStudent("cy", sis_user_id="S4"))
    got = lms_table("moodle", [(A, 100.0)], rows, roster, {})
    assert got.records[0] == ["First name", "Last name", "Username", "Email address", A]
    assert [w.split(" (")[0] for w in got.warnings] == ["ID number: left out of the Moodle file, since Ada, bob and "
                                                        "zed have none"]


def test_canvas_rows_always_name_their_student():
    """Canvas looks each row up on its own by ID, SIS User ID or SIS Login ID: does every row, a student on
    no roster or with no LMS ids included, carry a SIS Login ID, with the five columns always written?"""
    rows = [_row("ada"), _row("bob"), _row("zed")]
    got = lms_table("canvas", [(A, 100.0)], rows, _roster(RosterStudent("ada", sis_user_id="S1", lms_user_id="9"),
                                                          RosterStudent("bob")), {}, include_unrostered=True)
    assert got.records[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert [r[3] for r in got.records[2:]] == ["ada", "bob", "zed"]
    assert [w.split(":")[0] for w in got.warnings] == ["zed"]          # off the roster (see below)


def test_identifiers_are_written_exactly_with_a_warning_and_names_neutralised():
    """Is an id or email a spreadsheet would run as a formula (=, +, -, @, tab, CR) written exactly in the
    columns an LMS matches on (an apostrophe would become part of it and match nobody), with one warning line
    per column naming the students, while names and the section get an apostrophe?"""
    rows = [_row("=cmd", "-x@e.edu", first="@Al", last="+Bo"), _row("ok", "ok@e.edu")]
    roster = _roster(RosterStudent("=cmd", sis_user_id="+44", section="=S"), RosterStudent("ok", sis_user_id="S2"))
    moodle = lms_table("moodle", [(A, 100.0)], rows, roster, {})
    assert moodle.records[1] == ["'@Al", "'+Bo", "=cmd", "+44", "-x@e.edu", "1.0"]
    assert [w.split(":")[0] for w in moodle.warnings] == ["Username", "ID number", "Email address"]
    assert moodle.warnings[0].startswith("Username: =cmd starts with =, +, -, @, a tab or a carriage return, and "
                                         "is written exactly since the LMS matches on it")
    canvas = lms_table("canvas", [(A, 100.0)], rows, roster, {"=cmd": "@7"})
    assert canvas.records[2] == ["'+Bo, @Al", "", "+44", "=cmd", "'=S", "1.0"]     # an ID is a number (below)
    assert [w.split(":")[0] for w in canvas.warnings] == ["ID", "SIS User ID", "SIS Login ID"]
    assert canvas.warnings[0].startswith("ID: left empty for =cmd, whose lms_user_id ('@7') is not a whole number")
    blackboard = lms_table("blackboard", [(A, 100.0)], rows, roster, {})
    assert blackboard.records[1] == ["'+Bo", "'@Al", "=cmd", "'+44", "1.0"]      # Student ID: shown, not matched on
    assert [w.split(":")[0] for w in blackboard.warnings] == ["Username", "Points possible"]
    assert blackboard.warnings[0].startswith("Username: =cmd starts with =, +, -, @, a tab or a carriage return, "
                                             "and is written exactly since the LMS matches on it")


def test_blackboard_file_is_quoted_throughout_and_reads_back_as_written():
    """Blackboard asks that every field of a comma-delimited file be in quotes: does the Blackboard file, written
    as the export writes it, quote each field (names with commas, quotes and accents, an empty Student ID, the
    scores), round a score as the other files do, and give back every record through csv.reader?"""
    rows = [{**_row("zoe", first='Zoë "Z"', last="Ångström, Jr"), "score": 97.10924299999999},
            {**_row("x1"), "score": 0.0}]
    got = lms_table("blackboard", [(A, 100.0)], rows, _roster(RosterStudent("zoe", sis_user_id="0042"),
                                                              RosterStudent("x1", sis_login_id="xone")), {})
    assert got.records == [["Last Name", "First Name", "Username", "Student ID", A],
                           ["Ångström, Jr", 'Zoë "Z"', "zoe", "0042", "97.109243"], ["", "", "xone", "", "0.0"]]
    out = io.StringIO()
    assert got.quote_all
    csv.writer(out, lineterminator="\n", quoting=csv.QUOTE_ALL).writerows(got.records)
    assert out.getvalue().splitlines() == [f'"Last Name","First Name","Username","Student ID","{A}"',
                                           '"Ångström, Jr","Zoë ""Z""","zoe","0042","97.109243"',
                                           '"","","xone","","0.0"']
    assert list(csv.reader(io.StringIO(out.getvalue()))) == got.records
    assert not lms_table("canvas", [(A, 100.0)], rows, {}, {}).quote_all


def test_blackboard_warns_that_each_upload_creates_columns_with_their_points():
    """A Blackboard column is an existing one only when its header carries Blackboard's Column ID, which the
    export does not know: is there one warning saying that each upload creates a column per assignment (0
    points possible in the Original view) and naming each assignment's points, and none for a file without
    assignments?"""
    got = lms_table("blackboard", [(A, 100.0), ("lab", 12.5)], [_row("ada")], {}, {})
    assert got.records[0] == ["Last Name", "First Name", "Username", "Student ID", A, "lab"]
    assert got.warnings == (
        f"Points possible: the Blackboard file heads the column of {A}, lab with the name alone, so each upload "
        f"creates a new column for it (in the Original course view a text column with 0 points possible, left out "
        f"of totals) rather than updating one; after the first upload set each new column's points ({A} 100.0, "
        f"lab 12.5), and from then on give each its Column ID in CourseCsvExport.blackboard_columns (the number "
        f"after '|' in the column's header in Blackboard's download, as 'Name [Total Pts: 100 Score] |123456')",)
    assert lms_table("blackboard", [], [], {}, {}).warnings == ()


def test_blackboard_heads_a_column_with_its_column_id_as_its_download_does():
    """With the Column ID of an assignment's existing Blackboard column (CourseCsvExport.blackboard_columns), is
    its column headed as Blackboard's download heads it ('Name [Total Pts: 100 Score] |123456'), so the upload
    updates that column, the others by their name alone and named in the warning, and is there no warning once
    every assignment has its Column ID?"""
    got = lms_table("blackboard", [(A, 100.0), ("lab", 12.5)], [_row("ada")], {}, {}, column_ids={A: " 123456 "})
    assert got.records[0] == ["Last Name", "First Name", "Username", "Student ID",
                              f"{A} [Total Pts: 100 Score] |123456", "lab"]
    assert len(got.warnings) == 1 and got.warnings[0].startswith(
        "Points possible: the Blackboard file heads the column of lab with the name alone"), got.warnings
    assert "(lab 12.5)" in got.warnings[0]
    both = lms_table("blackboard", [(A, 100.0), ("lab", 12.5)], [_row("ada")], {}, {},
                     column_ids={A: "123456", "lab": "99"})
    assert both.records[0][4:] == [f"{A} [Total Pts: 100 Score] |123456", "lab [Total Pts: 12.5 Score] |99"]
    assert both.warnings == ()
    assert lms_table("canvas", [(A, 100.0)], [_row("ada")], {}, {}, column_ids={A: "1"}).records[0][5] == A


def test_blackboard_column_ids_that_cannot_be_written_are_named_in_one_line():
    """Is a Column ID given for an assignment the gradebook does not hold (a typo would leave its column new),
    one that is not a whole number, or one two assignments share, refused in one line naming the setting, the
    assignment and what to give, and a good set accepted?"""
    held = [A, "lab"]
    assert blackboard_column_problem({A: "1281892", "lab": " 7 "}, held) is None
    assert blackboard_column_problem({"labb": "7"}, held) == (
        f"CourseCsvExport.blackboard_columns: labb is not in the gradebook, which holds {A}, lab; no file written")
    assert blackboard_column_problem({A: "|1281892"}, held) == (
        f"CourseCsvExport.blackboard_columns: the Column ID of {A} ('|1281892') is not a whole number: it is the "
        f"number after '|' in the column's header in Blackboard's download ('Name [Total Pts: 100 Score] |123456'); "
        f"no file written")
    assert blackboard_column_problem({A: "0042", "lab": "42"}, held) == (
        f"CourseCsvExport.blackboard_columns: {A} and lab share '0042', so both would be uploaded into one "
        f"Blackboard column; no file written")


def test_blackboard_export_takes_column_ids_from_nbgrader_config_and_refuses_a_bad_one(tmp_path):
    """Through `nbgrader export --CourseCsvExport.lms=blackboard`, with the assignment's Column ID in the course's
    nbgrader_config.py: is its column headed with it (no Points possible warning), and with a Column ID that is
    not a number does the export exit 2 with one line naming the setting, no traceback and no file? And given on
    the command line (`--CourseCsvExport.blackboard_columns=NAME=ID`), is it read the same way?"""
    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    (folder / "roster.csv").write_text("id,sis_login_id\nada,alove\n", encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(A)
    config = folder / "nbgrader_config.py"
    plain = config.read_text(encoding="utf-8")
    config.write_text(plain + f"c.CourseCsvExport.blackboard_columns = {{{A!r}: 1281892}}\n", encoding="utf-8")
    done = export(folder, "bb.csv", "--CourseCsvExport.lms=blackboard")
    assert done.returncode == 0, done.stderr
    assert records(folder / "bb.csv") == [["Last Name", "First Name", "Username", "Student ID",
                                           f"{A} [Total Pts: 0 Score] |1281892"], ["", "", "alove", "", "0.0"]]
    assert "Points possible" not in done.stderr
    config.write_text(plain + f"c.CourseCsvExport.blackboard_columns = {{{A!r}: '12a'}}\n", encoding="utf-8")
    done = export(folder, "bad.csv", "--CourseCsvExport.lms=blackboard")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "blackboard_columns" in ln]
    assert len(lines) == 1 and lines[0].startswith(f"nbgrader export: CourseCsvExport.blackboard_columns: the Column "
                                                   f"ID of {A} ('12a') is not a whole number"), done.stderr
    assert "Traceback" not in done.stderr and not (folder / "bad.csv").exists()
    config.write_text(plain, encoding="utf-8")
    done = export(folder, "cli.csv", "--CourseCsvExport.lms=blackboard", f"--CourseCsvExport.blackboard_columns={A}=77")
    assert done.returncode == 0, done.stderr
    assert records(folder / "cli.csv")[0][4] == f"{A} [Total Pts: 0 Score] |77", "the setting given on the command line"
    done = export(folder, "cli-bad.csv", "--CourseCsvExport.lms=blackboard",
                  "--CourseCsvExport.blackboard_columns=lab=7")
    assert done.returncode == 2 and "labb" not in done.stderr, done.stderr
    assert f"CourseCsvExport.blackboard_columns: lab is not in the gradebook, which holds {A}" in done.stderr
    assert not (folder / "cli-bad.csv").exists()


@pytest.mark.parametrize("column", ["ID number", "Email address"])
def test_moodle_leaves_out_an_id_number_or_email_two_students_share(column):
    """Moodle's import gives every row with the same mapped value to one user (the later row's grades
    replacing the earlier's): is an ID number or email that two students share (differing only in case
    and spaces, as Moodle's database compares them) left out, with one warning naming the column, the
    students and the value, while the other column and Username stay?"""
    roster = _roster(RosterStudent("ada", sis_user_id="S1"), RosterStudent("bob", sis_user_id="S2"),
                     RosterStudent("cy", sis_user_id="S3"))
    rows = [_row("ada", "ada@e.edu"), _row("bob", "bob@e.edu"), _row("cy", "cy@e.edu")]
    if column == "ID number":
        roster["cy"] = RosterStudent("cy", sis_user_id=" s1 ")
    else:
        rows[2] = _row("cy", "ADA@e.edu")
    got = lms_table("moodle", [(A, 100.0)], rows, roster, {})
    kept = "Email address" if column == "ID number" else "ID number"
    assert got.records[0] == ["First name", "Last name", "Username", kept, A]
    shared = "S1" if column == "ID number" else "ada@e.edu"
    field = "sis_user_id" if column == "ID number" else "email"
    assert got.warnings == (
        f"{column}: left out of the Moodle file, since ada and cy share '{shared}' (Moodle's import gives the rows "
        f"of one {column} to one user, the later row's grades replacing the earlier's); map Username, or correct "
        f"the roster's {field} column",)


@pytest.mark.parametrize("lms", ["moodle", "canvas", "blackboard"])
def test_a_login_two_students_share_stops_the_export(lms):
    """The login column (Moodle's and Blackboard's Username, Canvas's SIS Login ID) is the one always written
    (Blackboard's only one it matches on): when two
    students have the same login (one's sis_login_id is the other's student id), is the export refused
    with one line naming the column, the students and the value, rather than a file whose import gives
    both rows to one student?"""
    roster = _roster(RosterStudent("ada", sis_login_id="bob"), RosterStudent("bob"), RosterStudent("cy"))
    with pytest.raises(ExportError) as raised:
        lms_table(lms, [(A, 100.0)], [_row("ada"), _row("bob"), _row("cy")], roster, {})
    column = "SIS Login ID" if lms == "canvas" else "Username"
    message = str(raised.value)
    assert message.startswith(f"{column}: ada and bob share 'bob' (the roster's sis_login_id, or the student id "
                              f"without one), so {lms.capitalize()}'s import would give their rows to one student")
    assert message.endswith("no file written: give each student their own sis_login_id") and "\n" not in message


def test_moodle_takes_a_zero_identifier_for_none():
    """Moodle's importer skips a mapped value PHP calls empty, '0' included, and gives that row's grades to
    the student above: is an ID number '0' left out like a missing one, and a Username '0' refused?"""
    roster = _roster(RosterStudent("ada", sis_user_id="S1"), RosterStudent("bob", sis_user_id="0"))
    got = lms_table("moodle", [(A, 100.0)], [_row("ada", "a@e.edu"), _row("bob", "b@e.edu")], roster, {})
    assert got.records[0] == ["First name", "Last name", "Username", "Email address", A]
    assert got.warnings[0].startswith("ID number: left out of the Moodle file, since bob has none ('0' is none to "
                                      "Moodle)")
    with pytest.raises(ExportError, match=r"^Username: zero is '0', which Moodle's import takes for no username"):
        lms_table("moodle", [(A, 100.0)], [_row("ada"), _row("zero")], _roster(RosterStudent("zero", sis_login_id="0")),
                  {})


def test_canvas_leaves_empty_an_id_or_sis_user_id_two_students_share():
    """Canvas tries ID, then SIS User ID, then SIS Login ID on each row, skipping an empty cell, and two rows
    that find one student both go to it: is an ID two students share (0042 and 42: Canvas reads a number)
    or a SIS User ID they share left empty for them alone, one warning per column, the logins kept?"""
    roster = _roster(RosterStudent("ada", lms_user_id="0042", sis_user_id="S1"),
                     RosterStudent("bob", lms_user_id="42", sis_user_id="S2"),
                     RosterStudent("cy", lms_user_id="7", sis_user_id="s2"), RosterStudent("dee", lms_user_id="8"))
    got = lms_table("canvas", [(A, 100.0)], [_row(s) for s in ("ada", "bob", "cy", "dee")], roster, {})
    assert [r[1:4] for r in got.records[2:]] == [["", "S1", "ada"], ["", "", "bob"], ["7", "", "cy"],
                                                 ["8", "", "dee"]]
    assert [w.split(" (")[0] for w in got.warnings] == [
        "ID: left empty for ada and bob, since ada and bob share '0042'",
        "SIS User ID: left empty for bob and cy, since bob and cy share 'S2'"]
    assert got.warnings[0].endswith("so these rows are matched on SIS User ID or SIS Login ID; correct the roster's "
                                    "lms_user_id column")


def test_canvas_leaves_empty_an_id_that_is_not_a_number():
    """Canvas reads the ID column as its own numeric user id ('12ab' as 12, another student): is an
    lms_user_id that is not a whole number left out of ID, with a warning naming the student, and a
    numeric one (spaces trimmed) kept?"""
    got = lms_table("canvas", [(A, 100.0)], [_row("ada"), _row("bob")], {}, {"ada": "12ab", "bob": " 31 "})
    assert [r[1] for r in got.records[2:]] == ["", "31"]
    assert got.warnings == (
        "ID: left empty for ada, whose lms_user_id ('12ab') is not a whole number: Canvas reads ID as its own user "
        "id, a number (of '12ab' it keeps 12, another student), so these rows are matched on SIS User ID or SIS "
        "Login ID; correct the roster's lms_user_id column",)


@pytest.mark.parametrize("lms", ["canvas", "moodle", "blackboard"])
def test_a_student_in_the_gradebook_but_not_on_the_roster_is_left_out_with_a_warning(lms):
    """A Moodle row matching no user stops the whole import, Canvas matches an off-roster student only by a
    login it may not have, and Blackboard does not process a row whose Username is not enrolled: is a
    student the gradebook holds but the roster does not left out of the file, with one warning naming them,
    telling how to add them, remove them, or write them all the same, Moodle's optional columns then
    decided from the students written alone, and all written when the course has no roster at all?"""
    rows = [_row("ada", "a@e.edu"), _row("zed"), _row("yan", "y@e.edu")]
    roster = _roster(RosterStudent("ada", sis_user_id="S1"))
    got = lms_table(lms, [(A, 100.0)], rows, roster, {})
    column = "SIS Login ID" if lms == "canvas" else "Username"
    assert [r[LOGIN_AT[lms]] for r in got.records[FIRST_ROW[lms]:]] == ["ada"]
    if lms == "moodle":
        assert got.records[0] == ["First name", "Last name", "Username", "ID number", "Email address", A]
    why = {"moodle": "a row that matches no Moodle user stops the whole import",
           "canvas": "Canvas matches such a row only if the student id is the login, and offers it as an unknown "
                     "student otherwise",
           "blackboard": "Blackboard matches a row on its Username alone, so such a row counts only if the student "
                         "id is the login, and is not processed otherwise"}[lms]
    assert [w for w in got.warnings if not w.startswith("Points possible:")] == [
        f"yan and zed: in the gradebook but not on the roster, so left out of the {lms.capitalize()} file ({why}); "
        f"add them to the roster with their LMS ids, take a student who left the course out of the gradebook with "
        f"`nbgrader db student remove <id> --force` (--force: their grades are deleted too), or write them with "
        f"their student id as {column} with --CourseCsvExport.include_unrostered=True"]
    everyone = lms_table(lms, [(A, 100.0)], rows, {}, {})
    assert len(everyone.records) == len(got.records) + 2
    assert not [w for w in everyone.warnings if "not on the roster" in w]


@pytest.mark.parametrize("written", [False, True], ids=["left-out", "include_unrostered"])
def test_an_off_roster_id_no_roster_can_hold_is_not_told_to_be_added_to_the_roster(written):
    """A gradebook student 'smith,j' or 'a b' (a folder under submitted/ named by hand) cannot go on a roster,
    which refuses such ids: is each named in a line of its own telling to rename the folder and grade again,
    while the advice to add students to the roster goes to 'zed' alone?"""
    rows = [_row("ada"), _row("smith,j"), _row("a b"), _row("zed")]
    got = lms_table("canvas", [(A, 100.0)], rows, _roster(RosterStudent("ada")), {}, include_unrostered=written)
    roster_advice = [w for w in got.warnings if "add them to the roster" in w]
    assert len(roster_advice) == 1 and roster_advice[0].startswith("zed: in the gradebook but not on the roster")
    where = "written (include_unrostered) with it as the login" if written else "left out of the file"
    assert [w for w in got.warnings if "no roster can list" in w] == [
        f"{sid}: in the gradebook, but no roster can list this id (it holds {what}), so it is {where}; rename the "
        f"folder under submitted/ to the student's roster id, run `course autograde` again, and take {sid} out of "
        f"the gradebook with `nbgrader db student remove <id> --force` (--force: their grades under that id are "
        f"deleted too)" for sid, what in (("a b", "a space"), ("smith,j", "a ','"))]


def test_an_off_roster_id_close_to_a_roster_student_without_a_submission_is_named_as_a_likely_typo():
    """When the roster misspells a student's id (katherin for katherine), is the submitter left out of the file
    paired in one warning with the roster student who has no submission (whose 0 the file holds), while an
    off-roster id close to a student who did submit, or far from everyone, gets no such line?"""
    def row(sid: str, submitted: bool) -> dict:
        return {**_row(sid), "submitted": submitted, "score": 88.0 if submitted else 0.0}

    rows = [row("katherine", True), row("katherin", False), row("bobby", True), row("bobb", True), row("zed", True),
            row("yan", False)]
    roster = _roster(RosterStudent("katherin"), RosterStudent("bobb"), RosterStudent("yan"))
    got = lms_table("canvas", [(A, 100.0)], rows, roster, {})
    assert [w for w in got.warnings if "typo" in w] == [
        "katherine (not on the roster) may be the roster's katherin (a typo?): if so, correct the roster and export "
        "again"]
    assert [r[3] for r in got.records[2:]] == ["katherin", "bobb", "yan"]


@pytest.mark.parametrize("lms", ["canvas", "moodle", "blackboard"])
def test_an_id_differing_from_the_roster_s_only_by_unicode_normalisation_is_named_and_caught_as_a_case_clash(lms):
    """A gradebook student 'zoë' written as 'e' and a combining mark (NFD) beside the roster's 'zoë' as one code
    point (NFC) prints just like it: is it left out with the warnings naming it by its escapes and saying it is
    the roster's id but for Unicode normalisation (as bob.smith is for Bob.Smith, but for case), and with
    `include_unrostered` is the export refused for the login they share, as for the case clash?"""
    nfc, nfd = "zo\u00eb", "zoe\u0308"
    rows = [_row("ada"), _row(nfc), _row(nfd), _row("Bob.Smith"), _row("bob.smith")]
    roster = _roster(RosterStudent("ada"), RosterStudent(nfc), RosterStudent("Bob.Smith"))
    got = lms_table(lms, [(A, 100.0)], rows, roster, {})
    assert [r[LOGIN_AT[lms]] for r in got.records[FIRST_ROW[lms]:]] == ["ada", nfc, "Bob.Smith"]
    assert got.warnings[0].startswith(f"bob.smith and {nfd} ('zoe\\u0308'): in the gradebook but not on the roster")
    tail = ("two students to nbgrader, so their grades are left out of the file; if they are one, rename the "
            "submission folder to the roster's id (or correct the roster), autograde again and export again")
    assert got.warnings[1:3] == (
        f"bob.smith (in the gradebook, not on the roster) matches the roster's Bob.Smith except for case: {tail}",
        f"{nfd} ('zoe\\u0308') (in the gradebook, not on the roster) matches the roster's {nfc} ('zo\\xeb') except "
        f"for Unicode normalisation: {tail}")
    column = "SIS Login ID" if lms == "canvas" else "Username"
    for pair, names in (((nfc, nfd), f"{nfd} ('zoe\\u0308') and {nfc} ('zo\\xeb')"),
                        (("Bob.Smith", "bob.smith"), "Bob.Smith and bob.smith")):
        with pytest.raises(ExportError, match=rf"^{column}: {re.escape(names)} share "):
            lms_table(lms, [(A, 100.0)], [_row(sid) for sid in pair], _roster(RosterStudent(pair[0])), {},
                      include_unrostered=True)


TAIL = ("; add them to the roster with their LMS ids, or take a student who left the course out of the gradebook "
        "with `nbgrader db student remove <id> --force` (--force: their grades are deleted too)")


@pytest.mark.parametrize("lms", ["canvas", "moodle", "blackboard"])
def test_a_student_not_on_the_roster_is_written_when_asked_for_with_a_warning(lms):
    """With `include_unrostered`, is a student the gradebook holds but the roster does not written with the
    gradebook's name (and email, in a Moodle file whose every row has one) and their student id as the login,
    with one warning naming them and saying just what their rows hold, and how to remove a student who left
    (`nbgrader db student remove`)?"""
    rows = [_row("ada", "a@e.edu"), _row("zed", "z@e.edu"), _row("yan", "y@e.edu")]
    got = lms_table(lms, [(A, 100.0)], rows, _roster(RosterStudent("ada")), {}, include_unrostered=True)
    assert [r[LOGIN_AT[lms]] for r in got.records[FIRST_ROW[lms]:]] == ["ada", "zed", "yan"]
    written = {"moodle": "the gradebook's name, the gradebook's email and the student id as Username, no ID number, "
                         "which Moodle matches only if it is the login, or by the email where Email address is mapped, "
                         "and a row that matches no user stops the whole Moodle import",
               "canvas": "the gradebook's name and the student id as SIS Login ID, no SIS User ID, which Canvas "
                         "matches only if it is the login",
               "blackboard": "the gradebook's name and the student id as Username, no Student ID, which Blackboard "
                             "matches only if it is the login (it processes no row whose Username is not enrolled in "
                             "the course)"}[lms]
    assert [w for w in got.warnings if w.startswith("yan")] == [
        f"yan and zed: in the gradebook but not on the roster, written (include_unrostered) with {written}{TAIL}"]


def test_canvas_warning_of_students_not_on_the_roster_names_the_id_written_from_the_gradebook():
    """A student off the roster whose lms_user_id the gradebook holds gets it as Canvas's ID, which Canvas
    matches first: does the warning say so, naming them, rather than "only the name and the SIS Login ID"?"""
    rows = [_row("ada"), _row("zed"), _row("yan")]
    got = lms_table("canvas", [(A, 100.0)], rows, _roster(RosterStudent("ada")), {"zed": "77"},
                    include_unrostered=True)
    assert [r[1] for r in got.records[2:]] == ["", "77", ""]
    assert got.warnings == (
        "yan and zed: in the gradebook but not on the roster, written (include_unrostered) with the gradebook's name, "
        "the gradebook's lms_user_id as ID (for zed) and the student id as SIS Login ID, no SIS User ID, which Canvas "
        "matches only if it is the login when the row has no ID (a row with one is matched by it)" + TAIL,)


def test_moodle_warns_of_assignments_not_out_of_100():
    """Moodle's file carries no maximum and a grade item its import creates is out of 100 (grades capped at
    the item's maximum): is there one warning naming each assignment out of other points and saying that a
    grade over 100 stops the import, and none when every assignment is out of 100?"""
    roster = _roster(RosterStudent("ada", sis_user_id="S1"))
    got = lms_table("moodle", [(A, 120.0), ("quiz", 100.0), ("lab", 12.5)], [_row("ada", "a@e.edu")], roster, {})
    assert got.warnings == (
        f"Maximum grade: {A} is out of 120.0, lab is out of 12.5, not 100: the Moodle file carries no maximum, a "
        f"grade item Moodle's import creates is out of 100, and Moodle caps a grade at its item's maximum; create "
        f"the grade item with this maximum before importing and map the column to it; a grade above 100 also stops "
        f"the whole import unless the site allows unlimited grades",)
    assert lms_table("moodle", [(A, 100.0)], [_row("ada", "a@e.edu")], roster, {}).warnings == ()
    assert lms_table("canvas", [(A, 120.0)], [_row("ada")], {}, {}).warnings == ()      # its Points Possible row


def test_moodle_warns_of_grades_above_100():
    """Moodle's import refuses the whole file for a grade above 100 (unless the site allows unlimited grades):
    is a student whose extra credit takes them over 100 named, with the assignment, in one warning, and is
    there none at 100 or in a Canvas file?"""
    roster = _roster(RosterStudent("ada", sis_user_id="S1"), RosterStudent("bob", sis_user_id="S2"))
    rows = [{**_row("ada", "a@e.edu"), "score": 105.0}, {**_row("bob", "b@e.edu"), "score": 100.0}]
    got = lms_table("moodle", [(A, 100.0)], rows, roster, {})
    assert got.warnings == (f"Grade above 100: ada 105.0 in {A}: Moodle's import refuses the whole file for a grade "
                            f"above 100 unless the site allows unlimited grades (Site administration > Grades > "
                            f"General settings), and caps a grade at its grade item's maximum",)
    assert lms_table("canvas", [(A, 100.0)], rows, roster, {}).warnings == ()


def test_scores_are_plain_decimals():
    """Is a tiny score written 0.00005, not Python's 5e-05 (which neither LMS reads as a number), and a
    whole one still 100.0?"""
    rows = [{**_row("ada"), "score": 5e-05}, {**_row("ada"), "assignment": "quiz", "score": 100}]
    got = lms_table("canvas", [(A, 100.0), ("quiz", 1e-05)], rows, {}, {})
    assert got.records[1][5:] == ["100.0", "0.00001"] and got.records[2][5:] == ["0.00005", "100.0"]


def test_export_with_a_shared_login_writes_nothing_and_says_why_in_one_line(tmp_path):
    """Through `nbgrader export --CourseCsvExport.lms=moodle`: with two roster students sharing a login,
    does the export exit 2 with one line naming them, no traceback and no file?"""
    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    (folder / "roster.csv").write_text("id,sis_login_id\nada,alove\nbob,ALOVE\n", encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(A)
    done = export(folder, "moodle.csv", "--CourseCsvExport.lms=moodle")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "Username" in ln]
    assert len(lines) == 1 and lines[0].startswith("nbgrader export: Username: ada and bob share 'alove'"), done.stderr
    assert "Traceback" not in done.stderr and not (folder / "moodle.csv").exists()


@pytest.mark.parametrize("lms", ["nbgrader", "canvas"])
def test_export_with_a_broken_roster_says_so_in_one_line(tmp_path, lms):
    """With a roster row that has no id, does `nbgrader export` (plain or for an LMS) exit 2 with one line
    naming the roster file and its line, as `course` commands do, rather than a traceback, and write no file?"""
    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    (folder / "roster.csv").write_text("id,first_name\nada,Ada\n,Nobody\n", encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(A)
    done = export(folder, "grades.csv", f"--CourseCsvExport.lms={lms}")
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "roster.csv" in ln]
    assert len(lines) == 1 and lines[0].startswith("nbgrader export: roster.csv: line 3"), done.stderr
    assert "Traceback" not in done.stderr and not (folder / "grades.csv").exists()


@pytest.mark.parametrize("lms", ["canvas", "moodle", "blackboard"])
def test_a_student_without_a_submission_who_is_not_due_yet_is_named(lms):
    """A student who has not submitted is exported with 0, which the LMS shows as their grade: is there one
    line per assignment naming those whose due date, or whose own extension, is still ahead, and none for
    a student past due or one who submitted, even one whose submission has no timestamp (its timestamp.txt
    missing, blank or unreadable)?"""
    import datetime as dt

    now = dt.datetime(2026, 3, 1, 12, 0)
    past, ahead = now - dt.timedelta(days=1), now + dt.timedelta(hours=1)
    rows = [{**_row(sid, f"{sid}@e.edu"), "submitted": sent, "timestamp": stamp, "duedate": due,
             "extended_duedate": extended}
            for sid, sent, stamp, due, extended in (("ada", False, "", past, ""), ("bob", False, "", past, ahead),
                                                    ("cy", True, past, ahead, ""), ("dee", False, "", ahead, ""),
                                                    ("eve", True, None, ahead, ""))]
    roster = _roster(*(RosterStudent(r["student_id"], sis_user_id=f"S-{r['student_id']}") for r in rows))
    got = lms_table(lms, [(A, 100.0)], rows, roster, {}, now=now)
    assert [w for w in got.warnings if not w.startswith("Points possible:")] == [
        f"{A}: bob and dee have not submitted and are not due yet (the due date, or an extension, is still ahead), "
        f"but are exported with 0, which the LMS will show as the grade; export after the due date, or without "
        f"this assignment (--assignment)"]
    assert [r[-1] for r in got.records[-5:]] == ["1.0"] * 5          # the scores themselves are unchanged
    later = lms_table(lms, [(A, 100.0)], rows, roster, {}, now=ahead + dt.timedelta(seconds=1)).warnings
    assert [w for w in later if not w.startswith("Points possible:")] == []


@pytest.mark.parametrize("lms", ["canvas", "moodle", "nbgrader"])
def test_export_names_as_not_submitted_only_students_the_gradebook_holds_no_submission_of(tmp_path, lms):
    """Through `nbgrader export --CourseCsvExport.lms=...` before the due date, the plain export as the LMS
    ones: is a student whose submission the gradebook holds without a timestamp (its timestamp.txt missing,
    blank or unreadable) left out of the "have not submitted" line, which names the student who has no
    submission and says that the 0 reads as a grade?"""
    import datetime as dt

    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    (folder / "roster.csv").write_text("id\nada\nnora\n", encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(QUIZ, duedate=dt.datetime(2099, 1, 1))
        gb.add_student("ada")
        gb.add_submission(QUIZ, "ada", timestamp=None)
    done = export(folder, f"{lms}.csv", f"--CourseCsvExport.lms={lms}")
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if "not submitted" in ln]
    assert len(lines) == 1 and f"{QUIZ}: nora has not submitted and is not due yet" in lines[0], done.stderr
    shown = ("which reads as the grade (an LMS or spreadsheet importing the file takes it for one)"
             if lms == "nbgrader" else "which the LMS will show as the grade")
    assert f"but is exported with 0, {shown}; export after the due date" in lines[0], done.stderr


def test_canvas_name_with_points_possible_is_not_taken_for_the_points_row():
    """Canvas takes any row whose first cell contains "Points Possible" for the points row: is a student so named
    written with "Points possible", found by their SIS Login ID, with one warning naming them?"""
    rows = [_row("pp", first="Points Possible", last="Smith"), _row("ok", first="Ada", last="Lovelace")]
    got = lms_table("canvas", [(A, 100.0)], rows, {}, {})
    assert [r[0] for r in got.records] == ["Student", "Points Possible", "Smith, Points possible", "Lovelace, Ada"]
    assert got.records[2][3] == "pp"
    named = [w for w in got.warnings if w.startswith("Student:")]
    assert len(named) == 1 and "the name of pp contains 'Points Possible'" in named[0], got.warnings


@pytest.mark.parametrize("name", ['Jr\\", Smith', "Smith, Jr\\"])
def test_moodle_names_php_would_misread_are_written_with_slashes(name):
    """Moodle reads the file with PHP's fgetcsv, whose escape is a backslash: is a quoted name with a backslash
    before a quote or at its end written with '/' for it (the row then has as many cells as the header), with a
    warning, while a backslash PHP reads right stays?"""
    rows = [_row("odd", last=name), _row("fine", last="Back\\slash, Ada")]
    got = lms_table("moodle", [(A, 100.0)], rows, {}, {})
    assert got.records[1][1] == name.replace("\\", "/") and got.records[2][1] == "Back\\slash, Ada"
    named = [w for w in got.warnings if w.startswith("Name:")]
    assert len(named) == 1 and "the name of odd has a backslash" in named[0], got.warnings
    two = lms_table("moodle", [(A, 100.0)], [_row("odd", last=name), _row("odder", first=name)], {}, {})
    assert any(w.startswith("Name: the names of odd and odder have a backslash") for w in two.warnings), two.warnings


def test_moodle_identifiers_php_would_misread_are_refused():
    """Is a Username PHP would misread an ExportError naming the student, and such an email left out with a
    warning?"""
    rows = [_row("ada", email='ada"\\"@e.edu'), _row("bob", email="bob@e.edu")]
    got = lms_table("moodle", [(A, 100.0)], rows, {}, {})
    assert "Email address" not in got.records[0]
    assert any(w.startswith("Email address: left out of the Moodle file, since ada has a backslash") for w in
               got.warnings), got.warnings
    with pytest.raises(ExportError, match=r"^Username: ada has a backslash before a quote"):
        lms_table("moodle", [(A, 100.0)], rows, {"ada": RosterStudent("ada", sis_login_id="a,b\\")}, {})


@pytest.mark.parametrize("lms", ["moodle", "canvas", "blackboard"])
def test_export_leaves_out_students_not_on_the_roster_unless_asked(tmp_path, lms):
    """Through `nbgrader export --CourseCsvExport.lms=...`, with a student who joined late (in the gradebook,
    not on the roster) and no email: is the file the rostered students' alone, Moodle's ID number and Email
    address kept since each of them has their own, with one warning naming the late joiner and the option,
    and with `--CourseCsvExport.include_unrostered=True` is their row written (Moodle's optional columns
    then left out, since they have none)?"""
    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    (folder / "roster.csv").write_text("id,email,sis_user_id\nada,ada@e.edu,S1\nbob,bob@e.edu,S2\n",
                                       encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(A)
        gb.add_student("late_joiner")
    done = export(folder, "lms.csv", f"--CourseCsvExport.lms={lms}")
    assert done.returncode == 0, done.stderr
    got = records(folder / "lms.csv")
    login = LOGIN_AT[lms]
    assert [r[login] for r in got[FIRST_ROW[lms]:]] == ["ada", "bob"]
    if lms == "moodle":
        assert got[0] == ["First name", "Last name", "Username", "ID number", "Email address", A]
    warned = [ln for ln in done.stderr.splitlines() if "late_joiner" in ln]
    assert len(warned) == 1 and "late_joiner: in the gradebook but not on the roster, so left out of the" in warned[0]
    assert warned[0].endswith("--CourseCsvExport.include_unrostered=True"), done.stderr
    done = export(folder, "all.csv", f"--CourseCsvExport.lms={lms}", "--CourseCsvExport.include_unrostered=True")
    assert done.returncode == 0, done.stderr
    got = records(folder / "all.csv")
    assert sorted(r[login] for r in got[FIRST_ROW[lms]:]) == ["ada", "bob", "late_joiner"]
    if lms == "moodle":
        assert got[0] == ["First name", "Last name", "Username", A]
    assert [ln for ln in done.stderr.splitlines() if ln.startswith("[ExportApp | WARNING] late_joiner:")]


def test_export_after_blanking_a_roster_value_writes_none(tmp_path):
    """A wrong lms_user_id and email taken out of the roster (cells left blank): does the next Canvas export
    write no ID for the student and the next Moodle export no email, rather than the values the gradebook
    held from before?"""
    from nbgrader.api import Gradebook

    folder = course_with_students(tmp_path / "course", ())
    header = "id,email,lms_user_id,sis_user_id\n"
    (folder / "roster.csv").write_text(header + "ada,wrong@e.edu,999,S1\nbob,bob@e.edu,42,S2\n", encoding="utf-8")
    with Gradebook(load_course(folder).gradebook_url) as gb:
        gb.add_assignment(A)
    assert export(folder, "before.csv", "--CourseCsvExport.lms=canvas").returncode == 0
    assert [r[1] for r in records(folder / "before.csv")[2:]] == ["999", "42"]
    (folder / "roster.csv").write_text(header + "ada,,,S1\nbob,bob@e.edu,42,S2\n", encoding="utf-8")
    for lms in ("canvas", "moodle"):
        done = export(folder, f"{lms}.csv", f"--CourseCsvExport.lms={lms}")
        assert done.returncode == 0, done.stderr
    assert [r[1] for r in records(folder / "canvas.csv")[2:]] == ["", "42"]
    moodle = records(folder / "moodle.csv")
    assert moodle[0] == ["First name", "Last name", "Username", "ID number", A]       # ada has no email now
    assert "wrong@e.edu" not in (folder / "moodle.csv").read_text(encoding="utf-8")
