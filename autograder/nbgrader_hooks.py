"""nbgrader's own commands, and formgrader's buttons, routed through this course's engine.

A course folder's `nbgrader_config.py` is two lines: `configure(get_config(), <its folder>)`. That
sets, from course.yml:

- `CourseDirectory.root`, `.db_url`, `.course_id` and `Exchange.root` (course.yml's `exchange`), so
  `nbgrader release_assignment`, `collect`, `release_feedback`, `export` and formgrader need no flags;
- `CourseDirectory.ignore` also skips `results.json`: nbgrader's generate_feedback copies every other
  file of autograded/<student>/<assignment>/ into feedback/, and results.json is instructor-only
  (hidden tests' names, the replay seed);
- `Autograde.autograde_preprocessors = [CourseAutograde]`: `nbgrader autograde` and formgrader's
  Autograde button (`NbGraderAPI.autograde`) grade with this engine (`course autograde --student`),
  never by running the notebook's visible asserts; when the engine refuses (no sandbox, a course.yml
  problem) the button fails with that one-line reason; `Autograde.exporter_class = CourseNotebookReader`:
  a submitted file that is not notebook JSON is graded as `course autograde` grades it (0, the reason,
  the placeholder notebook kept), with one warning line, not a traceback and a deleted autograded/ folder;
- `GenerateFeedback.exporter_class = CourseFeedbackExporter`: `nbgrader generate_feedback` (and its
  formgrader button) writes our page, from results.json and the gradebook (the same page as `course
  feedback`), instead of an HTML copy of the notebook;
- `ExportApp.plugin_class = CourseCsvExport`: `nbgrader export` syncs the roster first (names, emails,
  a zero row for a student who did not submit) and adds each student's extension and own due date
  (`--CourseCsvExport.excel=True`: a file for Excel, with a UTF-8 byte-order mark;
  `--CourseCsvExport.lms=canvas`, `moodle` or `blackboard`: one row per student, as that LMS's grade
  import reads it);
- `ExchangeFactory.release_feedback = CourseReleaseFeedback`: `nbgrader release_feedback` leaves out,
  naming each, the students whose submission did not come through the exchange (no
  `submission_secret.txt`), instead of stopping at the first of them; releases the pages of a
  submission that has its secret but lost its `timestamp.txt` (nbgrader's own opens that file only
  to log it, and stops there with a FileNotFoundError); and first writes afresh (a
  warning line each) the pages that are no longer those of results.json and the gradebook (a TA
  changed a score or comment after `course feedback`), so a student never gets an older page;
- nbgrader's generate_assignment (and formgrader's Generate button) is `course release`
  (`_release_as_the_engine`): points and the intro table from course.yml, the source checked, the
  leak check, the gradebook's maximum scores, instead of a release of source/ as it is;
- the grading key of a results.json that `nbgrader autograde` deletes before grading again (a newer
  submission, --force) is kept for the engine (`_keep_removed_keys`), so a resubmission gets the WARNING
  that a TA's scores on the earlier one still stand, and the gradebook's flag for review, as under `course
  autograde`;
- nbgrader reads a submission's `timestamp.txt` as the engine does (`_read_stamps_as_the_engine`): a
  stamp it cannot parse counts as none, with a warning, instead of a traceback after which nbgrader's
  autograde or generate_feedback deletes the student's autograded/ or feedback/ folder.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
import glob
import os
import shutil
import stat
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TextIO

from nbconvert.exporters import Exporter, NotebookExporter
from nbformat import NotebookNode
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.plugins.export import CsvExportPlugin
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Dict, Unicode, default

from .config import Course, Extension, load_course
from .errors import ConfigError, CourseError, ExportError
from .grading.lateness import TIMESTAMP_FILE
from .intake import SECRET_FILE
from .layout import NBGRADER_CONFIG, RESULTS_JSON, output_problem
from .notebooks import over_notebook_limits_file
from .text import first_few, first_ids, format_points, shown_name, truncate

HOOKS = __name__
# nbgrader's command-line apps that this engine routes: run with a course.yml that cannot be read,
# they stop at once (`nbgrader autograde --force` would otherwise first delete every student's
# autograded/ folder, results.json included, then fail each student with a traceback)
REFUSING_APPS = ("AutogradeApp", "GenerateAssignmentApp", "GenerateFeedbackApp", "ExportApp")
_grading = threading.Lock()      # one batch at a time in a formgrader process
_reported: set[str] = set()      # course.yml errors printed by `configure` in this process
_stamp_roots: set[str] = set()   # the course folders whose timestamp.txt nbgrader reads as the engine does
_stamp_notes: set[tuple[str, str, str]] = set()   # unread stamps logged in this process: student, assignment, note
_nbgrader_readers: dict[str, Any] = {}            # nbgrader's own readers, which other course folders keep
_release_roots: set[str] = set()  # the course folders whose generate_assignment is `course release`
_nbgrader_generate: dict[str, Any] = {}           # nbgrader's own GenerateAssignment.start, which others keep
# the grading key of each results.json nbgrader's autograde removed before grading: (course folder, student,
# assignment) -> key, taken by CourseAutograde (see `_keep_removed_keys`)
_removed_keys: dict[tuple[str, str, str], str] = {}
_key_roots: set[str] = set()     # the course folders whose removed results.json keys are kept
_nbgrader_converter: dict[str, Any] = {}          # nbgrader's own Autograde.init_destination, once replaced


def configure(c: Any, course_dir: str | Path) -> Course | None:
    """Fill nbgrader's config `c` for the course in `course_dir` (see the module docstring).

    The routing through this engine is set before course.yml is read, and stays when it cannot be
    read (a typo, a wrong type): the error is then printed in one line and None returned, rather
    than raised, because nbgrader (traitlets) would only log a raised error and go on with its own
    defaults, so that `nbgrader generate_feedback` wrote its own pages and copied results.json
    into feedback/, and `nbgrader autograde` graded the visible asserts. Routed, each of those
    commands (and formgrader's buttons) fails with course.yml's error until it is fixed; run from the
    command line (`REFUSING_APPS`), it exits 2 right here, before nbgrader touches any folder."""
    from nbgrader.coursedir import CourseDirectory

    root = str(Path(course_dir).resolve())
    c.CourseDirectory.root = root
    ignore = list(CourseDirectory().ignore)
    c.CourseDirectory.ignore = [*ignore, *([RESULTS_JSON] if RESULTS_JSON not in ignore else [])]
    c.Autograde.autograde_preprocessors = [CourseAutograde]
    c.Autograde.exporter_class = CourseNotebookReader
    c.CourseAutograde.course_dir = root
    c.GenerateFeedback.exporter_class = CourseFeedbackExporter
    c.GenerateFeedback.preprocessors = []
    c.CourseFeedbackExporter.course_dir = root
    c.ExportApp.plugin_class = CourseCsvExport
    c.CourseCsvExport.course_dir = root
    c.ExchangeFactory.release_feedback = CourseReleaseFeedback
    _read_stamps_as_the_engine(root)
    _release_as_the_engine(root)
    _keep_removed_keys(root)
    try:
        course = load_course(root)
    except CourseError as exc:
        line = (f"{NBGRADER_CONFIG}: {exc} (nbgrader's autograde, generate_assignment, generate_feedback and export "
                f"refuse until it is fixed)")
        if line not in _reported:            # nbgrader reads its config files more than once
            _reported.add(line)
            print(line, file=sys.stderr, flush=True)
        if _running_app() in REFUSING_APPS:
            raise SystemExit(2) from None     # not an Exception: traitlets would only log that
        return None
    c.CourseDirectory.db_url = course.gradebook_url
    c.CourseDirectory.course_id = course.course_id
    if course.exchange is not None:
        c.Exchange.root = str(course.exchange.resolve())
    return course


def _read_stamps_as_the_engine(root: str) -> None:
    """Have nbgrader, in this process, read the timestamp.txt files of the course in `root` as `course
    autograde` reads them (`lateness.submission_time`).

    nbgrader reads a submission's stamp itself: `nbgrader autograde` (and formgrader's Autograde button)
    in submitted/ and autograded/ before grading, `generate_feedback` in autograded/ and feedback/, and
    formgrader's list of submissions in submitted/. Its reader stops at a stamp it cannot parse ('yesterday
    at noon', or a time after a byte-order mark) with a traceback, and the converter then deletes the
    student's autograded/ or feedback/ folder, results.json and page included, as a failed one; `course
    autograde` grades the same submission as on time, with a warning. Read here, such a stamp counts as
    none for nbgrader too, logged once per submission in that warning's words, and a stamp that is read
    gives the engine's time (naive UTC, as nbgrader keeps it), so nbgrader's comparisons of submitted and
    autograded stamps and the time it puts in the gradebook agree with `course autograde`'s. Submissions are
    only read. Other course folders in the same process (a formgrader serving several) keep nbgrader's reader."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    _stamp_roots.add(os.path.realpath(root))
    if _nbgrader_readers:
        return
    _nbgrader_readers.update(existing=CourseDirectory.get_existing_timestamp,
                             submitted=NbGraderAPI.get_submitted_timestamp)

    def get_existing_timestamp(self: Any, dest_path: str) -> dt.datetime | None:
        if os.path.realpath(self.root) not in _stamp_roots:
            return _nbgrader_readers["existing"](self, dest_path)  # type: ignore[no-any-return]
        return _stamp_time(Path(dest_path), Path(self.root), self.log)

    def get_submitted_timestamp(self: Any, assignment_id: str, student_id: str) -> dt.datetime | None:
        cd = self.coursedir
        if os.path.realpath(cd.root) not in _stamp_roots:
            return _nbgrader_readers["submitted"](self, assignment_id, student_id)  # type: ignore[no-any-return]
        folder = Path(os.path.abspath(cd.format_path(cd.submitted_directory, student_id, assignment_id)))
        return _stamp_time(folder, Path(cd.root), self.log)

    CourseDirectory.get_existing_timestamp = get_existing_timestamp
    NbGraderAPI.get_submitted_timestamp = get_submitted_timestamp


def _release_as_the_engine(root: str) -> None:
    """Have nbgrader's generate_assignment, in this process, release an assignment of the course in
    `root` as `course release` does (`api.release`): points and the intro table from course.yml, the
    source checked first, the leak check, the gradebook's cells, roster, due date and max scores, and the
    previous release kept when any step fails. nbgrader's own builds release/ from source/ as it is, so
    a change of points in course.yml was not in the notebook students got nor in the gradebook's maximum,
    until a later `course autograde` graded out of other points.

    `nbgrader generate_assignment ASSIGNMENT` and formgrader's Generate button both come here; a release
    that fails is one error line (its reason, as `course release` says it), exit 1 from the command line.
    Without `--force` an existing release is skipped, as nbgrader skips it, with a warning. nbgrader's
    own conversion still runs for any other root: `course release` runs it, in a scratch folder, on the
    source with course.yml's points written in."""
    from nbgrader.converters import GenerateAssignment

    _release_roots.add(os.path.realpath(root))
    if _nbgrader_generate:
        return
    _nbgrader_generate.update(start=GenerateAssignment.start)

    def start(self: Any) -> None:
        if os.path.realpath(self.coursedir.root) not in _release_roots:
            _nbgrader_generate["start"](self)
            return
        _course_release(self)

    GenerateAssignment.start = start


def _course_release(converter: Any) -> None:
    """`course release` of the assignment `converter` (nbgrader's GenerateAssignment) was asked for,
    logged through its log; a failure is logged in one line and raised as nbgrader's own exception,
    which its command turns into exit 1 (and formgrader into a failed Generate)."""
    from nbgrader.converters.base import NbGraderException

    from . import api
    from .toolpath import tools_on_path

    cd = converter.coursedir
    assignment = str(cd.assignment_id)
    release = Path(cd.format_path(cd.release_directory, ".", assignment))
    if release.is_dir() and not converter.force:
        converter.log.warning("%s exists: not released again (--force, or `course release %s`, releases it anew "
                              "from source/ and course.yml)", os.path.relpath(release, cd.root), assignment)
        return
    if cd.notebook_id not in ("", "*"):
        converter.log.warning("--notebook %s: `course release` releases every notebook of %s", cd.notebook_id,
                              assignment)
    converter.log.info("nbgrader generate_assignment runs `course release %s` (points from course.yml, "
                       "leak check, gradebook)", assignment)
    try:
        with tools_on_path():
            api.release(cd.root, assignment, log=leveled(converter.log))
    except CourseError as exc:
        converter.log.error("%s", exc)
        raise NbGraderException(str(exc)) from None


def _keep_removed_keys(root: str) -> None:
    """Have nbgrader's autograde, for the course in `root`, keep the grading key of the results.json it
    removes before grading (`_removed_keys`), for CourseAutograde to hand to the engine (api.autograde's
    `earlier_keys`).

    Before grading a submission newer than its autograded/ folder (a student who submitted again), or
    with --force (formgrader's Autograde button), nbgrader deletes that folder, results.json with it, so
    the engine would not know what it graded before: a resubmission would not be told apart from a first
    grading, and the TA not warned that their scores on the earlier submission still stand, as `course
    autograde` warns them. A folder of submitted/ whose name no student id can be (`intake.misnamed_folder`)
    is skipped there with the line `course autograde` gives it, before nbgrader adds a gradebook student
    and an autograded/ folder of that name (the engine would refuse the id once they were made). Other
    course folders in the same process keep nbgrader's own converter."""
    from nbgrader.converters import Autograde

    _key_roots.add(os.path.realpath(root))
    if _nbgrader_converter:
        return
    _nbgrader_converter["init_destination"] = Autograde.init_destination

    def init_destination(self: Any, assignment_id: str, student_id: str) -> bool:
        original = _nbgrader_converter["init_destination"]
        where = os.path.realpath(self.coursedir.root)
        if where not in _key_roots:
            return original(self, assignment_id, student_id)  # type: ignore[no-any-return]
        from .api import RESULTS_READ_MAX_BYTES
        from .intake import misnamed_folder
        from .layout import CourseLayout
        from .notebooks import RefusedFile, read_regular

        layout = CourseLayout(Path(where))
        misnamed = misnamed_folder(student_id)
        if misnamed is not None:      # refused before nbgrader makes a gradebook student and folder of the name
            _skip_misnamed(self, layout, student_id, misnamed)
            return False
        path = layout.results_json(student_id, assignment_id)
        try:
            data = read_regular(path, RESULTS_READ_MAX_BYTES) if os.path.lexists(path) else None
        except (RefusedFile, OSError):
            data = None
        go = original(self, assignment_id, student_id)
        key = _grading_key(data, student_id, assignment_id) if data is not None and not os.path.lexists(path) else ""
        if key:
            _removed_keys[(where, student_id, assignment_id)] = key
        return go  # type: ignore[no-any-return]

    Autograde.init_destination = init_destination
    _nbgrader_converter["init_notebooks"] = Autograde.init_notebooks

    def init_notebooks(self: Any) -> None:
        _nbgrader_converter["init_notebooks"](self)
        where = os.path.realpath(self.coursedir.root)
        if where not in _key_roots:
            return
        from .intake import misnamed_folder
        from .layout import CourseLayout

        # a folder name nbgrader's own pattern cannot read back (a newline in it) would stop the whole run
        # before init_destination sees it: such folders are left out here, named as course autograde names them
        layout = CourseLayout(Path(where))
        base = os.path.dirname(os.path.dirname(self.coursedir.format_path(self.coursedir.submitted_directory,
                                                                          "s", "a")))
        for folder in sorted(self.assignments):
            student = os.path.basename(os.path.dirname(folder))
            misnamed = misnamed_folder(student) if os.path.dirname(os.path.dirname(folder)) == base else None
            if misnamed is not None:
                _skip_misnamed(self, layout, student, misnamed)
                del self.assignments[folder]

    Autograde.init_notebooks = init_notebooks


def _skip_misnamed(converter: Any, layout: Any, student: str, why: str) -> None:
    """Log that submitted/`student` is not graded, `why`, as `course autograde` prints it (control
    characters of the name written out, `text.shown_name`)."""
    from .text import shown_name

    converter.log.warning("not graded: %s: %s", shown_name(layout.relative(layout.submitted_dir / student)), why)


def _grading_key(data: bytes, student: str, assignment: str) -> str:
    """The grading key of a results.json's bytes when they are `student`'s results in `assignment`, else ""."""
    from .reporting.results_json import results_of

    try:
        return results_of(data, student, assignment)[1]
    except ValueError:                          # not JSON, not ours, or another's results
        return ""


def _stamp_time(folder: Path, root: Path, log: Any) -> dt.datetime | None:
    """The time of `folder`'s timestamp.txt as nbgrader keeps times (naive UTC), None when it has none
    or the engine cannot read it; the latter logged as a warning naming the folder, once per submission
    in this process (nbgrader reads each stamp more than once)."""
    from .grading.lateness import submission_time
    from .layout import CourseLayout
    from .reporting.gradebook import naive_utc

    when, note = submission_time(folder, root)
    key = (folder.parent.name, folder.name, note)
    if note and key not in _stamp_notes:
        _stamp_notes.add(key)
        log.warning("%s: %s", CourseLayout(root).relative(folder), note)
    return naive_utc(when) if when is not None else None


def _running_app() -> str:
    """The class name of the traitlets application being set up in this process ('AutogradeApp'
    for `nbgrader autograde`; a Jupyter server's for formgrader), or ''."""
    from traitlets.config import Application

    return type(Application.instance()).__name__ if Application.initialized() else ""


def leveled(logger: Any) -> Callable[[str], None]:
    """A `log` for the engine's progress lines that hands each to `logger` at its own level: a line
    the engine starts with 'WARNING: ' or 'ERROR: ' (as `course` prints it) is logged as a warning or
    an error, without the prefix the logger adds again; every other line as information."""
    def log(line: str) -> None:
        for prefix, method in (("WARNING: ", logger.warning), ("ERROR: ", logger.error)):
            if line.startswith(prefix):
                method("%s", line[len(prefix):])
                return
        logger.info("%s", line)
    return log


def _ids(resources: dict[str, Any]) -> tuple[str, str, str]:
    info = resources.get("nbgrader") or {}
    return str(info.get("student", "")), str(info.get("assignment", "")), str(info.get("notebook", ""))


class CourseAutograde(NbGraderPreprocessor):   # type: ignore[misc]
    """Stands in for nbgrader's autograde preprocessors: grades the student's whole submission with
    `course autograde --student` (sandbox, hidden graders, results.json, feedback page, gradebook),
    then hands nbgrader the autograded copy with our report in its grade cells to write back."""

    course_dir = Unicode("", help="the course folder (set by autograder.nbgrader_hooks.configure)").tag(config=True)

    def _warned(self) -> set[str]:
        """What this command has warned of that each call of the engine would say again (api.autograde's
        `warned`): the lines about ids differing only by case (api.case_clashes), and the stamps ahead of
        the clock (api.future_stamp). nbgrader's converter grades the class one student and notebook at a
        time, each through api.autograde, making this preprocessor anew for each notebook, but keeps one
        exporter (our parent) for the command, or for a press of formgrader's Autograde button: the set is
        kept there, so that the roster's clashes are logged once per command, not once per student, and
        a student's stamp once, not once per notebook, while a later press of the button says them again."""
        exporter: Any = self.parent
        if exporter is None:                # made outside a converter: nothing to share with
            return set()
        warned = getattr(exporter, "_course_warned", None)
        if not isinstance(warned, set):
            warned = set()
            exporter._course_warned = warned
        return warned

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        import nbformat

        from . import api
        from .toolpath import tools_on_path

        student, assignment, notebook = _ids(resources)
        if not (self.course_dir and student and assignment):
            raise CourseError("nbgrader autograde: CourseAutograde needs the course folder, student and assignment "
                              "(is nbgrader_config.py calling autograder.nbgrader_hooks.configure?)")
        # nbgrader calls this once per notebook; the first call grades the submission and writes
        # results.json, so the assignment's other notebooks find it unchanged and are not graded again.
        earlier = _removed_keys.pop((os.path.realpath(self.course_dir), student, assignment), "")
        with _grading, tools_on_path():
            batch = api.autograde(self.course_dir, assignment, student=student, log=leveled(self.log),
                                  notice=leveled(self.log), warned=self._warned(),
                                  earlier_keys={student: earlier} if earlier else None)
        for line in (*batch.gradebook_errors, *batch.output_errors, *batch.ungraded):
            self.log.warning(line)
        for line in batch.unreadable:
            self.log.error("not graded: %s", line)
        for result in batch.results:
            if result.state == "crashed":
                self.log.error("%s: the grader failed for this submission (see its results.json)", student)
            elif result.final_score is not None:      # a person changed a score: what the gradebook gives
                self.log.info("%s: %s/%s points in the gradebook, with the TA's changes (course autograde alone: %s)",
                              student, format_points(result.final_score), format_points(result.max_score),
                              format_points(result.reported_score))
            else:
                self.log.info("%s: %s/%s points (course autograde)", student, format_points(result.score),
                              format_points(result.max_score))
        course = load_course(self.course_dir)
        ours = course.layout.autograded(student, assignment) / f"{notebook}.ipynb"
        max_bytes = int(course.assignment(assignment).limits.notebook_mb * 1024 * 1024)
        # a copy over the cell or value limits, saved outputs counted, is not read again: nbgrader's own `nb`
        # stands (nbformat needs about 2 KB per cell); ours never is (a notebook over them is copied without
        # its outputs, or as a placeholder), but a copy written before may be
        if ours.is_file() and not over_notebook_limits_file(ours, max_bytes, outputs=True):
            nb = nbformat.read(ours, as_version=4)
        return nb, resources


class CourseNotebookReader(NotebookExporter):
    """`nbgrader autograde`'s exporter: nbconvert's notebook exporter, except that a submitted file
    nbformat cannot read (not notebook JSON, a file saved half-way) is handed on as an empty notebook,
    with one warning line, instead of an exception. nbgrader's own would log nbformat's traceback,
    fail the student and delete their autograded/ folder, the placeholder notebook and results.json
    `course autograde` wrote included; routed on, the engine (`CourseAutograde`) grades such a
    submission as `course autograde` does (0, with the reason) and hands back its placeholder."""

    def from_file(  # type: ignore[override]
            self, file_stream: Any, resources: dict[str, Any] | None = None, **kw: Any) -> tuple[str, dict[str, Any]]:
        import nbformat
        from nbformat.v4 import new_notebook

        try:
            nb = nbformat.read(file_stream, as_version=4)
        except Exception as exc:  # noqa: BLE001 - whatever nbformat says of the file, the engine says it in its words
            where = str(getattr(file_stream, "name", "the notebook"))
            root = getattr(getattr(self.parent, "coursedir", None), "root", "")
            if root and os.path.isabs(where):
                where = os.path.relpath(where, root)
            self.log.warning("%s: not a notebook nbformat can read (%s); graded as `course autograde` grades it",
                             shown_name(where), truncate(" ".join(str(exc).split()), 120) or type(exc).__name__)
            nb = new_notebook()
        output: tuple[str, dict[str, Any]] = self.from_notebook_node(  # type: ignore[no-untyped-call]
            nb, resources=resources, **kw)
        return output


class CourseFeedbackExporter(Exporter):
    """`nbgrader generate_feedback`'s exporter: the course's feedback page for the notebook's
    student (results.json and the gradebook), whatever the notebook holds."""

    course_dir = Unicode("", help="the course folder (set by autograder.nbgrader_hooks.configure)").tag(config=True)
    output_mimetype = "text/html"

    @default("file_extension")
    def _file_extension_default(self) -> str:
        return ".html"

    def from_file(  # type: ignore[override]  # a page, as from_notebook_node
            self, file_stream: Any, resources: dict[str, Any] | None = None, **kw: Any) -> tuple[str, dict[str, Any]]:
        """The page without reading the notebook (nbconvert's reads it with nbformat first): an
        autograded copy can still be one nbformat cannot read (a submission that is not notebook JSON,
        written before its copy became a placeholder notebook, or one left as submitted without a
        release to build that from), and nbformat's error there made nbgrader delete the student's
        feedback folder instead of writing the page `course feedback` writes for them."""
        from nbformat.v4 import new_notebook

        return self.from_notebook_node(new_notebook(), resources, **kw)

    def from_notebook_node(  # type: ignore[override]  # a page, as nbconvert's HTML exporters return
            self, nb: NotebookNode, resources: dict[str, Any] | None = None, **kw: Any) -> tuple[str, dict[str, Any]]:
        from . import api

        _, resources = super().from_notebook_node(nb, resources, **kw)
        student, assignment, _ = _ids(resources)
        course = load_course(self.course_dir)
        page = api.student_page(course, course.assignment(assignment), student)
        resources["output_extension"] = ".html"
        return page, resources


class CourseCsvExport(CsvExportPlugin):   # type: ignore[misc]
    """nbgrader's CSV export after syncing the roster into the gradebook, plus two columns:
    `extension` ("2 days") and `extended_duedate` (the student's own due date), empty without one.

    The rows are nbgrader's (every assignment of the gradebook times every student, a 0 row for whoever
    did not submit, the same values and filters), written by the csv module: nbgrader's own plugin
    joins the fields with commas unquoted, so a name holding a comma or quotes would shift the columns.

    The file is UTF-8 without a byte-order mark, as nbgrader writes it (Canvas's and Moodle's grade
    imports read it with or without one); `excel` (`nbgrader export --CourseCsvExport.excel=True`)
    starts it with one, so that Excel reads "Zoë" rather than "ZoÃ«" (Excel takes a CSV file without
    the mark for the system's legacy code page).
    `lms` (`canvas`, `moodle`, `blackboard`) writes the same rows' scores one row per student, one column per
    assignment, with the roster's LMS ids (`reporting.lms_export`), leaving out students the gradebook holds
    but the roster does not unless `include_unrostered`; students that file could not tell
    apart stop the export (one line, exit 2, no file). So does a `--to` that names a folder, or a file in
    a folder that does not exist (`layout.output_problem`: no folder is made), a file that cannot be
    written, and an `--assignment` the gradebook does not hold."""

    course_dir = Unicode("", help="the course folder (set by autograder.nbgrader_hooks.configure)").tag(config=True)
    excel = Bool(False, help="start the CSV file with a UTF-8 byte-order mark, for Excel (Canvas's and Moodle's "
                             "grade imports read the file either way)").tag(config=True)
    lms = Unicode("nbgrader", help="the file's form: `nbgrader` (a row per assignment and student, as above), "
                                   "`canvas`, `moodle` or `blackboard` (a row per student, a column per "
                                   "assignment, as that LMS's grade import reads it; see "
                                   "autograder/reporting/lms_export.py)").tag(config=True)
    include_unrostered = Bool(False, help="with `lms` canvas, moodle or blackboard: also write the students the "
                                          "gradebook holds but the roster does not (left out by default, with a "
                                          "warning: the LMS matches them only if their student id is their login, "
                                          "and a row matching no Moodle user stops the whole import)"
                              ).tag(config=True)
    blackboard_columns = Dict(help="with `lms` blackboard: the Column ID of each assignment's existing Blackboard "
                                   "column (assignment name -> the number after '|' in that column's header in "
                                   "Blackboard's download), so the upload updates it; an assignment without one is "
                                   "headed by its name alone, which Blackboard uploads as a new column"
                              ).tag(config=True)

    def export(self, gradebook: Any) -> None:
        from .reporting.lms_export import LMS_FORMATS

        if self.lms not in LMS_FORMATS:       # before anything is synced or written
            _refuse(f"CourseCsvExport.lms is {self.lms!r}; expected one of {', '.join(LMS_FORMATS)}")
        problem = output_problem(self.to or DEFAULT_EXPORT)
        if problem:
            _refuse(f"--to {self.to or DEFAULT_EXPORT}: {problem}; no file written")
        try:
            self._export(gradebook)
        except ConfigError as exc:            # a broken course.yml or roster: one line, as `course` prints it
            _refuse(str(exc))

    def _export(self, gradebook: Any) -> None:
        from .reporting.gradebook import gradebook_lock, sync_roster

        course = load_course(self.course_dir)
        gradebook.db.commit()             # no read transaction held while waiting for a writer
        with gradebook_lock(course):      # grades still being committed in the background land first
            try:
                sync_roster(gradebook, course)
                gradebook.db.commit()
            except BaseException:
                gradebook.db.rollback()
                raise
            unknown = (self._unknown_assignments(gradebook, course) or self._unknown_students(gradebook, course)
                       or self._column_id_problem(gradebook))
            if unknown:
                _refuse(unknown)
            rows = self._rows(gradebook, course)
            assignments = [(a.name, a.max_score) for a in self._assignments(gradebook)]
            lms_ids = {s.id: s.lms_user_id or "" for s in gradebook.students}
        stale_lines, stale_due = _stale_results(course, rows)
        for line in [*stale_lines, *self._extension_notes(stale_due)]:
            self.log.warning(line)
        for name in sorted({name for name, _ in assignments} - {a.name for a in course.assignments}):
            self.log.warning("%s: in the gradebook but not in course.yml; its rows are exported as the gradebook "
                             "holds them (`nbgrader db assignment remove %s` takes it out of the gradebook)",
                             name, name)
        dest = self.to or DEFAULT_EXPORT
        if self.lms == "nbgrader":
            from .reporting.lms_export import not_due_yet

            records = [list(EXPORT_COLUMNS), *([_cell(key, row[key]) for key in EXPORT_COLUMNS] for row in rows)]
            quote_all = False
            warnings = [*_identifier_warnings(rows),
                        *not_due_yet(rows, dt.datetime.now(dt.UTC).replace(tzinfo=None), "nbgrader")]
        else:
            from .reporting.lms_export import lms_table

            try:
                lms_file = lms_table(self.lms, assignments, rows, {s.id: s for s in course.students()}, lms_ids,
                                     include_unrostered=self.include_unrostered, column_ids=self._column_ids())
            except ExportError as exc:        # students the file could not tell apart: nothing written
                _refuse(str(exc))
            records, warnings, quote_all = lms_file.records, list(lms_file.warnings), lms_file.quote_all
        for line in warnings:
            self.log.warning(line)
        self.log.info("Exporting grades to %s", dest)
        try:
            with open_export(dest, "utf-8-sig" if self.excel else "utf-8") as fh:
                csv.writer(fh, lineterminator="\n", quoting=csv.QUOTE_ALL if quote_all else csv.QUOTE_MINIMAL
                           ).writerows(records)
        except OSError as exc:                # permissions, a full disk: a file replaced whole is left as it was
            _refuse(f"--to {dest}: cannot be written ({exc.strerror or type(exc).__name__})")

    def _unknown_assignments(self, gradebook: Any, course: Course) -> str | None:
        """The line refusing the export when `--assignment` names an assignment the gradebook does not
        hold (a typo would otherwise give a file without its column or rows, with exit code 0), naming
        those it does hold; None when each is known."""
        held = [a.name for a in gradebook.assignments]
        unknown = [name for name in dict.fromkeys(str(a) for a in self.assignment) if name not in held]
        if not unknown:
            return None
        planned = [name for name in unknown if name in {a.name for a in course.assignments}]
        why = (f" ({', '.join(planned)} {'is' if len(planned) == 1 else 'are'} in course.yml, but nothing of "
               f"{'it' if len(planned) == 1 else 'them'} has been released or graded yet)" if planned else "")
        return (f"--assignment {', '.join(shown_name(n) for n in unknown)}: not in the gradebook{why}, which holds "
                f"{', '.join(held) if held else 'no assignment yet'}; no file written")

    def _column_ids(self) -> dict[str, str]:
        """`blackboard_columns` as text (a Column ID may be given as a number in nbgrader_config.py)."""
        return {str(name): str(cid) for name, cid in self.blackboard_columns.items()}

    def _column_id_problem(self, gradebook: Any) -> str | None:
        """The line refusing a Blackboard export whose `blackboard_columns` names an assignment the gradebook
        does not hold or gives a Column ID that is not one (`lms_export.blackboard_column_problem`); None
        otherwise, and for the other files, which have no use for it."""
        from .reporting.lms_export import blackboard_column_problem

        if self.lms != "blackboard":
            return None
        return blackboard_column_problem(self._column_ids(), [a.name for a in gradebook.assignments])

    def _unknown_students(self, gradebook: Any, course: Course) -> str | None:
        """The line refusing the export when `--student` names an id the gradebook does not hold once the
        roster is synced into it (a typo, or a student on neither the roster nor the gradebook: the file
        would otherwise hold its header alone, with exit code 0), naming a few ids it does hold; None
        when each is known."""
        held = [s.id for s in gradebook.students]
        unknown = [sid for sid in dict.fromkeys(str(s) for s in self.student) if sid not in set(held)]
        if not unknown:
            return None
        roster = course.layout.relative(course.roster_file) if course.roster_file is not None else "no roster"
        some = first_ids([shown_name(sid) for sid in held])
        return (f"--student {', '.join(shown_name(sid) for sid in unknown)}: not in the gradebook nor on the roster "
                f"({roster}), which hold {some if held else 'no student yet'}; no file written")

    def _assignments(self, gradebook: Any) -> list[Any]:
        """The gradebook's assignments that `--assignment` leaves in (all without it), in its order."""
        wanted = {str(a) for a in self.assignment}
        return [a for a in gradebook.assignments if not wanted or a.name in wanted]

    def _rows(self, gradebook: Any, course: Course) -> list[dict[str, Any]]:
        """nbgrader's CsvExportPlugin rows (its values, not yet text: `_cell`), with the course's
        extension columns and `submitted` (not exported: whether the gradebook holds a submission, which
        a missing or unreadable timestamp.txt leaves without a timestamp)."""
        from nbgrader.api import MissingEntry

        from .reporting.gradebook import naive_utc

        students = {str(s) for s in self.student}
        names = {a.name: a for a in course.assignments}
        rows = []
        self._elsewhere: dict[str, list[tuple[str, str]]] = {}   # assignment -> (student, the gradebook's extension)
        for assignment in self._assignments(gradebook):
            ours = names.get(assignment.name)
            elsewhere = self._elsewhere.setdefault(assignment.name, [])
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                row: dict[str, Any] = {
                    "assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
                    "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
                    "max_score": assignment.max_score}
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:
                    row.update(submitted=False, timestamp="", raw_score=0.0, late_submission_penalty=0.0,
                               score=0.0)
                else:
                    penalty = submission.late_submission_penalty
                    row.update(submitted=True, timestamp=submission.timestamp, raw_score=submission.score,
                               late_submission_penalty=penalty, score=max(0.0, submission.score - penalty))
                    mine = ours.extensions.get(student.id) if ours is not None else None
                    if ours is not None and submission.extension and submission.extension != (mine and mine.delta):
                        given = Extension(days=submission.extension.days, hours=submission.extension.seconds / 3600)
                        elsewhere.append((student.id, given.describe()))
                ext = ours.extensions.get(student.id) if ours is not None else None
                due = ours.due_for(student.id) if ours is not None and ext is not None else None
                row["extension"] = ext.describe() if ext is not None else ""
                row["extended_duedate"] = naive_utc(due) if due is not None else ""
                rows.append(row)
        return rows

    def _extension_notes(self, stale: set[tuple[str, str]]) -> list[str]:
        """A line per assignment naming the students whose extension in the gradebook (given there, by a
        TA) is not course.yml's, leaving out those of `stale` ((assignment, student): their late penalty
        was taken against an earlier course.yml, which `_stale_results`' line says; the gradebook's
        extension is that earlier one, and the same regrading writes course.yml's)."""
        lines = []
        for name, given in self._elsewhere.items():
            shown = [f"{sid} ({words})" for sid, words in sorted(given, key=lambda g: g[0].casefold())
                     if (name, sid) not in stale]
            if shown:
                lines.append(f"{name}: the gradebook gives {first_few(shown)} another extension than "
                             f"course.yml; extensions are course.yml's (assignments[].extensions): the export's "
                             f"extension columns and the late penalty follow it, and the next `course autograde "
                             f"{name}` writes it into the gradebook")
        return lines


DEFAULT_EXPORT = "grades.csv"         # nbgrader export's file without --to


def _refuse(line: str) -> NoReturn:
    """Stop `nbgrader export` with `line` on stderr and exit code 2, as `course` stops on a CourseError
    (SystemExit, not an Exception: nbgrader would print a traceback)."""
    print(f"nbgrader export: {line}", file=sys.stderr, flush=True)
    raise SystemExit(2) from None


@contextlib.contextmanager
def open_export(dest: str, encoding: str) -> Iterator[TextIO]:
    """`dest` opened for writing text. A regular file (or a name not yet taken) is written beside itself
    and replaced in one step, so that a reader never sees half a file; a symbolic link is followed
    first, so that its target is replaced and the link kept. Anything else (a pipe, a FIFO, a
    terminal) and any name under /dev or /proc (`/dev/stdout`, even when the shell sent it to a file)
    is written straight into: replacing it would put a file in its place."""
    try:
        mode = os.stat(dest).st_mode          # follows links; a dangling one counts as a new file
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode) or _through_system_folders(dest):
        with open(dest, "w", newline="", encoding=encoding) as fh:
            yield fh
        return
    target = os.path.realpath(dest)
    tmp = f"{target}.tmp"
    try:
        with open(tmp, "w", newline="", encoding=encoding) as fh:
            yield fh
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _through_system_folders(path: str) -> bool:
    """Whether `path`, or a symbolic link on the way from it to its target, names something under
    /dev or /proc (`/dev/stdout` -> `/proc/self/fd/1` -> the shell's redirection)."""
    here = os.path.abspath(path)
    for _ in range(40):                        # the kernel's own limit on links in a row
        if here.startswith(("/dev/", "/proc/")):
            return True
        if not os.path.islink(here):
            return False
        here = os.path.abspath(os.path.join(os.path.dirname(here), os.readlink(here)))
    return False


def _stale_results(course: Course, rows: list[dict[str, Any]]) -> tuple[list[str], set[tuple[str, str]]]:
    """A line per assignment whose late penalties in `rows` were taken against another due date or
    extension than course.yml's now, one per assignment whose scores are out of other points, and one
    per assignment with grades taken while a grader failed (`consistency.stale_results`): the export's
    due, extension and max score columns are course.yml's, its penalties and scores the last autograde's.
    With the lines, the (assignment, student) pairs whose late penalty is from before."""
    from .api import graded_result
    from .consistency import stale_due_students, stale_results

    out, stale = [], set()
    for a in course.assignments:
        graded = {r["student_id"] for r in rows if r["assignment"] == a.name}
        results = [r for r in (graded_result(course, a, sid) for sid in sorted(graded)) if r is not None]
        out += stale_results(a, results)
        stale |= {(a.name, sid) for sid in stale_due_students(a, results)}
    return out, stale


def _cell(column: str, value: Any) -> str:
    """One exported field as text. Scores are rounded to 6 decimals (`lms_export.number`). A name that a
    spreadsheet would take for a formula gets a leading apostrophe (`lms_export.spreadsheet_text`);
    student ids and emails are written as they are, since rows are matched on them (`_identifier_warnings`)."""
    from .reporting.lms_export import number, spreadsheet_text

    if value is None:
        return ""
    if isinstance(value, float):
        return number(value)
    text = str(value)
    return spreadsheet_text(text) if column in _TEXT_COLUMNS else text


_TEXT_COLUMNS = frozenset({"last_name", "first_name"})


def _identifier_warnings(rows: list[dict[str, Any]]) -> list[str]:
    """A line per identifier column of the plain export (`student_id`, `email`) naming the students
    whose value a spreadsheet would run as a formula (written exactly all the same)."""
    from .reporting.lms_export import formula_warning

    students = {r["student_id"]: r for r in rows}
    lines = (formula_warning(column, ((sid, str(r[column] or "")) for sid, r in students.items()),
                             "rows are matched on it") for column in ("student_id", "email"))
    return [line for line in lines if line]


# nbgrader's CsvExportPlugin columns, then the course's two.
EXPORT_COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                  "raw_score", "late_submission_penalty", "score", "max_score", "extension", "extended_duedate")


def _unfetchable(root: str, released: dict[str, list[str]]) -> list[str]:
    """A warning for each notebook of `released` (assignment -> students) submitted as `<name>.IPYNB` (or
    any case but lower): its page is released, but `nbgrader fetch_feedback` looks for the student's
    `*.ipynb` in lower case only and never finds it, saying nothing to the student."""
    from .layout import CourseLayout, is_notebook_name

    layout = CourseLayout(Path(root))
    lines = []
    for assignment, students in sorted(released.items()):
        for student in students:
            folder = layout.submission(student, assignment)
            names = sorted(os.listdir(folder)) if folder.is_dir() else []
            for name in names:
                if is_notebook_name(name) and not name.endswith(".ipynb"):
                    page = layout.feedback(student, assignment) / f"{os.path.splitext(name)[0]}.html"
                    lines.append(f"{layout.relative(folder / name)}: nbgrader fetch_feedback finds lower-case "
                                 f".ipynb only, so {student} will not fetch {layout.relative(page)}; "
                                 "hand that page over another way")
    return lines


def _has_page(folder: str) -> bool:
    """Whether a student's feedback folder for an assignment holds a page (an .html file)."""
    return bool(glob.glob(os.path.join(glob.escape(folder), "*.html")))


class CourseReleaseFeedback(ExchangeReleaseFeedback):   # type: ignore[misc]
    """nbgrader's release_feedback (its own exchange), leaving out, with a warning naming the
    folder, each student whose feedback folder has no `submission_secret.txt` (a submission put in
    submitted/ by hand, not through `nbgrader submit`: the exchange has no way to hand it back).
    nbgrader's own stops at the first such student with a FileNotFoundError, and the students its
    folder listing reaches after that get nothing. A folder with the secret and no `timestamp.txt`
    (which `nbgrader fetch_feedback` never needs: it finds the page by the secret alone) is released
    here (`_release_by_secret`), as nbgrader would were it not for its log line's timestamp.

    The pages it releases are first checked against results.json and the gradebook, and one a TA
    made out of date (an override or comment changed after `course feedback`) is written afresh, with
    a warning naming it: nbgrader releases the files of feedback/ as they are."""

    def copy_files(self) -> None:
        before = self.coursedir.student_id_exclude
        excluded = {s for s in (before or "").split(",") if s}
        skipped = []
        released: dict[str, list[str]] = {}                       # assignment -> students
        untimed: dict[str, str] = {}                              # page folder -> student: no timestamp.txt
        found = False                                             # a folder asked for that holds a page
        for page_folder in sorted(glob.glob(self.src_path)):      # feedback/<student or *>/<assignment>
            student = os.path.basename(os.path.dirname(page_folder.rstrip(os.sep)))
            has_page = _has_page(page_folder)
            found = found or has_page
            if student in excluded or not has_page:
                continue
            why = _secret_problem(page_folder)
            if why:
                skipped.append(student)
                self.log.warning("%s: %s, so its feedback cannot be released; left out",
                                 os.path.relpath(page_folder, self.coursedir.root), why)
                continue
            released.setdefault(os.path.basename(page_folder.rstrip(os.sep)), []).append(student)
            if not os.path.isfile(os.path.join(page_folder, TIMESTAMP_FILE)):
                untimed[page_folder] = student
        if not found:
            self.log.warning("%s", self._nothing_found())
        gone = self._removed(released)
        for students in released.values():
            students[:] = [sid for sid in students if sid not in gone]
        for line in _unfetchable(self.coursedir.root, released):
            self.log.warning("%s", line)
        for line in self._refreshed(released):
            self.log.warning("%s", line)
        for page_folder, student in untimed.items():
            if student not in gone:
                self._release_by_secret(page_folder, student)
        # nbgrader's own would open their timestamp.txt: the folders without one are released above
        skipped += untimed.values()
        self.coursedir.student_id_exclude = ",".join(sorted(excluded | set(skipped) | gone))
        try:
            super().copy_files()
        finally:
            self.coursedir.student_id_exclude = before

    def _nothing_found(self) -> str:
        """The line for a release that found no feedback page for the assignment (and student) asked
        for: the folder it looked in, and the students with pages for that assignment or, when it has
        none, the assignments with pages (a misspelt name, or `course feedback` not run yet)."""
        from .reporting.lms_export import listed

        pages: dict[str, list[str]] = {}                          # assignment -> students with a page
        for folder in sorted(glob.glob(self.coursedir.format_path(self.coursedir.feedback_directory, "*", "*"))):
            if _has_page(folder):
                student, assignment = Path(folder).parts[-2:]
                pages.setdefault(assignment, []).append(student)
        asked = self.coursedir.assignment_id
        where = f"{os.path.relpath(self.src_path, self.coursedir.root)}{os.sep}"
        if self.coursedir.student_id and pages.get(asked):
            have = f"the students with one for {asked}: {listed(pages[asked], shown=10)}"
        elif pages:
            have = f"the assignments with feedback pages: {', '.join(sorted(pages))}"
        else:
            have = "no assignment has any (`course feedback ASSIGNMENT` writes them)"
        return f"no feedback page under {where}, so nothing was released; {have}"

    def _release_by_secret(self, page_folder: str, student: str) -> None:
        """Each page of `page_folder` (a student's feedback folder without timestamp.txt) copied where
        `nbgrader fetch_feedback` looks for it: the exchange's feedback folder, named by the hash of the
        submission's secret and the notebook's name, put in place by a rename as nbgrader does."""
        from nbgrader.utils import notebook_hash

        with open(os.path.join(page_folder, SECRET_FILE), encoding="utf-8") as fh:
            secret = fh.read()                  # readable and not empty: _secret_problem
        where = os.path.relpath(page_folder, self.coursedir.root)
        for page in sorted(glob.glob(os.path.join(glob.escape(page_folder), "*.html"))):
            notebook = os.path.splitext(os.path.basename(page))[0]
            name = notebook_hash(secret=secret, notebook_id=notebook)
            staged = os.path.join(self.dest_path, f"{name}-tmp.html")
            shutil.copy(page, staged)
            os.replace(staged, os.path.join(self.dest_path, f"{name}.html"))
            self.log.info("Releasing feedback for student '%s' on assignment '%s/%s/%s' (%s has no %s)", student,
                          self.coursedir.course_id, self.coursedir.assignment_id, notebook, where, TIMESTAMP_FILE)

    def _removed(self, released: dict[str, list[str]]) -> set[str]:
        """The students of `released` taken out of the course (api.removed_from_course), each named in a
        warning: their pages are not released."""
        from . import api

        try:
            course = load_course(self.coursedir.root)
            gone = set()
            for name, students in released.items():
                gone |= api.removed_from_course(course, course.assignment(name), students)
        except CourseError:
            return set()                        # _refreshed says the pages cannot be checked
        for sid in sorted(gone):
            self.log.warning("%s: taken out of the course (on neither the roster nor the gradebook, which had "
                             "their grades), so their feedback is not released; left out", sid)
        return gone

    def _refreshed(self, released: dict[str, list[str]]) -> list[str]:
        """The pages of `released` (assignment -> students) written afresh (api.refresh_pages)."""
        from . import api

        try:
            course = load_course(self.coursedir.root)
        except CourseError as exc:
            return [f"the pages cannot be checked against the gradebook ({exc}); released as they are"]
        lines = []
        for name, students in released.items():
            try:
                lines += api.refresh_pages(course, course.assignment(name), students)
            except CourseError as exc:
                lines.append(f"{name}: the pages cannot be checked against the gradebook ({exc}); released as "
                             f"they are")
        return lines


def _secret_problem(page_folder: str) -> str:
    """Why the submission_secret.txt of a feedback folder cannot name the student's released page
    (nbgrader hashes its text with the notebook's name), or "" when it can."""
    path = os.path.join(page_folder, SECRET_FILE)
    if not os.path.isfile(path):
        return f"no {SECRET_FILE} (not submitted through nbgrader's exchange)"
    try:
        with open(path, encoding="utf-8") as fh:
            secret = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        return f"{SECRET_FILE} cannot be read ({type(exc).__name__}: {exc})".splitlines()[0][:300]
    return "" if secret else f"{SECRET_FILE} is empty"


def config_problems(course: Course) -> list[str]:
    """Where the course's nbgrader_config.py would let nbgrader bypass this engine (empty when it
    calls `configure`)."""
    from traitlets.config.loader import PyFileConfigLoader

    path = course.root / NBGRADER_CONFIG
    rel = course.layout.relative(path)
    if not path.is_file():
        return [f"{rel}: missing, so nbgrader's commands use their own defaults (run them with flags) and "
                f"`nbgrader autograde` would grade the notebook's visible asserts"]
    try:
        cfg = PyFileConfigLoader(NBGRADER_CONFIG, path=str(course.root)).load_config()
    except Exception as exc:  # noqa: BLE001 - whatever the config file raises is reported in one line
        return [f"{rel}: cannot be loaded ({type(exc).__name__}: {exc})".splitlines()[0]]
    out = []
    if CourseAutograde not in list(cfg.Autograde.get("autograde_preprocessors", [])):
        out.append(f"{rel}: `nbgrader autograde` (and formgrader's Autograde button) would run nbgrader's own "
                   f"grading; call autograder.nbgrader_hooks.configure")
    if cfg.GenerateFeedback.get("exporter_class") is not CourseFeedbackExporter:
        out.append(f"{rel}: `nbgrader generate_feedback` would overwrite the feedback pages and copy "
                   f"{RESULTS_JSON} next to them; call autograder.nbgrader_hooks.configure")
    return out
