"""The student's feedback page: one self-contained HTML file per submission.

Like nbgrader's generate_feedback, the page is written as
`feedback/<student>/<assignment>/<notebook-stem>.html`. It shows only what a student may see:
scores, each test's student-safe `output`, recognised misconceptions with their hints (a probe's
guess of the stage where the output first goes wrong is headed as such, not as recognised), and the
notes from running the notebook. It never shows a test's instructor `detail`, the hidden-input
seed or anything else kept for instructors in results.json's `extra_data`. Every value is
escaped by Jinja2's autoescape, so text that came from student code cannot become markup.

When the gradebook holds a person's changes (a TA's override or extra credit in formgrader, a
comment on a cell), the page shows them: the total and each problem's score are the gradebook's,
the autograder's own score beside an overridden one, and the comments under "From your
instructor" (see `reporting.gradebook.Review`). Under the heading, one short line gives the course's
name, when the submission was made, this student's due date (their extension's, if any) and when the
submission was graded, as results.json holds them; the page holds no time of its own making, so it
reads the same however often it is written again.

The page is made for reading on a phone as well as a desk: what lost points comes first (a
problem's failed checks, then checks that could not be graded, then advice worth no points, then
advice that had nothing to look at because the function gave no result, shown as not run);
passed checks are folded in `<details>` (no script needed), advice that found nothing to say
beside them but never counted as a passed check (the header and the overview count checks worth
points); the cases of a parametrised check are shown as one check ("3 of 6 cases failed"); checks
that failed with one identical message, and notebook cells that raised the same error, are grouped
(see `digest`).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import jinja2
from markupsafe import Markup, escape

from autograder.config import Assignment
from autograder.grading.results import SubmissionResult
from autograder.notebooks import RefusedFile, open_regular
from autograder.text import format_points, format_time, plural, shown_name

from .bounds import FEEDBACK_MAX_BYTES, bound_result, shrunk
from .digest import (
    Check,
    FailureGroup,
    ProblemDigest,
    case_state,
    digest_key,
    group_notes,
    is_advice,
    problem_digest,
    problem_tests,
)
from .results_json import (
    atomic_write_text,
    diagnosis_heading,
    misconception_name,
    reported_score,
    student_error,
)
from .review import Review

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Misconception:
    id: str
    name: str
    hint: str
    heading: str          # "Recognised misconception: <name>"; a probe's guess: "Where it first goes wrong: <name>"


@dataclass(frozen=True)
class CaseView:
    label: str            # the case's parameters ("" for a plain check)
    state: str            # passed, failed, not_graded, advice, not_run
    message: str


@dataclass(frozen=True)
class CheckView:
    name: str             # the grader function, e.g. test_layer_norm_matches_reference
    description: str      # its one-line question
    state: str            # failed, not_graded, advice, not_run or passed
    numbers: str          # "1.7", or "1.1–1.6" for a parametrised check
    score: str
    max_score: str
    parametrised: bool
    total_cases: int
    open_cases: tuple[CaseView, ...]      # cases that did not pass, in order
    passed_cases: tuple[str, ...]         # labels of the cases that passed
    message: str          # the one message every open case gave, else ""
    misconceptions: tuple[str, ...]       # names

    @property
    def messages(self) -> tuple[str, ...]:
        """The distinct messages of the open cases."""
        return tuple(dict.fromkeys(c.message for c in self.open_cases if c.message))

    @property
    def failed_count(self) -> int:
        return sum(c.state == "failed" for c in self.open_cases)

    def more_cases(self, shown: int) -> str:
        """The summary of the open cases folded after the first `shown`, by what became of them:
        "4 more cases not graded", "1 more case that failed", "3 more cases: 2 failed, 1 not graded"."""
        folded = self.open_cases[shown:]
        counts: dict[str, int] = {}
        for case in folded:
            counts[case.state] = counts.get(case.state, 0) + 1
        more = plural(len(folded), "more case")
        if len(counts) == 1:
            return f"{more} {_CASES_THAT[next(iter(counts))]}"
        return f"{more}: " + ", ".join(f"{n} {_CASE_WORD[state]}" for state, n in counts.items())


_CASE_WORD = {"failed": "failed", "not_graded": "not graded", "not_run": "not run", "advice": "with advice"}
_CASES_THAT = {**_CASE_WORD, "failed": "that failed"}     # after "N more cases"


@dataclass(frozen=True)
class FailureView:
    """A failed check, or several failed checks of one problem that gave the very same message."""
    checks: tuple[CheckView, ...]
    message: str          # shared message of a group ("" for a single check)
    score: str
    max_score: str
    misconceptions: tuple[str, ...]
    partly_graded: bool = False   # checks not graded of which some earned points in the cases that passed

    @property
    def same_error(self) -> bool:
        return len(self.checks) > 1

    @property
    def every_case(self) -> bool:
        """Did the shared error stop every case of every check in the group (none of them passed in part)?"""
        return all(len(c.open_cases) == c.total_cases for c in self.checks)


@dataclass(frozen=True)
class ProblemView:
    number: int
    name: str
    score: str
    max_score: str
    auto_score: str       # the autograder's score when a person changed it, else ""
    full_marks: bool
    needs_reading: bool   # lost points, not graded, advice or no checks: gets its own section
    has_checks: bool
    failed: int           # failed checks (a parametrised check with any failed case is one)
    not_graded: int       # checks that could not be graded (none of their cases failed)
    graded: int           # checks worth points
    graded_passed: int    # of those, the checks passed
    misconceptions: tuple[Misconception, ...]
    failures: tuple[FailureView, ...]
    skipped: tuple[FailureView, ...]      # checks that could not be graded
    advice: tuple[CheckView, ...]
    passed: tuple[CheckView, ...]         # checks worth points that passed: what "N checks passed" counts
    not_run: tuple[CheckView, ...] = ()   # advice with nothing to look at (the function gave no result)
    quiet: tuple[CheckView, ...] = ()     # advice (no points) that found nothing to say: never a passed check
    partly_graded: int = 0    # of the checks not graded, those that earned points in the cases that passed

    @property
    def passed_cases(self) -> int:
        return sum(c.total_cases for c in self.passed)


@dataclass(frozen=True)
class NoteView:
    text: str
    repeats: tuple[str, ...]
    consequences: tuple[str, ...]
    undefined: str


@dataclass(frozen=True)
class InstructorNote:
    """A change or comment from the gradebook, for the "From your instructor" box."""
    problem: str          # "" for the notebook as a whole
    kind: str             # "score" or "comment"
    text: str


@dataclass(frozen=True)
class FeedbackView:
    """Everything the template may show, and nothing else."""
    student: str
    assignment: str
    crashed: bool
    error: str
    score: str
    max_score: str
    raw_score: str        # before the late penalty ("" when there is none)
    late_penalty: str     # points, as the gradebook holds them (fixed when the submission was autograded)
    passed: int           # checks (grader functions, all their cases) passed, of
    total: int            # the checks worth points; the page counts checks throughout, as its cards do
    not_graded: int       # checks that could not be graded (in all their cases, or in some: partly_graded)
    notes: tuple[NoteView, ...]
    problems: tuple[ProblemView, ...]
    common_failure: str   # the one message of every check when all of them failed alike, else ""
    instructor: tuple[InstructorNote, ...] = ()
    due: str = ""         # the student's due date (with their extension), for reading: "2026-12-14 23:59:00 UTC"
    extension: str = ""   # "2 days"
    course: str = ""      # the course's name, when the page is written for a course
    submitted: str = ""   # when the submission was made (its timestamp.txt), for reading
    graded: str = ""      # when it was graded (results.json's graded_at), for reading
    auto_score: str = ""      # the autograder's score (before any penalty) when a person changed scores, else ""
    reviewed_score: str = ""  # that score with the person's changes (before any penalty), when auto_score is set
    late_share: str = ""      # the late penalty as a share of the autograder's score ("20%"), when auto_score is set
    partly_graded: int = 0    # of the checks not graded, those that earned points in the cases that passed

    @property
    def to_read(self) -> tuple[ProblemView, ...]:
        if self.common_failure:
            return ()
        return tuple(p for p in self.problems if p.needs_reading)

    @property
    def full_marks(self) -> tuple[ProblemView, ...]:
        return tuple(p for p in self.problems if not p.needs_reading)


def _numbers(check: Check) -> str:
    first, last = check.cases[0].number, check.cases[-1].number
    return first if first == last else f"{first}\u2013{last.rsplit('.', 1)[-1]}"


def _check_view(check: Check) -> CheckView:
    open_cases = tuple(CaseView(c.label, c.state, c.test.output.strip())
                       for c in check.cases if c.state != "passed")
    messages = {c.message for c in open_cases}
    return CheckView(
        name=check.function, description=check.description, state=check.kind, numbers=_numbers(check),
        score=format_points(check.score), max_score=format_points(check.max_score),
        parametrised=check.parametrised, total_cases=len(check.cases), open_cases=open_cases,
        passed_cases=tuple(c.label for c in check.cases if c.state == "passed"),
        message=messages.pop() if len(messages) == 1 else "",
        misconceptions=tuple(misconception_name(d) for d in check.diagnoses))


def _failure_view(group: FailureGroup) -> FailureView:
    checks = tuple(_check_view(c) for c in group.checks)
    names: dict[str, None] = {}
    for c in checks:
        names.update(dict.fromkeys(c.misconceptions))
    return FailureView(checks=checks, message=group.message,
                       score=format_points(sum(c.score for c in group.checks)),
                       max_score=format_points(sum(c.max_score for c in group.checks)),
                       misconceptions=tuple(names), partly_graded=group.partly_graded)


def _problem_view(p: ProblemDigest) -> ProblemView:
    return ProblemView(
        number=p.number, name=p.name, score=format_points(p.score), max_score=format_points(p.max_score),
        auto_score="",
        full_marks=p.full_marks, needs_reading=p.needs_reading, has_checks=bool(p.checks),
        failed=len(p.of_kind("failed")), not_graded=len(p.of_kind("not_graded")), graded=p.graded_checks,
        graded_passed=p.graded_checks - len(p.of_kind("failed")) - len(p.of_kind("not_graded")),
        misconceptions=tuple(Misconception(d, misconception_name(d), hint, diagnosis_heading(d, p.stages))
                             for d, hint in p.diagnoses),
        failures=tuple(_failure_view(g) for g in p.failures),
        skipped=tuple(_failure_view(g) for g in p.not_graded),
        advice=tuple(_check_view(c) for c in p.advice),
        passed=tuple(_check_view(c) for c in p.of_kind("passed") if c.max_score > 0),
        not_run=tuple(_check_view(c) for c in p.not_run),
        quiet=tuple(_check_view(c) for c in p.of_kind("passed") if c.max_score == 0),
        partly_graded=p.partly_graded)


_VIEWS: dict[tuple[object, ...], ProblemView] = {}   # digest_key -> the problem's view
VIEWS_KEPT = 128                                      # views kept, least recently used out


def _problem_views(result: SubmissionResult) -> tuple[ProblemView, ...]:
    """`_problem_view` of each problem's digest, a view kept for the next student whose problem went
    the same way (digest_key: the same tests but for their detail and duration), most often full marks."""
    views = []
    for tests in problem_tests(result):
        key = digest_key(tests)
        view = _VIEWS.pop(key, None)
        if view is None:
            view = _problem_view(problem_digest(tests))
            while len(_VIEWS) >= VIEWS_KEPT:
                del _VIEWS[next(iter(_VIEWS))]
        _VIEWS[key] = view
        views.append(view)
    return tuple(views)


def _reviewed(problems: tuple[ProblemView, ...], review: Review) -> tuple[ProblemView, ...]:
    """The problems with a person's scores; one whose checks all passed but whose score a person
    lowered below its points gets a section of its own rather than a line under "Full marks"."""
    out = []
    for p in problems:
        r = review.problem(p.name)
        if r is not None and r.overridden:
            p = replace(p, score=format_points(r.score), auto_score=format_points(r.auto_score or 0.0),
                        needs_reading=p.needs_reading or r.score < r.max_score)
        out.append(p)
    return tuple(out)


def _instructor_notes(review: Review) -> tuple[InstructorNote, ...]:
    notes = []
    for r in review.problems:
        if not r.overridden:
            continue
        given = f"the autograder gave {format_points(r.auto_score or 0.0)}."
        if r.manual_score is not None and r.manual_score != r.auto_score:
            extra = f" (including {format_points(r.extra_credit)} extra credit)" if r.extra_credit else ""
            text = (f"Your instructor set the score to {format_points(r.score)} of {format_points(r.max_score)} "
                    f"points{extra}; {given}")
        else:                       # extra credit alone
            text = (f"Your instructor added {format_points(r.extra_credit)} extra credit, for {format_points(r.score)} "
                    f"of {format_points(r.max_score)} points; {given}")
        notes.append(InstructorNote(r.problem, "score", text))
    notes += [InstructorNote(problem, "comment", text) for problem, text in review.comments]
    return tuple(notes)


def _readable_time(iso: str) -> str:
    """results.json's time for reading, to the second (`text.format_time`): a submission 30 seconds after
    the due date must not show the due date's minute."""
    try:
        return format_time(dt.datetime.fromisoformat(iso))
    except (ValueError, OverflowError):     # out of range in UTC: a results.json from before stamps were read in UTC
        return iso


def feedback_view(result: SubmissionResult, assignment: Assignment | None = None,
                  review: Review | None = None, course_name: str = "") -> FeedbackView:
    """The student-safe view of `result` (no detail, no seed, no roster flag), with the gradebook's
    overrides and comments when `review` is given."""
    if assignment is not None:
        points = dict(result.problem_points)
        missing = tuple((p.name, p.points) for p in assignment.problems if p.name not in points)
        if missing:
            result = replace(result, problem_points=result.problem_points + missing)
    problems = _problem_views(result)
    graded = [t for t in result.tests if not is_advice(t)]
    messages = {t.output.strip() for t in graded}
    every_one_failed = len(graded) > 1 and all(case_state(t) == "failed" for t in graded)
    common = messages.pop() if every_one_failed and len(messages) == 1 else ""
    penalty = result.late_penalty
    score, raw = reported_score(result), result.raw_score
    instructor: tuple[InstructorNote, ...] = ()
    auto_score = late_share = ""
    if review is not None and review.changed:
        problems = _reviewed(problems, review)
        instructor = _instructor_notes(review)
        raw = review.raw_score
        if review.late_penalty is not None:      # the gradebook's penalty: what nbgrader export takes off
            penalty = review.late_penalty
        score = review.final_score(result.late_penalty)
        if review.scores_changed and result.state != "crashed":
            auto_score = format_points(result.raw_score)
            if penalty > 0 and result.raw_score > 0 and penalty == result.late_penalty:
                late_share = f"{format_points(100 * penalty / result.raw_score)}%"
    late = result.state != "crashed" and penalty > 0
    return FeedbackView(
        student=result.student,
        assignment=result.assignment,
        crashed=result.state == "crashed",
        error=without_colours(student_error(result)) if result.state == "crashed" else "",
        score=format_points(score),
        max_score=format_points(result.max_score or sum(float(p.max_score) for p in problems)),
        raw_score=format_points(raw) if late else "",
        late_penalty=format_points(penalty) if late else "",
        passed=sum(p.graded_passed for p in problems),
        total=sum(p.graded for p in problems),
        not_graded=sum(p.not_graded for p in problems),
        partly_graded=sum(p.partly_graded for p in problems),
        notes=tuple(NoteView(g.first, g.repeats, g.consequences, g.undefined)
                    for g in group_notes(result.notes)),
        problems=problems,
        common_failure=common,
        instructor=instructor,
        due=_readable_time(result.due) if result.due else "",
        extension=result.extension,
        course=course_name,
        submitted=_readable_time(result.submitted_at) if result.submitted_at else "",
        graded=_readable_time(result.graded_at) if result.graded_at else "",
        auto_score=auto_score,
        reviewed_score=format_points(raw) if auto_score else "",
        late_share=late_share,
    )


# --------------------------------------------------------------------------- text for reading

_CODE = re.compile(r"`([^`\n]+)`")
# A terminal's colour or style (SGR: ESC [ numbers m), raw or as `bounds.clip` writes ESC out (`\x1b`):
# what a student printed in colour reads as the plain text on the page. Other control characters
# stay written out.
_SGR = re.compile(r"(?:\x1b|\\x1b)\[[0-9;:]*m")


def without_colours(text: str) -> str:
    """`text` less the terminal colour and style sequences in it, raw or written out: ESC [31m RED
    ESC [0m reads RED."""
    return _SGR.sub("", text) if "x1b[" in text or "\x1b[" in text else text
_LONG_TOKEN = re.compile(r"[^\s<>]{16,}")    # long enough to need a break on a phone
# The places just after a joint: `_` before anything but a space or an entity, `.` or `,` before a
# letter. Matched empty, so that <wbr> is put in by a plain replacement (no template to expand).
_AFTER_JOINT = re.compile(r"(?:(?<=_)(?=[^\s&])|(?<=[.,])(?=[A-Za-z_]))")


# Right-to-left letters (Hebrew, Arabic, Syriac, Thaana, N'Ko, ... and their presentation forms).
_RTL = "\u0590-\u08ff\ufb1d-\ufdff\ufe70-\ufefe\U00010800-\U00010fff\U0001e800-\U0001efff"
# A run of words that start with such a letter, the spaces between them included: isolated in <bdi>, it
# reads right to left within itself without moving the English words around it (a message "raised
# ValueError: <Arabic> (at line 3)" otherwise shows its parts out of order).
_RTL_RUN = re.compile(rf"[{_RTL}][^\s<>&`]*(?:[ \t]+[{_RTL}][^\s<>&`]*)*")


def _isolate_rtl(escaped: str) -> str:
    """Escaped text with each run of right-to-left words put in <bdi>."""
    return _RTL_RUN.sub(lambda m: f"<bdi>{m.group(0)}</bdi>", escaped) if _RTL_RUN.search(escaped) else escaped


def _wrap_joints(escaped: str) -> str:
    """Allow a line break after the joints (`_`, and `.` or `,` before a letter) of each long token of escaped text."""
    return _LONG_TOKEN.sub(lambda m: _AFTER_JOINT.sub("<wbr>", m.group(0)), escaped)


def breakable(text: object) -> Markup:
    """Escape a name (`multi_head_attention`, a test id) and let it wrap only at its joints."""
    return Markup(_AFTER_JOINT.sub("<wbr>", str(escape(text))))


def rich(text: object) -> Markup:
    """Escape `text` (its terminal colours dropped), show `backticked` spans as code, isolate
    right-to-left words (<bdi>) and let long identifiers wrap at their joints."""
    escaped = _isolate_rtl(str(escape(without_colours(str(text)))))
    parts, last = [], 0
    for m in _CODE.finditer(escaped):
        parts.append(_wrap_joints(escaped[last:m.start()]))
        parts.append("<code>" + _wrap_joints(m.group(1)) + "</code>")
        last = m.end()
    parts.append(_wrap_joints(escaped[last:]))
    return Markup("".join(parts))


_KEPT: dict[tuple[Hashable, ...], Markup] = {}    # (macro's name, its arguments) -> its markup
KEPT_MARKUP = 256                                  # sections kept, least recently used out
_KEPT_FROM: list[jinja2.Template | None] = [None]  # the template they were made by


def kept(macro: Callable[..., Markup], *args: Hashable) -> Markup:
    """`macro(*args)`, kept for the next page: a macro of the page's template whose markup depends on
    its arguments only (the views, frozen and compared field by field), like a problem's section,
    is the same for every student whose problem went the same way (most often: full marks)."""
    key = (getattr(macro, "name", macro), *args)
    out = _KEPT.pop(key, None)
    if out is None:
        out = macro(*args)
        while len(_KEPT) >= KEPT_MARKUP:
            del _KEPT[next(iter(_KEPT))]
    _KEPT[key] = out
    return out


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    """Jinja's own cache of compiled templates (a folder of this user's, mode 0700, in the temp
    folder; Jinja refuses one another user could write): a command then loads the page's compiled
    template instead of compiling it again (tens of milliseconds of a one-student run). None when
    no such folder can be had: the template is then compiled as before."""
    try:
        return jinja2.FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        bytecode_cache=_bytecode_cache(),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(breakable=breakable, rich=rich)
    env.globals.update(plural=plural, kept=kept)
    return env


def prepare_page() -> None:
    """Load and compile the page's template now (it is kept), so the first page renders at once."""
    _environment().get_template("feedback.html")


def render_feedback(result: SubmissionResult, assignment: Assignment | None = None,
                    review: Review | None = None, course_name: str = "") -> str:
    """The feedback page for `result` as one HTML document (inline CSS, no external assets), at most
    FEEDBACK_MAX_BYTES (messages are cut shorter if needed); `course_name` heads it when given."""
    template = _environment().get_template("feedback.html")
    if _KEPT_FROM[0] is not template:       # the template was loaded again (changed): its markup is new
        _KEPT.clear()
        _KEPT_FROM[0] = template
    page = template.render(view=feedback_view(bound_result(result), assignment, review, course_name))
    if len(page.encode("utf-8")) > FEEDBACK_MAX_BYTES:
        page = template.render(view=feedback_view(shrunk(bound_result(result)), assignment, review, course_name))
    return page


# In a page written with a person's review (overrides, extra credit or comments) and only there: the
# heading of its "From your instructor" section (templates/feedback.html).
REVIEW_MARKER = b'id="review-title"'


def shows_review(page: Path) -> bool:
    """Whether the feedback page `page` was written with a person's review (False when it is missing
    or unreadable): a page that shows one is written again once the review is taken back."""
    try:
        return REVIEW_MARKER in page.read_bytes()
    except OSError:
        return False


def feedback_filename(result: SubmissionResult) -> str:
    """`<notebook-stem>.html` for the first graded notebook, or else the first of the assignment's
    notebooks that was there but could not be read (a folder or a link in its place, an empty file),
    else `feedback.html`. nbgrader's `fetch_feedback` finds a page by the stem of each `*.ipynb` in the
    student's own copy of the submission, so a page named so can reach the student; `feedback.html`
    (no notebook, or a whole folder refused) is named after none. A stem holding control characters
    is written out (shown_name), as results.json keeps it, and one that would make too long a file
    name so (255 bytes) gives `feedback.html`."""
    named = result.files or result.unreadable_notebooks
    stem = shown_name(Path(named[0]).stem) if named else ""
    if len(stem.encode("utf-8", "surrogateescape")) > 250:
        stem = ""
    return f"{stem or 'feedback'}.html"


PAGE_HEAD = b"<!DOCTYPE html>"            # how our page begins (templates/feedback.html)
PAGE_TITLE = b"<title>Feedback: "         # and its title, within PAGE_SNIFF_BYTES
PAGE_SNIFF_BYTES = 4096


def is_feedback_page(path: Path) -> bool:
    """Whether `path` is a page this engine wrote (a regular `.html` file, not a link, that begins as
    templates/feedback.html does, its title included), rather than a file someone else put there."""
    if not path.name.lower().endswith(".html"):
        return False
    try:
        fd = open_regular(path)
    except RefusedFile:
        return False
    try:
        head = os.read(fd, PAGE_SNIFF_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)
    return head.lstrip().startswith(PAGE_HEAD) and PAGE_TITLE in head


def remove_stale_pages(folder: str | Path, result: SubmissionResult) -> list[str]:
    """Remove from `folder` (feedback/<student>/<assignment>/) our pages that `result`'s submission would
    not have: named after a notebook it no longer holds (an earlier submission's), or `feedback.html` once
    a notebook names the page. Kept: its page (`feedback_filename`), a page named after each of its
    notebooks (`nbgrader generate_feedback` writes one per notebook), and every file that is not our page
    (`is_feedback_page`: a TA's notes, the bookkeeping files). Returns the names removed."""
    folder = Path(folder)
    keep = {feedback_filename(result)} | {f"{shown_name(Path(f).stem)}.html"
                                          for f in (*result.files, *result.unreadable_notebooks)}
    removed = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        if name not in keep and is_feedback_page(folder / name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)
                removed.append(name)
    return removed


def write_feedback(result: SubmissionResult, assignment: Assignment | None, folder: str | Path,
                   review: Review | None = None, course_name: str = "") -> Path:
    """Write the page to `<folder>/<notebook-stem>.html` atomically; returns its path.

    `folder` is the submission's own folder, e.g. feedback/<student>/<assignment>.
    """
    return atomic_write_text(Path(folder) / feedback_filename(result),
                             render_feedback(result, assignment, review, course_name))
