"""Plain functions behind the `course` command: release, validate, autograde, demo.

Each takes a course folder and returns a report object; none prints except through `log`.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import errno
import os
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Assignment, Course, Limits, load_course
from .errors import ConfigError, CourseError
from .grading.lateness import TIMESTAMP_FILE
from .grading.results import SubmissionResult, graded_now
from .intake import BOOKKEEPING, ungraded_files
from .layout import (
    CONFIG_FILE,
    DEMO_DIR,
    EXAMPLES,
    ROSTER_FILE,
    CourseLayout,
    copy_course,
    is_notebook_name,
    name_problem,
    student_id_problem,
    write_problems,
)
from .notebooks import (
    RefusedFile,
    open_regular,
    read_regular,
    submission_entries,
)
from .text import id_difference, id_key, plural, sorted_ids, spelt_id, truncate, visible

if TYPE_CHECKING:       # imported where used: nbgrader and Jupyter load slowly
    from .batch.launch import StartedWorker
    from .batch.worker import Task
    from .release import ReleaseReport
    from .reporting.review import Review
    from .reporting.summary import StudentRow
    from .validate import NotebookRun, ValidationReport

Log = Callable[[str], None]
Progress = Callable[[int, int], None]
RESULTS_READ_MAX_BYTES = 16 * 2**20   # a results.json larger than this is not ours: grade again

BOOKKEEPING_BYTES = 4096      # timestamp.txt and submission_secret.txt are far smaller


def _quiet(_: str) -> None:
    pass


def assignment_names(course_dir: str | Path, assignment: str | None, *, set_up: bool = True) -> list[str]:
    """[assignment] when it is in course.yml and set up (`Course.assignment`), or every assignment's
    name when it is None: each of them set up, unless not `set_up` (a ConfigError names the first
    that is not, and what it lacks)."""
    course = load_course(course_dir)
    if assignment is not None:
        return [course.assignment(assignment).name]
    for a in course.assignments if set_up else ():
        problems = course.setup_problems(a)
        if problems:
            ready = [b.name for b in course.assignments if not course.setup_problems(b)]
            alone = f": name one to do it alone (set up: {', '.join(ready)})" if ready else ""
            raise ConfigError(f"{problems[0]}; without an assignment the command does every one in "
                              f"{CONFIG_FILE}{alone}")
    return [a.name for a in course.assignments]


def release(course_dir: str | Path, assignment: str, *, log: Log = _quiet, drop_grades: bool = False) -> ReleaseReport:
    """`course release`: the student notebooks from the source, points from course.yml, recorded in the
    gradebook. `drop_grades`: a cell the release no longer has goes from the gradebook even when
    submissions have grades or comments for it (with them), instead of the release being refused."""
    from .release import release as run_release

    course = load_course(course_dir)
    a = course.assignment(assignment)
    report = run_release(course, a, drop_grades=drop_grades)
    for name, changes in report.points_written:
        where = course.layout.relative(course.layout.source(a.name) / name)
        log(f"points from course.yml written into {where}: {'; '.join(changes)}")
    for nb in report.notebooks:
        log(released_line(nb.relative_to(course.root), report.checked_lines))
    if report.gradebook:
        log(f"gradebook: {summarise_changes(report.gradebook)}")
    for line in report.warnings:
        log(f"WARNING: {line}")
    return report


def released_line(where: Path, checked_lines: int) -> str:
    """`course release`'s line for one released notebook and its leak check."""
    return f"released {where} (leak check: {plural(checked_lines, 'instructor-only line')} absent)"


def run_line(kind: str, run: NotebookRun, root: Path) -> str:
    """`course validate`'s line for one notebook run in a kernel: `kind` "source" (where any error is
    one) or "release" (where errors are the stubs students are to finish)."""
    ran = f"{plural(run.cells, 'cell')} ran"
    stopped = ""
    if run.timed_out is not None:         # the cells above it ran; it ran out of time; those below did not run
        ran = f"{run.timed_out} of {plural(run.cells, 'cell')} ran"
        stopped = f", cell {run.timed_out + 1} stopped at the time limit"
    if kind == "source":
        return (f"source  {run.path.relative_to(root)}: {ran} in a Jupyter kernel in {run.seconds:.1f} s{stopped}, "
                f"{plural(len(run.errors), 'error')}")
    kinds = sorted({e.ename for e in run.errors})
    return (f"release {run.path.relative_to(root)}: {ran} in {run.seconds:.1f} s{stopped}, "
            f"{plural(len(run.errors), 'cell')} stopped at unfinished stubs ({', '.join(kinds) or 'none'})")


def summarise_changes(changes: tuple[str, ...]) -> str:
    """Gradebook changes for one log line: cells added are counted by kind, the rest listed."""
    added: dict[str, int] = {}
    students = [line.split()[1] for line in changes if len(line.split()) == 2 and line.split()[0] == "student"]
    rest = []
    for line in changes:
        words = line.split()
        if len(words) == 3 and words[1] == "cell":
            added[words[0]] = added.get(words[0], 0) + 1
        elif len(students) > 5 and len(words) == 2 and words[0] == "student":
            if words[1] == students[0]:      # a new roster: counted where it starts, a few named
                named = sorted_ids(students)
                rest.append(f"{len(students)} students ({', '.join(named[:3])}, ..., {named[-1]})")
        else:
            rest.append(line)
    counted = [f"{n} {kind} cell{'s' if n != 1 else ''} added" for kind, n in added.items()]
    return "; ".join(rest + counted)


def validate(course_dir: str | Path, assignment: str, *, log: Log = _quiet,
             missing_as_problems: bool = False) -> ValidationReport:
    """`course validate` of one assignment. With `missing_as_problems`, an assignment that course.yml
    declares but the course folder does not hold yet (`Course.setup_problems`) is a report of those
    problems, nothing run, rather than a ConfigError (`course validate` of every assignment)."""
    from .validate import ValidationReport
    from .validate import validate as run_validate

    course = load_course(course_dir)
    missing = course.setup_problems(course.entry(assignment)) if missing_as_problems else ()
    if missing:
        log(f"{assignment}: not set up in the course folder yet, so nothing was run")
        return ValidationReport(assignment, (), (), (0.0, 0.0), (0.0, 0.0), problems=missing)
    report = run_validate(course, course.assignment(assignment))
    for run in report.source_runs:
        log(run_line("source", run, course.root))
    for run in report.release_runs:
        log(run_line("release", run, course.root))
    log(f"autograder: source scores {report.source_score[0]:g}/{report.source_score[1]:g}, "
        f"release scores {report.release_score[0]:g}/{report.release_score[1]:g}")
    return report


@dataclass(frozen=True)
class BatchResult:
    assignment: str
    results: tuple[StudentRow, ...]      # one compact row per student; the full result is in results.json
    gradebook_errors: tuple[str, ...]
    autograded_dir: Path
    feedback_dir: Path
    seconds: float
    skipped: tuple[str, ...] = ()         # students not graded again: same submission, same graders
    output_errors: tuple[str, ...] = ()   # "<student>: <why>" for results/feedback that could not be written
    ungraded: tuple[str, ...] = ()        # "<path>: <why>" for every file under submitted/ not graded
    not_submitted: tuple[str, ...] = ()   # roster students with no submission (a zero in the gradebook)
    gradebook_changes: tuple[str, ...] = ()   # entries created or corrected from course.yml first
    committing: tuple[str, ...] = ()      # students whose grades a detached writer is still committing
    unreadable: tuple[str, ...] = ()      # "<path> could not be read (<why>)...": submissions not graded
    # "<folder>: not graded: ..." for the submission of a student taken out of the course (on neither
    # the roster nor the gradebook, which had their grades): left as it is, and not graded
    removed: tuple[str, ...] = ()
    # "<student>: ..." for a new submission whose earlier one has a TA's overrides, extra credit or
    # comments in the gradebook: they still stand (nbgrader keeps them), for the TA to review
    standing_reviews: tuple[str, ...] = ()
    # a one-student run's student whose submission was unchanged and already fully written (results.json
    # with its key, page, formgrader copy, the same grades in the gradebook, no person's review): nothing written
    already_graded: tuple[str, ...] = ()
    # students committed in the background whose gradebook could not be read for a person's changes:
    # their row shows the autograder's scores
    review_unread: tuple[str, ...] = ()
    # students graded before under other graders (the engine, the instructor code or the course.yml entry
    # changed since), graded again
    regraded: tuple[str, ...] = ()

    @property
    def grader_failed(self) -> bool:
        """True when the grader itself failed somewhere (not when students did), or could not read a
        submission."""
        return (bool(self.gradebook_errors) or bool(self.output_errors) or bool(self.unreadable)
                or any(r.grader_failed for r in self.results))


def submissions(course: Course, assignment: str, student: str | None = None) -> list[tuple[str, Path]]:
    """(student id, folder) for every submitted/<student>/<assignment>/, sorted by student id.

    A student folder or assignment folder that is a symbolic link is listed too (grading refuses
    it with a reason for that student); no link is followed here."""
    layout = course.layout
    if student is not None:
        folder = layout.submission(student, assignment)
        if not (os.path.islink(folder.parent) or (os.path.lexists(folder) and os.path.lexists(folder.parent))):
            hint = _id_hint(course, assignment, student)
            raise CourseError(f"{layout.relative(folder)}: no such submission folder{hint}")
        return [(student, folder)]
    base = layout.submitted_dir
    if not base.is_dir():
        return []
    out = []
    for name, mode in submission_entries(base):
        if name.startswith(".") or not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            continue
        if name_problem(name) is not None:
            continue                        # no id to print or store; intake.ungraded_files says so
        folder = layout.submission(name, assignment)
        if stat.S_ISLNK(mode) or os.path.lexists(folder):
            out.append((name, folder))
    return out


def _id_hint(course: Course, assignment: str, student: str) -> str:
    """For a `student` given without a submission folder of `assignment`: the submission folders whose id
    differs from it only by case or Unicode normalisation (`text.id_key`: 'Ada' for 'ada', 'zoë' typed as
    one code point for a folder named with 'e' and a combining mark), named as "; <folder> differs ...", or
    "" when there is none. Ids that print alike are named with their escapes."""
    layout = course.layout
    try:
        names = os.listdir(layout.submitted_dir)
    except OSError:
        return ""
    key = id_key(student)
    found = sorted_ids(name for name in names if name != student and id_key(name) == key
                       and name_problem(name) is None and os.path.lexists(layout.submission(name, assignment)))
    if not found:
        return ""
    hows = {id_difference(student, name) for name in found}
    how = hows.pop() if len(hows) == 1 else "case or Unicode normalisation"
    alike = "Unicode" in how

    def named(sid: str) -> str:
        folder = layout.relative(layout.submission(sid, assignment))
        return f"{folder} ({sid!a})" if alike else folder

    given = spelt_id(student) if alike else student
    if len(found) == 1:
        give = "as that folder's name is spelt" if alike else found[0]
        return f"; {named(found[0])} differs from {given} only by {how}: give --student {give}"
    return (f"; {' and '.join(named(sid) for sid in found)} differ from {given} only by {how}: give --student as "
            f"the name of the folder meant is spelt")


def case_clashes(course: Course, students: Sequence[str], assignment: str | None = None) -> list[str]:
    """A line for each id that differs from another only by case or by Unicode normalisation (`text.id_key`:
    'zoë' as one code point or as 'e' and a combining mark, which print alike), which grading takes for two
    students (ids are compared code point by code point, as nbgrader's are): roster ids
    (`Course.roster_case_clashes`); a folder of `students` (under submitted/) off the roster that the roster
    has in another case or form (graded as a student off the roster, while the rostered one gets no
    submission, unless they have a folder of their own: a folder of `students`, or of `assignment` under
    theirs); and two folders of `students`. Ids differing by normalisation are named with their escapes."""
    layout = course.layout
    relative = layout.relative
    roster = course.roster()
    listed = set(roster)
    folded: dict[str, str] = {}
    for sid in roster:
        folded.setdefault(id_key(sid), sid)
    present = set(students)
    try:
        folders = set(os.listdir(layout.submitted_dir)) if assignment is not None else set()
    except OSError:
        folders = set()

    def submitted(sid: str) -> bool:
        return sid in present or (sid in folders and os.path.lexists(layout.submission(sid, str(assignment))))

    def named(sid: str, how: str) -> str:
        folder = relative(layout.submitted_dir / sid)
        return f"{folder} ({sid!a})" if "Unicode" in how else folder

    out = list(course.roster_case_clashes())
    seen: dict[str, str] = {}
    for sid in students:
        meant = folded.get(id_key(sid))
        if sid not in listed and meant is not None:
            how = id_difference(sid, meant)
            roster_id = spelt_id(meant) if "Unicode" in how else meant
            if submitted(meant):
                out.append(f"{named(sid, how)} matches roster id {roster_id} except for {how}: graded as a student "
                           f"off the roster, beside {named(meant, how)}, the roster's; if they are one student, keep "
                           f"one folder, named {roster_id} (or correct the roster), and run `course autograde` again")
            else:
                out.append(f"{named(sid, how)} matches roster id {roster_id} except for {how}: graded as a student "
                           f"off the roster, and {meant} as one without a submission; rename the folder to {roster_id} "
                           f"(or correct the roster) and run `course autograde` again")
        other = seen.setdefault(id_key(sid), sid)
        if other != sid:
            how = id_difference(sid, other)
            out.append(f"{named(other, how)} and {named(sid, how)} differ only by {how}: graded as two students; if "
                       f"they are one, keep one folder")
    return out


def _check_student(student: str | None) -> None:
    """Refuse (CourseError) a `student` given to grade or write pages for that cannot be a student's
    folder (empty, `..`, a path, a hidden folder), before anything is read or written for it."""
    why = student_id_problem(student) if student is not None else None
    if why is not None:
        raise CourseError(f"student {student!r}: not a student id ({why})")


def _refusal(course: Course, folder: Path) -> str | None:
    """Why a submission folder cannot be graded (a symbolic link somewhere on its path), or None."""
    relative = course.layout.relative
    for path in (folder.parent, folder):
        try:
            mode = os.lstat(path).st_mode
        except OSError as exc:
            return f"{relative(path)} could not be read ({exc.strerror})."
        if stat.S_ISLNK(mode):
            return (f"{relative(path)} is a symbolic link, not a folder, so {relative(folder)} was not "
                    f"graded; submit real files and folders.")
        if not stat.S_ISDIR(mode):
            return f"{relative(path)} is not a folder, so {relative(folder)} was not graded."
    return None


def _unreadable(course: Course, folder: Path) -> str | None:
    """"<path> could not be read (<why>)" when the grader cannot read a submission folder it can reach
    (permissions, a failing disk), or None: the folder cannot be listed, or one of its notebooks or
    its timestamp.txt cannot be opened. A link or a folder that is not one, the student's folder or
    the assignment's, is refused (`_refusal`), and a file that opens is read as usual; nothing is
    read here. The student's folder is looked at first: a link there is never followed to a folder
    that does not exist, and called unreadable."""
    try:
        if not all(stat.S_ISDIR(os.lstat(path).st_mode) for path in (folder.parent, folder)):
            return None
        with os.scandir(folder) as it:
            names = [e.name for e in it if is_notebook_name(e.name) or e.name == TIMESTAMP_FILE]
    except OSError as exc:
        return _not_read(course, folder, folder, exc)
    for name in sorted(names):
        path = folder / name
        try:
            if not stat.S_ISREG(os.lstat(path).st_mode):
                continue
            os.close(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY))
        except OSError as exc:
            if exc.errno not in (errno.ENOENT, errno.ELOOP):     # gone, or replaced by a link: graded as usual
                return _not_read(course, folder, path, exc)
    return None


def _not_read(course: Course, folder: Path, path: Path, exc: OSError) -> str:
    return f"{course.layout.relative(path)} could not be read ({exc.strerror or exc})"


def _split_unreadable(course: Course, a: Assignment, todo: list[tuple[str, Path]],
                      log: Log) -> dict[str, str]:
    """The students of `todo` whose submission the grader cannot read (`_unreadable`) and who have an
    earlier result: student -> the line naming the file. They are not graded, so a 0 for a file
    nobody could read (the machine's permissions, more likely than not) never replaces their grades.
    One without an earlier result is graded as before (0, the reason on their page: the student may
    have made it so), with a WARNING for the TA."""
    kept = {}
    for sid, folder in todo:
        why = _unreadable(course, folder)
        if why is None:
            continue
        if _stored_result(course, a, sid) is not None:
            kept[sid] = (f"{why}, so {course.layout.relative(folder)} was not graded and its student's earlier "
                         f"grades stand; make it readable to the grader and run `course autograde` again")
        else:
            log(f"WARNING: {sid}: {why}; graded 0 with that reason on their page (if the grader's permissions "
                f"are at fault, fix them and run `course autograde` again)")
    return kept


def removed_from_course(course: Course, a: Assignment, students: Iterable[str]) -> set[str]:
    """Those of `students` taken out of the course (`_split_removed` says how it is told): graded, and
    then removed from both the roster and the gradebook; their folders stay, but nothing is graded,
    written or released for them."""
    from .reporting.gradebook_sql import gradebook_students

    roster = set(course.roster())
    off = [sid for sid in students if sid not in roster]
    held = gradebook_students(course, a.name) if off else None
    if held is None:
        return set()
    gone = set()
    for sid in off:
        stored = _stored_result(course, a, sid) if sid not in held else None
        if stored is not None and stored[1]:
            gone.add(sid)
    return gone


def _split_removed(course: Course, a: Assignment, todo: list[tuple[str, Path]]) -> dict[str, str]:
    """The students of `todo` taken out of the course, student -> the line naming their folder: on
    neither the roster nor the gradebook, though their results.json has its grading key, which it
    gets only once the gradebook holds their grades (someone removed them since: `nbgrader db student
    remove --force`, as README says to for a student who left). Grading them would put them back in
    the gradebook and the export. A student off the roster whom the gradebook never held is graded
    (flagged "not on roster"), as before; so is everyone when the gradebook cannot be read with plain
    SQL or holds no submission of the assignment (started afresh: nobody was taken out of it)."""
    gone = removed_from_course(course, a, [sid for sid, _ in todo])
    where = course.layout.relative(course.roster_file) if course.roster_file is not None else None
    removed = {}
    for sid, folder in todo:
        if sid not in gone:
            continue
        readd = (f"add them to {where} (or run `nbgrader db student add {sid}`)" if where is not None
                 else f"run `nbgrader db student add {sid}`")
        removed[sid] = (f"{course.layout.relative(folder)}: not graded: {sid} was taken out of the gradebook, "
                        f"which had their grades, and is not on the roster; the folder is left as it is. To grade "
                        f"{sid} again, {readd}")
    return removed


def renamed_grade_cells(course: Course, assignment: Assignment) -> list[str]:
    """A line per notebook where course.yml gives a problem a grade cell (`grade_id`) the gradebook does not
    have, while the gradebook holds scores of submissions graded before under a grade cell that is no longer
    any problem's there: a grade_id renamed after grading. Grading then would add the new cell beside the
    old one, so the gradebook would count both (nbgrader's own generate_assignment refuses to add or remove
    a cell once there are submissions). Empty when the gradebook cannot be read with plain SQL."""
    from .consistency import notebook_problems
    from .reporting.gradebook import notebook_name
    from .reporting.gradebook_sql import graded_cells

    held = graded_cells(course, assignment.name)
    if not held:
        return []
    out = []
    for notebook in dict.fromkeys(p.notebook for p in assignment.problems):
        cells = held.get(notebook_name(notebook))
        if cells is None:
            continue
        mine = notebook_problems(assignment, notebook)
        new = [p for p in mine if p.grade_id not in cells]
        old = sorted(name for name, graded in cells.items() if graded and name not in {p.grade_id for p in mine})
        if not (new and old):
            continue
        if len(new) == 1 and len(old) == 1:
            what = (f"problem {new[0].name}'s grade cell is {new[0].grade_id} in course.yml, but the gradebook holds "
                    f"the scores of the submissions graded before under {old[0]}")
        else:
            what = (f"course.yml's grade cells {', '.join(p.grade_id for p in new)} are not in the gradebook, which "
                    f"holds the scores of the submissions graded before under {', '.join(old)}")
        out.append(f"{notebook}: {what} (a grade_id renamed after grading?), so grading now would keep both in the "
                   f"gradebook; give the grade_id{'s' * (len(old) > 1)} {', '.join(old)} back in course.yml, or "
                   f"rename the cell in {course.layout.relative(course.layout.source(assignment.name) / notebook)} "
                   f"too and run `course release {assignment.name} --drop-grades` (which drops the scores under "
                   f"{', '.join(old)}), then `course autograde {assignment.name}`; nothing was graded")
    return out


def _check_grader_files(course: Course, a: Assignment) -> None:
    """Refuse (CourseError) a batch with a problem that has no grader file, before the gradebook or
    any student's results are touched: that is the course's mistake (a typo in course.yml, a grader
    not yet written), and grading would give every student 0 for it (and put its grade cell in
    the gradebook). What else keeps the graders from being collected (a grader that does not import,
    checks for no problem of course.yml) is found when a worker collects them (batch.worker), also
    before any submission."""
    from .consistency import grader_file_problems

    problems = grader_file_problems(course, a, strays=False)
    if problems:
        raise CourseError(f"{'; '.join(problems)}; nothing was graded (`course validate {a.name}` checks the "
                          f"course)")


def _key_what_was_graded(task: Task, keys: dict[str, str], version: str, layers: tuple[str, ...],
                         extension: str, log: Log) -> None:
    """Key a fresh result by what was graded. A Dask worker graded its machine's copy of the submission:
    when that is not the copy this machine keyed (a shared file system not yet in sync, a resubmission
    meanwhile), the result is keyed by what the worker read, so that the next run grades the submission
    as it now is rather than calling it unchanged. A submission graded from this machine's copy is read
    again once graded: when it is not the one keyed before grading (moved away, replaced or unreadable
    for a while: a copy or a sync into submitted/ meanwhile), the result gets no key, and the next run
    grades the submission again rather than keeping what was read mid-change."""
    from .grading.fingerprint import grading_key, submission_hash, submission_of

    keyed = keys.get(task.student, "")
    if not keyed:
        return
    if task.seen:
        if submission_of(keyed) == task.seen:
            return
        keys[task.student] = grading_key(version, task.seen, seed=task.seed, on_roster=task.on_roster,
                                         isolation=layers, extension=extension)
        log(f"WARNING: {task.student}: the Dask worker read another copy of the submission than this machine did "
            f"(a shared file system not yet in sync, or a resubmission meanwhile); graded as the worker read it, so "
            f"the next `course autograde` grades it again if the copy here differs")
        return
    try:
        now = submission_hash(Path(task.folder))
    except Exception:  # noqa: BLE001 - unreadable now: not the submission that was keyed
        now = ""
    if now != submission_of(keyed):
        keys[task.student] = ""
        log(f"WARNING: {task.student}: the submission changed while it was graded (moved, replaced or unreadable "
            f"for a while); its result stands for now, and the next `course autograde` grades it again")


def _timestamp_line(course: Course, a: Assignment, sid: str, result: SubmissionResult, fresh: bool) -> str:
    """What to say of a result's unreadable timestamp.txt. A kept result (`fresh` false) whose stamp was not
    read for want of an Exchange.timezone, which nbgrader's config sets now, is not told that none is set:
    the line says the timezone is set and how to grade it again, so that the stamp is read in it."""
    from .grading.lateness import NO_ZONE, exchange_timezone

    if fresh or NO_ZONE not in result.timestamp_problem:
        return result.timestamp_problem
    try:
        zone = exchange_timezone(course.layout.root)
    except Exception:  # noqa: BLE001 - a config that cannot be read now: the result's own words
        return result.timestamp_problem
    if not zone:
        return result.timestamp_problem
    return (f"this result is kept from a run before Exchange.timezone was set ({zone} now), when its "
            f"{TIMESTAMP_FILE} could not be read as a time. `course "
            f"autograde {a.name} --student {sid} --force` grades it again, reading the stamp in {zone}.")


def autograde(course_dir: str | Path, assignment: str, *, student: str | None = None,
              seed: int | None = None, force: bool = False, insecure: bool = False,
              workers: int | None = None, scheduler: str | None = None, background_commit: bool = False,
              early: Sequence[StartedWorker] = (), log: Log = _quiet, progress: Progress | None = None,
              notice: Log = _quiet, warned: set[str] | None = None,
              earlier_keys: Mapping[str, str] | None = None) -> BatchResult:
    """Grade submissions; write results.json, feedback pages and the gradebook.

    Refuses (SandboxUnavailable, one line) when the sandbox cannot be fully set up on this
    machine, unless `insecure`; the layers that applied are recorded in every results.json.

    Submissions are graded by warm workers (autograder.batch): `workers` processes on this machine
    (default: the cores available; one runs in this process), or the workers of the Dask cluster
    whose scheduler is at `scheduler`. Each student's feedback page and results.json are written
    as soon as their result arrives, results.json without its grading key; one gradebook writer
    process (so grading never waits for nbgrader; started with the batch, or for a single
    submission once its results are written) then commits their grades in one transaction and
    copies their notebooks into autograded/ for the formgrader; once it has acknowledged that,
    results.json is rewritten (atomically) with the key, which marks the student as done (not when
    their new page could not be written: the next run grades them again). So a
    batch stopped at any point and run again finishes with every grade present once: a submission
    whose content, seed and graders are unchanged since its results.json was written with its key
    is not graded again unless `force` (see grading.fingerprint); it is listed in
    `BatchResult.skipped`, and its grades are written again. A submission whose content changed
    since then, and whose earlier one got a TA's overrides, extra credit or comments in the
    gradebook (kept there, as nbgrader keeps them), gets a WARNING line naming them
    (`BatchResult.standing_reviews`). `progress(done, total)` is called as
    results arrive. `BatchResult.results` holds one compact row per student (the full results stay
    on disk), in student order, whatever the workers.

    With `background_commit`, a single submission's grades are committed by a detached writer
    (batch.writer.commit_in_background) once its results.json and page are written, and this
    returns without waiting for it (`BatchResult.committing` names the student): the writer holds
    the course's gradebook lock, which every command opening the gradebook waits for, and it adds
    the grading key to results.json only after the commit. Every gradebook writer of a batch holds
    that lock too (taken here, passed to it). It waits after all when a plain read of the gradebook
    finds a person's review of the student (so that their row has the gradebook's scores); it names
    the student in `BatchResult.review_unread` when that read cannot tell; and it writes nothing when
    the submission is unchanged and all of it is written already (`BatchResult.already_graded`).

    Each row of `BatchResult.results` whose scores a person changed in the gradebook (an override,
    extra credit) carries the gradebook's scores, as the writer committed them (`StudentRow.with_review`).

    `early`: grading worker processes started for this course folder and assignment before this
    call (batch.launch; `course autograde` forks them before its own imports): the pool's first
    workers (a single submission is then graded by one rather than in this process). They are
    used or closed here.

    `log` is given the command's report (each student's line, WARNING lines about what was graded);
    `notice` the status of the run itself, which no script reading that report needs: a wait for the
    gradebook's lock, whether a `course serve` server grades the submission, a commit made here
    rather than in the background (`course autograde` prints it on stderr).

    `warned`: what the caller's process warned of already, for a command that grades its students through
    a call each, and each notebook of an assignment through a call of its own (`nbgrader autograde`): the
    `case_clashes` lines, and the stamps ahead of the clock (`future_stamp`'s `what`). Those are not given
    to `log` again, and those given are added, so that a roster's ids differing only by case are said once
    per command, not once per student, and a stamp ahead of the clock once per submission.

    `earlier_keys`: student -> the grading key of their results.json that was removed before this call
    (nbgrader's autograde deletes the student's autograded/ folder, results.json with it, before grading a
    newer submission, or with --force): taken as that results.json's key to tell a resubmission or changed
    graders, so that they are warned of and flagged in the gradebook as when the file is there.
    """
    started = time.perf_counter()
    from .batch.writer import GradebookProcess, Recorded, WriterReport, commit_in_background
    from .consistency import require_release
    from .grading.seeds import SEED_EXPECTED, course_secret, is_seed
    from .reporting.gradebook import GradebookReport, acquire_gradebook_lock, check_gradebook_opens, check_gradebook_url

    try:
        if seed is not None and not is_seed(seed):
            raise CourseError(f"seed: expected {SEED_EXPECTED}, got {seed!r}")
        _check_student(student)
        course = load_course(course_dir)
        a = course.assignment(assignment)
        todo = submissions(course, a.name, student)
        for line in case_clashes(course, [sid for sid, _ in todo], a.name):
            if warned is None or line not in warned:
                log(f"WARNING: {line}")
            if warned is not None:
                warned.add(line)
        # a student taken out of the course: their folder is named in a WARNING, not graded
        removed = _split_removed(course, a, todo)
        for line in removed.values():
            log(f"WARNING: {line}")
        todo = [(sid, folder) for sid, folder in todo if sid not in removed]
        # a folder or file the grader cannot read: earlier grades stand, named, and the batch exits 1
        unreadable = _split_unreadable(course, a, todo, log)
        todo = [(sid, folder) for sid, folder in todo if sid not in unreadable]
        require_release(course, a)                       # as `course validate` refuses it
        renamed = renamed_grade_cells(course, a)         # before the gradebook gets a second cell beside the old
        if renamed:
            raise CourseError("; ".join(renamed))
        _check_grader_files(course, a)
        check_gradebook_url(course)                      # before the gradebook writer starts
        check_gradebook_opens(course)                    # ... and a gradebook file it could not read
        _check_writable(course, [course.layout.autograded_dir, course.layout.feedback_dir],
                        [[course.layout.autograded(sid, a.name), course.layout.feedback(sid, a.name)]
                         for sid, _ in todo])
        secret = course_secret(course.secret_file)
    except BaseException:
        for forked in early:
            forked.close(kill=True)              # the command stops here (an error, Ctrl-C): none is waited for
        raise
    rows: dict[str, StudentRow] = {}
    skipped: list[str] = []
    output_errors: list[str] = []
    standing: list[str] = []
    already: list[str] = []
    unread: list[str] = []
    with contextlib.ExitStack() as stack:
        # last out: Ctrl-C or SIGTERM leaves with a note of the submissions not graded (`interrupted_line`)
        stack.push(_noting_interrupt(lambda: interrupted_line(
            a.name, student, sum(1 for sid, _ in todo if sid not in rows and sid not in skipped), len(todo),
            force=force)))
        for forked in early:
            stack.push(_stopping(forked.close))  # when it was not used (closing it twice is harmless)
        gradebook = GradebookProcess(course.root, a.name)
        stack.callback(gradebook.close)
        # A batch starts the writer first: its imports (nbgrader) take longest and overlap with the
        # workers' start. A single submission starts it once its results and page are written, so
        # that import does not compete with its grading for the CPU.
        writer_waits = len(todo) == 1
        detach = background_commit and writer_waits
        committing: list[str] = []

        def start_writer() -> None:
            lock = acquire_gradebook_lock(course, notice=notice)
            stack.callback(os.close, lock)
            gradebook.start(lock)

        if not writer_waits:
            start_writer()
        from .batch.pool import make_pool
        from .batch.worker import Task
        from .grading.fingerprint import (
            graders_version,
            grading_key,
            regraded,
            resubmitted,
            student_extension,
            submission_hash,
        )
        from .grading.seeds import student_seed
        from .reporting.gradebook_sql import has_person_review, holds_grades, person_reviewed
        from .reporting.review import regrade_kept_warning
        from .reporting.summary import StudentRow

        roster = set(course.roster())
        version = graders_version(course, a)
        early = _greeted(early, course, a, insecure=insecure, version=version, notice=notice)
        pool = make_pool(course.root, a.name, workers=workers, scheduler=scheduler, submissions=len(todo),
                         insecure=insecure, course=course, early=early, notice=notice)
        stack.push(_stopping(pool.close))
        info = pool.start() if todo else None   # fails closed here, before any submission is touched
        if info is not None and info.missing:
            log(f"WARNING: grading without a complete sandbox (--insecure); missing: {'; '.join(info.missing)}")
        layers = info.layers if info is not None else ()
        keys: dict[str, str] = {}
        refused: set[str] = set()
        changed: set[str] = set()           # graded before, and submitted again since (other content)
        new_graders: list[str] = []         # graded before under other graders
        kept: dict[str, str] = {}           # of those, the ones people reviewed: what they set, kept
        folders = dict(todo)
        tasks: list[Task] = []
        # known without grading, in student order: a refusal, or None for a result read back from
        # results.json when it comes up (so a batch of unchanged submissions holds one at a time)
        ready: list[tuple[str, SubmissionResult | None]] = []
        unchanged: dict[str, Task] = {}
        committed: dict[str, str] = {}      # the key of the result the gradebook holds, for those graded now
        for sid, folder in todo:
            s_seed = seed if seed is not None else student_seed(secret, a.name, sid)
            on_roster = sid in roster
            refusal = _refusal(course, folder)
            try:
                keys[sid] = "" if refusal else grading_key(version, submission_hash(folder), seed=s_seed,
                                                           on_roster=on_roster, isolation=layers,
                                                           extension=student_extension(a, sid))
            except Exception:  # noqa: BLE001 - an unreadable folder is graded (and explained) below
                keys[sid] = ""
            task = Task(student=sid, folder=str(folder), seed=s_seed, on_roster=on_roster)
            if not force and keys[sid] and _previous_result(course, a, sid, keys[sid]) is not None:
                skipped.append(sid)
                ready.append((sid, None))
                unchanged[sid] = task
            elif refusal:
                refused.add(sid)
                log(f"WARNING: {sid}: refused: {refusal} Graded 0 with that reason on their page (no link under "
                    f"{course.layout.relative(course.layout.submitted_dir)}/ is followed).")
                ready.append((sid, _refused(a, sid, s_seed, on_roster, refusal, layers)))
            else:
                tasks.append(task)
                before = _stored_result(course, a, sid)
                before_key = before[1] if before is not None else (earlier_keys or {}).get(sid, "")
                if before is not None and not before_key and not holds_grades(course, a, before[0], stamped=True):
                    # graded, never committed (the gradebook does not hold its grades): what it has instead
                    before_key = _gradebook_key(course, a, sid)
                committed[sid] = before_key
                if resubmitted(before_key, keys[sid]):
                    changed.add(sid)
                if regraded(before_key, version):
                    new_graders.append(sid)
                elif before is not None and sid not in changed:
                    line = extension_changed_line(a, before[0])
                    if line:
                        log(line)
        if new_graders:
            log(graders_changed_line(course, a, len(new_graders), len(todo)))

        def arriving() -> Iterator[tuple[SubmissionResult, bool]]:
            for sid, known in ready:
                if known is None:
                    known = _previous_result(course, a, sid, keys[sid])
                    if known is None:                 # changed since it was looked at: graded after all
                        skipped.remove(sid)
                        tasks.append(unchanged[sid])
                        continue
                yield known, sid in refused
            if tasks:
                for task, result in pool.run(tasks):
                    _key_what_was_graded(task, keys, version, layers, student_extension(a, task.student), log)
                    yield result, True

        # results.json written without the grading key, waiting for the writer's acknowledgement
        pending: dict[str, tuple[SubmissionResult, str, str]] = {}   # result, key, the gradebook's key

        def settle(acks: list[Recorded]) -> None:
            """Once the writer has a student's grades in, the key. Grades it gave up on (rolled back) get
            none: the next run grades that student again and commits then, as a resubmission or a regrade
            still (its warning and the gradebook's flag for a TA's review are not lost with the key)."""
            for ack in acks:
                for line in ack.warnings:
                    standing.append(line)
                    log(f"WARNING: {line}")
                if ack.kept:
                    kept[ack.student] = ack.kept
                if ack.review is not None and ack.student in rows:     # what the student gets, for the summary
                    rows[ack.student] = rows[ack.student].with_review(ack.review)
                waiting = pending.pop(ack.student, None)
                if waiting is not None and ack.error is None:
                    output_errors.extend(write_student_results(course, a, ack.student, *waiting))

        # The page's template, imported and compiled on a thread while the first submission is
        # graded (its task is sent as this loop starts): not earlier, when its CPU would be taken
        # from the workers' own start (numpy, pytest, the graders' collection; `--student`'s
        # worker starts beside this process).
        page_template = _prepare_page_soon()
        # the students whose progress line's score is the autograder's alone while their row gets the
        # gradebook's review (one read for a batch; a one-student run asks below, as it must anyway)
        reviewed = None if detach else person_reviewed(course, a.name)
        for result, fresh in arriving():
            sid = result.student
            rows[sid] = replace(StudentRow.of(result), unchanged=not fresh)
            # A student whose results.json or page cannot be written (a file where their folder goes)
            # is one line, and nothing more of the result goes out: no grades in the gradebook that
            # neither results.json nor the page shows, no copy or bookkeeping files in the same folders.
            unsaved: list[str] = []
            if fresh:
                # at once, so the student's results are readable now; without the key until the
                # commit, so a batch stopped before it grades this submission again
                unsaved = [f"{line}; nothing else of this result was written (its page, its grades in the "
                           f"gradebook): the next `course autograde` grades {sid} again"
                           for line in write_student_results(course, a, sid, result, None, committed.get(sid, ""))]
                if not unsaved and keys[sid]:        # a crashed one too: its key tells a resubmission
                    pending[sid] = (result, keys[sid], committed.get(sid, ""))
            page_written = False
            if not unsaved:
                # the page at once, without the gradebook's review: the writer rewrites it if people
                # changed grades or commented there
                page_template.join()
                unsaved, page_written = _write_page(course, a, sid, result, None, fresh=fresh)
                if unsaved and pending.pop(sid, None) is not None:
                    # not marked done (results.json gets no grading key) while its page is an older result's:
                    # the next run grades it again and writes the page, rather than calling it unchanged
                    unsaved = [f"{line}; its grades were not put in the gradebook, and it is not marked as graded: "
                               f"the next `course autograde` grades {sid} again" for line in unsaved]
            output_errors.extend(unsaved)
            copy = needs_formgrader_copy(course, a, sid, folders[sid], fresh=fresh, refused=sid in refused)
            # A person's review in the gradebook (a plain read; None: it cannot tell) makes a one-student
            # run wait for its commit: the writer's acknowledgement brings the gradebook's scores for the
            # summary, and a resubmission's warning (which waits also when it cannot tell).
            seen = has_person_review(course, a.name, sid) if detach else None
            # the gradebook may hold a person's review (True, or None: it cannot tell)
            maybe_reviewed = seen if detach else (None if reviewed is None else sid in reviewed)
            if unsaved:
                pass                                  # said above; the gradebook keeps what it held
            elif (detach and not fresh and not copy and not page_written and seen is False
                    and holds_grades(course, a, result) and not _page_shows_review(course, a, sid, result)):
                already.append(sid)                   # everything of it is written already: nothing to do
            elif detach and not (seen is True or (seen is None and (sid in changed or sid in new_graders))):
                writer_waits = False
                waiting = pending.get(sid)            # the key, added by the writer after its commit
                lock = acquire_gradebook_lock(course, notice=notice)
                try:
                    commit_in_background(course, a.name, result, copy_from=folders[sid] if copy else None,
                                         key=waiting[1] if waiting is not None else None, lock_fd=lock,
                                         review_again=sid in changed or sid in new_graders)
                    committing.append(sid)
                    pending.pop(sid, None)
                    if seen is None:
                        unread.append(sid)
                except OSError as exc:                # committed here instead, as a batch does
                    notice(f"gradebook: no background commit ({exc}); committing now")
                    gradebook.start(lock)
                    gradebook.record(result, copy_from=folders[sid] if copy else None, resubmitted=sid in changed,
                                     regraded=sid in new_graders and sid not in changed)
                finally:
                    os.close(lock)
            else:
                if writer_waits:
                    writer_waits = False
                    start_writer()
                gradebook.record(result, copy_from=folders[sid] if copy else None, encoded=pool.encoded(result),
                                 resubmitted=sid in changed, regraded=sid in new_graders and sid not in changed)
            log(f"{'graded' if fresh else 'unchanged':<9} {sid:<20} "
                f"{result.score:6.2f}/{result.max_score:g}" + ("  (autograder)" if maybe_reviewed is not False else "")
                + ("" if result.on_roster else "  (not on the roster)")
                + ("  GRADER ERROR" if result.state == "crashed" else "")
                + (f"  {result.execution_time:.2f} s" if fresh else "  (not graded again)"))
            if fresh and result.state == "crashed":
                log(f"WARNING: {sid}: {crash_line(result)}")
            if result.timestamp_problem:
                log(f"WARNING: {sid}: {_timestamp_line(course, a, sid, result, fresh)} No late penalty was taken "
                    f"(see docs/grading.md, Late submissions).")
            said, line = future_stamp(course, a, result)
            if line and (warned is None or said not in warned):
                log(f"WARNING: {line}")
            if line and warned is not None:
                warned.add(said)
            if progress is not None:
                progress(len(rows), len(todo))
            settle(gradebook.recorded())
        pool.close()                             # the workers go before the wait for the gradebook
        if committing or already:
            book = WriterReport(GradebookReport())
        else:
            if writer_waits:                     # nothing arrived: the writer still creates the entries
                start_writer()
            settle(gradebook.recorded(wait=True))
            book = gradebook.finish()
    output_errors.extend(book.output_errors)
    kept_line = regrade_kept_warning(kept)
    if kept_line:
        log(f"WARNING: {kept_line}")
    # each line is "<student>: <why>": its row says the student's files are not all written
    results = tuple(replace(rows[sid], unsaved=True) if any(e.startswith(f"{sid}: ") for e in output_errors)
                    else rows[sid] for sid, _ in todo if sid in rows)
    graded = {sid for sid, _ in todo} | set(unreadable)
    return BatchResult(assignment=a.name, results=results, gradebook_errors=book.gradebook.messages,
                       autograded_dir=course.layout.autograded_dir, feedback_dir=course.layout.feedback_dir,
                       seconds=round(time.perf_counter() - started, 2), skipped=tuple(skipped),
                       output_errors=tuple(output_errors),
                       ungraded=tuple(str(u) for u in ungraded_files(course, a, results, student)),
                       not_submitted=() if student else tuple(s for s in course.roster() if s not in graded),
                       gradebook_changes=book.gradebook.created, committing=tuple(committing),
                       unreadable=tuple(unreadable.values()), removed=tuple(removed.values()),
                       standing_reviews=tuple(standing), already_graded=tuple(already), review_unread=tuple(unread),
                       regraded=tuple(new_graders))


def _stopping(close: Callable[..., None]) -> Callable[..., bool]:
    """An exit callback for `ExitStack.push`: `close()` at a batch's end, `close(kill=True)` when an
    exception leaves it (Ctrl-C, SIGTERM, a failure): no worker's result is wanted any more, so none
    is waited for, whatever it is grading (a notebook that never ends would hold the command up to
    the cell's time limit). Grades sent to the gradebook writer are committed all the same."""
    def exit_(kind: type[BaseException] | None, *_: object) -> bool:
        close(kill=kind is not None)
        return False

    return exit_


def _noting_interrupt(line: Callable[[], str]) -> Callable[..., bool]:
    """An exit callback for `ExitStack.push`: a KeyboardInterrupt (Ctrl-C, or cli.Terminated for SIGTERM)
    leaving the batch gets `line()` as a note (`BaseException.add_note`, which `course` prints after
    "course: interrupted"), when it says something."""
    def exit_(kind: type[BaseException] | None, exc: BaseException | None, *_: object) -> bool:
        if isinstance(exc, KeyboardInterrupt):
            text = line()
            if text:
                exc.add_note(text)
        return False

    return exit_


def interrupted_line(assignment: str, student: str | None, not_graded: int, total: int, *, force: bool) -> str:
    """What to say of a batch of `total` submissions stopped before it graded `not_graded` of them (""
    when it graded all): the next `course autograde` takes them up (grading those new or changed: a plain
    run had not yet looked whether they were), or, when this one was given --force,
    that it must be given again: without it, a submission graded before and unchanged since keeps its
    earlier result."""
    if not not_graded:
        return ""
    command = f"course autograde {assignment}" + (f" --student {student}" if student else "")
    one = not_graded == 1
    head = f"{not_graded} of {plural(total, 'submission')} {'was' if one else 'were'} not graded"
    if not force:                                # some of them may be unchanged: the run had not looked yet
        return (f"{not_graded} of {plural(total, 'submission')} {'was' if one else 'were'} not reached (neither "
                f"graded nor found unchanged); the next `{command}` takes {'it' if one else 'them'} up")
    return (f"{head}; this run was given --force, and the next `{command}` without it keeps the earlier result of "
            f"a submission graded before and unchanged since: run `{command} --force` to grade "
            f"{'it' if one else 'them'}")


def crash_line(result: SubmissionResult) -> str:
    """Why a submission's grading crashed (the first line of its reason, control characters shown), for
    the batch's output: results.json holds the whole reason, and the next run grades it again."""
    first = next((line.strip() for line in result.crash_reason.splitlines() if line.strip()), "no reason given")
    return (f"grading crashed ({truncate(visible(first), 300)}): scored 0 for now; the next `course autograde` "
            f"grades {result.student} again")


def graders_changed_line(course: Course, a: Assignment, count: int, total: int) -> str:
    """The line said before a batch grades again `count` of its `total` submissions that were graded
    under other graders (grading.fingerprint.graders_version: the engine, the assignment's instructor
    code and the files under assignments/ it imports, its release, its course.yml entry), whatever their
    own files."""
    every = "all " if count == total and count > 1 else ""
    layout, package = course.layout, course.layout.package(a.package)
    return (f"{a.name}: the graders changed since the last grading (the engine, "
            f"{layout.relative(package)}/ or a file under {layout.relative(package.parent)}/ "
            f"it imports, the release in {layout.relative(layout.release(a.name))}/, or the assignment's course.yml "
            f"settings: problems, points, tolerances, limits, due date, late policy), so "
            f"{every}{plural(count, 'submission')} graded before {'is' if count == 1 else 'are'} graded again")


def extension_changed_line(a: Assignment, before: SubmissionResult) -> str:
    """The line said before a batch grades a student again, their submission and the graders unchanged,
    when course.yml gives them another extension than their last grading was given (`before`): only
    their late penalty can change; "" when their extension is the same."""
    from .grading.lateness import lateness

    now = lateness(a, None, before.student).extension
    if before.state != "graded" or now == before.extension:
        return ""
    return (f"{before.student}: their extension changed since the last grading ({before.extension or 'none'} "
            f"then, {now or 'none'} now), so they are graded again")


def future_stamp(course: Course, a: Assignment, result: SubmissionResult,
                 now: dt.datetime | None = None) -> tuple[str, str]:
    """(what, line): when the time `result` was graded with (its submission's timestamp.txt) lies ahead of
    this machine's clock (`now`, default the time now) by more than lateness.CLOCK_SKEW_MINUTES, a line
    naming the student, the file and the time, and `what` it is about (the student, file and time: the
    line's words on how far ahead change with the clock); ("", "") otherwise. Such a submission is graded
    as usual: the stamp may be right and this machine's clock behind, and the line says how to grade it
    again once the stamp is corrected."""
    from .grading.lateness import CLOCK_SKEW_MINUTES, ahead_of_clock, late_words
    from .text import format_points

    try:
        when = dt.datetime.fromisoformat(result.submitted_at) if result.submitted_at else None
    except ValueError:                  # a results.json edited by hand: its time is not judged here
        return "", ""
    if when is None or when.tzinfo is None:
        return "", ""
    ahead = ahead_of_clock(when, now)
    if not ahead:
        return "", ""
    stamp = course.layout.relative(course.layout.submission(result.student, a.name) / TIMESTAMP_FILE)
    what = f"{result.student}: {stamp} says {when.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"
    penalty = (f"a late penalty of {format_points(result.late_penalty)} points" if result.late_penalty
               else "no late penalty")
    return what, (f"{what}, {late_words(ahead)} ahead of this machine's clock (more than the {CLOCK_SKEW_MINUTES} "
                  f"minutes allowed for clock skew): the clock of the machine that collected it was ahead (or this "
                  f"one's is behind), or the file was edited. Graded as usual with that time ({penalty}); once the "
                  f"file is corrected, `course autograde {a.name} --student {result.student}` grades it again (see "
                  f"docs/grading.md, Late submissions).")


def _greeted(early: Sequence[StartedWorker], course: Course, a: Assignment, *, insecure: bool, version: str,
             notice: Log) -> tuple[StartedWorker, ...]:
    """`early` less the connections to a `course serve` server (batch.serve) that would not grade
    as this command would (or did not answer in time): those are closed, and the submission is
    graded as if no server ran. `notice` is told which it is."""
    from .batch.serve import greet, identity, is_served

    kept = []
    for started in early:
        if is_served(started):
            why = greet(started, identity(course, a, insecure=insecure, version=version))
            if why is not None:
                started.close()
                notice(f"course serve: not used ({why}); grading without it")
                continue
            notice(f"grading on the warm worker of `course serve` (pid {started.popen.pid})")
        kept.append(started)
    return tuple(kept)


def _prepare_page_soon() -> threading.Thread:
    """A thread that imports the feedback page's module and compiles its template, so the first
    page is written without that wait (the main thread meanwhile waits for the first result)."""
    def prepare() -> None:
        with contextlib.suppress(Exception):   # the page's own writing reports any failure
            from .reporting.feedback import prepare_page
            prepare_page()

    thread = threading.Thread(target=prepare, name="page-template", daemon=True)
    thread.start()
    return thread


def _refused(a: Assignment, sid: str, s_seed: int, on_roster: bool, reason: str,
             layers: tuple[str, ...]) -> SubmissionResult:
    """A submission refused before anything of it ran (a link in place of its folder): 0, with the reason."""
    return SubmissionResult(
        student=sid, assignment=a.name, state="graded", seed=s_seed, on_roster=on_roster, notes=(reason,),
        problems=tuple(p.name for p in a.problems), isolation=layers,
        problem_points=tuple((p.name, p.points) for p in a.problems), graded_at=graded_now())


@dataclass(frozen=True)
class FeedbackReport:
    assignment: str
    written: tuple[str, ...]          # students whose page was (re)written
    not_graded: tuple[str, ...]       # students with a submission but no results.json yet
    no_secret: tuple[str, ...]        # pages that `nbgrader release_feedback` cannot release (no secret)
    errors: tuple[str, ...]           # "<student>: <why>", or "<results.json>: <why>" when it cannot be read
    removed: tuple[str, ...] = ()     # students taken out of the course (removed_from_course): no page written


def graded_result(course: Course, a: Assignment, sid: str) -> SubmissionResult | None:
    """The result stored in autograded/<student>/<assignment>/results.json, or None when there is
    none (or it is not one written by this grader)."""
    stored = _stored_result(course, a, sid)
    return stored[0] if stored is not None else None


def _stored_result(course: Course, a: Assignment, sid: str) -> tuple[SubmissionResult, str] | None:
    """(result, grading key) from the student's results.json, when it is one of ours for them."""
    try:
        return _read_results_json(course, a, sid)
    except CourseError:
        return None


def _gradebook_key(course: Course, a: Assignment, sid: str) -> str:
    """results_json.gradebook_key_of the student's results.json ("" when it cannot be read)."""
    import json

    from .reporting.results_json import gradebook_key_of

    try:
        return gradebook_key_of(json.loads(read_regular(course.layout.results_json(sid, a.name),
                                                        RESULTS_READ_MAX_BYTES)))
    except (OSError, RefusedFile, ValueError, RecursionError):
        return ""


def _read_results_json(course: Course, a: Assignment, sid: str) -> tuple[SubmissionResult, str] | None:
    """(result, grading key) from the student's results.json; None when there is none, CourseError
    naming the file and why when there is one that is not ours for them (not JSON, cut short, ...)."""
    from .reporting.results_json import results_of

    path = course.layout.results_json(sid, a.name)
    if not os.path.lexists(path):
        return None
    where = course.layout.relative(path)
    try:
        return results_of(read_regular(path, RESULTS_READ_MAX_BYTES), sid, a.name)
    except RefusedFile as exc:
        raise CourseError(f"{where}: {exc}") from None
    except ValueError as exc:
        raise CourseError(f"{where}: {str(exc) or type(exc).__name__}"[:500]) from None


def student_page(course: Course, a: Assignment, sid: str) -> str:
    """The student's feedback page as `course feedback` writes it: results.json and the gradebook's
    overrides and comments. CourseError when the submission has not been graded."""
    from .reporting.feedback import render_feedback
    from .reporting.gradebook import review_of

    result = graded_result(course, a, sid)
    if result is None:
        where = course.layout.relative(course.layout.results_json(sid, a.name))
        raise CourseError(f"{where}: missing or unreadable; run `course autograde {a.name} --student {sid}` first")
    return render_feedback(result, a, review_of(course, a, sid), course.name)


def feedback(course_dir: str | Path, assignment: str, *, student: str | None = None,
             log: Log = _quiet) -> FeedbackReport:
    """(Re)write the feedback pages of graded submissions from results.json and the gradebook, so a
    TA's overrides and comments from formgrader reach the student's page; each page's folder also
    gets the submission's timestamp.txt and submission_secret.txt for `nbgrader release_feedback`."""
    from .consistency import stale_results
    from .reporting.gradebook import open_gradebook, read_review

    _check_student(student)
    course = load_course(course_dir)
    a = course.assignment(assignment)
    todo = submissions(course, a.name, student)
    _check_writable(course, [course.layout.feedback_dir], [[course.layout.feedback(sid, a.name)] for sid, _ in todo])
    written, not_graded, no_secret, errors = [], [], [], []
    graded = []
    removed = removed_from_course(course, a, [sid for sid, _ in todo])
    with open_gradebook(course) as gb:
        for sid, _ in todo:
            if sid in removed:
                continue
            try:
                stored = _read_results_json(course, a, sid)
            except CourseError as exc:       # named, rather than taken for a submission not graded yet
                errors.append(str(exc))
                continue
            if stored is None:
                not_graded.append(sid)
                continue
            result = stored[0]
            graded.append(result)
            try:
                review = read_review(gb, a, sid)
                page = _feedback_folder(course, a, sid, result, review)
            except Exception as exc:  # noqa: BLE001 - one student's page never stops the others
                errors.append(f"{sid}: {type(exc).__name__}: {exc}".splitlines()[0][:500])
                continue
            written.append(sid)
            if not (page.parent / "submission_secret.txt").is_file():
                no_secret.append(sid)
            log(f"feedback {sid:<20} {course.layout.relative(page)}"
                + ("  (with the gradebook's review)" if review is not None and review.changed else ""))
    for stale in stale_results(a, graded):
        log(f"WARNING: {stale}")
    return FeedbackReport(a.name, tuple(written), tuple(not_graded), tuple(no_secret), tuple(errors),
                          tuple(sid for sid, _ in todo if sid in removed))


def refresh_pages(course: Course, a: Assignment, students: Iterable[str]) -> list[str]:
    """For `nbgrader release_feedback`: each student's page (of those graded) written afresh, as
    `course feedback` writes it, when it no longer is the page of their results.json and the gradebook
    (a TA changed an override or comment since); returns a line for each page written or that could
    not be checked (released as it is)."""
    from .reporting.feedback import feedback_filename, render_feedback
    from .reporting.gradebook import open_gradebook, read_review

    lines = []
    with open_gradebook(course) as gb:
        for sid in students:
            stored = _stored_result(course, a, sid)
            if stored is None:
                continue
            result = stored[0]
            page = course.layout.feedback(sid, a.name) / feedback_filename(result)
            try:
                review = read_review(gb, a, sid)
                if _holds(page, render_feedback(result, a, review, course.name).encode("utf-8")):
                    continue
                _feedback_folder(course, a, sid, result, review)
            except Exception as exc:  # noqa: BLE001 - that page is released as it is, and said so
                lines.append(f"{sid}: {course.layout.relative(page)} could not be checked against the gradebook "
                             f"({type(exc).__name__}: {exc}), so it is released as it is; run `course feedback "
                             f"{a.name} --student {sid}` and release again".splitlines()[0][:500])
                continue
            lines.append(f"{sid}: {course.layout.relative(page)} was not the page of results.json and the "
                         f"gradebook (changed since `course feedback`): written afresh before release")
    return lines


@dataclass(frozen=True)
class DoctorReport:
    """What `course doctor` found: each isolation layer with whether it applied, and why not."""
    layers: tuple[tuple[str, bool, bool, str], ...]   # (layer, applied, required, explanation)
    facts: tuple[str, ...]                        # about the machine (bubblewrap, user, namespaces, ...)
    error: str = ""                               # the sandbox did not start at all
    course: tuple[str, ...] = ()                  # what would stop autograde in the course folder
    memory: str = ""                              # how a submission's memory is bounded here (memory_bound)

    @property
    def ok(self) -> bool:
        """Would `course autograde` grade here (without --insecure)?"""
        return (not self.error and not self.course
                and all(applied for _, applied, required, _ in self.layers if required))


def memory_bound(cgroup: bool, limits: Iterable[tuple[str, Limits]]) -> str:
    """One line: how a submission's memory is bounded on this machine. In the cgroup (root), all its
    processes together get memory_mb + 512 MB; without one (an ordinary user: no cgroup can be made,
    and none is delegated to it), RLIMIT_AS bounds each process alone, so a submission that forks may
    hold its template and `processes` forks, each at memory_mb. `limits`: (where they come from, the
    limits), e.g. each assignment's; none: the defaults."""
    shown = [(where, lim) for where, lim in limits] or [("the defaults", Limits())]
    if cgroup:
        each = "; ".join(f"{lim.memory_mb + 512:,} MB ({where})" for where, lim in shown)
        return f"memory: all of a submission's processes together, in a cgroup: {each}"
    worst = "; ".join(f"{lim.processes + 1} x {lim.memory_mb:,} MB = {(lim.processes + 1) * lim.memory_mb / 1024:,.0f} "
                      f"GB ({where})" for where, lim in shown)
    return (f"memory: PER PROCESS only on this machine (no cgroup for this user): each process of a submission "
            f"may use limits.memory_mb, so at worst (limits.processes + 1) x memory_mb in all: {worst} "
            f"(docs/security.md, \"Grading under an ordinary account\")")


def course_problems(course_dir: str | Path, *, named: bool = False) -> tuple[str, ...]:
    """What would stop `course autograde` in this course folder before any grading, one line each:
    course.yml, the gradebook's URL, the folders it writes (autograded/, feedback/), and each assignment's
    released notebooks (`release_findings`). Nothing
    when the folder holds no course.yml (`course doctor` run outside a course), unless the folder was
    `named` (`--course-dir`): then one line says that it is no course folder."""
    from .reporting.gradebook import check_gradebook_opens, check_gradebook_url

    config = CourseLayout(Path(course_dir)).config
    if not os.path.lexists(config):
        if not named:
            return ()
        if not os.path.lexists(course_dir):
            return (f"{course_dir}: no such folder (--course-dir)",)
        if not Path(course_dir).is_dir():
            return (f"{course_dir}: not a folder (--course-dir)",)
        return (f"{course_dir}: not a course folder: it holds no {CONFIG_FILE} (--course-dir)",)
    if not named and not config.is_file():
        return ()
    try:
        course = load_course(course_dir)
    except CourseError as exc:
        return (str(exc),)
    problems = []
    try:
        check_gradebook_url(course)
        check_gradebook_opens(course)
    except CourseError as exc:
        problems.append(str(exc))
    unwritable = write_problems([course.layout.autograded_dir, course.layout.feedback_dir], course.layout.relative)
    if unwritable is not None:
        problems.append(unwritable)
    problems += release_findings(course)[0]
    return tuple(problems)


def release_findings(course: Course) -> tuple[list[str], list[str]]:
    """(problems, notes) about every assignment's released notebooks, for `course doctor`. A problem is
    what makes `course autograde <assignment>` refuse (`consistency.release_problems`, in its words): a
    released notebook missing, unreadable or no notebook. An assignment never released (no release
    folder) that nobody has submitted to yet, while another is released, is a note instead, as one not
    set up is: it is not live yet, and the live one is graded. A note too: a released notebook that shows
    other points than course.yml (`consistency.release_points_problems`; autograde warns of it and grades
    on course.yml's). An assignment not set up is left to its own note (`course_notes`)."""
    from .consistency import release_points_problems, release_problems

    found = {a.name: release_problems(course, a) for a in course.assignments if not course.setup_problems(a)}
    live = any(not lines for lines in found.values())
    problems: list[str] = []
    notes: list[str] = []
    for a in course.assignments:
        lines = found.get(a.name)
        if lines is None:
            continue
        if not lines:
            notes += [f"{line}; course autograde grades on course.yml's points"
                      for line in release_points_problems(course, a)]
        elif live and not os.path.lexists(course.layout.release(a.name)) and not submissions(course, a.name):
            notes.append(f"{a.name} is not released yet and nobody has submitted it, so `course autograde "
                         f"{a.name}` stops (those of the other assignments do not): {'; '.join(lines)}")
        else:
            problems += lines
    return problems, notes


def course_notes(course_dir: str | Path) -> tuple[str, ...]:
    """What `course doctor` says of a course folder where nothing stops `course autograde`
    (`course_problems` found nothing): what it checked, an assignment not set up or not released yet, a
    release showing other points than course.yml (`release_findings`), and what would stop nbgrader's own
    commands there (an exchange folder that does not exist: `release_assignment`, `submit` and `collect`
    need it). Nothing when the folder holds no course.yml."""
    if not CourseLayout(Path(course_dir)).config.is_file():
        return ()
    try:
        course = load_course(course_dir)
    except CourseError:
        return ()
    names = ", ".join(a.name for a in course.assignments)
    notes = [f"{CONFIG_FILE} read (assignments: {names}); the gradebook's URL, "
             f"{course.layout.relative(course.layout.autograded_dir)}/ and "
             f"{course.layout.relative(course.layout.feedback_dir)}/ can be used, and the released notebooks read"]
    for a in course.assignments:
        problems = course.setup_problems(a)
        if problems:
            notes.append(f"{a.name} is not set up yet, so commands for it stop (those for the other assignments "
                         f"do not): {'; '.join(problems)}")
    notes += release_findings(course)[1]
    if course.exchange is not None and not course.exchange.is_dir():
        notes.append(f"the exchange folder {course.exchange} ({CONFIG_FILE}: exchange) does not exist: nbgrader's "
                     f"release_assignment, submit and collect need it (grading does not)")
    return tuple(notes)


def doctor(*, course_dir: str | Path | None = None, log: Log = _quiet, named: bool = False) -> DoctorReport:
    """Start the sandbox as `course autograde` would, run a probe notebook, report every layer; with
    `course_dir` holding a course.yml, check that course too (config, gradebook, folders written, released
    notebooks).
    `named`: the folder was named (`--course-dir`), so that one which is no course folder is a problem."""
    from .sandbox import isolation
    from .sandbox.host import SandboxHost, SandboxUnavailable
    from .sandbox.outcomes import SandboxError

    facts = isolation.machine_facts()
    for fact in facts:
        log(fact)
    course = course_problems(course_dir, named=named) if course_dir is not None else ()
    for problem in course:
        log(f"course: {problem}")
    for note in course_notes(course_dir) if course_dir is not None and not course else ():
        log(f"course: {note}")
    host = SandboxHost(insecure=True)
    try:
        info = host.start()
    except (SandboxUnavailable, SandboxError) as exc:
        log(f"sandbox: {exc}")
        return DoctorReport(layers=(), facts=facts, error=str(exc), course=course)
    finally:
        host.close()
    why = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in info.missing}
    rows = []
    for layer in isolation.REQUIRED + isolation.OPTIONAL:
        applied = layer in info.layers
        note = isolation.DESCRIPTIONS.get(layer, "") if applied else why.get(layer, "not available here")
        rows.append((layer, applied, layer in isolation.REQUIRED, note))
        mark = "ok " if applied else ("-- " if layer in isolation.OPTIONAL else "NO ")
        log(f"  {mark} {layer:<18} {note}")
    limits: list[tuple[str, Limits]] = []
    if course_dir is not None and not course:
        with contextlib.suppress(CourseError, OSError):
            limits = [(a.name, a.limits) for a in load_course(course_dir).assignments]
    memory = memory_bound("cgroup" in info.layers, limits)
    log(memory)
    report = DoctorReport(layers=tuple(rows), facts=facts, course=course, memory=memory)
    if report.ok:
        log("course autograde will grade on this machine.")
    elif course and all(applied for _, applied, required, _ in rows if required):
        log("course autograde will refuse to grade in this course folder: fix the lines marked course.")
    else:
        log("course autograde will refuse to grade here (unless --insecure): fix the layers marked NO"
            + (" and the lines marked course." if course else "."))
    return report


def _check_writable(course: Course, shared: list[Path], students: list[list[Path]]) -> None:
    """Refuse, in one line before anything is graded, when this account cannot write what a command
    writes: a folder every student's results go into (`shared`), or the folders of every student
    (`students`: each student's folders). One student's folder alone (a file where it should be, a
    folder left by another user) is that student's error, met when their results are written: the
    others are still graded."""
    problem = write_problems(shared, course.layout.relative)
    if problem is None and students:
        each = [write_problems(folders, course.layout.relative) for folders in students]
        if all(each):
            problem = write_problems([f for folders in students for f in folders], course.layout.relative)
    if problem is not None:
        raise CourseError(f"cannot write the results: {problem}")


def _previous_result(course: Course, a: Assignment, sid: str, key: str) -> SubmissionResult | None:
    """The result stored in results.json when it was graded under `key` (and did not crash)."""
    stored = _stored_result(course, a, sid)
    if stored is None or stored[1] != key or stored[0].state != "graded":
        return None
    return stored[0]


def _page_shows_review(course: Course, a: Assignment, sid: str, result: SubmissionResult) -> bool:
    """Whether the student's feedback page on disk was written with a person's review."""
    from .reporting.feedback import feedback_filename, shows_review

    return shows_review(course.layout.feedback(sid, a.name) / feedback_filename(result))


def _write_page(course: Course, a: Assignment, sid: str, result: SubmissionResult, review: Review | None, *,
                fresh: bool) -> tuple[list[str], bool]:
    """The student's feedback page (when graded afresh, or missing): its failure as one line, and
    whether it was written (or tried)."""
    from .reporting.feedback import feedback_filename

    feedback = course.layout.feedback(sid, a.name)
    if not fresh and (feedback / feedback_filename(result)).is_file():
        return [], False
    return _run_steps(sid, [("writing the feedback page",
                             lambda: _feedback_folder(course, a, sid, result, review))]), True


def write_student_results(course: Course, a: Assignment, sid: str, result: SubmissionResult,
                        key: str | None, gradebook_key: str = "") -> list[str]:
    """autograded/<student>/<assignment>/results.json, atomically. Its grading key (when given) marks
    the student as done (see grading.fingerprint): it is written only once the gradebook holds their
    grades. A crashed result is graded again all the same (`_previous_result`), but keeps its key, so
    that the next run tells a new submission from the same one (a TA may have scored the crashed one
    by hand: `BatchResult.standing_reviews`). Its failure is one line.

    Without `key` the file is written without waiting for the disk (no fsync): a results.json
    without its key is graded again by the next `course autograde` anyway, so one that a crash of
    the machine left empty loses nothing; the one written with the key is synced. `gradebook_key`: the
    key of the result the gradebook holds until this one is committed (results_json.gradebook_key_of)."""
    from .reporting.results_json import atomic_write_text, render_results_json

    def results() -> None:
        _inside(course, course.layout.autograded(sid, a.name))
        extra = {"gradebook_key": gradebook_key} if gradebook_key else {}
        text = render_results_json(result, grading_key=key, **extra)
        atomic_write_text(course.layout.results_json(sid, a.name), text, sync=key is not None)

    return _run_steps(sid, [("writing results.json", results)])


def _run_steps(sid: str, steps: list[tuple[str, Callable[[], object]]]) -> list[str]:
    errors: list[str] = []
    for what, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - reported per student; the batch goes on
            errors.append(f"{sid}: {what}: {type(exc).__name__}: {exc}".splitlines()[0][:500])
    return errors


def _inside(course: Course, path: Path) -> Path:
    """A folder of the course, created without going through any link."""
    return _output_dir(course.root, *path.relative_to(course.root).parts)


def needs_formgrader_copy(course: Course, a: Assignment, sid: str, folder: Path, *, fresh: bool,
                          refused: bool) -> bool:
    """Whether autograded/<student>/<assignment>/ should get the submission (in `folder`) again: when it
    was graded afresh, when a stopped batch left it without its notebooks, or when its timestamp.txt or
    submission_secret.txt is not there as submitted (the grading key does not cover the secret, so one
    that reached submitted/ after the notebook was graded would otherwise never be copied, and
    `nbgrader release_feedback` could not hand the student's page back), or is there from an earlier
    submission while this one has none (the copy removes it: `_remove_stale_copies`)."""
    if refused:
        return False
    if fresh:
        return True
    target = course.layout.autograded(sid, a.name)
    try:
        if not any(is_notebook_name(name) for name, _ in submission_entries(target)):
            return True
    except OSError:
        return True
    return any(_copy_lags(folder / name, target / name) for name in BOOKKEEPING)


def _copy_lags(submitted: Path, copy: Path) -> bool:
    """Whether the bookkeeping file `submitted` (one a copy takes: regular, small) is not in `copy`
    with the same bytes, or `copy` is an earlier submission's while the submission has no such file."""
    try:
        data = read_regular(submitted, BOOKKEEPING_BYTES)
    except RefusedFile:         # none (then a copy is stale), or none that a copy would take
        return not os.path.lexists(submitted) and os.path.lexists(copy)
    return not _holds(copy, data)


def write_formgrader_copy(course: Course, a: Assignment, sid: str, folder: Path, result: SubmissionResult) -> None:
    """Copy the submission's notebooks into autograded/ for the formgrader, annotated with our report:
    each is written once, annotated (one that is not a readable notebook, or too large to be read, is
    replaced by a placeholder formgrader can open, `annotate.placeholder_notebook`; one over the limits
    only through its saved outputs is written without them). A notebook that is not one of the
    assignment's (formgrader never shows it), or an unreadable one without a release, is written as submitted;
    one whose annotation fails is not written at all (its earlier copy removed: the next run copies it again).
    The notebooks and bookkeeping files of an earlier submission that this one does not have (another
    name, or one not copied now: too large, a link; a timestamp.txt or submission_secret.txt it lacks) are
    removed first (`_remove_stale_copies`), so formgrader opens and our report annotates this submission's
    notebook, never an earlier one left under the expected name, and neither its time nor its secret is
    taken for an earlier submission's. Only the notebooks the annotation reads (the assignment's, those
    graded) are held in memory until written; any other notebook is copied as submitted, a piece at a time,
    so the writer's memory does not grow with the number of notebooks a submission holds."""
    from .reporting.annotate import annotate_autograded

    layout = course.layout
    target = _inside(course, layout.autograded(sid, a.name))
    arriving: dict[str, bytes] = {}
    annotated = set(a.notebooks) | {Path(f).name for f in result.files}
    max_bytes = int(a.limits.notebook_mb * 1024 * 1024)
    def annotate() -> None:
        # each notebook is decided on by itself: one over the limits (nbformat would need hundreds of MB
        # for very many cells, outputs or other values) is written without its outputs, or as a placeholder
        # when over the grader's limits too, never as submitted (annotate_autograded)
        for report in annotate_autograded(result, a, target, layout.release(a.name), arriving=arriving):
            if report.notebook is not None:
                arriving.pop(report.notebook.name, None)

    annotated_all = False
    try:
        copied = _copy_for_formgrader(folder, target, max_bytes=max_bytes, notebooks=arriving, only=annotated)
        _remove_stale_copies(target, keep=copied)     # the folder's others are written: `arriving` holds the rest
        annotate()
        annotated_all = True
    finally:
        if not annotated_all and arriving:            # a later file failed: what was read is annotated still
            with contextlib.suppress(Exception):
                annotate()
        for name, data in arriving.items():
            if annotated_all:     # one formgrader does not show (not the assignment's), or unreadable, no release
                _write_copy(target / name, data)
            else:                 # never written unannotated: no copy, so the next run copies it again
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(target / name)


def _remove_stale_copies(target: Path, keep: set[str]) -> None:
    """Remove each notebook and bookkeeping file (timestamp.txt, submission_secret.txt) of the student's
    autograded folder `target` that is not in `keep` (the files copied from the submission now): copies of
    an earlier submission. Only what nbgrader's autograde and this engine copy there goes; other files
    (results.json, anything a TA put there) and folders stay."""
    for name, mode in submission_entries(target):
        copied_kind = is_notebook_name(name) or name in BOOKKEEPING
        if copied_kind and name not in keep and not stat.S_ISDIR(mode):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(target / name)


def gradebook_side_outputs(course: Course, a: Assignment, sid: str, folder: Path | None, result: SubmissionResult,
                           review: Review | None) -> list[str]:
    """What a batch's gradebook writer process writes for one student once their grades are in:
    the formgrader copy (when `folder`, the submission, is given), the bookkeeping files of the
    feedback folder (from that copy), and the feedback page again when people changed grades or
    commented in the gradebook. Each step's failure is one line, as the batch's other outputs report."""
    steps: list[tuple[str, Callable[[], object]]] = []
    if folder is not None:
        steps.append(("copying the notebooks into autograded/",
                      lambda: write_formgrader_copy(course, a, sid, folder, result)))
    if folder is not None:
        steps.append(("copying timestamp.txt and submission_secret.txt into feedback/",
                      lambda: _copy_bookkeeping(course, a, sid, _inside(course, course.layout.feedback(sid, a.name)))))
    if review is not None and (review.changed or _page_shows_review(course, a, sid, result)):
        # with the review, or without it once the people who changed grades took their changes back
        steps.append(("writing the feedback page", lambda: _feedback_folder(course, a, sid, result, review)))
    return _run_steps(sid, steps)
def _feedback_folder(course: Course, a: Assignment, sid: str, result: SubmissionResult,
                     review: Review | None) -> Path:
    """feedback/<student>/<assignment>/: the page, and the submission's timestamp.txt and
    submission_secret.txt (from its autograded copy) where `nbgrader release_feedback` looks for
    them; nothing instructor-only. An earlier submission's pages that this one would not have are
    removed (`feedback.remove_stale_pages`). Returns the page's path."""
    from .reporting.feedback import remove_stale_pages, write_feedback

    folder = _inside(course, course.layout.feedback(sid, a.name))
    page = write_feedback(result, a, folder, review, course.name)
    remove_stale_pages(folder, result)
    _copy_bookkeeping(course, a, sid, folder)
    return page


def _copy_bookkeeping(course: Course, a: Assignment, sid: str, folder: Path) -> None:
    """timestamp.txt and submission_secret.txt from the student's autograded copy into `folder`
    (where there are any yet). One that the copy, there, no longer has (a later submission without it:
    `_remove_stale_copies`) is removed from `folder` too: it was an earlier submission's."""
    from .reporting.results_json import atomic_write_bytes

    autograded = course.layout.autograded(sid, a.name)
    for name in BOOKKEEPING:
        try:
            data = read_regular(autograded / name, BOOKKEEPING_BYTES)
        except RefusedFile:
            if autograded.is_dir() and not os.path.lexists(autograded / name):
                with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                    os.unlink(folder / name)
            continue
        if not _holds(folder / name, data):
            atomic_write_bytes(folder / name, data)


def _holds(path: Path, data: bytes) -> bool:
    """Whether the regular file `path` already holds exactly `data` (a re-grade's bookkeeping files:
    not written again)."""
    try:
        return read_regular(path, len(data)) == data
    except RefusedFile:
        return False


def _output_dir(root: Path, *parts: str) -> Path:
    """root/parts..., created as real folders: a symbolic link found on the way (which grading
    never makes) is replaced by a folder, so nothing is ever written through a link."""
    path = root
    for part in parts:
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            _mkdir(path)
            continue
        if stat.S_ISLNK(mode):
            path.unlink()
            _mkdir(path)
        elif not stat.S_ISDIR(mode):
            raise NotADirectoryError(f"{path.relative_to(root)} is not a folder")
    return path


def _mkdir(path: Path) -> None:
    """mkdir, where another process of the batch (the gradebook writer) may have just made it."""
    try:
        path.mkdir()
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise


def _copy_for_formgrader(submitted: Path, autograded: Path, *, max_bytes: int,
                         notebooks: dict[str, bytes] | None = None, only: Container[str] | None = None) -> set[str]:
    """Copy the submitted notebooks, timestamp and submission secret (as nbgrader's autograde does),
    so formgrader can show them for manual review and `nbgrader generate_feedback` finds them. Only
    regular files within the notebook size limit are copied; no link is followed and each copy is
    written atomically, read and written a piece at a time. The originals are only read. With `notebooks`,
    the notebooks (those named in `only`, when given) are read into it (name -> bytes) instead, for the
    caller to write. Returns the names of the files taken from the submission (a bookkeeping file
    `autograded` holds already with the same bytes included)."""
    taken: set[str] = set()
    for name, mode in submission_entries(submitted):
        if not stat.S_ISREG(mode) or not (is_notebook_name(name) or name in BOOKKEEPING):
            continue
        try:
            fd = open_regular(submitted / name)
        except RefusedFile:
            continue
        try:
            size = os.fstat(fd).st_size
            if size > max_bytes:
                continue
            taken.add(name)
            if name in BOOKKEEPING and size <= BOOKKEEPING_BYTES:
                data = os.pread(fd, size + 1, 0)
                if _holds(autograded / name, data):
                    continue
            if notebooks is not None and is_notebook_name(name) and (only is None or name in only):
                notebooks[name] = b"".join(_pieces(fd))
            else:
                _write_copy(autograded / name, _pieces(fd))
        finally:
            os.close(fd)
    return taken


def _pieces(fd: int) -> Iterator[bytes]:
    """What is left to read of the open file `fd`, 1 MB at a time."""
    while piece := os.read(fd, 1 << 20):
        yield piece


def _write_copy(path: Path, data: bytes | Iterable[bytes]) -> None:
    """`data` (bytes, or pieces of them written as they come) into `path` atomically, with the mode a new
    file gets (0644 under the usual umask, readable by all, as nbgrader's copies are)."""
    from .reporting.results_json import new_file_mode

    tmp = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, then renamed into place or removed
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp", delete=False)
    try:
        with tmp:
            os.fchmod(tmp.fileno(), new_file_mode())
            for piece in (data,) if isinstance(data, bytes) else data:
                tmp.write(piece)
        os.replace(tmp.name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp.name)
        raise


def prepare_demo(project_dir: str | Path, demo_dir: str | Path | None = None,
                 assignment: str | None = None) -> Path:
    """A scratch course folder (default .demo/) holding the course and the bundled example submissions.
    An `assignment` the project's course.yml does not have (or has not set up) is refused, as `course
    release` refuses it, before the previous demo folder is removed."""
    project = Path(project_dir).resolve()
    demo = Path(demo_dir).resolve() if demo_dir else project / DEMO_DIR
    examples = CourseLayout(project / EXAMPLES)
    if not examples.submitted_dir.is_dir():
        raise CourseError(f"{examples.submitted_dir}: no bundled example submissions")
    if assignment is not None:
        load_course(project).assignment(assignment)
    if demo.exists():
        shutil.rmtree(demo)
    copy_course(project, demo)
    shutil.copytree(examples.submitted_dir, CourseLayout(demo).submitted_dir)
    roster_src = examples.root / ROSTER_FILE
    if roster_src.is_file():
        shutil.copy2(roster_src, demo / ROSTER_FILE)
    return demo
