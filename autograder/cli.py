"""The `course` command: argument parsing only; the work is in autograder.api.

Exit codes: 0 done (whatever students scored); 1 the command ran and reports something to fix (the
grader failed for a submission, a page was not written, validate's problems, doctor: autograde would
refuse); 2 a problem with the course or the command line (one line on stderr, no traceback); 130
interrupted (Ctrl-C); 143 `course autograde` stopped by SIGTERM (its workers killed as for Ctrl-C).
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from . import __version__
from .errors import CourseError, raise_on_sigterm
from .slowimports import skip_format_checkers
from .text import plural, sorted_ids
from .toolpath import tools_on_path

# The engine (autograder.api, autograder.config) is imported where used: `course autograde`
# first starts its grading workers (`_early_workers`), whose start-up then overlaps with those
# imports.
if TYPE_CHECKING:

    from .batch.launch import StartedWorker
    from .layout import CourseLayout

DESCRIPTION = """\
Release, check and grade the notebook assignments of the course in the current folder (or
--course-dir): course.yml lists the assignments; students' notebooks are graded by hidden tests
that never run inside the student's own process."""

EPILOG = """\
typical order: course release ASSIGNMENT; course validate ASSIGNMENT; nbgrader release_assignment;
nbgrader collect (into submitted/<student>/ASSIGNMENT/); course autograde ASSIGNMENT; review in
formgrader; course feedback ASSIGNMENT; nbgrader release_feedback; nbgrader export.
exit codes: 0 done, whatever students scored; 1 the command ran and found something to fix: the
grader itself failed for some submission (autograde), a page was not written (feedback), PROBLEM
lines (validate), autograde would refuse here (doctor); 2 a problem with course.yml, the course
folder or the command line stopped the command (one line on stderr); 130 interrupted (Ctrl-C); 143
autograde stopped by SIGTERM."""


def _log(line: str) -> None:
    print(line, flush=True)


def positive_count(text: str) -> int:
    """argparse's type for a whole number of at least 1 (also the tools' scripts')."""
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return n


def _seed(text: str) -> int:
    from .grading.seeds import SEED_EXPECTED, is_seed

    try:
        n = int(text)
    except ValueError:
        n = -1
    if not is_seed(n):
        raise argparse.ArgumentTypeError(f"expected {SEED_EXPECTED}, not {text!r}")
    return n


def _student(text: str) -> str:
    from .layout import student_id_problem

    why = student_id_problem(text)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a student id: {why}")
    return text


def _parser() -> argparse.ArgumentParser:
    # --course-dir goes before the command or after it (`course --course-dir DIR autograde ...`, as
    # nbgrader's commands take theirs after); unset at both, it is the current folder (`_course_dir`)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", default=argparse.SUPPRESS, metavar="DIR",
                        help="the course folder holding course.yml (default: the current folder)")
    p = argparse.ArgumentParser(prog="course", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"course {__version__}")
    p.add_argument("--course-dir", default=argparse.SUPPRESS, metavar="DIR",
                   help="the course folder holding course.yml (default: the current folder); also taken after "
                        "the command")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("release", parents=[common],
                       help="generate the student notebooks in release/ and check them for leaks")
    r.add_argument("assignment", nargs="?", help="an assignment from course.yml (default: every one)")
    r.add_argument("--drop-grades", action="store_true",
                   help="let the release remove cells (a grade_id renamed, a notebook dropped) that submissions "
                        "have grades or comments for, with those grades and comments (refused without it)")
    v = sub.add_parser("validate", parents=[common],
                       help="run source and release notebooks in a real kernel and through the autograder")
    v.add_argument("assignment", nargs="?", help="an assignment from course.yml (default: every one)")
    g = sub.add_parser("autograde", parents=[common], help="grade submitted/<student>/<assignment>/ notebooks")
    g.add_argument("assignment", help="an assignment from course.yml")
    g.add_argument("--student", type=_student, metavar="ID", help="grade only this student")
    g.add_argument("--seed", type=_seed, metavar="N", help="replay with this hidden-input seed (from results.json)")
    g.add_argument("--force", action="store_true",
                   help="grade every submission again, even those unchanged since they were graded under the "
                        "same graders")
    g.add_argument("--insecure", action="store_true",
                   help="grade even if the sandbox cannot be fully set up here (not for untrusted submissions; "
                        "see `course doctor`)")
    g.add_argument("--workers", type=positive_count, metavar="N",
                   help="grade with N warm worker processes on this machine (default, and at most: the cores "
                        "available, within a cgroup CPU quota)")
    g.add_argument("--wait", action="store_true",
                   help="with --student, return only once the grades are in the gradebook (by default the "
                        "command returns once results.json and the page are written, and the commit finishes "
                        "in the background; every course command waits for it); a whole class always waits")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="grade on the Dask cluster whose scheduler is at ADDRESS (e.g. tcp://host:8786); "
                        "the course folder must be at the same path on its workers")
    s = sub.add_parser("serve", parents=[common],
                       help="keep a warm grading worker for ASSIGNMENT, so that `course autograde ASSIGNMENT "
                            "--student ID` grades at once (first feedback without a worker's start-up)")
    s.add_argument("assignment", help="an assignment from course.yml")
    s.add_argument("--idle-minutes", type=float, default=60.0, metavar="M",
                   help="stop after M minutes without a submission to grade (default: 60)")
    s.add_argument("--insecure", action="store_true",
                   help="serve even if the sandbox cannot be fully set up here (only commands given --insecure "
                        "use it)")
    f = sub.add_parser("feedback", parents=[common],
                       help="(re)write feedback pages from results.json and the gradebook (TA overrides and comments)")
    f.add_argument("assignment", help="an assignment from course.yml")
    f.add_argument("--student", type=_student, metavar="ID", help="only this student's page")
    gs = sub.add_parser("gradescope", parents=[common],
                        help="write ASSIGNMENT's Gradescope autograder zip (setup.sh, run_autograder, the engine, "
                             "the assignment's course files and the course secret; see docs/gradescope.md)")
    gs.add_argument("assignment", help="an assignment from course.yml")
    gs.add_argument("--to", metavar="FILE",
                    help="where to write the zip (default: gradescope/ASSIGNMENT-autograder.zip, its folder made "
                         "when missing); FILE's folder must exist")
    gs.add_argument("--visibility", default="visible", metavar="WHEN",
                    help="when students see their results on Gradescope: hidden, after_due_date, after_published "
                         "or visible (results.json's visibility; default: visible)")
    sub.add_parser("doctor", parents=[common],
                   help="check which sandbox layers this machine supports, and the course folder when it holds a "
                   "course.yml or is named by --course-dir (exit 1 if autograde would refuse)")
    d = sub.add_parser("demo", parents=[common],
                       help="release, validate and grade the bundled example submissions in .demo/")
    d.add_argument("--assignment", help="the assignment to grade (default: the first in course.yml)")
    d.add_argument("--skip-validate", action="store_true", help="skip executing notebooks in Jupyter kernels")
    return p


def _autograde(course_dir: str | Path, assignment: str, student: str | None, seed: int | None,
               force: bool = False, insecure: bool = False, workers: int | None = None,
               scheduler: str | None = None, wait: bool = True, early: tuple[StartedWorker, ...] = (),
               shown_from: Path | None = None) -> int:
    """Grade and print the summary; the closing lines name results.json and the pages relative to the
    course folder, or to `shown_from` when they are under it (the demo's: .demo/autograded/...)."""
    from . import api
    from .config import load_course
    from .progress import Progress

    progress = Progress()
    try:
        batch = api.autograde(course_dir, assignment, student=student, seed=seed, force=force, insecure=insecure,
                              workers=workers, scheduler=scheduler, background_commit=not wait, early=early,
                              log=progress.line, progress=progress.update, notice=progress.notice)
    finally:
        progress.close()
    # imported after the batch: its imports (numpy) need not delay the gradebook writer's start
    from .reporting.summary import format_summary, not_submitted_lines

    course = load_course(course_dir)
    a = course.assignment(assignment)
    layout = course.layout
    print()
    print(format_summary(batch.results, a, graders=layout.relative(layout.graders(a.package))))
    if batch.already_graded:
        print(f"Already graded: {', '.join(sorted_ids(batch.already_graded))} (submission and graders unchanged "
              f"since the last run): nothing was graded or written; --force grades again")
    rewritten = [sid for sid in batch.skipped if sid not in batch.already_graded]
    if rewritten:
        print(f"Not graded again (submission and graders unchanged since the last run: results kept, grades "
              f"written to the gradebook again; --force to regrade): {', '.join(sorted_ids(rewritten))}")

    def shown(path: Path) -> str:
        if shown_from is not None and path.is_relative_to(shown_from):
            return path.relative_to(shown_from).as_posix()
        return layout.relative(path)

    print(f"\nresults.json: {shown(layout.results_json('<student>', a.name))}")
    print(f"feedback:     {shown(layout.feedback('<student>', a.name))}/")
    if batch.committing:
        print(f"gradebook: {', '.join(sorted_ids(batch.committing))}'s grades are being committed in the background "
              f"(course commands wait for it; --wait to wait here)")
    if batch.review_unread:
        print(f"gradebook: a TA's changes for {', '.join(sorted_ids(batch.review_unread))} could not be read now, "
              f"so the table shows the autograder's scores (--wait, or the feedback page, shows the final ones)")
    if batch.gradebook_changes:
        print(f"gradebook: from course.yml: {api.summarise_changes(batch.gradebook_changes)}")
    for line in batch.ungraded:
        print(f"not graded: {line}")
    for line in batch.unreadable:
        print(f"not graded: {line}", file=sys.stderr)
    if student is None:
        from .consistency import extension_problems, release_points_problems
        for line in extension_problems(course, a, (r.student for r in batch.results)):
            print(f"WARNING: {line}")
        for line in release_points_problems(course, a):
            print(f"WARNING: {line}; graded on course.yml's points")
    if batch.not_submitted:
        for line in not_submitted_lines(batch.not_submitted, a):
            print(line)
        from .config import roster_typo
        for row in batch.results:
            typo = None if row.on_roster else roster_typo(row.student, batch.not_submitted, case_only=False)
            if typo:
                print(f"WARNING: {typo}: if so, correct the roster (or rename the submission folder) and run "
                      f"`course autograde {a.name}` again")
    for err in batch.gradebook_errors:
        print(f"gradebook: {err}", file=sys.stderr)
    for err in batch.output_errors:
        print(f"output: {err}", file=sys.stderr)
    if not batch.results:
        where = f"{layout.relative(layout.submission('<student>', a.name))}/"
        print(nothing_graded(where, unreadable=len(batch.unreadable), removed=len(batch.removed)))
    return 1 if batch.grader_failed else 0


def nothing_graded(where: str, *, unreadable: int, removed: int) -> str:
    """The closing line of a `course autograde` that graded nobody: no submission under `where`, or
    every one found was left ungraded, each named in a line above: `unreadable` the grader could not
    read (their earlier grades stand), `removed` of students taken out of the course."""
    found = unreadable + removed
    if not found:
        return f"no submissions found under {where}"
    why = []
    if unreadable:
        why.append(f"{unreadable} could not be read (earlier grades stand)")
    if removed:
        why.append(f"{removed} of {'a student' if removed == 1 else 'students'} taken out of the course")
    return (f"nothing was graded: {plural(found, 'submission')} found under {where}, none gradable: "
            f"{' and '.join(why)}; each is named above")


def _feedback(course_dir: str, assignment: str, student: str | None) -> int:
    from . import api
    from .config import load_course

    report = api.feedback(course_dir, assignment, student=student, log=_log)
    course = load_course(course_dir)
    layout = course.layout
    print(f"\n{plural(len(report.written), 'feedback page')} written under "
          f"{layout.relative(layout.feedback('<student>', report.assignment))}/")
    if report.not_graded:
        print(f"not graded yet (run `course autograde {report.assignment}`): "
              f"{', '.join(sorted_ids(report.not_graded))}")
    if report.removed:
        print(f"taken out of the course (on neither the roster nor the gradebook, which had their grades), so no "
              f"page was written: {', '.join(sorted_ids(report.removed))}; add them to the roster (or `nbgrader db "
              f"student add`) and run `course autograde {report.assignment}` to grade them again")
    if report.no_secret:
        print(f"no submission_secret.txt (not submitted through nbgrader's exchange), so `nbgrader "
              f"release_feedback` cannot release them (it leaves them out, naming each): "
              f"{', '.join(sorted_ids(report.no_secret))}")
    for err in report.errors:
        print(f"feedback: {err}", file=sys.stderr)
    return 1 if report.errors else 0


def _release(course_dir: str, assignment: str | None, drop_grades: bool = False) -> int:
    from . import api

    for name in api.assignment_names(course_dir, assignment):
        api.release(course_dir, name, log=_log, drop_grades=drop_grades)
    return 0


def _validate(course_dir: str, assignment: str | None) -> int:
    from . import api

    failed = 0
    for name in api.assignment_names(course_dir, assignment, set_up=False):
        report = api.validate(course_dir, name, log=_log, missing_as_problems=assignment is None)
        for warning in report.warnings:
            print(f"WARNING: {warning}")
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        print(f"validate {name}: ok" if report.ok else f"validate {name}: {plural(len(report.problems), 'problem')}")
        failed += not report.ok
    return 1 if failed else 0


def _demo(course_dir: str, assignment: str | None, skip_validate: bool) -> int:
    from . import api
    from .config import load_course

    demo = api.prepare_demo(course_dir, assignment=assignment)
    print(f"demo course folder: {demo}")
    assignment = assignment or api.assignment_names(demo, None, set_up=False)[0]
    print(f"\n== course release {assignment}")
    api.release(demo, assignment, log=_log)
    if not skip_validate:
        print(f"\n== course validate {assignment}")
        report = api.validate(demo, assignment, log=_log)
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        if not report.ok:
            return 1
    count = len(api.submissions(load_course(demo), assignment))
    print(f"\n== course autograde {assignment}  ({count} example submissions)")
    return _autograde(demo, assignment, None, None, shown_from=Path.cwd())   # .demo/autograded/..., not autograded/...


def _gradescope(course_dir: str, assignment: str, to: str | None, visibility: str) -> int:
    from .gradescope import build_bundle
    from .layout import CourseLayout

    bundle = build_bundle(course_dir, assignment, to=to, visibility=visibility)
    layout = CourseLayout(Path(course_dir).resolve())
    print(f"wrote {layout.relative(bundle.path)} ({len(bundle.names)} files): upload it as the Gradescope "
          f"assignment's autograder (Ubuntu base image); it holds the course secret, so keep it out of students' reach")
    return 0


def _serve(course_dir: str, assignment: str, idle_minutes: float, insecure: bool) -> int:
    from .batch.serve import Server
    from .text import minutes

    if not idle_minutes > 0:
        raise CourseError(f"--idle-minutes: expected a positive number of minutes, got {idle_minutes:g}")
    with Server(course_dir, assignment, insecure=insecure, log=_log) as server:
        server.start()
        info = server.worker.info
        if info.missing:
            _log(f"WARNING: serving without a complete sandbox (--insecure); missing: {'; '.join(info.missing)}")
        _log(f"serving {server.assignment.name} of {server.course.root} (pid {os.getpid()}, socket {server.path}): "
             f"`course autograde {server.assignment.name} --student ID` grades here; "
             f"stops on Ctrl-C, or after {minutes(idle_minutes, 'idle minute')}")
        why = server.serve(idle_seconds=idle_minutes * 60)
        _log(f"stopped: {why}")
    return 0


def _workers_within_cores(args: argparse.Namespace) -> None:
    """`autograde --workers N` beyond the cores this command may use (affinity, cgroup quota): N brought
    down to them, in one line on stderr. Each worker's sandbox is held on one CPU, and workers that
    share a core grade no faster than one, while each still holds a worker's and a sandbox's memory:
    a number meant as "as many as possible" (the class size, a typo) would otherwise start one
    worker per submission at once."""
    if args.command != "autograde" or args.workers is None or args.scheduler or args.student is not None:
        return                               # (one student: one worker whatever N)
    from .cpus import available_cores

    cores = available_cores()
    if args.workers > cores:
        print(f"course autograde: --workers {args.workers}: this command may use {plural(cores, 'core')} "
              f"(workers sharing a core grade no faster, and each holds its own memory); grading with {cores}",
              file=sys.stderr, flush=True)
        args.workers = cores


def _early_workers(args: argparse.Namespace) -> tuple[StartedWorker, ...]:
    """For `autograde` on this machine with more than one core, its grading workers (forks of this
    process: batch.launch.fork_worker), started before this command imports the engine: their
    start-up (numpy, the sandbox, pytest and the graders' collection) runs while this process
    imports, reads the course, plans the batch and starts the gradebook writer, rather than after
    all of that. `--student` gets one (its start-up on one core, this process's on another); a
    batch one per worker its pool will have (`--workers`, else one per core, at most one per
    submission folder), worker i for the pool's i-th CPU, as the pool would start them. Fewer, or
    none, when they cannot be forked (the pool then starts the others itself, or the submission is
    graded in this process)."""
    if args.command != "autograde" or args.scheduler:
        return ()
    if args.student is not None:             # a warm worker kept by `course serve`, when one runs
        from .batch.serve import connect

        served = connect(args.course_dir, args.assignment)
        if served is not None:
            return (served,)
    from .cpus import affinity, available_cores

    cpus, cores = affinity(), available_cores()     # cores: capped by a cgroup's CPU quota
    if not cpus or cores < 2:
        return ()
    from .batch.launch import fork_worker, log_folder
    from .layout import CourseLayout

    root = Path(args.course_dir).resolve()
    layout = CourseLayout(root)
    if args.student is not None:
        if not os.path.lexists(layout.submission(args.student, args.assignment)):
            return ()                        # an error to report, nothing to grade
        slots: list[int | None] = [None]     # a lone worker: its sandbox takes the least busy CPU
    else:
        count = _submission_folders(layout, args.assignment, limit=args.workers or cores)
        slots = [cpus[i % len(cpus)] for i in range(count)]
    if not slots:
        return ()
    # The worker's first imports (the course's schema, the sandbox's launcher; no numpy, no thread),
    # which this command makes as well: made once, before the fork, rather than in each process. The
    # worker's way to its sandbox's start is as long either way; this process then has less to do
    # beside it (its CPU goes to the sandbox starting on the other core).
    from .batch import worker  # noqa: F401
    from .sandbox import process  # noqa: F401
    started: list[StartedWorker] = []
    try:
        logs = log_folder() if len(slots) > 1 else None
        for cpu in slots:
            started.append(fork_worker(str(root), args.assignment, insecure=args.insecure, cpu=cpu, logs=logs))
    except (OSError, RuntimeError):
        pass                                 # the pool starts the others
    return tuple(started)


def _submission_folders(layout: CourseLayout, assignment: str, *, limit: int) -> int:
    """How many student folders of submitted/ hold an entry for `assignment`, counted up to `limit`
    (an estimate for sizing the pool early: api.submissions lists them for grading)."""
    count = 0
    try:
        with os.scandir(layout.submitted_dir) as entries:
            for entry in entries:
                if count >= limit:
                    break
                if not entry.name.startswith(".") and os.path.lexists(layout.submission(entry.name, assignment)):
                    count += 1
    except OSError:
        return 0
    return count


def main(argv: list[str] | None = None) -> int:
    # Up to the workers' fork this process only imports modules and parses its arguments: objects
    # that live as long as it does, which the cyclic collector would walk again and again as they
    # are made. Off until then (the forked worker keeps it off through its own start-up): the fork
    # of a cold `--student`, and so its first feedback, comes that much sooner.
    collecting = gc.isenabled()
    gc.disable()
    try:
        args = _parser().parse_args(argv)
        args.course_dir_given = hasattr(args, "course_dir")     # doctor: a folder named must be a course
        if not args.course_dir_given:
            args.course_dir = "."
        skip_format_checkers()               # before anything imports nbformat or nbgrader
        _workers_within_cores(args)
        early = _early_workers(args)
    finally:
        if collecting:
            gc.enable()
    interrupted = False
    # after the workers' fork: a forked worker keeps the default (SIGTERM ends it)
    restore = raise_on_sigterm(Terminated) if args.command == "autograde" else None
    try:
        with tools_on_path():
            return _run(args, early)
    except CourseError as exc:
        print(f"course: error: {exc}", file=sys.stderr)
        return 2
    except Terminated as exc:
        interrupted = True
        print(f"course: terminated (SIGTERM){_notes(exc)}", file=sys.stderr)
        return 143
    except KeyboardInterrupt as exc:
        interrupted = True
        print(f"course: interrupted{_notes(exc)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    finally:
        for started in early:
            started.close(kill=interrupted)  # stopped already when they graded; killed when interrupted
        if restore is not None:
            restore()


def _notes(exc: BaseException) -> str:
    """The notes an interrupt was given on its way out (api.interrupted_line), after ": "; "" without any."""
    notes = [str(note) for note in getattr(exc, "__notes__", ())]
    return f": {'; '.join(notes)}" if notes else ""


class Terminated(KeyboardInterrupt):
    """SIGTERM during `course autograde`: it stops the command as Ctrl-C does (its workers and their
    sandboxes killed at once, the grades already sent to the gradebook writer committed)."""


def _unfinished_commits(course_dir: str) -> None:
    """When grades are being committed in the background, wait for that; then say so if one such
    commit failed or was interrupted."""
    from .config import load_course
    from .reporting.gradebook import PENDING_DIR, gradebook_lock, unfinished_commits

    if not (Path(course_dir) / PENDING_DIR).is_dir():
        return
    try:
        course = load_course(course_dir)
    except CourseError:
        return                               # the command itself reports it
    with gradebook_lock(course, notice=lambda line: print(line, file=sys.stderr, flush=True)):
        lines = unfinished_commits(course)
    for line in lines:
        print(line, file=sys.stderr)


def _run(args: argparse.Namespace, early: tuple[StartedWorker, ...] = ()) -> int:
    if getattr(args, "course_dir", None) is not None:
        _unfinished_commits(args.course_dir)
    if args.command == "release":
        return _release(args.course_dir, args.assignment, args.drop_grades)
    if args.command == "validate":
        return _validate(args.course_dir, args.assignment)
    if args.command == "autograde":
        if args.workers is not None and args.scheduler:
            raise CourseError("--workers and --scheduler: give one (a cluster's workers are set up on the cluster)")
        if args.scheduler is not None and not args.scheduler.strip():
            raise CourseError("--scheduler: empty address (an unset variable?); give the Dask scheduler's address, "
                              "e.g. tcp://host:8786, or leave the option out to grade on this machine")
        if args.seed is not None and args.student is None:
            print(f"WARNING: --seed {args.seed} without --student: every student is graded on this one draw, and "
                  f"their results and grades are replaced until a run without --seed (a fairness check, for a "
                  f"scratch copy of the course)", file=sys.stderr, flush=True)
        if args.wait and args.student is None:
            print("WARNING: --wait changes nothing without --student: a whole-class autograde always commits every "
                  "grade to the gradebook before it returns", file=sys.stderr, flush=True)
        return _autograde(args.course_dir, args.assignment, args.student, args.seed, args.force, args.insecure,
                          args.workers, args.scheduler, wait=args.wait or args.student is None, early=early)
    if args.command == "serve":
        return _serve(args.course_dir, args.assignment, args.idle_minutes, args.insecure)
    if args.command == "feedback":
        return _feedback(args.course_dir, args.assignment, args.student)
    if args.command == "gradescope":
        return _gradescope(args.course_dir, args.assignment, args.to, args.visibility)
    if args.command == "doctor":
        from . import api
        return 0 if api.doctor(course_dir=args.course_dir, log=_log, named=args.course_dir_given).ok else 1
    if args.command == "demo":
        return _demo(args.course_dir, args.assignment, args.skip_validate)
    raise AssertionError(f"unknown command {args.command!r}")


def run() -> NoReturn:
    """The `course` command's entry point: `main`, then a quick exit. Everything the command opened
    is closed by then (sandbox, workers, files); the interpreter's own teardown of the modules it
    imported (numpy, pytest, Jinja, ...) would add a noticeable part of a one-student run's time,
    so the output is flushed, the exit handlers run, and the process ends without that teardown."""
    code = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):    # a reader gone, or the stream closed
            stream.flush()
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    run()
