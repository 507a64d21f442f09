"""The one process that writes the gradebook during a batch, so grading never imports nbgrader.

The batch's driver starts it first (its imports then overlap with the sandbox's start and with
grading) and feeds it each result as it comes; it commits each submission in its own transaction
through reporting.gradebook's GradebookWriter (plain SQL when it can, reporting.gradebook_sql; nbgrader's
API, imported only then, when it cannot), in the order received; then (when asked)
copies the submission's notebooks into autograded/ for the formgrader, annotated with our report
(it needs nbformat, which is slow to import too), and rewrites the student's feedback page when
the gradebook holds a person's overrides or comments for them (api.gradebook_side_outputs):

    writer -> {"op": "open", "created": [...]}              or {"op": "failed", "message"}
    driver -> {"op": "record", "copy_from": null | "<submission folder>", "resubmitted": bool, "regraded": bool}
              + <result_to_dict>   (attached: batch.wire)
    writer -> {"op": "recorded", "student", "error": null | "<why>", "output_errors": [...], "warnings": [...],
               "review": null | <reporting.review.scores_to_plain>, "kept": null | "<what people set>"}

`review` (when a person changed a score in the gradebook: an override, extra credit) carries the
gradebook's scores as committed, so the batch's summary shows what the student gets.

`resubmitted` (a submission whose content changed since it was last graded) asks the writer for a
warning when the gradebook still holds a TA's overrides, extra credit or comments from the earlier
submission (reporting.review.resubmission_warning), which nbgrader keeps on a regrade. `regraded` (the
same submission graded again because the graders changed) asks for what people set in the gradebook, in
words (`kept`: reporting.review.people_set), which the batch names in one line for all such students.
Either raises again the flag of each score a TA set on the submission (`needs_manual_grade`: formgrader's
"needs manual grade"); any other result (an unchanged submission read back) leaves the TA's flags as
they are (reporting.gradebook.needs_manual_grade).
    driver -> {"op": "done"}                                 (then the writer exits)

The driver takes the course's gradebook lock (reporting.gradebook.acquire_gradebook_lock) and
passes it to the writer, which holds it until it exits.

A one-student `course autograde` does not wait for the writer: once the student's results.json and
page are written it takes the lock, records the job under `.gradebook-pending/` and starts a
detached writer (`commit_in_background`), which holds the lock, commits, writes the other files,
then writes results.json again with its grading key and removes the record. So the next course
command waits for that commit, and one that failed or was interrupted is reported by the next
command and graded again by the next `course autograde` (results.json still has no key).

    with GradebookProcess(course_dir, assignment) as gb:
        gb.record(result, copy_from=folder)   # returns at once
        for ack in gb.recorded():             # acknowledgements so far (wait=True: all of them)
            ...                               # Recorded(student, error, output_errors)
        report = gb.finish()                  # waits for every commit: WriterReport
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import types
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Course
from ..errors import CourseError
from ..grading.results import SubmissionResult, result_from_dict, result_to_dict
from ..reporting.gradebook import GradebookReport
from ..reporting.review import Review, scores_from_plain, scores_to_plain
from ..slowimports import skip_format_checkers
from ..text import visible
from .launch import exited
from .wire import ATTACHED, Connection, WireClosed, dumps, socket_pair

# What this package uses of nbgrader.api (reporting.gradebook); checked after the light import.
NBGRADER_API_NAMES = ("Gradebook", "MissingEntry", "InvalidEntry", "Student", "Assignment", "Notebook",
                      "GradeCell", "TaskCell", "SolutionCell", "SourceCell", "SubmittedAssignment",
                      "SubmittedNotebook", "Grade", "Comment")
OPEN_SECONDS = 600.0       # generous: nbgrader's import and a new gradebook's migrations on a loaded machine
BUSY_SECONDS = 600.0       # a background commit tries again this long while another program writes the database
BUSY_RETRY_SECONDS = 0.5
LAST_WORDS_SECONDS = 5.0   # for the messages a writer sent before it stopped, once a send to it failed


@dataclass(frozen=True)
class Recorded:
    """The writer is done with one student: their grades committed (or why not) and its other files."""
    student: str
    error: str | None = None                 # why the grades were not committed (rolled back), or None
    output_errors: tuple[str, ...] = ()      # "<student>: <why>" for its files that could not be written
    warnings: tuple[str, ...] = ()           # "<student>: ..." a TA should know (a resubmission's standing review)
    review: Review | None = None             # the gradebook's scores when a person changed one (no comments)
    kept: str = ""                           # a regrade's: what people set in the gradebook, kept (in words)


@dataclass(frozen=True)
class WriterReport:
    gradebook: GradebookReport
    output_errors: tuple[str, ...] = ()      # "<student>: <why>" for the writer's files that failed


class GradebookProcess:
    """A writer process for the course's gradebook (see the module's docstring). Each result sent
    with `record` is acknowledged once, in order, by `recorded()`: committed, or why not (a
    submission rolled back; the gradebook unusable; the writer gone), so nothing is ever lost
    silently."""

    def __init__(self, course_dir: str | Path, assignment: str):
        self.course_dir = str(Path(course_dir).resolve())
        self.assignment = assignment
        self._conn: Connection | None = None
        self._popen: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - held for the process, closed in close()
        self._waiting: deque[str] = deque()     # students sent, not yet acknowledged
        self._acks: list[Recorded] = []         # acknowledged, not yet handed out by recorded()
        self._all: list[Recorded] = []
        self._created: tuple[str, ...] = ()
        self._gone = ""                         # why the writer cannot write anything more

    def __enter__(self) -> GradebookProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, lock_fd: int | None = None) -> None:
        """Start the writer; `lock_fd`, the gradebook lock this process took, is passed to it."""
        conn, fd = socket_pair()
        argv = [sys.executable, "-m", "autograder.batch.writer", "--course-dir", self.course_dir,
                "--assignment", self.assignment, "--fd", str(fd)]
        if lock_fd is not None:
            argv += ["--lock-fd", str(lock_fd)]
        try:
            self._popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=self._log, cwd=self.course_dir,
                                           pass_fds=(fd,) if lock_fd is None else (fd, lock_fd))
        finally:
            os.close(fd)
        conn.sock.settimeout(OPEN_SECONDS)
        self._conn = conn

    def record(self, result: SubmissionResult, *, copy_from: Path | None = None, encoded: bytes | None = None,
               resubmitted: bool = False, regraded: bool = False) -> None:
        """Queue one result for the gradebook (returns without waiting for the commit); with
        `copy_from` (the submission folder), the formgrader copy is written too. `encoded`, when
        given, is `result_to_dict(result)` already encoded by batch.wire (as a worker sent it): it is
        sent as it is. `resubmitted`: the submission changed since it was last graded (its
        acknowledgement then warns of a TA's review still standing from the earlier one); `regraded`: the
        same submission graded again under changed graders (its acknowledgement then says what people set,
        `Recorded.kept`)."""
        if self._gone:                          # checked first: a writer that stopped has no connection left
            self._ack(Recorded(result.student, self._gone))
            return
        if self._conn is None:
            raise RuntimeError("GradebookProcess used before start()")
        self._waiting.append(result.student)
        try:
            self._conn.send({"op": "record", "copy_from": str(copy_from) if copy_from is not None else None,
                             "resubmitted": resubmitted, "regraded": regraded},
                            attached=encoded if encoded is not None else dumps(result_to_dict(result)))
        except OSError:                         # it is gone: what it said before it went (why it stopped)
            self._conn.sock.settimeout(LAST_WORDS_SECONDS)
            while self._conn is not None:
                self._read_one()

    def recorded(self, *, wait: bool = False) -> list[Recorded]:
        """The acknowledgements that arrived since the last call; with `wait`, first wait until
        every result sent so far is acknowledged."""
        while self._waiting and self._conn is not None:
            if not wait and not self._conn.has_pending() and not select.select([self._conn.sock], [], [], 0)[0]:
                break
            self._read_one()
        acks, self._acks = self._acks, []
        return acks

    def _read_one(self) -> None:
        assert self._conn is not None
        try:
            msg = self._conn.recv()
        except (WireClosed, OSError, ValueError):
            self._stopped()
            return
        op = msg.get("op")
        if op == "open":
            self._created = tuple(str(c) for c in msg.get("created", ()))
        elif op == "failed":                    # the gradebook itself is unusable: no grade lands
            self._gone = str(msg.get("message", "the gradebook could not be opened"))
            while self._waiting:
                self._ack(Recorded(self._waiting.popleft(), self._gone))
        elif op == "recorded" and self._waiting:
            student = self._waiting.popleft()
            error = msg.get("error")
            try:
                review = scores_from_plain(msg["review"]) if msg.get("review") is not None else None
            except ValueError:
                review = None                   # the summary shows the autograder's scores
            self._ack(Recorded(student, None if error is None else str(error),
                               tuple(str(e) for e in msg.get("output_errors", ())),
                               tuple(str(w) for w in msg.get("warnings", ())), review, str(msg.get("kept") or "")))

    def _ack(self, ack: Recorded) -> None:
        self._acks.append(ack)
        self._all.append(ack)

    def _stopped(self) -> None:
        if not self._gone:
            self._gone = f"the gradebook writer stopped ({self._stderr_tail()})"
        while self._waiting:
            self._ack(Recorded(self._waiting.popleft(), self._gone))
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def finish(self) -> WriterReport:
        """Wait for every acknowledgement and for the writer to exit; the whole batch's report
        (including acknowledgements not yet handed out by `recorded`)."""
        self.recorded(wait=True)
        if self._conn is not None:
            try:
                self._conn.send({"op": "done"})
                while self._conn is not None:       # whatever is left ("open" when nothing was sent)
                    msg = self._conn.recv()
                    if msg.get("op") == "open":
                        self._created = tuple(str(c) for c in msg.get("created", ()))
                    elif msg.get("op") == "failed":
                        self._gone = str(msg.get("message", "the gradebook could not be opened"))
            except (WireClosed, OSError, ValueError):
                pass
        if self._gone and not self._all:
            self._all.append(Recorded("(gradebook)", self._gone))
        self.close()
        report = GradebookReport(recorded=tuple(a.student for a in self._all if a.error is None),
                                 failed=tuple((a.student, a.error) for a in self._all if a.error is not None),
                                 created=self._created)
        return WriterReport(report, tuple(e for a in self._all for e in a.output_errors))

    def _stderr_tail(self) -> str:
        if self._popen is not None:
            try:
                self._popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        self._log.seek(0)
        lines = self._log.read()[-4000:].decode("utf-8", "replace").strip().splitlines()
        status = self._popen.poll() if self._popen is not None else None
        return lines[-1][:300] if lines else f"exit status {status}"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._popen is not None:
            if not exited(self._popen, OPEN_SECONDS):      # woken by its exit (launch.exited)
                self._popen.kill()
                self._popen.wait()
            self._popen = None
        if not self._log.closed:
            self._log.close()


# What nbgrader.utils takes from setuptools (for unzipping collected archives, which this process never
# does): importing setuptools means importing pkg_resources, about half a second.
ARCHIVE_FUNCTIONS = ("unpack_archive", "unpack_tarfile", "unpack_zipfile")
DEFERRED_MODULES = ("requests",)    # nbgrader.auth's JupyterHub plugin, which a gradebook never calls


def _deferred_archive_util() -> types.ModuleType:
    """A stand-in for setuptools.archive_util whose functions import the real module when called."""
    stub = types.ModuleType("setuptools.archive_util")

    def forward(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            real = importlib.import_module("setuptools.archive_util")
            return getattr(real, name)(*args, **kwargs)
        call.__name__ = name
        return call

    for name in ARCHIVE_FUNCTIONS:
        setattr(stub, name, forward(name))
    return stub


class _Deferred(types.ModuleType):
    """A stand-in module that imports the real one on its first attribute use (importlib's LazyLoader
    would not do: on Python 3.11 the import statement itself reads the module's __spec__ and loads it)."""

    def __getattr__(self, attr: str) -> Any:
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), attr)


def import_nbgrader_api() -> str:
    """Import nbgrader.api for this process quickly: without nbgrader/__init__ (which imports the
    Jupyter server extensions: the formgrader, the exchange, nbconvert), without jsonschema's format
    libraries, with setuptools' archive functions and requests imported only when used. nbgrader.api's
    own code, models and SQL are nbgrader's, unchanged. Should any of this not fit the installed
    nbgrader, the plain import is done instead. Returns "light", or what happened instead (one line)."""
    skip_format_checkers()
    if "nbgrader" in sys.modules:
        importlib.import_module("nbgrader.api")
        return "nbgrader already imported; plain import of nbgrader.api"
    before = set(sys.modules)
    stub = None
    try:
        spec = importlib.util.find_spec("nbgrader")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("nbgrader is not a package here")
        package = importlib.util.module_from_spec(spec)   # its __init__ is not run
        sys.modules["nbgrader"] = package
        package.__version__ = importlib.import_module("nbgrader._version").__version__  # type: ignore[attr-defined]
        if "setuptools" not in sys.modules and "setuptools.archive_util" not in sys.modules:
            stub = sys.modules["setuptools.archive_util"] = _deferred_archive_util()
        for name in DEFERRED_MODULES:
            if name not in sys.modules and importlib.util.find_spec(name) is not None:
                sys.modules[name] = _Deferred(name)
        api = importlib.import_module("nbgrader.api")
        missing = [n for n in NBGRADER_API_NAMES if not hasattr(api, n)]
        if missing:
            raise ImportError(f"nbgrader.api has no {', '.join(missing)}")
        return "light"
    except Exception as exc:  # noqa: BLE001 - any surprise: forget the partial import, do the plain one
        for name in set(sys.modules) - before:
            if name.split(".")[0] in ("nbgrader", "setuptools", *DEFERRED_MODULES):
                del sys.modules[name]
        why = f"{type(exc).__name__}: {exc}"
        importlib.import_module("nbgrader.api")
        return f"plain import of nbgrader.api ({why})"[:300]
    finally:
        if stub is not None and sys.modules.get("setuptools.archive_util") is stub:
            del sys.modules["setuptools.archive_util"]    # a later import finds the real module


def _import_nbgrader() -> None:
    """What a GradebookWriter of this process runs before it first needs nbgrader's API (most batches
    write through plain SQL and never do: reporting.gradebook_sql)."""
    how = import_nbgrader_api()
    if how != "light":
        print(f"gradebook writer: {how}", file=sys.stderr)


def _one_line(text: str, limit: int = 500) -> str:
    """An error's text as one printable line: whitespace runs as one space, control characters written
    out (the text may quote a roster name or a path from a submission), at most `limit` characters."""
    return visible(" ".join(text.split()))[:limit]


def _busy(error: str) -> bool:
    """Whether a gradebook error is SQLite's "someone else is writing" (worth trying again)."""
    return "database is locked" in error or "database table is locked" in error


def commit_in_background(course: Course, assignment: str, result: SubmissionResult, *,
                         copy_from: Path | None, key: str | None, lock_fd: int, review_again: bool = False) -> int:
    """Start a detached writer for one student's grades and return its process id without waiting:
    `lock_fd` is the gradebook lock this process holds (the writer keeps holding it: close yours).
    `key` is results.json's grading key, written once the grades are committed. `review_again`: a
    resubmission's or new graders' result (GradebookWriter.record)."""
    from ..reporting.gradebook import mark_lock_holder, write_pending

    job = {"result": result_to_dict(result), "copy_from": str(copy_from) if copy_from is not None else None,
           "key": key, "course_yml": _config_text(course), "review_again": review_again}
    record = write_pending(course, assignment, result.student, job)
    argv = [sys.executable, "-m", "autograder.batch.writer", "--course-dir", str(course.root),
            "--assignment", assignment, "--job", str(record), "--lock-fd", str(lock_fd)]
    with open(record.with_suffix(".log"), "wb") as log:
        popen = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                 pass_fds=(lock_fd,), cwd=course.root, start_new_session=True)
    mark_lock_holder(lock_fd, popen.pid)
    return popen.pid


def _config_text(course: Course) -> str | None:
    """course.yml as this command graded under it, for a background commit (see `job_course`)."""
    try:
        return course.layout.config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def job_course(course_dir: str, record: Path) -> Course:
    """The course a background commit writes under: course.yml as it is now, or, when it no longer
    reads (an instructor half way through adding an assignment), as it was when the job's grades
    were graded, kept in the job's record. Grades already graded are not lost to an edit of the
    configuration made while they were being committed."""
    from ..config import course_data, load_course, parse_course

    try:
        return load_course(course_dir)
    except CourseError:
        try:
            text = json.loads(record.read_text(encoding="utf-8")).get("course_yml")
        except (OSError, ValueError, AttributeError):
            text = None
        if not isinstance(text, str):
            raise
        return parse_course(course_data(text), Path(course_dir).resolve())


def commit_job(course_dir: str, assignment_name: str, record: Path) -> int:
    """The detached writer: commit the job's grades, write its other files, then results.json with
    its key, and remove the record; on failure, say why next to it (for the next command)."""
    from ..api import gradebook_side_outputs, write_student_results
    from ..reporting.gradebook import GradebookWriter, clear_pending

    failed = record.with_suffix(".failed")
    try:
        job = json.loads(record.read_text(encoding="utf-8"))
        result = result_from_dict(job["result"])
        course = job_course(course_dir, record)
        assignment = course.assignment(assignment_name)
        deadline = time.monotonic() + BUSY_SECONDS
        while True:
            try:
                with GradebookWriter(course, assignment, before_nbgrader=_import_nbgrader) as writer:
                    error = writer.record(result, review_again=job.get("review_again") is True)
                    review = writer.review(result.student) if error is None else None
            except Exception as exc:
                if not _busy(str(exc)) or time.monotonic() > deadline:
                    raise
                error = str(exc)
            if error is None or not _busy(error) or time.monotonic() > deadline:
                break
            time.sleep(BUSY_RETRY_SECONDS)    # someone else (formgrader, nbgrader) is writing it
        if error is not None:
            failed.write_text(f"the commit was rolled back: {error}\n", encoding="utf-8")
            return 1
        folder = Path(job["copy_from"]) if job.get("copy_from") else None
        problems = gradebook_side_outputs(course, assignment, result.student, folder, result, review)
        if job.get("key") and not problems:
            problems = write_student_results(course, assignment, result.student, result, str(job["key"]))
        if problems:                           # the grades are in; the files are not: graded again
            record.write_text(json.dumps(job), encoding="utf-8")
            failed.write_text(f"{_one_line(problems[0])}\n", encoding="utf-8")
            return 1
        clear_pending(course, assignment.name, result.student)
        return 0
    except Exception as exc:
        _failed(record, f"{type(exc).__name__}: {exc}")
        raise


def _failed(record: Path, why: str) -> None:
    """Why a background commit failed, beside its record (reporting.gradebook.unfinished_commits)."""
    with contextlib.suppress(OSError):
        record.with_suffix(".failed").write_text(_one_line(why) + "\n", encoding="utf-8")


def serve(fd: int, course_dir: str, assignment_name: str) -> int:
    """The writer process: open the gradebook, commit each result received, until told it is done."""
    from ..api import gradebook_side_outputs
    from ..config import load_course
    from ..reporting.gradebook import GradebookWriter
    from ..reporting.review import people_set, resubmission_warning

    conn = Connection.from_fd(fd)
    try:
        course = load_course(course_dir)
        assignment = course.assignment(assignment_name)
        writer = GradebookWriter(course, assignment, before_nbgrader=_import_nbgrader)
        writer.__enter__()
    except CourseError as exc:
        conn.send({"op": "failed", "message": _one_line(str(exc))})
        return 2
    except Exception as exc:  # noqa: BLE001 - sent to the driver as one line
        conn.send({"op": "failed", "message": _one_line(f"gradebook: {type(exc).__name__}: {exc}")})
        return 2
    try:
        conn.send({"op": "open", "created": list(writer.created)})
        while True:
            try:
                msg = conn.recv()
            except WireClosed:
                break
            if msg.get("op") != "record":
                break
            try:
                encoded = msg.get(ATTACHED)
                result = result_from_dict(json.loads(encoded) if isinstance(encoded, bytes) else msg["result"])
            except (KeyError, TypeError, ValueError, RecursionError) as exc:
                conn.send({"op": "recorded", "student": "?", "error": f"unreadable result ({exc})"})
                continue
            error = writer.record(result, review_again=bool(msg.get("resubmitted") or msg.get("regraded")))
            review = writer.review(result.student) if error is None else None
            folder = Path(msg["copy_from"]) if msg.get("copy_from") else None
            written = gradebook_side_outputs(course, assignment, result.student, folder, result, review)
            standing = resubmission_warning(review) if review is not None and msg.get("resubmitted") else None
            kept = people_set(review) if review is not None and msg.get("regraded") else None
            conn.send({"op": "recorded", "student": result.student, "error": error, "output_errors": written,
                       "warnings": [standing] if standing else [], "kept": kept[0] if kept else None,
                       "review": scores_to_plain(review) if review is not None and review.scores_changed else None})
    finally:
        writer.__exit__(None, None, None)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.batch.writer")
    parser.add_argument("--course-dir", required=True)
    parser.add_argument("--assignment", required=True)
    parser.add_argument("--fd", type=int, help="the connection to the batch's driver")
    parser.add_argument("--job", type=Path, help="a background commit's record (instead of --fd)")
    parser.add_argument("--lock-fd", type=int, help="the gradebook lock, taken by the process that started this one")
    args = parser.parse_args(argv)
    if (args.fd is None) == (args.job is None):
        parser.error("give one of --fd and --job")
    if args.lock_fd is not None:
        from ..config import load_course
        from ..reporting.gradebook import hold_inherited_lock

        try:
            course = load_course(args.course_dir) if args.job is None else job_course(args.course_dir, args.job)
        except CourseError as exc:             # course.yml changed since the command read it
            if args.job is None:
                raise
            _failed(args.job, str(exc))         # for the next command to report
            return 1
        hold_inherited_lock(course, args.lock_fd)
    skip_format_checkers()
    # Ctrl-C at the terminal reaches this process too: it finishes committing what it was sent
    # and exits when the batch closes the connection, so no grade that was graded is lost.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from ..toolpath import tools_on_path

    with tools_on_path():
        if args.job is not None:
            return commit_job(args.course_dir, args.assignment, args.job)
        return serve(args.fd, args.course_dir, args.assignment)


if __name__ == "__main__":
    sys.exit(main())
