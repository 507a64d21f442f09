"""The class at a glance, for the terminal: one fixed-width row per student.

    student  layer_norm  split_heads  silu  total    state    flags                   diagnoses
    -------  ----------  -----------  ----  -------  -------  ----------------------  ----------------------------
    ada              15           10     5  30/30    graded
    bob             7.5            0     5  12.5/30  graded   not on roster, 2 notes  layer_norm.unbiased_variance
    cy                -            -     -  0/30     crashed  crashed

    3 students, 2 graded: mean 21.25, median 21.25 of 30 (crashed excluded). Feedback pages: feedback/<student>/hw/

A check whose grader code failed (SubmissionResult.grader_errors) flags its rows "grader error",
and each distinct grader error gets one closing GRADER ERROR line naming the check, the error's
reason and how many submissions it cost points.

When the gradebook holds a person's change to a student's scores (a TA's override or extra credit in
formgrader), the row shows what the student gets, as the feedback page and `nbgrader export` show it:
the changed problems' scores and the total are the gradebook's, marked *, and the flags give the
autograder's own total ("TA changed, autograder 25"); a line under the table says what * means.

    ada            15*          10     5  30/30*   graded   TA changed, autograder 25

The class mean and median leave out crashed submissions (the autograder has no score for them), except
one a TA scored by hand in the gradebook: that student has a grade, the one their feedback page and
`nbgrader export` give, and it counts; the closing line names such students ("including crashed cy,
scored by a TA").

A submission unchanged since the last run (not graded again) is flagged "unchanged", and the closing
line counts those apart from the ones graded now. A student whose results.json or feedback page could
not be written (a full disk, a folder not writable) is flagged "files not written", and the closing
line says how many were not saved.

When the problem names would make the table (diagnoses aside) wider than WIDE characters, the
problem columns are headed P1, P2, ... and a legend line names them.
"""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from autograder.config import Assignment
from autograder.grading.results import SubmissionResult, SubmissionState, grader_error_parts
from autograder.sandbox.isolation import OPTIONAL, REQUIRED
from autograder.text import display_width, first_ids, format_points, format_time, pad, plural, sorted_ids, truncate

from .results_json import ordered_problems, reported_score
from .review import Review

WIDE = 120
GAP = "  "
CHANGED = "*"               # marks a score a person changed in the gradebook
CHANGED_LEGEND = (f"{CHANGED} a TA's change in the gradebook (an override or extra credit in formgrader): what "
                  f"the student gets, as on their feedback page and in `nbgrader export`; flags give the "
                  f"autograder's total.")
MAX_GRADER_ERRORS = 10      # GRADER ERROR lines at the most (a reason may differ from student to student)
# a reason that starts by naming the file where the error arose outside the graders (plugin.internal_reason)
_AROSE_IN = re.compile(r"^(?P<file>\S+\.py), line \d+: ")


@dataclass(frozen=True)
class StudentRow:
    """What a batch keeps of one student's result once it is written: enough for this summary and
    the batch's callers (a few hundred bytes; the full result, tests and messages, is in results.json)."""
    student: str
    state: SubmissionState
    score: float                    # the score given (test points less the late penalty)
    max_score: float
    reported_score: float           # what the student is told: the score, or 0 when grading crashed
    problems: tuple[tuple[str, float | None], ...]   # (problem, points earned or None without tests)
    on_roster: bool = True
    late_penalty: float = 0.0
    notes: int = 0
    diagnoses: tuple[str, ...] = ()
    isolation: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    grader_failed: bool = False
    grader_errors: tuple[str, ...] = ()   # "<check>: <error>" for checks whose grader code failed
    timestamp_problem: str = ""     # why timestamp.txt was not used: not judged late, whatever its time
    stamped: bool = True            # whether the submission had a timestamp that was read
    notebook_unread: bool = False   # a notebook of it was there but could not be read as one (a 0 to look at)
    unchanged: bool = False         # not graded again: the same submission and graders as the last run
    # With a person's change to a score in the gradebook (`with_review`): each changed problem's score
    # as the gradebook holds it, and what the student gets in all (late penalty taken); else () and None.
    reviewed: tuple[tuple[str, float], ...] = ()
    final_score: float | None = None
    unsaved: bool = False           # its results.json or feedback page could not be written (output errors)

    @classmethod
    def of(cls, result: SubmissionResult) -> StudentRow:
        return cls(
            student=result.student, state=result.state, score=result.score, max_score=result.max_score,
            reported_score=reported_score(result),
            problems=tuple((p, result.problem_score(p) if result.has_tests(p) else None)
                           for p in ordered_problems(result)),
            on_roster=result.on_roster, late_penalty=result.late_penalty, notes=len(result.notes),
            diagnoses=result.diagnoses, isolation=result.isolation, files=result.files,
            grader_failed=result.grader_failed, grader_errors=result.grader_errors,
            timestamp_problem=result.timestamp_problem, stamped=bool(result.submitted_at),
            notebook_unread=bool(result.unreadable_notebooks))

    @property
    def crashed(self) -> bool:
        return self.state == "crashed"

    @property
    def total(self) -> float:
        """What the student gets: the gradebook's total when a person changed a score, else the reported score."""
        return self.reported_score if self.final_score is None else self.final_score

    def with_review(self, review: Review | None) -> StudentRow:
        """This row with the gradebook's `review` of the submission (as committed): the scores a person
        changed and the student's final score, as the feedback page computes them (Review.final_score)."""
        if review is None or not review.scores_changed:
            return replace(self, reviewed=(), final_score=None)
        return replace(self, reviewed=tuple((p.problem, p.score) for p in review.problems if p.overridden),
                       final_score=review.final_score(self.late_penalty))


def _flags(row: StudentRow) -> str:
    flags = []
    if row.final_score is not None:
        flags.append(f"TA changed, autograder {format_points(row.reported_score)}")
    if row.unchanged:
        flags.append("unchanged")
    if not row.on_roster:
        flags.append("not on roster")
    if row.crashed:
        flags.append("crashed")
    if row.grader_errors:
        flags.append("grader error")
    if row.late_penalty:
        flags.append(f"late -{format_points(row.late_penalty)}")
    if row.timestamp_problem:
        flags.append("timestamp unread")
    if row.notebook_unread:
        flags.append("notebook unreadable")
    if row.notes:
        flags.append(f"{row.notes} note{'s' if row.notes != 1 else ''}")
    if row.unsaved:
        flags.append("files not written")
    return ", ".join(flags)


def _problem_score(row: StudentRow, problem: str) -> str:
    changed = dict(row.reviewed).get(problem)
    if changed is not None:
        return f"{format_points(changed)}{CHANGED}"
    if row.crashed:
        return "-"
    earned = dict(row.problems).get(problem)
    return "-" if earned is None else format_points(earned)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(display_width(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        out = [pad(c, w, right=i in right) for i, (c, w) in enumerate(zip(cells, widths))]
        return GAP.join(out).rstrip()

    return [line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)]


def format_summary(results: Iterable[SubmissionResult | StudentRow], assignment: Assignment, *,
                   feedback_pages: str | None = None, graders: str = "graders") -> str:
    """A plain-text table of `results` (sorted by student), a closing line with the class mean and
    median (of the graded submissions and the crashed ones a TA scored by hand) and where the feedback
    pages are, and a GRADER ERROR line per distinct grader error (`graders`: the graders' folder, as
    the instructor should read it)."""
    table = sorted((r if isinstance(r, StudentRow) else StudentRow.of(r) for r in results),
                   key=lambda r: r.student)
    problems = [p.name for p in assignment.problems]
    for r in table:
        for problem, earned in r.problems:
            if earned is not None and problem not in problems:
                problems.append(problem)
    max_score = assignment.max_score

    rows = []
    for r in table:
        total = (f"{format_points(r.total)}/{format_points(r.max_score or max_score)}"
                 + (CHANGED if r.final_score is not None else ""))
        rows.append([r.student, *(_problem_score(r, p) for p in problems), total, r.state, _flags(r),
                     ", ".join(r.diagnoses)])

    def build(names: Sequence[str]) -> list[str]:
        header = ["student", *names, "total", "state", "flags", "diagnoses"]
        return _table(header, rows, right=set(range(1, len(names) + 1)))

    lines = build(problems)
    legend = ""
    if len(lines[1].rsplit(GAP, 1)[0]) > WIDE:     # the rule line, without the diagnoses column
        short = [f"P{i}" for i in range(1, len(problems) + 1)]
        lines = build(short)
        points = {p.name: p.points for p in assignment.problems}
        legend = "Problems: " + ", ".join(
            f"{s} {p}" + (f" ({format_points(points[p])})" if p in points else "") for s, p in zip(short, problems))

    counted = [r.total for r in table if _counted(r)]
    n = len(table)
    tail = f"{n} student{'s' if n != 1 else ''}, {_graded_count(table, sum(not r.crashed for r in table))}"
    if counted:
        import statistics  # here: a batch imports this module (StudentRow) before its first result

        tail += (f": mean {format_points(statistics.fmean(counted))}, "
                 f"median {format_points(statistics.median(counted))} of {format_points(max_score)}")
        covers = _mean_covers(table)
        if covers:
            tail += f" ({covers})"
    unsaved = sum(r.unsaved for r in table)
    if unsaved:
        tail += (f"; {'' if n == 1 else f'{unsaved} of them '}not saved (a results.json or feedback page could "
                 f"not be written: the output lines below)")
    tail += "."
    if feedback_pages is not None:
        tail += f" Feedback pages: {feedback_pages}"
    sandbox = isolation_line(table)
    unstamped = unstamped_line(table, assignment)
    errors = grader_error_lines(table, assignment, graders)
    changed = [CHANGED_LEGEND] if any(r.final_score is not None for r in table) else []
    return "\n".join([*lines, *([legend] if legend else []), *changed, "", tail, *([sandbox] if sandbox else []),
                      *([unstamped] if unstamped else []),
                      *([""] + errors if errors else [])]) + "\n"


def _counted(row: StudentRow) -> bool:
    """Whether the class mean and median count `row`: a graded submission, or a crashed one a TA scored
    by hand (its total is then the gradebook's, what the student gets)."""
    return not row.crashed or row.final_score is not None


def _mean_covers(rows: Sequence[StudentRow]) -> str:
    """What the mean covers beyond the graded submissions: "" when every submission was graded."""
    by_hand = [r.student for r in rows if r.crashed and r.final_score is not None]
    left_out = sum(not _counted(r) for r in rows)
    parts = [f"including crashed {first_ids(by_hand)}, scored by a TA"] if by_hand else []
    if left_out:
        parts.append(f"{left_out} other crashed excluded" if by_hand else "crashed excluded")
    return "; ".join(parts)


def _graded_count(rows: Sequence[StudentRow], graded: int) -> str:
    """How many were graded (not crashed), those unchanged since the last run (not graded again) told apart."""
    unchanged = sum(r.unchanged for r in rows)
    if not unchanged:
        return f"{graded} graded"
    if unchanged == len(rows):
        return ("already graded, unchanged since the last run (not graded again)" if unchanged == 1
                else f"all {unchanged} already graded, unchanged since the last run (not graded again)")
    return f"{graded - unchanged} graded now, {unchanged} already graded (unchanged since the last run)"


LATE_POLICY = "Late policy: "       # how the line about submissions without a timestamp.txt starts


def unstamped_line(rows: Sequence[StudentRow], assignment: Assignment) -> str:
    """When the assignment has a due date: which graded submissions had no timestamp.txt at all (so
    none of them could be judged late), or "" when each had one (as nbgrader's collect and submit write)."""
    if assignment.due is None:
        return ""
    graded = [r for r in rows if not r.crashed]
    missing = [r.student for r in graded if not r.stamped and not r.timestamp_problem]
    if not missing:
        return ""
    if len(missing) == len(graded) and len(graded) > 1:
        return (f"{LATE_POLICY}none of the {len(graded)} submissions has a timestamp.txt (nbgrader's collect "
                f"and submit write one), so all were graded as on time.")
    return (f"{LATE_POLICY}{len(missing)} submission{'s' if len(missing) != 1 else ''} without a timestamp.txt "
            f"(nbgrader's collect and submit write one), graded as on time: {first_ids(missing)}.")


def not_submitted_lines(students: Sequence[str], assignment: Assignment, now: dt.datetime | None = None) -> list[str]:
    """The lines naming the roster `students` without a submission (each a 0 in the gradebook), sorted: those
    whose due date (their extension's, when they have one) is still ahead of `now` (aware; default this
    machine's clock, as lateness.ahead_of_clock) apart, as not due yet, so that nobody is chased for a
    submission before their deadline. No line for either group without students."""
    now = now or dt.datetime.now(dt.UTC)
    dues = {sid: assignment.due_for(sid) for sid in students}
    not_due = {sid: due for sid, due in dues.items() if due is not None and due > now}
    ahead = sorted_ids(sid for sid in dues if sid in not_due)
    past = sorted_ids(sid for sid in dues if sid not in not_due)
    lines = []
    if past:
        lines.append(f"no submission from {plural(len(past), 'roster student')}, each scored 0 in the gradebook: "
                     f"{', '.join(past)}")
    if ahead:
        when = set(not_due.values())
        due = (f"due {format_time(when.pop())}" if len(when) == 1
               else "each one's due date, extensions included, is still ahead")
        lines.append(f"no submission (not due yet: {due}) from {plural(len(ahead), 'roster student')}, each scored "
                     f"0 in the gradebook until they submit and are graded: {', '.join(ahead)}")
    return lines


def grader_error_lines(rows: Sequence[StudentRow], assignment: Assignment, graders: str = "graders") -> list[str]:
    """One line per distinct grader error (a check and its reason) among `rows`, in the order first
    met: which check of `graders` failed in its own code, why, and in how many of the submissions
    (each of which it scored 0)."""
    reach: dict[tuple[str, str], set[str]] = {}
    for r in rows:
        for e in r.grader_errors:
            reach.setdefault(grader_error_parts(e), set()).add(r.student)
    lines = []
    for (check, reason), students in list(reach.items())[:MAX_GRADER_ERRORS]:
        n = len(rows)
        count = ("1 submission" if n == 1 else f"all {n} submissions" if len(students) == n
                 else f"{len(students)} of {n} submissions")
        arose = _AROSE_IN.match(reason)
        fix = arose["file"] if arose else "the grader"
        lines.append(f"GRADER ERROR in {graders.rstrip('/')}/{check} ({count}): {truncate(reason, 300)}; "
                     f"that check scored 0: fix {fix} and run `course autograde {assignment.name} --force`")
    if len(reach) > MAX_GRADER_ERRORS:
        lines.append(f"... and {len(reach) - MAX_GRADER_ERRORS} more grader errors (each results.json names its own "
                     f"in extra_data.grader_errors)")
    return lines


def isolation_line(results: Sequence[SubmissionResult | StudentRow]) -> str:
    """Which sandbox layers applied to every graded submission ("" when none were recorded)."""
    recorded = [set(r.isolation) for r in results if r.isolation]
    if not recorded:
        return ""
    common = set.intersection(*recorded)
    missing = [layer for layer in REQUIRED if layer not in common]
    extra = [layer for layer in OPTIONAL if layer in common]
    if missing:
        return (f"Sandbox: INSECURE, missing {', '.join(missing)} "
                f"(see `course doctor`; graded with --insecure).")
    return f"Sandbox: all {len(REQUIRED)} required isolation layers applied" + \
        (f" (also {', '.join(extra)})." if extra else ".")
