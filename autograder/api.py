"""Plain functions behind the `course` command: release, validate, autograde, demo.

Each takes a course folder and returns a report object; none prints except through `log`.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import Assignment, Course, load_course
from .errors import CourseError
from .grading.results import SubmissionResult
from .layout import DEMO_DIR, EXAMPLES, ROSTER_FILE, CourseLayout, copy_course
from .notebooks import RefusedFile, more_code_cells_than, open_regular, read_regular, submission_entries

if TYPE_CHECKING:       # imported where used: nbgrader and Jupyter load slowly
    from .release import ReleaseReport
    from .validate import ValidationReport

Log = Callable[[str], None]
Progress = Callable[[int, int], None]
RESULTS_READ_MAX_BYTES = 16 * 2**20   # a results.json larger than this is not ours: grade again


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
    skipped: tuple[str, ...] = ()         # students not graded again: same submission, same graders
    output_errors: tuple[str, ...] = ()   # "<student>: <why>" for results/feedback that could not be written

    @property
    def grader_failed(self) -> bool:
        """True when the grader itself failed somewhere (not when students did)."""
        return (bool(self.gradebook_errors) or bool(self.output_errors)
                or any(r.grader_failed for r in self.results))


def submissions(course: Course, assignment: str, student: str | None = None) -> list[tuple[str, Path]]:
    """(student id, folder) for every submitted/<student>/<assignment>/, sorted by student id.

    A student folder or assignment folder that is a symbolic link is listed too (grading refuses
    it with a reason for that student); no link is followed here."""
    layout = course.layout
    if student is not None:
        folder = layout.submission(student, assignment)
        if not (os.path.lexists(folder) and os.path.lexists(folder.parent)):
            raise CourseError(f"{layout.relative(folder)}: no such submission folder")
        return [(student, folder)]
    base = layout.submitted_dir
    if not base.is_dir():
        return []
    out = []
    for name, mode in submission_entries(base):
        if name.startswith(".") or not (stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            continue
        folder = layout.submission(name, assignment)
        if stat.S_ISLNK(mode) or os.path.lexists(folder):
            out.append((name, folder))
    return out


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


def autograde(course_dir: str | Path, assignment: str, *, student: str | None = None,
              seed: int | None = None, force: bool = False, insecure: bool = False,
              workers: int | None = None, scheduler: str | None = None,
              log: Log = _quiet, progress: Progress | None = None) -> BatchResult:
    """Grade submissions; write results.json, feedback pages and the gradebook.

    Refuses (SandboxUnavailable, one line) when the sandbox cannot be fully set up on this
    machine, unless `insecure`; the layers that applied are recorded in every results.json.

    Submissions are graded by warm workers (autograder.batch): `workers` processes on this machine
    (default: the cores available; one runs in this process), or the workers of the Dask cluster
    whose scheduler is at `scheduler`. This process alone writes results: each student's
    results.json and feedback page as soon as their result arrives; one gradebook writer process
    (so grading never waits for nbgrader) commits their grades and copies their notebooks into
    autograded/ for the formgrader, and has finished when this returns. A batch stopped at any
    point and run again finishes with every grade present once: a submission whose content, seed
    and graders are unchanged since its results.json was written is not graded again unless
    `force` (see grading.fingerprint); it is listed in `BatchResult.skipped`, and its grades are
    written again. `progress(done, total)` is
    called as results are written. The results are in student order, whatever the workers.
    """
    from .batch.pool import make_pool
    from .batch.worker import Task
    from .batch.writer import GradebookProcess
    from .grading.fingerprint import graders_version, grading_key, submission_hash
    from .grading.seeds import course_secret, student_seed

    started = time.perf_counter()
    course = load_course(course_dir)
    a = course.assignment(assignment)
    todo = submissions(course, a.name, student)
    roster = set(course.roster())
    secret = course_secret(course.secret_file)
    version = graders_version(course, a)
    by_student: dict[str, SubmissionResult] = {}
    skipped: list[str] = []
    output_errors: list[str] = []
    with contextlib.ExitStack() as stack:
        gradebook = stack.enter_context(GradebookProcess(course.root, a.name))   # starts now, in parallel
        pool = make_pool(course.root, a.name, workers=workers, scheduler=scheduler, submissions=len(todo),
                         insecure=insecure)
        stack.callback(pool.close)
        info = pool.start() if todo else None   # fails closed here, before any submission is touched
        if info is not None and info.missing:
            log(f"WARNING: grading without a complete sandbox (--insecure); missing: {'; '.join(info.missing)}")
        layers = info.layers if info is not None else ()
        keys: dict[str, str] = {}
        refused: set[str] = set()
        folders = dict(todo)
        tasks: list[Task] = []
        ready: list[tuple[SubmissionResult, bool]] = []       # (result, fresh) known without grading
        for sid, folder in todo:
            s_seed = seed if seed is not None else student_seed(secret, a.name, sid)
            on_roster = sid in roster
            refusal = _refusal(course, folder)
            try:
                keys[sid] = "" if refusal else grading_key(version, submission_hash(folder), seed=s_seed,
                                                           on_roster=on_roster, isolation=layers)
            except Exception:  # noqa: BLE001 - an unreadable folder is graded (and explained) below
                keys[sid] = ""
            previous = None if force or not keys[sid] else _previous_result(
                course.layout.results_json(sid, a.name), keys[sid], sid, a.name)
            if previous is not None:
                skipped.append(sid)
                ready.append((previous, False))
            elif refusal:
                refused.add(sid)
                ready.append((_refused(a, sid, s_seed, on_roster, refusal, layers), True))
            else:
                tasks.append(Task(student=sid, folder=str(folder), seed=s_seed, on_roster=on_roster))

        def graded() -> Iterator[tuple[SubmissionResult, bool]]:
            yield from ready
            if tasks:
                for _, result in pool.run(tasks):
                    yield result, True

        for result, fresh in graded():
            sid = result.student
            by_student[sid] = result
            output_errors.extend(_write_outputs(course, a, sid, folders[sid], result, keys[sid],
                                                fresh=fresh, refused=sid in refused, formgrader=False))
            copy = needs_formgrader_copy(course, a, sid, fresh=fresh, refused=sid in refused)
            gradebook.record(result, copy_from=folders[sid] if copy else None)
            log(f"{'graded' if fresh else 'unchanged':<9} {sid:<20} "
                f"{result.score:6.2f}/{result.max_score:g}"
                + ("" if result.on_roster else "  (not on the roster)")
                + ("  GRADER ERROR" if result.state == "crashed" else "")
                + (f"  {result.execution_time:.2f} s" if fresh else "  (not graded again)"))
            if progress is not None:
                progress(len(by_student), len(todo))
        pool.close()                             # the workers go before the wait for the gradebook
        book = gradebook.finish()
    output_errors.extend(book.output_errors)
    results = tuple(by_student[sid] for sid, _ in todo if sid in by_student)
    return BatchResult(assignment=a.name, results=results, gradebook_errors=book.gradebook.messages,
                       autograded_dir=course.layout.autograded_dir, feedback_dir=course.layout.feedback_dir,
                       seconds=round(time.perf_counter() - started, 2), skipped=tuple(skipped),
                       output_errors=tuple(output_errors))


def _refused(a: Assignment, sid: str, s_seed: int, on_roster: bool, reason: str,
             layers: tuple[str, ...]) -> SubmissionResult:
    """A submission refused before anything of it ran (a link in place of its folder): 0, with the reason."""
    return SubmissionResult(
        student=sid, assignment=a.name, state="graded", seed=s_seed, on_roster=on_roster, notes=(reason,),
        problems=tuple(p.name for p in a.problems), isolation=layers,
        problem_points=tuple((p.name, p.points) for p in a.problems))


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
    why = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in info.missing}
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


def _previous_result(path: Path, key: str, sid: str, assignment: str) -> SubmissionResult | None:
    """The result stored in results.json when it was graded under `key` (and did not crash)."""
    import json

    from .reporting.results_json import result_from_json

    try:
        doc = json.loads(read_regular(path, RESULTS_READ_MAX_BYTES))
        result, stored_key = result_from_json(doc)
    except (RefusedFile, ValueError, RecursionError):
        return None
    if stored_key != key or result.state != "graded" or result.student != sid or result.assignment != assignment:
        return None
    return result


def _write_outputs(course: Course, a: Assignment, sid: str, folder: Path, result: SubmissionResult, key: str, *,
                   fresh: bool, refused: bool, formgrader: bool = True) -> list[str]:
    """Write what the batch produces for one student; each step's failure is reported, none stops
    the batch. results.json comes last: its grading key marks the student as done. Without
    `formgrader`, the copy for the formgrader is left to `write_formgrader_copy` (which a batch's
    gradebook writer process calls, since it needs nbformat, slow to import)."""
    from .reporting.feedback import feedback_filename, write_feedback
    from .reporting.results_json import write_results_json

    layout = course.layout

    def results() -> None:
        _inside(course, layout.autograded(sid, a.name))
        write_results_json(result, layout.results_json(sid, a.name),
                           grading_key=key if result.state == "graded" else None)

    steps: list[tuple[str, Callable[[], object]]] = []
    if formgrader and fresh and not refused:
        steps.append(("copying the notebooks into autograded/",
                      lambda: write_formgrader_copy(course, a, sid, folder, result)))
    feedback = layout.feedback(sid, a.name)
    if fresh or not (feedback / feedback_filename(result)).is_file():
        steps.append(("writing the feedback page", lambda: write_feedback(result, a, _inside(course, feedback))))
    if fresh:
        steps.append(("writing results.json", results))
    return _run_steps(sid, steps)


def _run_steps(sid: str, steps: list[tuple[str, Callable[[], object]]]) -> list[str]:
    errors = []
    for what, step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - reported per student; the batch goes on
            errors.append(f"{sid}: {what}: {type(exc).__name__}: {exc}".splitlines()[0][:500])
    return errors


def _inside(course: Course, path: Path) -> Path:
    """A folder of the course, created without going through any link."""
    return _output_dir(course.root, *path.relative_to(course.root).parts)


def needs_formgrader_copy(course: Course, a: Assignment, sid: str, *, fresh: bool, refused: bool) -> bool:
    """Whether autograded/<student>/<assignment>/ should get the submission's notebooks: when it was
    graded afresh, or when a stopped batch left it without them."""
    if refused:
        return False
    if fresh:
        return True
    target = course.layout.autograded(sid, a.name)
    try:
        return not any(name.endswith(".ipynb") for name, _ in submission_entries(target))
    except OSError:
        return True


def write_formgrader_copy(course: Course, a: Assignment, sid: str, folder: Path, result: SubmissionResult) -> None:
    """Copy the submission's notebooks into autograded/ for the formgrader, annotated with our report."""
    from .reporting.annotate import annotate_autograded

    layout = course.layout
    target = _inside(course, layout.autograded(sid, a.name))
    _copy_for_formgrader(folder, target, max_bytes=int(a.limits.notebook_mb * 1024 * 1024))
    copies = [target / name for name, mode in submission_entries(target)
              if stat.S_ISREG(mode) and name.endswith(".ipynb")]
    if not any(more_code_cells_than(c) for c in copies):   # nbformat would need hundreds of MB
        annotate_autograded(result, a, target, layout.release(a.name))


def formgrader_copy_errors(course: Course, a: Assignment, sid: str, folder: Path,
                           result: SubmissionResult) -> list[str]:
    """`write_formgrader_copy`, its failure reported as one line (as `_write_outputs` reports)."""
    return _run_steps(sid, [("copying the notebooks into autograded/",
                             lambda: write_formgrader_copy(course, a, sid, folder, result))])


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


def _copy_for_formgrader(submitted: Path, autograded: Path, *, max_bytes: int) -> None:
    """Copy the submitted notebooks and timestamp (as nbgrader's autograde does), so formgrader can
    show them for manual review. Only regular files within the notebook size limit are copied; no
    link is followed and each copy is written atomically. The originals are only read."""
    for name, mode in submission_entries(submitted):
        if not stat.S_ISREG(mode) or not (name.endswith(".ipynb") or name == "timestamp.txt"):
            continue
        try:
            fd = open_regular(submitted / name)
        except RefusedFile:
            continue
        try:
            if os.fstat(fd).st_size > max_bytes:
                continue
            tmp = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed below, then renamed into place or removed
                dir=autograded, prefix=f".{name}.", suffix=".tmp", delete=False)
            try:
                with tmp:
                    os.fchmod(tmp.fileno(), 0o644)
                    with os.fdopen(os.dup(fd), "rb") as src:
                        shutil.copyfileobj(src, tmp, 1 << 20)
                os.replace(tmp.name, autograded / name)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp.name)
                raise
        finally:
            os.close(fd)


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
