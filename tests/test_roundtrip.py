"""The TA's round trip through real nbgrader, on a scratch course whose exchange and student homes
live in the test's tmp folder:

    course release -> nbgrader release_assignment -> (students) fetch_assignment, submit
    -> nbgrader collect -> course autograde -> a TA's override and comment (nbgrader's gradebook API)
    -> course feedback -> nbgrader release_feedback -> (students) fetch_feedback -> nbgrader export

Three roster students: ada submits two days late (20% off) and a TA then lowers one of her grades,
kat two days late with a three-day extension (nothing off), nora does not submit. Then formgrader's
Autograde button (the NbGraderAPI call it makes), nbgrader's generate_feedback, and a change of
points after submission.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from autograder.layout import CourseLayout
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

A = "transformer-block"
NB = "transformer-block.ipynb"
STEM = "transformer-block"
BIN = Path(sys.executable).parent
EXAMPLES = CourseLayout(ROOT / "examples")
ROSTER = ("id,first_name,last_name,email\n"
          "ada,Ada,Lovelace,ada@example.edu\n"
          "kat,Katherine,Johnson,kat@example.edu\n"
          "nora,Nora,Noether,nora@example.edu\n")
# nbgrader's exchange keeps released pages in <exchange>/<course id>/feedback/, and fetch_feedback puts
# them in <assignment>/feedback/<timestamp>/ in the student's home: exchange folders, not course steps.
EXCHANGE_FEEDBACK = "feedback"
OVERRIDE = 10.0                            # the TA's layer_norm score for kat (below its points)
ADA_OVERRIDE = 8.0                         # the TA's layer_norm score for ada, late (the autograder gave 12)
COMMENT = "Right idea; LayerNorm divides by d, not d - 1. Partial credit restored."


@dataclasses.dataclass
class Trip:
    tmp: Path
    course: Path
    exchange: Path
    log: dict[str, subprocess.CompletedProcess]
    results: dict[str, dict]               # results.json per student, as course autograde wrote it
    auto_before: float                     # kat's layer_norm auto score before the override
    ada_auto: float                        # ada's layer_norm auto score before the override

    @property
    def layout(self) -> CourseLayout:
        return CourseLayout(self.course)

    def home(self, student: str) -> Path:
        return self.tmp / "home" / student


def env_for(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    return dict(os.environ, HOME=str(home), PATH=os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
                JUPYTER_CONFIG_DIR=str(home / ".jupyter"), JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"))


def run(args: list[str], cwd: Path, home: Path, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, env=env_for(home), capture_output=True, text=True, timeout=600)
    if check:
        assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def course_cmd(trip_course: Path, home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "autograder.cli", *args, "--course-dir", str(trip_course)],
               trip_course, home, check)


def nbgrader_config(course: Path):
    """The course's nbgrader config as nbgrader loads it (guards the exchange before any command runs)."""
    from traitlets.config.loader import PyFileConfigLoader

    return PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()


def student_config(home: Path, exchange: Path) -> None:
    """What a student's JupyterHub image would hold: the course id and the exchange."""
    (home / ".jupyter").mkdir(parents=True, exist_ok=True)
    (home / ".jupyter" / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'dl-attention'\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
        f"c.Exchange.cache = {str(home / '.cache' / 'nbgrader')!r}\n", encoding="utf-8")


def results_json(course: Path, student: str) -> dict:
    return json.loads(CourseLayout(course).results_json(student, A).read_text())


@pytest.fixture(scope="module")
def trip(tmp_path_factory) -> Trip:
    tmp = tmp_path_factory.mktemp("roundtrip")
    course = copy_course(tmp / "course")
    exchange = tmp / "exchange"
    instructor = tmp / "home" / "instructor"
    data = yaml.safe_load((course / "course.yml").read_text())
    data["exchange"] = "../exchange"
    due = dt.datetime.now(dt.UTC).replace(microsecond=0) - dt.timedelta(days=2)
    data["assignments"][0]["due"] = due.isoformat()
    data["assignments"][0]["extensions"] = {"kat": {"days": 3}}
    (course / "course.yml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    (course / "roster.csv").write_text(ROSTER, encoding="utf-8")

    cfg = nbgrader_config(course)
    assert Path(cfg.Exchange.root) == exchange and cfg.CourseDirectory.course_id == "dl-attention", \
        "nbgrader_config.py must point nbgrader at the test's own exchange before anything runs"

    log: dict[str, subprocess.CompletedProcess] = {}
    log["release"] = course_cmd(course, instructor, "release", A)
    log["release_assignment"] = run([str(BIN / "nbgrader"), "release_assignment", A], course, instructor)
    for student, example in (("ada", "ada"), ("kat", "katherine")):
        home = tmp / "home" / student
        student_config(home, exchange)
        run([str(BIN / "nbgrader"), "fetch_assignment", A], home, home)
        (home / A / NB).write_bytes((EXAMPLES.submission(example, A) / NB).read_bytes())
        run([str(BIN / "nbgrader"), "submit", A, f"--student={student}"], home, home)
    log["collect"] = run([str(BIN / "nbgrader"), "collect", A], course, instructor)
    xu = CourseLayout(course).submitted_dir / "xu"
    xu.mkdir()
    (xu / NB).write_bytes((EXAMPLES.submission("ada", A) / NB).read_bytes())      # one level too high
    log["autograde"] = course_cmd(course, instructor, "autograde", A)
    results = {s: results_json(course, s) for s in ("ada", "kat")}

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "dl-attention") as gb:      # as formgrader saves them
        grade = gb.find_grade("test_layer_norm", STEM, A, "kat")
        auto_before = grade.auto_score
        grade.manual_score = OVERRIDE
        gb.find_comment("layer_norm_solution", STEM, A, "kat").manual_comment = COMMENT
        grade = gb.find_grade("test_layer_norm", STEM, A, "ada")
        ada_auto = grade.auto_score
        grade.manual_score = ADA_OVERRIDE
        gb.db.commit()
    log["feedback"] = course_cmd(course, instructor, "feedback", A)
    log["release_feedback"] = run([str(BIN / "nbgrader"), "release_feedback", A], course, instructor)
    for student in ("ada", "kat"):
        home = tmp / "home" / student
        log[f"fetch_feedback {student}"] = run([str(BIN / "nbgrader"), "fetch_feedback", A, f"--student={student}"],
                                               home, home)
    log["export"] = run([str(BIN / "nbgrader"), "export", "--to", "grades.csv"], course, instructor)
    return Trip(tmp, course, exchange, log, results, auto_before, ada_auto)


def fetched_page(trip: Trip, student: str) -> str:
    pages = list((trip.home(student) / A / EXCHANGE_FEEDBACK).glob(f"*/{STEM}.html"))
    assert len(pages) == 1, pages
    return pages[0].read_text(encoding="utf-8")


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def exported(trip: Trip) -> dict[str, dict[str, str]]:
    with open(trip.course / "grades.csv", newline="", encoding="utf-8") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh)}


def test_release_puts_the_roster_and_due_date_in_the_gradebook(trip):
    """After `course release` alone (the first gradebook write), does the gradebook hold the roster, the
    due date and the grade cells?"""
    out = trip.log["release"].stdout
    assert "gradebook: student ada; student kat; student nora; assignment transformer-block (due " in out
    problems = yaml.safe_load((trip.course / "course.yml").read_text())["assignments"][0]["problems"]
    assert f"{len(problems)} grade cells added" in out
    due = yaml.safe_load((trip.course / "course.yml").read_text())["assignments"][0]["due"]
    due = dt.datetime.fromisoformat(due) if isinstance(due, str) else due
    assert f"assignment transformer-block (due {due.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC)" in out


def test_students_receive_our_page_with_the_override_and_the_comment(trip):
    """Does `nbgrader fetch_feedback` give kat our page, with the TA's override and comment, and ada hers?"""
    kat = text_of(fetched_page(trip, "kat"))
    assert "From your instructor" in kat and COMMENT in kat
    points = {p["problem"]: p["max_score"] for p in trip.results["kat"]["extra_data"]["problems"]}["layer_norm"]
    assert f"Your instructor set the score to {OVERRIDE:g} of {points:g} points; the autograder gave " \
        f"{trip.auto_before:g}." in kat
    total = trip.results["kat"]["score"] + OVERRIDE - trip.auto_before
    assert f"{total:g} / 100 points" in kat
    assert re.search(r"due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(with your extension of 3 days\)", kat)
    ada = text_of(fetched_page(trip, "ada"))
    assert "late penalty of 20" in ada and "From your instructor" in ada and COMMENT not in ada
    assert "Feedback: transformer" in ada and "Student: ada" in ada


def test_a_late_students_page_after_an_override_states_the_gradebooks_figures(trip):
    """After a TA lowers a grade of ada's late submission, does her page give the total the gradebook and
    `nbgrader export` give (the new raw score less the penalty in points fixed at autograde time), say the
    autograder's score was changed by her instructor, and tie the note's 20% to the autograder's score,
    never to the changed one?"""
    assert trip.ada_auto == 12.0 and trip.results["ada"]["extra_data"]["raw_score"] == 100
    row = exported(trip)["ada"]
    raw, penalty, score = (float(row[k]) for k in ("raw_score", "late_submission_penalty", "score"))
    assert (raw, penalty, score) == (96.0, 20.0, 76.0)
    page = text_of(fetched_page(trip, "ada"))
    assert "76 / 100 points" in page
    assert "The autograder gave 100 points; your instructor changed that to 96 (see below)." in page
    assert ("96 points less a late penalty of 20 points, fixed when your submission was autograded (20% of the "
            "autograder's 100 points).") in page
    assert "late penalty of 20% (20 points)." in page, "the note, as written at autograde time"
    assert "Your instructor set the score to 8 of 12 points; the autograder gave 12." in page


def test_feedback_holds_nothing_instructor_only(trip):
    """Do feedback/ and the exchange hold only the pages and nbgrader's bookkeeping: no results.json, no seed?"""
    for student in ("ada", "kat"):
        folder = trip.layout.feedback(student, A)
        assert sorted(p.name for p in folder.iterdir()) == ["submission_secret.txt", "timestamp.txt", f"{STEM}.html"]
        page = (folder / f"{STEM}.html").read_text()
        assert str(trip.results[student]["extra_data"]["seed"]) not in page
    released = list((trip.exchange / "dl-attention" / EXCHANGE_FEEDBACK).iterdir())
    assert len(released) == 2 and all(p.suffix == ".html" for p in released)


def test_export_has_names_emails_a_zero_row_and_totals_from_results_json(trip):
    """Does `nbgrader export` list every roster student with name and email, nora with 0, and totals equal
    to results.json's score (late penalty taken) plus the TA's change?"""
    rows = exported(trip)
    assert set(rows) == {"ada", "kat", "nora"}
    assert {s: (r["first_name"], r["last_name"], r["email"]) for s, r in rows.items()} == {
        "ada": ("Ada", "Lovelace", "ada@example.edu"), "kat": ("Katherine", "Johnson", "kat@example.edu"),
        "nora": ("Nora", "Noether", "nora@example.edu")}
    assert float(rows["nora"]["score"]) == 0.0 and rows["nora"]["timestamp"] == ""
    ada = trip.results["ada"]
    assert float(rows["ada"]["late_submission_penalty"]) == ada["extra_data"]["late_penalty"] == 20.0
    change = ADA_OVERRIDE - trip.ada_auto
    assert float(rows["ada"]["raw_score"]) == pytest.approx(ada["extra_data"]["raw_score"] + change)
    assert float(rows["ada"]["score"]) == pytest.approx(ada["score"] + change)
    kat = trip.results["kat"]
    assert float(rows["kat"]["late_submission_penalty"]) == kat["extra_data"]["late_penalty"] == 0.0
    assert float(rows["kat"]["score"]) == pytest.approx(kat["score"] + OVERRIDE - trip.auto_before)
    assert {r["max_score"] for r in rows.values()} == {"100.0"}


def test_the_extension_is_applied_and_shown(trip):
    """Is kat, late against the course due date, on time against her extension, in results.json, the
    gradebook and the export?"""
    from nbgrader.api import Gradebook

    kat = trip.results["kat"]["extra_data"]
    assert kat["extension"] == "3 days" and kat["late_penalty"] == 0
    rows = exported(trip)
    assert rows["kat"]["extension"] == "3 days" and rows["kat"]["extended_duedate"]
    assert rows["ada"]["extension"] == "" and rows["ada"]["extended_duedate"] == ""
    with Gradebook(f"sqlite:///{trip.course / 'gradebook.db'}") as gb:
        assert gb.find_submission(A, "kat").total_seconds_late == 0
        assert gb.find_submission(A, "ada").total_seconds_late > 86400


def test_autograde_reports_what_it_did_not_grade(trip):
    """Are the misplaced notebook and the roster student without a submission reported by name?"""
    out = trip.log["autograde"].stdout
    assert ("not graded: submitted/xu/transformer-block.ipynb: a notebook directly in the student's folder; "
            "expected submitted/xu/transformer-block/transformer-block.ipynb") in out
    assert "no submission from 1 roster student, each scored 0 in the gradebook: nora" in out


def test_formgraders_autograde_button_runs_our_engine(trip):
    """Does NbGraderAPI.autograde (what formgrader's button calls) grade with this engine: the same
    scores as results.json, our report in the grade cells, and the TA's override kept?"""
    from nbgrader.api import Gradebook
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from autograder.text import format_points

    cfg = nbgrader_config(trip.course)
    api = NbGraderAPI(CourseDirectory(config=cfg), config=cfg)
    here = os.getcwd()
    try:
        out = api.autograde(A, "ada")
    finally:
        os.chdir(here)
    assert out["success"], out.get("error", "") + out.get("log", "")
    ada = trip.results["ada"]       # a TA lowered her layer_norm: her line gives the gradebook's total first
    total = ada["score"] + ADA_OVERRIDE - trip.ada_auto
    assert (f"ada: {format_points(total)}/{format_points(ada['max_score'])} points in the gradebook, with the TA's "
            f"changes (course autograde alone: {format_points(ada['score'])})") in out["log"], out["log"]
    again = results_json(trip.course, "ada")
    assert again["score"] == trip.results["ada"]["score"]
    with Gradebook(f"sqlite:///{trip.course / 'gradebook.db'}") as gb:
        scores = {p["problem"]: p["score"] for p in again["extra_data"]["problems"]}
        assert gb.find_grade("test_layer_norm", STEM, A, "ada").auto_score == scores["layer_norm"]
        assert gb.find_grade("test_layer_norm", STEM, A, "kat").manual_score == OVERRIDE
    nb = json.loads((trip.layout.autograded("ada", A) / NB).read_text())
    grade_outputs = [o for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                     for o in c.get("outputs", [])]
    assert grade_outputs and not any(o.get("ename") == "AssertionError" for o in grade_outputs), \
        "the grade cells hold our report, not the visible asserts' run"


def test_generate_feedback_writes_our_page_and_no_instructor_file(trip):
    """Does `nbgrader generate_feedback --force` produce our page (with the comment), not an HTML copy of
    the notebook, and leave results.json out of feedback/?"""
    instructor = trip.home("instructor")
    run([str(BIN / "nbgrader"), "generate_feedback", A, "--force"], trip.course, instructor)
    page = (trip.layout.feedback("kat", A) / f"{STEM}.html").read_text()
    assert COMMENT in text_of(page) and "From your instructor" in page
    assert not (trip.layout.feedback("kat", A) / "results.json").exists()


def test_the_autograde_button_refuses_in_one_line_when_course_yml_is_broken(trip):
    """With course.yml broken after formgrader started, does the button fail naming the key, leaving the
    grades as they were?"""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    cfg = nbgrader_config(trip.course)
    path = trip.course / "course.yml"
    good = path.read_text()
    path.write_text(good + "colour: blue\n")
    here = os.getcwd()
    try:
        out = NbGraderAPI(CourseDirectory(config=cfg), config=cfg).autograde(A, "kat")
    finally:
        os.chdir(here)
        path.write_text(good)
    assert not out["success"]
    assert "course.yml: colour: unknown key" in out["log"] + out.get("error", "")


def test_changing_points_after_submissions(trip):
    """With silu at 8 instead of 5 after students submitted: does `course release` rewrite the notebooks
    and the gradebook's max scores (keeping the grades), and `course autograde --force` re-score?"""
    from nbgrader.api import Gradebook

    instructor = trip.home("instructor")
    path = trip.course / "course.yml"
    data = yaml.safe_load(path.read_text())
    assert data["assignments"][0]["problems"]["silu"]["points"] == 5
    data["assignments"][0]["problems"]["silu"]["points"] = 8
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    out = course_cmd(trip.course, instructor, "release", A).stdout
    assert "grade cell test_silu: 5 -> 8 points" in out
    assert "gradebook: grade cell transformer-block/transformer-block/test_silu: max score 5 -> 8; the " in out
    assert "graded before keep their old scores until `course autograde transformer-block`" in out
    released = json.loads((trip.layout.release(A) / NB).read_text())
    assert any(c["metadata"].get("nbgrader", {}).get("points") == 8 for c in released["cells"])
    assert "| `silu` | 8 |" in "".join(released["cells"][0]["source"])
    with Gradebook(f"sqlite:///{trip.course / 'gradebook.db'}") as gb:
        assert gb.find_assignment(A).max_score == 103.0
        assert gb.find_grade("test_layer_norm", STEM, A, "kat").manual_score == OVERRIDE
    course_cmd(trip.course, instructor, "autograde", A, "--force")
    assert results_json(trip.course, "ada")["max_score"] == 103.0
    with Gradebook(f"sqlite:///{trip.course / 'gradebook.db'}") as gb:
        assert gb.find_grade("test_silu", STEM, A, "ada").auto_score == 8.0
