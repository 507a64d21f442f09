"""The student's feedback page: one self-contained HTML file per submission.

Like nbgrader's generate_feedback, the page is written as
`feedback/<student>/<assignment>/<notebook-stem>.html`. It shows only what a student may see:
scores, each test's student-safe `output`, recognised misconceptions with their hints, and the
notes from running the notebook. It never shows a test's instructor `detail`, the hidden-input
seed or anything else kept for instructors in results.json's `extra_data`. Every value is
escaped by Jinja2's autoescape, so text that came from student code cannot become markup.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jinja2

from autograder.config import Assignment
from autograder.grading.results import SubmissionResult

from .bounds import FEEDBACK_MAX_BYTES, bound_result, shrunk
from .results_json import (atomic_write_text, format_points, misconception_name, numbered_tests,
                           ordered_problems, reported_score, short_name, student_error)

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Misconception:
    id: str
    name: str
    hint: str


@dataclass(frozen=True)
class CheckRow:
    number: str
    name: str
    description: str                  # the check's question (its docstring)
    passed: bool
    score: str
    max_score: str
    output: str
    misconceptions: tuple[str, ...]   # names


@dataclass(frozen=True)
class ProblemView:
    number: int
    name: str
    score: str
    max_score: str
    full_marks: bool
    tests: tuple[CheckRow, ...]
    misconceptions: tuple[Misconception, ...]


@dataclass(frozen=True)
class FeedbackView:
    """Everything the template may show, and nothing else."""
    student: str
    assignment: str
    crashed: bool
    error: str
    score: str
    max_score: str
    passed: int
    total: int
    notes: tuple[str, ...]
    problems: tuple[ProblemView, ...]


def feedback_view(result: SubmissionResult, assignment: Assignment | None = None) -> FeedbackView:
    """The student-safe view of `result` (no detail, no seed, no roster flag)."""
    points = dict(result.problem_points)
    if assignment is not None:
        for p in assignment.problems:
            points.setdefault(p.name, p.points)
    numbers = dict((id(t), n) for n, t in numbered_tests(result))
    problems = []
    for index, name in enumerate(ordered_problems(result), start=1):
        tests = [t for t in result.tests if t.problem == name]
        got = sum(t.score for t in tests)
        max_score = points.get(name, sum(t.max_score for t in tests))
        found: dict[str, Misconception] = {}
        rows = []
        for t in tests:
            hints = t.hints + ("",) * (len(t.diagnoses) - len(t.hints))
            for d, hint in zip(t.diagnoses, hints):
                found.setdefault(d, Misconception(d, misconception_name(d), hint))
            rows.append(CheckRow(number=numbers[id(t)], name=short_name(t), description=t.description,
                                 passed=t.passed,
                                score=format_points(t.score), max_score=format_points(t.max_score),
                                output=t.output, misconceptions=tuple(misconception_name(d) for d in t.diagnoses)))
        problems.append(ProblemView(number=index, name=name, score=format_points(got),
                                    max_score=format_points(max_score),
                                    full_marks=bool(tests) and all(t.passed for t in tests),
                                    tests=tuple(rows), misconceptions=tuple(found.values())))
    max_total = result.max_score or sum(points.get(p, 0.0) for p in ordered_problems(result))
    return FeedbackView(
        student=result.student,
        assignment=result.assignment,
        crashed=result.state == "crashed",
        error=student_error(result) if result.state == "crashed" else "",
        score=format_points(reported_score(result)),
        max_score=format_points(max_total),
        passed=sum(t.passed for t in result.tests),
        total=len(result.tests),
        notes=result.notes,
        problems=tuple(problems),
    )


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def render_feedback(result: SubmissionResult, assignment: Assignment | None = None) -> str:
    """The feedback page for `result` as one HTML document (inline CSS, no external assets), at most
    FEEDBACK_MAX_BYTES (messages are cut shorter if needed)."""
    template = _environment().get_template("feedback.html")
    page = template.render(view=feedback_view(bound_result(result), assignment))
    if len(page.encode("utf-8")) > FEEDBACK_MAX_BYTES:
        page = template.render(view=feedback_view(shrunk(bound_result(result)), assignment))
    return page


def feedback_filename(result: SubmissionResult) -> str:
    """`<notebook-stem>.html` for the first graded notebook, else `feedback.html`."""
    stem = Path(result.files[0]).stem if result.files else ""
    return f"{stem or 'feedback'}.html"


def write_feedback(result: SubmissionResult, assignment: Assignment | None, folder: str | Path) -> Path:
    """Write the page to `<folder>/<notebook-stem>.html` atomically; returns its path.

    `folder` is the submission's own folder, e.g. feedback/<student>/<assignment>.
    """
    return atomic_write_text(Path(folder) / feedback_filename(result), render_feedback(result, assignment))
