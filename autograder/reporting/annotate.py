"""Reasons where formgrader shows grades: each grade cell of the autograded notebook gets our report.

`course autograde` copies the submitted notebooks into `autograded/<student>/<assignment>/` (the
originals in `submitted/` are only ever read). Formgrader renders that copy next to the grades in
the gradebook; nbgrader's own autograde would leave a traceback under a grade cell that failed.
Here every grade cell (`Problem.grade_id`) gets, in place of the outputs the student's own kernel
left in it, one output written from the SubmissionResult:

- lost points: an `error` output (shown like a traceback) listing the failed checks with their
  messages, recognised misconceptions (or, for a probe's guess, where the output first goes wrong)
  with their hints, checks that could not be graded,
  advice, and advice not run (the function gave no result to look at); the parametrised cases
  and identical failures grouped as on the feedback page;
- full marks: a one-line `stream` output;
- a grader crash: an `error` output saying the problem needs manual grading.

Only student-safe fields are written (messages, diagnoses, hints; never `detail` or the seed), so
the notebook stays safe to hand back, e.g. through nbgrader's generate_feedback. A grade cell the
student deleted is put back from the released notebook (after the cell that precedes it there),
so formgrader has a place to show and override that grade; a copied grade, answer or read-only cell
(the same id further down) is unmarked but for its last copy, as nbgrader's DeduplicateIds does, so
formgrader shows one score box and one answer box per id; a grade cell made Markdown or Raw (or such a
copy of one) is unmarked too, where a code cell has the id or the release has the cell to put back
(`_unmark_non_code_grade_cells`). A copy that cannot be read as a notebook
(not JSON, or not a notebook: a text file saved as .ipynb) is replaced by a placeholder notebook
(`placeholder_notebook`) that formgrader can open: a Markdown cell saying the submitted file could not
be read and why, then the released notebook's answer cells, empty, and its grade cells with our report,
so that the submission can be graded by hand; the file in submitted/ is only ever read. Without a
released notebook to take the cells from, such a copy is left as it is. A notebook read but that nbformat
cannot write back gets the placeholder too, saying so (NOT_WRITABLE). A lone surrogate that JSON's
escapes let into a string ("\\ud800") is written as U+FFFD, so the copy is UTF-8 throughout. The cells
are shown as graded, as nbgrader's autograde gives formgrader the notebook its OverwriteCells went
through (`notebooks.as_released`): a cell the student changed from the release has its released type
again, a locked cell its released source (its stale outputs replaced by a line saying it was edited);
an answer cell keeps the student's text.

What the student wrote is kept, but not what would run in the TA's browser: formgrader renders the
copy with nbconvert, which puts raw HTML of Markdown cells and outputs into the page as it is, and
a notebook's outputs here are the student's own (no kernel ran them). So the copy keeps of each
rich output only its plain text and bitmap images (not HTML, JavaScript, SVG, Markdown, LaTeX or
widgets) and of its metadata only image sizes that are whole numbers (nbconvert writes them as
unquoted attributes), drops the notebook's widget state (which loads widget code from the network),
and keeps a Markdown cell that is not the released notebook's own as written only when nbconvert's
Markdown renderer makes of it nothing but what Markdown itself makes and a few harmless tags students
write (a collapsible section, centred or coloured text, sized images, anchors, plain comments; every
element closed within the cell), with link targets of http, https, mailto or attachment, or file
names within the notebook's folder (`safe_markdown`); otherwise with its other link targets
(`javascript:`, `data:`, `/logout`) replaced by LINK_REMOVED, or, if it still renders markup or
nbconvert fails on it, as a fenced code block (a heading whose text would give it an id of
formgrader's page is written as an HTML heading, which gets none); a Raw cell that is not the
released notebook's own is written as escaped text (`_neutralise_raw`). The
nbgrader metadata of a cell is the release's for its grade id, as nbgrader's autograde makes it, and
removed for an id the release does not have (formgrader writes the id into its page as it is); of
its other metadata and the notebook's, only what nbconvert does not write into the page is kept
(`_safe_cell_metadata`, `_safe_notebook_metadata`: a cell's tags become classes of it, the
notebook's lexer a class of each code cell's source). The
copy written is a valid notebook (an execution count that is not a whole number is cleared; see
`valid_notebook`), as formgrader refuses to show one that is not.

Every notebook of the assignment is decided on by itself: one whose saved outputs take it over the
limits (`over_notebook_limits`) is copied without its outputs, under a note saying why; one over the
grader's limits too is never parsed, and its copy is the placeholder (`placeholder_notebook`) saying
it is too large. Nothing of the student's is ever copied as submitted without the above.
"""
from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import nbformat
from nbformat.v4 import rwbase

from autograder.cellplan import joined_text, source_text
from autograder.config import Assignment, Problem
from autograder.grading.results import SubmissionResult
from autograder.notebooks import as_released, cell_kind, copied_cells, over_notebook_limits, without_outputs
from autograder.text import format_points, plural, shown_name

from .bounds import bound_result
from .digest import Check, FailureGroup, ProblemDigest, ProblemTests, digest_key, problem_digest, problem_tests
from .notebook_text import notebook_text
from .results_json import atomic_write_bytes, diagnosis_heading, student_error

OUTPUT_NAME = "course autograde"      # `ename` of our error outputs: what produced them
MARKS = {"failed": "\u2717", "not_graded": "not graded (no points):"}
PARTLY_GRADED = "partly graded:"      # the mark of checks not graded that earned points in the cases that passed
SHOWN_CASES = 3                       # failing cases of one check written out in full
RED, GREEN, YELLOW, BOLD, RESET = "\x1b[31m", "\x1b[32m", "\x1b[33m", "\x1b[1m", "\x1b[0m"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class AnnotationReport:
    notebook: Path | None              # the autograded copy written, or None
    annotated: tuple[str, ...] = ()    # grade ids that got our report
    restored: tuple[str, ...] = ()     # grade ids put back from the released notebook
    skipped: str = ""                  # why nothing was written ("" when written)


# --------------------------------------------------------------------------- the text

def _points(x: float) -> str:
    return format_points(x)


def _indent(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in text.strip().splitlines() if line.strip()]


def _check_lines(check: Check, mark: str, colour: str) -> list[str]:
    title = check.description or check.function
    open_cases = [c for c in check.cases if c.state not in ("passed",)]
    count = (f", {len(open_cases)} of {len(check.cases)} cases" if check.parametrised else "")
    lines = [f"{colour}{mark}{RESET} {title}  [{check.function}{count}; "
             f"{_points(check.score)} / {_points(check.max_score)} points]"]
    messages = check.messages
    if len(messages) == 1:
        labels = ", ".join(c.label for c in open_cases if c.label)
        if labels:
            lines.append(f"    cases: {labels}")
        lines += _indent(messages[0])
    else:
        for c in open_cases[:SHOWN_CASES]:
            lines += _indent(f"{c.label}: {c.test.output}" if c.label else c.test.output)
        if len(open_cases) > SHOWN_CASES:
            lines.append(f"    ... and {len(open_cases) - SHOWN_CASES} more cases (all on the feedback page)")
    return lines


def _group_member(check: Check) -> str:
    """A grouped check's function, with how many of its cases the shared error covers when not all."""
    shown = [c for c in check.cases if c.state != "passed"]
    if check.parametrised and len(shown) < len(check.cases):
        return f"{check.function}, {len(shown)} of {len(check.cases)} cases"
    return check.function


def _group_lines(groups: Iterable[FailureGroup], kind: str) -> list[str]:
    lines = []
    for group in groups:
        partly = kind != "failed" and group.partly_graded
        mark = PARTLY_GRADED if partly else MARKS[kind]
        if group.same_error:
            what = ("failed with the same error" if kind == "failed" else
                    "could not be graded in full, for one reason" if partly else "could not be graded, for one reason")
            lines.append(f"{RED if kind == 'failed' else YELLOW}{mark}{RESET} {len(group.checks)} checks "
                         f"{what}  [{', '.join(_group_member(c) for c in group.checks)}]")
            lines += _indent(group.message)
        else:
            lines += _check_lines(group.checks[0], mark, RED if kind == "failed" else YELLOW)
    return lines


def problem_report(problem: ProblemDigest) -> str:
    """The text for one grade cell: score, failures, misconceptions, not graded, advice, passed count."""
    graded = problem.graded_checks
    head = f"{OUTPUT_NAME}: {_points(problem.score)} / {_points(problem.max_score)} points for {problem.name}"
    if not problem.checks:
        return f"{head}: no checks ran for this problem."
    passed_count = graded - len(problem.of_kind("failed")) - len(problem.of_kind("not_graded"))
    lines = [f"{BOLD}{head}{RESET}, {passed_count} of {plural(graded, 'check')} passed"]
    lines += _group_lines(problem.failures, "failed")
    stages = problem.stages
    for diagnosis, hint in problem.diagnoses:
        lines.append(f"{YELLOW}{diagnosis_heading(diagnosis, stages)}{RESET} ({diagnosis})")
        if hint:
            lines += _indent(hint)
    lines += _group_lines(problem.not_graded, "not_graded")
    for check in problem.advice:
        lines.append(f"{YELLOW}advice (no points):{RESET} {check.description or check.function}  [{check.function}]")
        for message in check.messages:
            lines += _indent(message)
    for check in problem.not_run:
        lines.append(f"not run (no points): {check.description or check.function}  [{check.function}]")
        for message in check.messages:
            lines += _indent(message)
    passed = problem.of_kind("passed")
    if passed and lines[1:]:
        lines.append(f"{GREEN}{plural(len(passed), 'other check')} passed{RESET}: "
                     + ", ".join(c.function for c in passed))
    return "\n".join(lines)


def _new_output(output_type: str, **fields: Any) -> nbformat.NotebookNode:
    """What nbformat.v4.new_output(output_type, **fields) returns for the complete `fields` given here,
    without its schema check of each output: nbformat.writes checks the whole notebook anyway."""
    return nbformat.NotebookNode(output_type=output_type, **fields)


def _output(result: SubmissionResult, problem: ProblemDigest | None, name: str) -> nbformat.NotebookNode:
    if result.state == "crashed":
        text = (f"{OUTPUT_NAME}: not graded; the grader failed for this submission "
                f"({student_error(result)}). Grade this cell by hand or regrade.")
        return _new_output("error", ename=OUTPUT_NAME, evalue="not graded", traceback=[RED + text + RESET])
    if problem is None:
        return _new_output("stream", name="stdout", text=f"{OUTPUT_NAME}: no checks for {name}.\n")
    text = problem_report(problem)
    if problem.full_marks and not problem.advice and not problem.not_run:
        return _new_output("stream", name="stdout", text=text.replace(BOLD, "").replace(RESET, "") + ".\n")
    evalue = f"{_points(problem.score)} / {_points(problem.max_score)} points"
    return _new_output("error", ename=OUTPUT_NAME, evalue=evalue, traceback=text.splitlines())


_OUTPUTS: dict[tuple[object, ...], tuple[str, dict[str, Any]]] = {}   # digest_key -> (output type, fields)
OUTPUTS_KEPT = 128                                                    # least recently used out


def _problem_output(result: SubmissionResult, tests: ProblemTests | None, name: str) -> nbformat.NotebookNode:
    """`_output` for the problem, a graded problem's output kept for the next student whose problem
    went the same way (digest_key: the same tests but for their detail and duration); a new node each time."""
    if tests is None or result.state == "crashed":
        return _output(result, problem_digest(tests) if tests is not None else None, name)
    key = digest_key(tests)
    made = _OUTPUTS.pop(key, None)
    if made is None:
        node = _output(result, problem_digest(tests), name)
        made = (node.output_type, {k: v for k, v in node.items() if k != "output_type"})
        while len(_OUTPUTS) >= OUTPUTS_KEPT:
            del _OUTPUTS[next(iter(_OUTPUTS))]
    _OUTPUTS[key] = made
    kind, fields = made
    return _new_output(kind, **{k: list(v) if isinstance(v, list) else v for k, v in fields.items()})


# --------------------------------------------------------------------------- the notebook

def _grade_id(cell: Any) -> str:
    """The grade id of `cell`'s nbgrader metadata, "" when it has none or none that is a string (a student's
    metadata may hold a list there, which is no key of a mapping)."""
    meta = cell.get("metadata")
    marks = meta.get("nbgrader") if isinstance(meta, dict) else None
    grade_id = marks.get("grade_id") if isinstance(marks, dict) else None
    return grade_id if isinstance(grade_id, str) else ""


def _restore_position(nb: Any, released: Any, index: int) -> int:
    """Where to put back released.cells[index]: after the nearest earlier released cell found in nb."""
    for j in range(index - 1, -1, -1):
        before = released.cells[j]
        key_id, key_grade = before.get("id"), _grade_id(before)
        for k, cell in enumerate(nb.cells):
            if (key_grade and _grade_id(cell) == key_grade) or (key_id and cell.get("id") == key_id):
                return k + 1
    return len(nb.cells)


def _read_notebook(path: Path, data: bytes | None = None) -> tuple[Any, str]:
    """`nbformat.read(path, as_version=4)` without its validation: the notebook is validated once,
    as nbformat's writer would, when it is written back (`notebook_text`). With `data`, the bytes
    that are to be written at `path` are read instead of the file (as text, with universal newlines
    as `open` reads it). A notebook over the grader's cell or value limits, saved outputs counted
    (`over_notebook_limits`: nbformat would need about 2 KB per cell) is not parsed at all."""
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
        too_costly = over_notebook_limits(shown_name(path.name), data, outputs=True)
        if too_costly:
            return None, f"{shown_name(path.name)}: not annotated, {TOO_COSTLY} ({too_costly})"
        text = data.decode("utf-8")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return nbformat.convert(_reads(text), 4), ""
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError,
            nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        return None, f"{shown_name(path.name)}: not annotated, {NOT_READABLE} ({type(exc).__name__})"


NOT_READABLE = "not a readable notebook"    # `_read_notebook`'s reason for a file nbformat cannot read
TOO_COSTLY = "too costly to read"           # its reason for a notebook over the limits (`over_notebook_limits`)
PLACEHOLDER_ID = "course-autograde-unreadable"   # the id of the placeholder's first cell: the same every time
OUTPUTS_NOTE_ID = "course-autograde-outputs-left-out"   # the note heading a copy written without its outputs
UNREADABLE = "could not be read as a notebook"
NOT_WRITABLE = "was read, but could not be written back as a notebook for formgrader"
TOO_LARGE = "is too large to be read for this copy"


def placeholder_notebook(name: str, reason: str, released: Any, what: str = UNREADABLE) -> Any:
    """The notebook formgrader is given in place of a submitted file `name` that cannot be read as one
    (`reason`, the student's note; `what` the file is, UNREADABLE, TOO_LARGE or NOT_WRITABLE): a Markdown cell saying
    so, then each answer, task and grade cell of the released notebook (`released`), answers empty and no
    outputs, with their nbgrader metadata, so that formgrader shows a score box for each grade cell and a
    comment box for each answer, as the gradebook has them. Without a release, the note alone."""
    meta = json.loads(json.dumps(released.get("metadata", {}))) if released is not None else {}
    meta.pop("widgets", None)
    nb = nbformat.v4.new_notebook(metadata=meta)
    cells = (released.cells if released is not None else ())
    rest = ("the assignment's answer cells, empty, and its grade cells, so that the submission can be graded by hand"
            if cells else "the submission can be read in submitted/")
    nb.cells.append(nbformat.v4.new_markdown_cell(id=PLACEHOLDER_ID, source=
        f"**{OUTPUT_NAME}: the submitted file `{shown_name(name)}` {what}**: "
        f"{html.escape(reason, quote=False)}\n\n"
        f"This copy was written for formgrader in its place (the submitted file is left as it is): {rest}."))
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not isinstance(meta, dict) or not any(meta.get(k) for k in ("grade", "solution", "task")):
            continue
        cell = nbformat.from_dict(json.loads(json.dumps(cell)))
        if meta.get("solution") or meta.get("task"):
            cell.source = ""
        if cell.get("cell_type") == "code":
            cell.outputs = []
            cell.execution_count = None
        nb.cells.append(cell)
    return nb


def _reads(text: str) -> Any:
    """`nbformat.reader.reads(text)`: for a version-4 notebook, its JSON parsed straight into
    NotebookNodes (every object one, as nbformat's `from_dict` makes them after parsing), then
    the same rejoining of lines and stripping of transient metadata; any other is nbformat's."""
    nb = json.loads(text, object_hook=nbformat.NotebookNode)
    if not isinstance(nb, dict) or nb.get("nbformat", 1) != 4:
        return nbformat.reader.reads(text)
    try:
        return rwbase.strip_transient(rwbase.rejoin_lines(nb))
    except AttributeError as exc:       # as nbformat.reader.reads says it
        raise nbformat.ValidationError(f"The notebook is invalid and is missing an expected key: {exc}") from None


_RELEASED: dict[Path, tuple[tuple[int, int, int], Any]] = {}   # path -> (its stat key, the notebook read)


def _released_notebook(path: Path) -> Any:
    """The released notebook at `path` (None when missing or unreadable), read once per version of
    the file: a batch restores deleted grade cells from the same release for many students.
    Callers copy what they take from it and never change it."""
    try:
        st = path.stat()
    except OSError:
        return None
    key = (st.st_ino, st.st_size, st.st_mtime_ns)
    cached = _RELEASED.get(path)
    if cached is not None and cached[0] == key:
        return cached[1]
    released = _read_notebook(path)[0] if path.is_file() else None
    _RELEASED[path] = (key, released)
    return released


def _unmark_non_code_grade_cells(nb: Any, problems: tuple[Problem, ...], released: Any) -> dict[str, str]:
    """Remove the nbgrader metadata of each cell of `nb` that is not code but holds a problem's grade id
    (a student made the grade cell, or a copy of it, Markdown or Raw: Jupyter keeps the metadata), when
    a code cell holds that id or `released` has the cell to put back: formgrader would show a score box
    for each, and the grade belongs on the code cell (`annotate_notebook`). Returns each id unmarked, with
    what its last such cell is ("Markdown" or "Raw")."""
    ids = [p.grade_id for p in problems]            # a list: a student's grade id need not be hashable
    code = [c for c in nb.cells if c.get("cell_type") == "code"]
    kept = [gid for c in code + (list(released.cells) if released is not None else []) if (gid := _grade_id(c)) in ids]
    unmarked = {}
    for cell in nb.cells:
        grade_id = _grade_id(cell)
        if cell.get("cell_type") != "code" and grade_id in kept:
            del cell.metadata["nbgrader"]
            unmarked[grade_id] = "Raw" if cell.get("cell_type") == "raw" else "Markdown"
    return unmarked


def _as_graded(nb: Any, released: Any) -> None:
    """The cells of `nb` (in place) as grading took them, as nbgrader's autograde (its OverwriteCells) gives
    formgrader the notebook: what `notebooks.as_released` puts back from `released`, each nbgrader cell's
    released type and a locked cell's released source (an answer keeps the student's source). A code
    cell whose source was put back loses the outputs the student's version left, under a line saying so;
    one made code again has none, and one made Markdown or Raw again keeps none."""
    if released is None:
        return
    cells, _ = as_released("", list(nb.cells), "source", tuple(released.cells))
    for i, (was, now) in enumerate(zip(nb.cells, cells, strict=True)):
        if now is was:
            continue
        cell = nbformat.from_dict(json.loads(json.dumps(now)))
        if cell.cell_type != "code":
            cell.pop("outputs", None)
            cell.pop("execution_count", None)
        else:
            cell.pop("attachments", None)         # a Markdown cell's alone
            cell.outputs, cell.execution_count = [], None
            if source_text(was.get("source")) != source_text(cell.source):
                text = (f"{OUTPUT_NAME}: this locked cell was edited in the submission; it is shown as released, "
                        f"as grading put it back (the edited version was not run).\n")
                cell.outputs = [_new_output("stream", name="stderr", text=text)]
        nb.cells[i] = cell


def _unmark_copies(nb: Any) -> None:
    """Copies of an nbgrader cell (one grade id on several grade, answer or read-only cells: a
    student copied a cell) are unmarked but the last, as nbgrader's own DeduplicateIds does: the
    last keeps its id, so formgrader shows one score box and one answer box per id (an answer's last
    copy is the one whose definitions ran last, the ones graded). A copy's nbgrader metadata is
    removed, and a code cell's outputs say so: a grade cell's in place of its outputs (its report
    goes on the last), an answer's or read-only cell's above the student's own."""
    for grade_id, found in copied_cells(nb.cells).items():
        kind = cell_kind(nb.cells[found[-1]])
        for i in found[:-1]:
            cell = nb.cells[i]
            del cell.metadata["nbgrader"]
            if cell.get("cell_type") != "code":
                continue
            if kind == "grade":
                text = (f"a copy of the grade cell `{grade_id}`, not graded: its grade is on the last cell "
                        f"with that id, below.")
                cell.outputs, cell.execution_count = [], None
            elif kind == "answer":
                text = (f"a copy of the answer cell `{grade_id}`, not taken as the answer: the last cell with "
                        f"that id, below, is.")
            else:
                text = f"a copy of the read-only cell `{grade_id}`: the last cell with that id, below, is kept."
            cell.outputs = [_new_output("stream", name="stderr", text=f"{OUTPUT_NAME}: {text}\n"), *cell.outputs]


# what a rich output keeps in the copy: text, and bitmaps (shown as <img> data, which runs nothing)
SAFE_DATA = ("text/plain", "image/png", "image/jpeg", "image/gif")
SAFE_IMAGES = SAFE_DATA[1:]
IMAGE_SIZES = ("width", "height")     # the output metadata kept: nbconvert writes them as unquoted attributes
# link targets a Markdown cell of the student's keeps (`attachment:` names an image of the cell's own)
SAFE_SCHEMES = ("http", "https", "mailto", "attachment")
LINK_REMOVED = "#link-target-removed"
# where Markdown takes a link or image target: `[text](target` and a definition's `[label]: target`
_LINK_TARGET = re.compile(r"(\]\s*\(\s*<?|\]\s*:\s*<?)([^\s<>()]+(?:\([^\s<>()]*\)[^\s<>()]*)*)")
_ESCAPED = re.compile(r"\\([!-/:-@\[-`{-~])")
_SCHEME = re.compile(r"([a-z][a-z0-9+.\-]*):")
# what nbconvert's Markdown renderer makes of Markdown itself, and the harmless HTML students write in Markdown
# (a collapsible section, centred or coloured text): the tags and attributes a student's cell may render to (an
# attribute named alone is allowed any value; `href` and `src` are looked at by `unsafe_url`)
_ALLOWED_TAGS = frozenset({
    "p", "a", "img", "em", "strong", "b", "i", "u", "s", "del", "sub", "sup", "kbd", "code", "pre", "ul", "ol",
    "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "hr", "br", "table", "thead", "tbody", "tfoot",
    "tr", "th", "td", "span", "div", "input", "details", "summary", "center", "font", "mark", "small"})
_VOID_TAGS = frozenset({"br", "hr", "img", "input"})      # the allowed tags that have no end tag
_ALLOWED_ATTRIBUTES = frozenset({"href", "src", "alt", "title", "class", "align", "start", "id"})
# attributes allowed only with these values: a table column's alignment, a task's box, an open section
_FIXED_ATTRIBUTES: dict[str, set[str | None]] = {
    "style": {"text-align:left", "text-align:right", "text-align:center"},
    "type": {"checkbox"}, "disabled": {None, ""}, "checked": {None, ""}, "open": {None, ""}}
# attributes allowed only with values of this form: sizes, a font's colour (a name or #hex) and size, and an
# anchor's name (only an `a` has one: a named image or form would be a property of the page's `document`)
_SIZE = re.compile(r"(?:[0-9]{1,3}|1[0-9]{3}|2000)(?:px)?|(?:[0-9]{1,2}|100)%")      # up to 2000 px or 100%
_FORMED_ATTRIBUTES = {"width": _SIZE, "height": _SIZE,
                      "color": re.compile(r"[a-zA-Z]{1,20}|#[0-9a-fA-F]{3,8}"), "size": re.compile(r"[+-]?[1-7]"),
                      "name": re.compile(r"[A-Za-z0-9_.:\-]{1,100}")}
_FORMED_ON = {"name": {"a"}, "color": {"font"}, "size": {"font"}}
# the class names nbconvert's Markdown renderer writes: pygments' short token classes in a code block, its
# wrapper, a heading's anchor, a task list's item and box (a page's own classes, e.g. bootstrap's
# `modal-backdrop`, could lay a student's link over the whole page)
_CLASS_NAME = re.compile(r"[a-z][a-z0-9]{0,2}|highlight|hll|anchor-link|task-list-item|task-list-item-checkbox")
# ids of formgrader's page (its templates, its and nbconvert's), which its script and CSS find elements by
# (`#statusmessage` is fixed over the page), and the starts of those MathJax makes or nbconvert gives a cell
PAGE_IDS = frozenset({"notebook", "notebook-container", "statusmessage", "help-dialog"})
PAGE_ID_STARTS = ("mathjax", "mjx", "cell-id=")
# a start tag that a browser reads as html.parser does: names of ASCII letters, each value quoted or, unquoted,
# of characters that end no value early in either (no quote, `=`, `&`, `<` or `>`, no blank but ASCII ones)
_PLAIN_START_TAG = re.compile(r"""<[a-zA-Z][a-zA-Z0-9]*(?:[ \t\n\r\f]+[a-zA-Z][a-zA-Z-]*"""
                              r"""(?:=(?:"[^"<>]*"|'[^'<>]*'|[A-Za-z0-9_.:/#%?+,~()\-]+))?)*[ \t\n\r\f]*/?>""")
# an HTML comment that a browser ends where html.parser does: at its first `-->`, with no `--` (so no `--!>`)
# and no `<!-` in it, not starting `<!-->` or `<!--->` (which browsers read as an empty comment)
_PLAIN_COMMENT = re.compile(r"<!--(?![>-])(?:[^<-]|-(?!-)|<(?!!-))*-->")


class _RenderedMarkup(HTMLParser):
    """Reads nbconvert's HTML for a Markdown cell; `safe` stays True while everything in it is text, a
    plain comment or an allowed tag with allowed attributes, with link targets `unsafe_url` finds safe,
    each element closed in the order opened (`open`: those not yet closed). An element left open would
    reach past the cell in a browser: an unclosed `<font>` or `<s>` is opened again around the rest of
    formgrader's page."""

    def __init__(self, reserved: frozenset[str] = frozenset()) -> None:
        super().__init__(convert_charrefs=False)
        self.safe = True
        self.reserved = reserved
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag, attrs)
        if tag not in _VOID_TAGS:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._check_tag(tag, attrs)
        self.safe = self.safe and tag in _VOID_TAGS     # a browser leaves `<b/>` open

    def _check_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        plain = _PLAIN_START_TAG.fullmatch(self.get_starttag_text() or "")
        if tag not in _ALLOWED_TAGS or not plain or (tag == "input" and ("type", "checkbox") not in attrs):
            self.safe = False
        for name, value in attrs:
            if name in _FIXED_ATTRIBUTES:
                self.safe = self.safe and value in _FIXED_ATTRIBUTES[name]
            elif name in _FORMED_ATTRIBUTES:
                if name in IMAGE_SIZES and value and (self.get_starttag_text() or "").endswith(f"={value}>"):
                    value = value.removesuffix("/")     # `width=300/>`: browsers read the number, 300
                self.safe = (self.safe and tag in _FORMED_ON.get(name, {tag}) and value is not None
                             and _FORMED_ATTRIBUTES[name].fullmatch(value) is not None and value not in self.reserved)
            elif name not in _ALLOWED_ATTRIBUTES:
                self.safe = False
            elif name in ("href", "src") and unsafe_url(value or "") and not (tag == "img" and _is_data(value or "")):
                self.safe = False      # an image's data runs nothing
            elif name == "class" and not all(_CLASS_NAME.fullmatch(c) for c in (value or "").split()):
                self.safe = False
            elif name == "id" and _blocked_id(value or "", self.reserved):
                self.safe = False      # formgrader finds a grade's score box (and comment box) by this id

    def handle_endtag(self, tag: str) -> None:
        self.safe = self.safe and tag in _ALLOWED_TAGS and bool(self.open) and self.open.pop() == tag

    def handle_data(self, data: str) -> None:
        self.safe = self.safe and "<" not in data     # a `<` html.parser did not read as a tag

    def parse_comment(self, i: int, report: bool = True) -> int:
        """A comment is safe when written so that a browser ends it where html.parser does (_PLAIN_COMMENT)."""
        self.safe = self.safe and _PLAIN_COMMENT.match(self.rawdata, i) is not None
        return super().parse_comment(i, report)

    def handle_comment(self, data: str) -> None:
        pass                         # checked as it is read (`parse_comment`); shown by no browser

    def handle_decl(self, decl: str) -> None:
        self.safe = False

    def handle_pi(self, data: str) -> None:
        self.safe = False

    def unknown_decl(self, data: str) -> None:
        self.safe = False


def _blocked_id(value: str, reserved: frozenset[str]) -> bool:
    """Whether no element of a student's may have the id `value`: one of formgrader's page (PAGE_IDS,
    PAGE_ID_STARTS) or one it finds a grade's boxes by (`reserved`)."""
    return value in reserved or value in PAGE_IDS or value.lower().startswith(PAGE_ID_STARTS)


def _rendered(markdown: str, attachments: dict[str, Any]) -> str | None:
    """The HTML nbconvert's Markdown renderer makes of `markdown`, as formgrader's exporter renders a Markdown
    cell with `attachments` (then taking `/files/` off the start of each link and image target, as its
    template's `strip_files_prefix` does); None when it fails (formgrader would fail on it too)."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
    from nbconvert.filters.strings import strip_files_prefix

    try:
        made = MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=attachments)).render(markdown)
        return str(strip_files_prefix(str(made)))  # type: ignore[no-untyped-call]
    except Exception:  # noqa: BLE001 - formgrader would fail on it too
        return None


def _renders_safely(markdown: str, attachments: dict[str, Any], reserved: frozenset[str] = frozenset()) -> bool:
    """Whether nbconvert's Markdown renderer makes of `markdown` only text and what Markdown itself makes
    (`_RenderedMarkup`), as formgrader renders a Markdown cell with `attachments`."""
    rendered = _rendered(markdown, attachments)
    if rendered is None:
        return False
    reader = _RenderedMarkup(reserved)
    reader.feed(rendered)
    reader.close()
    return reader.safe and not reader.rawdata and not reader.open


def unsafe_url(url: str) -> bool:
    """Whether a link target, as Markdown gives it to the browser (backslash escapes and character
    references read, the blanks and control characters browsers skip taken out), names a scheme
    other than SAFE_SCHEMES (`javascript:`, `vbscript:`, `data:` and the like), or, with no scheme,
    leaves the notebook's folder: it starts with `/` (the TA's server, e.g. its `/logout`, or `//`
    another host) or has a backslash (browsers read it as `/`) or a `..` step (its `%`-escapes read,
    as browsers read `%2e%2e`)."""
    plain = html.unescape(_ESCAPED.sub(r"\1", url))
    plain = "".join(ch for ch in plain if ch > " " and ch != "\x7f").lower()
    plain = plain.removeprefix("/").removeprefix("files/") if plain.startswith(("/files/", "files/")) else plain
    scheme = _SCHEME.match(plain)
    if scheme is not None:
        return scheme.group(1) not in SAFE_SCHEMES
    path = unquote(re.split(r"[?#]", plain, maxsplit=1)[0])
    return plain.startswith("/") or "\\" in plain or "\\" in path or ".." in re.split(r"[/\\]", path)


def _links_removed(markdown: str, attachments: dict[str, Any]) -> str:
    """`markdown` with each link or image target nbconvert's renderer makes a link or image of that
    `unsafe_url` finds unsafe replaced by LINK_REMOVED; the same text in code is left as it is. (Each
    unsafe target is first replaced by a numbered mark: a mark the rendered HTML has as a target was one.)"""
    found = [m for m in _LINK_TARGET.finditer(markdown) if unsafe_url(m.group(2))]
    if not found:
        return markdown

    def marked(chosen: Callable[[int, re.Match[str]], str]) -> str:
        parts, at = [], 0
        for i, m in enumerate(found):
            parts += [markdown[at:m.start(2)], chosen(i, m)]
            at = m.end(2)
        return "".join(parts + [markdown[at:]])

    rendered = _rendered(marked(lambda i, m: f"{LINK_REMOVED}-{i}-"), attachments) or ""
    targets = set(re.findall(re.escape(LINK_REMOVED) + r"-(\d+)-", "".join(re.findall(r'="[^"]*"', rendered))))
    return marked(lambda i, m: LINK_REMOVED if str(i) in targets or f"-{i}-" not in rendered else m.group(2))


# a line that may be an ATX heading (`## text`), and the HTML nbconvert makes of one: the heading with the id it
# takes from the heading's text and a link to it
_ATX_LINE = re.compile(r"( {0,3})#[^\n]*")
_HEADING_MARK = "course-autograde-heading"
_RENDERED_HEADING = re.compile(r'<h([1-6]) id="([^"]*)">(.*)<a class="anchor-link" href="#[^"]*">&#182;</a></h\1>\s*',
                               re.S)
# a character reference that nbconvert's renderer, or the XML parser that reads its heading's text, may read as
# the character it names (as `html.unescape` finds them, which finds more); a `%XX` escape in an id
_REFERENCE = re.compile(r"&(?:#[0-9]+;?|#[xX][0-9a-fA-F]+;?|[^\t\n\f <&#;]{1,32};?)")
_ESCAPED_BYTE = re.compile(r"%[0-9a-f]{2}")


@lru_cache(maxsize=16)
def _id_spellings(reserved: frozenset[str]) -> re.Pattern[str]:
    """What an ATX heading line, lower-cased and its character references also read (`_heading_letters`),
    matches from its start when its id could be one `_blocked_id` finds (a superset: matching it, the line is
    rendered to tell). The id is the heading's text with each blank made `-` and each other character that is
    not allowed in a URL written as a `%XX` escape; the text is the line less its marks, in order. So each
    character of a blocked id that is no part of such an escape is one of the line's, in that order (a run of
    `-` one or more blanks or `-`), compared without case (PAGE_ID_STARTS are); for PAGE_ID_STARTS, those
    starting the id."""
    branches = []
    for target in sorted(reserved | PAGE_IDS | set(PAGE_ID_STARTS)):
        letters = re.sub("-+", "-", _ESCAPED_BYTE.sub("", target.lower()))
        parts = [f"[^{chars}]*[{chars}]" for chars in ("\\s-" if ch == "-" else re.escape(ch) for ch in letters)]
        branches.append("".join(parts))
    return re.compile("|".join(f"(?:{b})" for b in branches))


def _heading_letters(line: str) -> str:
    """`line` lower-cased, each character reference in it followed by the character it names: the text nbconvert
    makes of the line, whether it reads a reference or not, has its characters in this order."""
    if "&" in line:
        line = _REFERENCE.sub(lambda m: m.group(0) + html.unescape(m.group(0)), line)
    return line.lower()


def _headings_without_ids(markdown: str, attachments: dict[str, Any], reserved: frozenset[str]) -> str:
    """`markdown` with each ATX heading whose id nbconvert would take from its text is one `_blocked_id` finds
    (`# statusmessage`, `### MathJax notes`, a grade id) written instead as the HTML heading nbconvert makes
    of it, without the id and its link (an HTML heading gets none), a blank line after it ending the HTML.
    A line is taken for a heading when nbconvert makes a heading of it, in place, with a marked text."""
    lines = markdown.split("\n")
    found: dict[int, str] = {}
    could_clash = _id_spellings(reserved)
    for i, line in enumerate(lines):
        head = _ATX_LINE.fullmatch(line)
        if head is None or not could_clash.match(_heading_letters(line)):
            continue           # no heading, or none whose id could be blocked: not rendered (`_id_spellings`)
        made = _RENDERED_HEADING.fullmatch(_rendered(line, attachments) or "")
        if made and _blocked_id(html.unescape(made.group(2)), reserved):
            found[i] = f"{head.group(1)}<h{made.group(1)}>{made.group(3)}</h{made.group(1)}>"
    if not found:
        return markdown
    marked = [f"{_ATX_LINE.fullmatch(line).group(1)}# {_HEADING_MARK}-{i}-"  # type: ignore[union-attr]
              if i in found else line for i, line in enumerate(lines)]
    rendered = _rendered("\n".join(marked), attachments) or ""
    out: list[str] = []
    for i, line in enumerate(lines):
        if i in found and f'id="{_HEADING_MARK}-{i}-"' in rendered:
            out.append(found[i])
            if i + 1 < len(lines) and lines[i + 1].strip():
                out.append("")
        else:
            out.append(line)
    return "\n".join(out)


def safe_markdown(markdown: str, attachments: Any = None, reserved: frozenset[str] = frozenset()) -> str:
    """`markdown` as written if nbconvert's Markdown renderer, as formgrader renders the cell with its
    `attachments`, makes only text and what Markdown itself makes of it (`_renders_safely`: no raw HTML
    tag or attribute beyond those, no link target `unsafe_url` finds unsafe); else with its unsafe link
    targets replaced by LINK_REMOVED (`_links_removed`) if that renders safely; else that with its headings
    that would take an id of formgrader's page written as HTML headings (`_headings_without_ids`) if that
    renders safely; else the text as a fenced
    code block, or, should even that not render safely, as a paragraph of escaped text. `reserved`: the
    ids formgrader finds its boxes by (`reserved_ids`), which no element of the cell may have."""
    attachments = attachments if isinstance(attachments, dict) else {}
    if _renders_safely(markdown, attachments, reserved):
        return markdown
    kept = _links_removed(markdown, attachments)
    if kept != markdown and _renders_safely(kept, attachments, reserved):
        return kept
    headed = _headings_without_ids(kept, attachments, reserved)
    if headed != kept and _renders_safely(headed, attachments, reserved):
        return headed
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall("`+", kept)), default=0))
    fenced = f"{fence}text\n{kept}\n{fence}\n"
    if _renders_safely(fenced, attachments, reserved):
        return fenced
    return "".join(f"&#{ord(ch)};" if not ch.isalnum() and ch not in " \n" else ch for ch in kept)


def _is_data(url: str) -> bool:
    return "".join(ch for ch in html.unescape(url) if ch > " ").lower().startswith("data:")


def _image_sizes(meta: Any) -> dict[str, Any]:
    """The width and height of output metadata `meta` that are plain positive whole numbers."""
    if not isinstance(meta, dict):
        return {}
    return {k: v for k, v in meta.items() if k in IMAGE_SIZES and type(v) is int and 0 < v < 100_000}


def _safe_output_metadata(meta: Any) -> dict[str, Any]:
    """Of a rich output's metadata, only the image sizes (top-level or per bitmap type): nbconvert
    writes a width or height as an unquoted attribute, a file name as the image's source."""
    kept: dict[str, Any] = _image_sizes(meta)
    for kind in SAFE_IMAGES:
        sizes = _image_sizes(meta.get(kind)) if isinstance(meta, dict) else {}
        if sizes:
            kept[kind] = sizes
    return kept


def _count(value: Any) -> int | None:
    """An execution count as the notebook format has it: a whole number from 0, else None."""
    return value if type(value) is int and value >= 0 else None


def _released_marks(released: Any) -> dict[str, Any]:
    """grade id -> the nbgrader metadata of the released cell with that id."""
    marks: dict[str, Any] = {}
    for cell in released.cells:
        meta = cell.get("metadata", {}).get("nbgrader")
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str) and meta["grade_id"]:
            marks.setdefault(meta["grade_id"], meta)
    return marks


_PLAIN_ID = re.compile(r"[A-Za-z0-9_.\-]+")


def _reset_marks(cell: Any, marks: dict[str, Any] | None) -> None:
    """The nbgrader metadata of `cell` as the release has it for its grade id (`marks`), as nbgrader's
    autograde overwrites it; removed for an id the release does not have (nbgrader removes such an id).
    Formgrader writes a grade id into its page as it is. Without the release (`marks` None), an id
    that is not plain letters, digits, `_`, `-` and `.` has its metadata removed."""
    meta = cell.get("metadata")
    if not isinstance(meta, dict) or "nbgrader" not in meta:
        return
    grade_id = _grade_id(cell)
    if marks is not None and grade_id in marks:
        meta["nbgrader"] = nbformat.from_dict(json.loads(json.dumps(marks[grade_id])))
    elif marks is not None or not _PLAIN_ID.fullmatch(grade_id):
        del meta["nbgrader"]


# the cell metadata kept in the copy: nbconvert's templates read none of it but nbgrader's (whose values are the
# release's), a Raw cell's format (see `_neutralise_raw`) and the two flags below; they write each of a cell's
# `tags` into its `class` (split at each blank: `["x modal-backdrop"]` lays the cell over the page), leave out a
# cell whose `transient.remove_source` is set (its score box too) and choose its lexer by `magics_language`
_CELL_FLAGS = ("editable", "deletable")
# the notebook's metadata nbconvert reads: `title` is the page's, `language_info`'s lexer (pygments_lexer, else
# name) goes into the class of each code cell's highlighted source (`"ipython3 modal-backdrop"` lays each of them
# over the page), `language` and `widgets` are read too; kept: only the release's language_info and kernelspec
_NOTEBOOK_KEPT = ("language_info", "kernelspec")
# without the release, a language's names are kept when each is one such word
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_.+\-]{1,60}")


def _safe_cell_metadata(cell: Any) -> None:
    """`cell`'s metadata (in place) cut to its nbgrader metadata (as `_reset_marks` left it), its Raw format
    and `_CELL_FLAGS` that are booleans (see `_CELL_FLAGS` for what nbconvert does with the rest)."""
    meta = cell.get("metadata")
    if not isinstance(meta, dict):
        return
    kept = {k: v for k, v in meta.items()
            if k in ("nbgrader", "raw_mimetype") or (k in _CELL_FLAGS and type(v) is bool)}
    meta.clear()
    meta.update(kept)


def _safe_notebook_metadata(nb: Any, released: Any) -> None:
    """`nb`'s metadata (in place) cut to the release's language_info and kernelspec; without the release, to
    the name and lexer of its language_info that are single plain words (see `_NOTEBOOK_KEPT`)."""
    meta = nb.get("metadata")
    if not isinstance(meta, dict):
        return
    if released is not None:
        theirs = released.get("metadata")
        theirs = theirs if isinstance(theirs, dict) else {}
        kept = {k: json.loads(json.dumps(theirs[k])) for k in _NOTEBOOK_KEPT if k in theirs}
    else:
        info = meta.get("language_info")
        info = info if isinstance(info, dict) else {}
        words = {k: v for k, v in info.items()
                 if k in ("name", "pygments_lexer") and isinstance(v, str) and _PLAIN_WORD.fullmatch(v)}
        kept = {"language_info": words} if "name" in words else {}
    meta.clear()
    meta.update(nbformat.from_dict(kept))


def neutralise_student_markup(nb: Any, released: Any = None) -> None:
    """Keep nothing in `nb` (in place) that would run in a browser rendering it (the module's
    docstring): rich outputs cut to SAFE_DATA and their metadata to image sizes, the widget state
    dropped, the HTML tags and unsafe link targets of the Markdown cells that `released` does not
    hold made safe (see `safe_markdown`), nbgrader metadata taken from
    `released`, the other cell and notebook metadata nbconvert reads dropped (`_safe_cell_metadata`,
    `_safe_notebook_metadata`), and execution counts that are not whole numbers cleared."""
    _safe_notebook_metadata(nb, released)
    reserved = reserved_ids(nb, released)
    own = ({joined_text(c.get("source") or "") for c in released.cells if c.get("cell_type") == "markdown"}
           if released else set())
    own_raw = {_raw_key(c) for c in released.cells if c.get("cell_type") == "raw"} if released else set()
    marks = _released_marks(released) if released is not None else None
    for cell in nb.cells:
        _reset_marks(cell, marks)
        _safe_cell_metadata(cell)
        kind = cell.get("cell_type")
        if kind == "markdown":
            text = joined_text(cell.get("source") or "")
            if text not in own:
                cell.source = safe_markdown(text, cell.get("attachments"), reserved)
        elif kind == "raw":
            _neutralise_raw(cell, own_raw)
        elif kind == "code":
            if "execution_count" in cell:
                cell["execution_count"] = _count(cell["execution_count"])
            for out in cell.get("outputs", ()):
                if not isinstance(out, dict):
                    continue
                data = out.get("data")
                if isinstance(data, dict) and any(k not in SAFE_DATA for k in data):
                    kept = {k: v for k, v in data.items() if k in SAFE_DATA}
                    out["data"] = kept or {"text/plain": "(an output shown only as HTML or script: left out of this "
                                                         "copy)"}
                if "metadata" in out:
                    out["metadata"] = nbformat.NotebookNode(_safe_output_metadata(out["metadata"]))
                if "execution_count" in out:
                    out["execution_count"] = _count(out["execution_count"])


def _raw_key(cell: Any) -> tuple[str, str | None]:
    """A Raw cell's text and format (`raw_mimetype`; None when there is none, or one that is not text)."""
    meta = cell.get("metadata")
    form = meta.get("raw_mimetype") if isinstance(meta, dict) else None
    return joined_text(cell.get("source") or ""), form if isinstance(form, str) else None


def _neutralise_raw(cell: Any, own: set[tuple[str, str | None]]) -> None:
    """A student's Raw cell (one the release does not hold with the same text and format) as escaped text
    in a `<pre>`: formgrader's template puts a Raw cell of no format or `text/html` (any case) into the page
    through nbconvert's `clean_html`, which keeps any tag's `class` and `id` (a student's `<span id=...>`
    would take a score box's place, a `modal-backdrop` lie over the page), and those of other formats
    (which it leaves out) are escaped too should its exporter be set to show them. A format that is not
    text (which the template could not read) is removed: the cell shows as text."""
    meta = cell.get("metadata")
    if isinstance(meta, dict) and "raw_mimetype" in meta and not isinstance(meta["raw_mimetype"], str):
        del meta["raw_mimetype"]
    key = _raw_key(cell)
    if key in own:
        return
    cell.source = f"<pre>{html.escape(key[0], quote=False)}</pre>" if key[0] else ""


def reserved_ids(*notebooks: Any) -> frozenset[str]:
    """The grade ids of `notebooks`' cells (None skipped), with their comment and extra credit boxes' ids:
    formgrader finds a grade's score box as the first element of the page with its id, and its comment box
    with `<id>-comment` (its extra credit box has `<id>_extra_credit`), so a student's element with one of
    them would take the box's place."""
    ids = set()
    for nb in notebooks:
        for cell in (nb.get("cells") if isinstance(nb, dict) else None) or ():
            meta = cell.get("metadata") if isinstance(cell, dict) else None
            marks = meta.get("nbgrader") if isinstance(meta, dict) else None
            gid = marks.get("grade_id") if isinstance(marks, dict) else None
            if isinstance(gid, str) and gid:
                ids.add(gid)
    return frozenset(ids | {f"{gid}-comment" for gid in ids} | {f"{gid}_extra_credit" for gid in ids})


def annotate_notebook(nb: Any, result: SubmissionResult, problems: tuple[Problem, ...], released: Any = None
                      ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Write our report into the grade cells of `nb` (in place) for `problems`.
    Returns (grade ids annotated, grade ids restored from `released`)."""
    tests = {t[1]: t for t in problem_tests(result)}
    annotated, restored = [], []
    turned = _unmark_non_code_grade_cells(nb, problems, released)
    _unmark_copies(nb)
    graded: dict[str, list[Any]] = {}      # grade id -> the code cells that have it, in order
    for c in nb.cells:
        if c.get("cell_type") == "code":
            graded.setdefault(_grade_id(c), []).append(c)
    for problem in problems:
        cells = graded.get(problem.grade_id, [])
        if not cells and released is not None:
            found = [i for i, c in enumerate(released.cells) if _grade_id(c) == problem.grade_id]
            if found:
                cell = nbformat.from_dict(json.loads(json.dumps(released.cells[found[0]])))
                taken = {c["id"] for c in nb.cells if isinstance(c.get("id"), str)}
                if cell.get("id") in taken:    # the student's Markdown cell made of it keeps its id
                    cell["id"] = next(f"{cell['id'][:48]}-put-back-{n}" for n in range(len(taken) + 1)
                                      if f"{cell['id'][:48]}-put-back-{n}" not in taken)
                nb.cells.insert(_restore_position(nb, released, found[0]), cell)
                cells = graded[problem.grade_id] = [cell]
                restored.append(problem.grade_id)
        if not cells:
            continue
        output = _problem_output(result, tests.get(problem.name), problem.name)
        if problem.grade_id in restored:
            was = (f"made a {turned[problem.grade_id]} cell in the submission (kept as written, without its "
                   f"nbgrader marks)" if problem.grade_id in turned else "missing from the submission")
            note = (f"{OUTPUT_NAME}: this grade cell was {was}; it was put back "
                    f"from the released notebook so that its grade shows here.\n")
            cells[0].outputs = [_new_output("stream", name="stderr", text=note), output]
        else:
            cells[0].outputs = [output]
        cells[0].execution_count = None
        annotated.append(problem.grade_id)
    return tuple(annotated), tuple(restored)


def _read_without_outputs(path: Path, data: bytes | None) -> tuple[Any, str]:
    """For a notebook over the limits (`over_notebook_limits` with its outputs counted), at `path` or
    `data` (its bytes): (the notebook read with every saved output left out, `without_outputs`, when
    only its outputs take it over the limits, else None; the reason it is over them)."""
    name = shown_name(path.name)
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        return None, f"{name} could not be read again ({type(exc).__name__})"
    if reason := over_notebook_limits(name, data):       # over the grader's limits: not parsed
        return None, reason
    return _read_notebook(path, without_outputs(data))[0], over_notebook_limits(name, data, outputs=True)


def _note_outputs_left_out(nb: Any, reason: str) -> None:
    """Head `nb` with a Markdown cell saying that its saved outputs were left out of the copy, and why."""
    note = nbformat.v4.new_markdown_cell(id=OUTPUTS_NOTE_ID, source=
        f"**{OUTPUT_NAME}: the saved outputs of this notebook are left out of this copy**: "
        f"{html.escape(reason, quote=False)}\n\nThe code is as graded; the grade cells hold our report.")
    if not isinstance(nb.get("nbformat_minor"), int) or nb.nbformat_minor < 5:
        del note["id"]                    # cell ids came with nbformat 4.5
    nb.cells.insert(0, note)


def _valid_cell(cell: Any, minor: int) -> bool:
    try:
        nbformat.validate(nbformat.v4.new_notebook(cells=[cell], nbformat_minor=minor))
    except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return False
    return True


_CELL_ID = re.compile(r"[a-zA-Z0-9_\-]{1,64}")


def valid_notebook(nb: Any) -> Any:
    """A copy of `nb` that nbformat finds valid (formgrader refuses to show a notebook that is not, such
    as one whose execution count is text): each cell given a new id where its own is not a valid one or
    is taken, and each cell still not valid made again from its text (a code cell with those of its
    outputs that are valid, a cell of another kind as code, whose text nothing renders), with its
    nbgrader metadata; the notebook's metadata kept when valid."""
    out = nbformat.v4.new_notebook()
    seen: set[str] = set()
    for i, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict):
            continue
        cell = nbformat.from_dict(json.loads(json.dumps(cell)))
        if not isinstance(cell.get("id"), str) or not _CELL_ID.fullmatch(cell["id"]) or cell["id"] in seen:
            cell["id"] = next(f"course-autograde-cell-{i}-{n}" for n in range(len(seen) + 1)
                              if f"course-autograde-cell-{i}-{n}" not in seen)
        if not _valid_cell(cell, out.nbformat_minor):
            kind, text = cell.get("cell_type"), joined_text(cell.get("source") or "")
            meta = cell.get("metadata") if isinstance(cell.get("metadata"), dict) else {}
            marks = {"nbgrader": meta["nbgrader"]} if isinstance(meta.get("nbgrader"), dict) else {}
            if kind == "markdown":
                # without its attachments: an image of one is written out (`safe_markdown`)
                made = nbformat.v4.new_markdown_cell(safe_markdown(text, reserved=reserved_ids(nb)), id=cell["id"],
                                                     metadata=marks)
            else:
                outputs = cell.get("outputs") if kind == "code" and isinstance(cell.get("outputs"), list) else []
                made = nbformat.v4.new_code_cell(text, id=cell["id"], metadata=marks)
                made.outputs = [o for o in outputs if _valid_cell(nbformat.v4.new_code_cell(outputs=[o]),
                                                                   out.nbformat_minor)]
            if not _valid_cell(made, out.nbformat_minor):
                made = nbformat.v4.new_code_cell(text, id=cell["id"])
            cell = made
        seen.add(cell["id"])
        out.cells.append(cell)
    metadata = nb.get("metadata")
    if isinstance(metadata, dict):
        try:
            nbformat.validate({**out, "metadata": metadata, "cells": []})
            out.metadata = nbformat.from_dict(json.loads(json.dumps(metadata)))
        except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            pass
    return out


def _utf8(text: str) -> bytes:
    """`text` in UTF-8, each lone surrogate in it written as U+FFFD, the replacement character. JSON's
    escapes let a submitted notebook carry one ("\\ud800") in a string, where it reads as text but has no
    UTF-8 form: nbgrader and formgrader, which read the autograded copy and write what they read, would fail
    on it. The submitted file itself is only read."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _LONE_SURROGATE.sub("\ufffd", text).encode("utf-8")


def annotate_autograded(result: SubmissionResult, assignment: Assignment, folder: str | Path,
                        release_dir: str | Path | None = None, *, arriving: Mapping[str, bytes] | None = None
                        ) -> tuple[AnnotationReport, ...]:
    """Annotate the grade cells of every notebook of `assignment` in `folder` (autograded/<student>/<assignment>/).

    `arriving` (file name -> bytes) holds copies that are to be written into `folder` and are not
    yet there: such a notebook is read from them (and written once, annotated); the caller writes
    the ones not annotated (those without an AnnotationReport.notebook).

    A notebook that is not there, or cannot be read, is reported and left alone; this never
    raises for anything a student submitted.
    """
    submitted = [Path(f).name for f in result.files]     # as on disk (bound_result writes names out)
    result = bound_result(result)          # the report quotes student text: capped and escaped as everywhere
    folder = Path(folder)
    arriving = arriving or {}
    reports = []

    def arrived(path: Path) -> bytes | None:
        return arriving.get(path.name) if path.parent == folder else None

    def there(path: Path) -> bool:
        return arrived(path) is not None or path.is_file()

    for name in assignment.notebooks:
        path = folder / name
        if name not in submitted and len(assignment.notebooks) == 1 and len(submitted) == 1 \
                and there(folder / submitted[0]):
            path = folder / submitted[0]       # the one notebook graded, under another name (not a copy left there)
        if not there(path):
            reports.append(AnnotationReport(None, skipped=f"{name}: no autograded copy"))
            continue
        nb, why = _read_notebook(path, arrived(path))
        released = _released_notebook(Path(release_dir) / name) if release_dir is not None else None
        too_costly = ""
        if nb is None and f", {TOO_COSTLY} (" in why:
            nb, too_costly = _read_without_outputs(path, arrived(path))
        if nb is not None:
            _as_graded(nb, released)
            neutralise_student_markup(nb, released)
            if too_costly:
                _note_outputs_left_out(nb, too_costly)
        elif too_costly:                      # over the grader's limits too: never copied as it is
            nb = placeholder_notebook(path.name, too_costly, released, TOO_LARGE)
        elif released is not None and f", {NOT_READABLE} (" in why:
            note = next((n for n in result.notes if n.startswith(path.name)), why)
            nb = placeholder_notebook(path.name, note, released)
        else:
            reports.append(AnnotationReport(None, skipped=why))
            continue
        problems = tuple(p for p in assignment.problems if p.notebook == name)
        annotated, restored = annotate_notebook(nb, result, problems, released)
        try:
            data = _utf8(notebook_text(nb, strict=True))
        except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, AssertionError,
                RecursionError):
            try:         # formgrader refuses an invalid notebook: its cells made valid (see `valid_notebook`)
                data = _utf8(notebook_text(valid_notebook(nb), strict=True))
            except (nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, AssertionError,
                    RecursionError) as exc:
                # nbformat's validator or writer fails on it (a list nested hundreds deep): the placeholder
                what = "its JSON nests too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
                why = f"{shown_name(path.name)}: not annotated, nbformat cannot write it back ({what})"
                data = _utf8(notebook_text(placeholder_notebook(path.name, why, released, NOT_WRITABLE), strict=True))
        atomic_write_bytes(path, data)
        reports.append(AnnotationReport(path, annotated, restored))
    return tuple(reports)
