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
formgrader shows one score box and one answer box per id. A copy that cannot be read as a notebook
(not JSON, or not a notebook: a text file saved as .ipynb) is replaced by a placeholder notebook
(`placeholder_notebook`) that formgrader can open: a Markdown cell saying the submitted file could not
be read and why, then the released notebook's answer cells, empty, and its grade cells with our report,
so that the submission can be graded by hand; the file in submitted/ is only ever read. Without a
released notebook to take the cells from, such a copy is left as it is. A lone surrogate that JSON's
escapes let into a string ("\\ud800") is written as U+FFFD, so the copy is UTF-8 throughout.

What the student wrote is kept, but not what would run in the TA's browser: formgrader renders the
copy with nbconvert, which puts raw HTML of Markdown cells and outputs into the page as it is, and
a notebook's outputs here are the student's own (no kernel ran them). So the copy keeps of each
rich output only its plain text and bitmap images (not HTML, JavaScript, SVG, Markdown, LaTeX or
widgets), drops the notebook's widget state (which loads widget code from the network), and writes
out the HTML tags of the Markdown cells that are not the released notebook's own (`&lt;b>` shows as
the text `<b>`; code spans and fenced code are left as they are).
"""
from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat
from nbformat.v4 import rwbase

from autograder.config import Assignment, Problem
from autograder.grading.results import SubmissionResult
from autograder.notebooks import cell_kind, copied_cells, over_notebook_limits
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
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id", "") if isinstance(meta, dict) else ""


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
            return None, f"{shown_name(path.name)}: not annotated, too costly to read ({too_costly})"
        text = data.decode("utf-8")
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return nbformat.convert(_reads(text), 4), ""
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, nbformat.reader.NotJSONError,
            nbformat.ValidationError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        return None, f"{shown_name(path.name)}: not annotated, {NOT_READABLE} ({type(exc).__name__})"


NOT_READABLE = "not a readable notebook"    # `_read_notebook`'s reason for a file nbformat cannot read
PLACEHOLDER_ID = "course-autograde-unreadable"   # the id of the placeholder's first cell: the same every time


def placeholder_notebook(name: str, reason: str, released: Any) -> Any:
    """The notebook formgrader is given in place of a submitted file `name` that cannot be read as one
    (`reason`, the student's note): a Markdown cell saying so, then each answer, task and grade cell of
    the released notebook (`released`), answers empty and no outputs, with their nbgrader metadata, so
    that formgrader shows a score box for each grade cell and a comment box for each answer, as the
    gradebook has them."""
    nb = nbformat.v4.new_notebook(metadata=json.loads(json.dumps(released.get("metadata", {}))))
    nb.cells.append(nbformat.v4.new_markdown_cell(id=PLACEHOLDER_ID, source=
        f"**{OUTPUT_NAME}: the submitted file `{shown_name(name)}` could not be read as a notebook**: "
        f"{html.escape(reason, quote=False)}\n\n"
        f"This copy was written for formgrader in its place (the submitted file is left as it is): the "
        f"assignment's answer cells, empty, and its grade cells, so that the submission can be graded by hand."))
    for cell in released.cells:
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
# a Markdown cell's code: fenced blocks, then code spans (their text is shown as it is, tags included)
_MD_CODE = re.compile(r"(^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\2[ \t]*$|(`+)[^`].*?(?<!`)\3(?!`))", re.M | re.S)
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")


def _written_out_tags(markdown: str) -> str:
    """`markdown` with each `<` that would open an HTML tag, comment or declaration written as
    `&lt;`, except inside code."""
    parts, at = [], 0
    for m in _MD_CODE.finditer(markdown):
        parts += [_TAG_START.sub("&lt;", markdown[at:m.start()]), m.group(0)]
        at = m.end()
    parts.append(_TAG_START.sub("&lt;", markdown[at:]))
    return "".join(parts)


def neutralise_student_markup(nb: Any, released: Any = None) -> None:
    """Keep nothing in `nb` (in place) that would run in a browser rendering it (the module's
    docstring): rich outputs cut to SAFE_DATA, the widget state dropped, and the HTML tags of the
    Markdown cells that `released` does not hold as they are written out."""
    nb.metadata.pop("widgets", None)
    own = {_text(c.get("source")) for c in released.cells if c.get("cell_type") == "markdown"} if released else set()
    for cell in nb.cells:
        kind = cell.get("cell_type")
        if kind == "markdown":
            text = _text(cell.get("source"))
            if text not in own and "<" in text:
                cell.source = _written_out_tags(text)
        elif kind == "code":
            for out in cell.get("outputs", ()):
                data = out.get("data")
                if isinstance(data, dict) and any(k not in SAFE_DATA for k in data):
                    kept = {k: v for k, v in data.items() if k in SAFE_DATA}
                    out["data"] = kept or {"text/plain": "(an output shown only as HTML or script: left out of this "
                                                         "copy)"}


def _text(source: Any) -> str:
    return "".join(source) if isinstance(source, list) else str(source or "")


def annotate_notebook(nb: Any, result: SubmissionResult, problems: tuple[Problem, ...], released: Any = None
                      ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Write our report into the grade cells of `nb` (in place) for `problems`.
    Returns (grade ids annotated, grade ids restored from `released`)."""
    tests = {t[1]: t for t in problem_tests(result)}
    annotated, restored = [], []
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
                nb.cells.insert(_restore_position(nb, released, found[0]), cell)
                cells = graded[problem.grade_id] = [cell]
                restored.append(problem.grade_id)
        if not cells:
            continue
        output = _problem_output(result, tests.get(problem.name), problem.name)
        if problem.grade_id in restored:
            note = (f"{OUTPUT_NAME}: this grade cell was missing from the submission; it was put back "
                    f"from the released notebook so that its grade shows here.\n")
            cells[0].outputs = [_new_output("stream", name="stderr", text=note), output]
        else:
            cells[0].outputs = [output]
        cells[0].execution_count = None
        annotated.append(problem.grade_id)
    return tuple(annotated), tuple(restored)


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
        if nb is not None:
            neutralise_student_markup(nb, released)
        elif released is not None and f", {NOT_READABLE} (" in why:
            note = next((n for n in result.notes if n.startswith(path.name)), why)
            nb = placeholder_notebook(path.name, note, released)
        else:
            reports.append(AnnotationReport(None, skipped=why))
            continue
        problems = tuple(p for p in assignment.problems if p.notebook == name)
        annotated, restored = annotate_notebook(nb, result, problems, released)
        try:
            data = _utf8(notebook_text(nb))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            why = f"{shown_name(path.name)}: not annotated ({type(exc).__name__})"
            reports.append(AnnotationReport(None, skipped=why))
            continue
        atomic_write_bytes(path, data)
        reports.append(AnnotationReport(path, annotated, restored))
    return tuple(reports)
