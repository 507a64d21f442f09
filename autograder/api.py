"""Plain functions behind the `course` command: release, validate, autograde, demo.

Each takes a course folder and returns a report object; none prints except through `log`.
"""
from __future__ import annotations

import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Course, load_course
from .errors import CourseError
from .grading.results import SubmissionResult
from .layout import DEMO_DIR, EXAMPLES, ROSTER_FILE, CourseLayout, copy_course

if TYPE_CHECKING:       # imported where used: nbgrader and Jupyter load slowly
    from .release import ReleaseReport
    from .validate import ValidationReport

Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def assignment_names(course_dir: str | Path, assignment: str | None) -> list[str]:
    """[assignment] when it is in course.yml, or every assignment's name when it is None."""
    course = load_course(course_dir)
    if assignment is not None:
        return [course.assignment(assignment).name]
    return [a.name for a in course.assignments]


def release(course_dir: str | Path, assignment: str, *, log: Log = _quiet) -> ReleaseReport:
    from .release import release as run_release

    course = load_course(course_dir)
    a = course.assignment(assignment)
    report = run_release(course, a)
    for nb in report.notebooks:
        log(f"released {nb.relative_to(course.root)} (leak check: {report.checked_lines} instructor-only lines absent)")
    return report


def validate(course_dir: str | Path, assignment: str, *, log: Log = _quiet) -> ValidationReport:
    from .validate import validate as run_validate

    course = load_course(course_dir)
    report = run_validate(course, course.assignment(assignment))
    for run in report.source_runs:
        log(f"source  {run.path.relative_to(course.root)}: {run.cells} cells ran in a Jupyter kernel in "
            f"{run.seconds:.1f} s, {len(run.errors)} errors")
    for run in report.release_runs:
        kinds = sorted({e.ename for e in run.errors})
        log(f"release {run.path.relative_to(course.root)}: {run.cells} cells ran in {run.seconds:.1f} s, "
            f"{len(run.errors)} cells stopped at unfinished stubs ({', '.join(kinds) or 'none'})")
    log(f"autograder: source scores {report.source_score[0]:g}/{report.source_score[1]:g}, "
        f"release scores {report.release_score[0]:g}/{report.release_score[1]:g}")
    return report


@dataclass(frozen=True)
class BatchResult:
    assignment: str
    results: tuple[SubmissionResult, ...]
    gradebook_errors: tuple[str, ...]
    autograded_dir: Path
    feedback_dir: Path
    seconds: float

    @property
    def grader_failed(self) -> bool:
        """True when the grader itself failed somewhere (not when students did)."""
        return bool(self.gradebook_errors) or any(r.state == "crashed" or r.error for r in self.results)


def submissions(course: Course, assignment: str, student: str | None = None) -> list[tuple[str, Path]]:
    """(student id, folder) for every submitted/<student>/<assignment>/, sorted by student id."""
    layout = course.layout
    if student is not None:
        folder = layout.submission(student, assignment)
        if not folder.is_dir():
            raise CourseError(f"{layout.relative(folder)}: no such submission folder")
        return [(student, folder)]
    base = layout.submitted_dir
    if not base.is_dir():
        return []
    return sorted((d.name, layout.submission(d.name, assignment)) for d in base.iterdir()
                  if d.is_dir() and not d.name.startswith(".") and layout.submission(d.name, assignment).is_dir())


def autograde(course_dir: str | Path, assignment: str, *, student: str | None = None,
              seed: int | None = None, insecure: bool = False, log: Log = _quiet) -> BatchResult:
    """Grade submissions; write results.json, feedback pages and the gradebook.

    Refuses (SandboxUnavailable, one line) when the sandbox cannot be fully set up on this
    machine, unless `insecure`; the layers that applied are recorded in every results.json."""
    from .grading.engine import grade_submission, load_instructor_code
    from .grading.seeds import course_secret, student_seed
    from .reporting.annotate import annotate_autograded
    from .reporting.feedback import write_feedback
    from .reporting.gradebook import record_grades
    from .reporting.results_json import write_results_json
    from .sandbox.host import SandboxHost

    started = time.perf_counter()
    course = load_course(course_dir)
    a = course.assignment(assignment)
    todo = submissions(course, a.name, student)
    roster = set(course.roster())
    secret = course_secret(course.secret_file)
    code = load_instructor_code(course, a)
    results: list[SubmissionResult] = []
    host = SandboxHost(insecure=insecure, memory_mb=a.limits.memory_mb, processes=a.limits.processes)
    info = host.start() if todo else None       # fails closed here, before any submission is touched
    if info is not None and info.missing:
        log(f"WARNING: grading without a complete sandbox (--insecure); missing: {'; '.join(info.missing)}")
    for sid, folder in todo:
        s_seed = seed if seed is not None else student_seed(secret, a.name, sid)
        on_roster = sid in roster
        try:
            result = grade_submission(course, a, sid, folder, seed=s_seed, code=code, on_roster=on_roster,
                                      host=host)
        except Exception as exc:  # noqa: BLE001 - one student's notebook never stops the batch
            result = SubmissionResult(
                student=sid, assignment=a.name, state="crashed", seed=s_seed, on_roster=on_roster,
                problems=tuple(p.name for p in a.problems),
                problem_points=tuple((p.name, p.points) for p in a.problems),
                isolation=info.layers if info is not None else (),
                error=f"{type(exc).__name__}: {exc}\n{traceback.format_exc()[-2000:]}")
        results.append(result)
        _copy_for_formgrader(folder, course.layout.autograded(sid, a.name))
        write_results_json(result, course.layout.results_json(sid, a.name))
        write_feedback(result, a, course.layout.feedback(sid, a.name))
        annotate_autograded(result, a, course.layout.autograded(sid, a.name), course.layout.release(a.name))
        log(f"graded {sid:<20} {result.score:6.2f}/{result.max_score:g}"
            + ("" if on_roster else "  (not on the roster)")
            + ("  GRADER ERROR" if result.state == "crashed" else "")
            + f"  {result.execution_time:.2f} s")
    host.close()
    gradebook_errors = record_grades(course, a, results).messages
    return BatchResult(assignment=a.name, results=tuple(results), gradebook_errors=gradebook_errors,
                       autograded_dir=course.layout.autograded_dir,
                       feedback_dir=course.layout.feedback_dir,
                       seconds=round(time.perf_counter() - started, 2))


@dataclass(frozen=True)
class DoctorReport:
    """What `course doctor` found: each isolation layer with whether it applied, and why not."""
    layers: tuple[tuple[str, bool, bool, str], ...]   # (layer, applied, required, explanation)
    facts: tuple[str, ...]                        # about the machine (bubblewrap, user, namespaces, ...)
    error: str = ""                               # the sandbox did not start at all

    @property
    def ok(self) -> bool:
        """Would `course autograde` grade here (without --insecure)?"""
        return not self.error and all(applied for _, applied, required, _ in self.layers if required)


def doctor(*, log: Log = _quiet) -> DoctorReport:
    """Start the sandbox as `course autograde` would, run a probe notebook, report every layer."""
    from .sandbox import isolation
    from .sandbox.host import SandboxHost, SandboxUnavailable
    from .sandbox.outcomes import SandboxError

    facts = isolation.machine_facts()
    for fact in facts:
        log(fact)
    host = SandboxHost(insecure=True)
    try:
        info = host.start()
    except (SandboxUnavailable, SandboxError) as exc:
        log(f"sandbox: {exc}")
        return DoctorReport(layers=(), facts=facts, error=str(exc))
    finally:
        host.close()
    why = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in info.missing + info.notes}
    rows = []
    for layer in isolation.REQUIRED + isolation.OPTIONAL:
        applied = layer in info.layers
        note = isolation.DESCRIPTIONS.get(layer, "") if applied else why.get(layer, "not available here")
        rows.append((layer, applied, layer in isolation.REQUIRED, note))
        mark = "ok " if applied else ("-- " if layer in isolation.OPTIONAL else "NO ")
        log(f"  {mark} {layer:<18} {note}")
    report = DoctorReport(layers=tuple(rows), facts=facts)
    log("course autograde will grade on this machine." if report.ok else
        "course autograde will refuse to grade here (unless --insecure): fix the layers marked NO.")
    return report


def _copy_for_formgrader(submitted: Path, autograded: Path) -> None:
    """Copy the submitted notebooks and timestamp (as nbgrader's autograde does), so formgrader can
    show them for manual review. The originals are only read."""
    autograded.mkdir(parents=True, exist_ok=True)
    for item in submitted.iterdir():
        if item.is_file() and (item.suffix == ".ipynb" or item.name == "timestamp.txt"):
            shutil.copyfile(item, autograded / item.name)


def prepare_demo(project_dir: str | Path, demo_dir: str | Path | None = None) -> Path:
    """A scratch course folder (default .demo/) holding the course and the bundled example submissions."""
    project = Path(project_dir).resolve()
    demo = Path(demo_dir).resolve() if demo_dir else project / DEMO_DIR
    examples = CourseLayout(project / EXAMPLES)
    if not examples.submitted_dir.is_dir():
        raise CourseError(f"{examples.submitted_dir}: no bundled example submissions")
    if demo.exists():
        shutil.rmtree(demo)
    copy_course(project, demo)
    shutil.copytree(examples.submitted_dir, CourseLayout(demo).submitted_dir)
    roster_src = examples.root / ROSTER_FILE
    if roster_src.is_file():
        shutil.copy2(roster_src, demo / ROSTER_FILE)
    return demo
