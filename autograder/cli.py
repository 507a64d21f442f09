"""The `course` command: argument parsing only; the work is in autograder.api.

Exit codes: 0 done (whatever students scored); 1 the grader itself failed somewhere;
2 a problem with the course or the command line (one line on stderr, no traceback).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from . import __version__, api
from .errors import CourseError


def _log(line: str) -> None:
    print(line, flush=True)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--course-dir", default=".", metavar="DIR",
                        help="the course folder holding course.yml (default: the current folder)")
    p = argparse.ArgumentParser(prog="course", description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--version", action="version", version=f"course {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser("release", parents=[common], help="generate the student notebooks in release/ and check them for leaks")
    r.add_argument("assignment")
    v = sub.add_parser("validate", parents=[common], help="run source and release notebooks in a real kernel and through the autograder")
    v.add_argument("assignment")
    g = sub.add_parser("autograde", parents=[common], help="grade submitted/<student>/<assignment>/ notebooks")
    g.add_argument("assignment")
    g.add_argument("--student", metavar="ID", help="grade only this student")
    g.add_argument("--seed", type=int, metavar="N", help="replay with this hidden-input seed (from results.json)")
    g.add_argument("--force", action="store_true",
                   help="grade every submission again, even those unchanged since they were graded under the same graders")
    g.add_argument("--insecure", action="store_true",
                   help="grade even if the sandbox cannot be fully set up here (not for untrusted submissions; "
                        "see `course doctor`)")
    sub.add_parser("doctor", help="check which sandbox layers this machine supports (exit 1 if autograde would refuse)")
    d = sub.add_parser("demo", parents=[common], help="release, validate and grade the bundled example submissions in .demo/")
    d.add_argument("--assignment", default="transformer-block")
    d.add_argument("--skip-validate", action="store_true", help="skip executing notebooks in Jupyter kernels")
    return p


def _autograde(course_dir: str, assignment: str, student: str | None, seed: int | None,
               force: bool = False, insecure: bool = False) -> int:
    from .reporting.summary import format_summary
    from .config import load_course

    batch = api.autograde(course_dir, assignment, student=student, seed=seed, force=force, insecure=insecure,
                          log=_log)
    a = load_course(course_dir).assignment(assignment)
    print()
    print(format_summary(batch.results, a))
    if batch.skipped:
        print(f"Not graded again (submission and graders unchanged since the last run; --force to regrade): "
              f"{', '.join(batch.skipped)}")
    root = Path(course_dir).resolve()
    print(f"\nresults.json: {batch.autograded_dir.relative_to(root)}/<student>/{assignment}/results.json")
    print(f"feedback:     {batch.feedback_dir.relative_to(root)}/<student>/{assignment}/")
    for err in batch.gradebook_errors:
        print(f"gradebook: {err}", file=sys.stderr)
    for err in batch.output_errors:
        print(f"output: {err}", file=sys.stderr)
    if not batch.results:
        print(f"no submissions found under submitted/<student>/{assignment}/")
    return 1 if batch.grader_failed else 0


def _demo(course_dir: str, assignment: str, skip_validate: bool) -> int:
    demo = api.prepare_demo(course_dir)
    print(f"demo course folder: {demo}")
    print(f"\n== course release {assignment}")
    api.release(demo, assignment, log=_log)
    if not skip_validate:
        print(f"\n== course validate {assignment}")
        report = api.validate(demo, assignment, log=_log)
        for problem in report.problems:
            print(f"PROBLEM: {problem}")
        if not report.ok:
            return 1
    print(f"\n== course autograde {assignment}  ({len(api.submissions(api.load_course(demo), assignment))} example submissions)")
    return _autograde(str(demo), assignment, None, None)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # nbgrader shells out to alembic and kernels are this environment's python: our bin goes first.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    try:
        if args.command == "release":
            api.release(args.course_dir, args.assignment, log=_log)
            return 0
        if args.command == "validate":
            report = api.validate(args.course_dir, args.assignment, log=_log)
            for problem in report.problems:
                print(f"PROBLEM: {problem}")
            print("validate: ok" if report.ok else f"validate: {len(report.problems)} problem(s)")
            return 0 if report.ok else 1
        if args.command == "autograde":
            return _autograde(args.course_dir, args.assignment, args.student, args.seed, args.force,
                              args.insecure)
        if args.command == "doctor":
            return 0 if api.doctor(log=_log).ok else 1
        if args.command == "demo":
            return _demo(args.course_dir, args.assignment, args.skip_validate)
    except CourseError as exc:
        print(f"course: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("course: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
