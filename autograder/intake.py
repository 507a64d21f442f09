"""What lies in submitted/ that a batch did not grade, and why: every such file is named, none is
skipped without a word. Nothing here follows a link or opens a file (entries are lstat-ed).

nbgrader's layout is `submitted/<student>/<assignment>/<notebook>.ipynb` (plus its `timestamp.txt`
and `submission_secret.txt`); anything else is reported for the assignment being graded:

- a file directly in `submitted/`, or in a student's folder (a notebook one level too high);
- a student's folder for an assignment course.yml does not know;
- inside a graded submission, files that are neither one of the assignment's notebooks (or the one
  graded in place of a renamed notebook) nor nbgrader's bookkeeping files.

Folders of the course's other assignments are left for their own `course autograde`. Names nbgrader
ignores itself (`.ipynb_checkpoints`, `__pycache__`, `*.pyc`) are ignored here too, as are hidden
folders that Jupyter or a desktop leave in submitted/ (HOUSEKEEPING); any other hidden folder there
(`.ada`) is named, since no student id starts with '.' and nothing in it is graded.
"""
from __future__ import annotations

import fnmatch
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .config import Assignment, Course
from .grading.lateness import TIMESTAMP_FILE
from .layout import is_notebook_name, name_problem, utf8_name
from .notebooks import submission_entries
from .text import shown_name

SECRET_FILE = "submission_secret.txt"     # written by nbgrader submit; release_feedback needs it
BOOKKEEPING = (TIMESTAMP_FILE, SECRET_FILE)
IGNORED = (".ipynb_checkpoints", "__pycache__", "*.pyc")   # nbgrader's CourseDirectory.ignore
# hidden folders in submitted/ that are no student's: JupyterLab's language server's copies, a
# desktop's trash, Jupyter's and IPython's settings and caches (a course folder that is someone's home)
HOUSEKEEPING = (".virtual_documents", ".Trash-*", ".jupyter", ".ipython", ".cache", ".local")


@dataclass(frozen=True)
class Ungraded:
    path: str               # relative to the course folder
    reason: str

    def __str__(self) -> str:
        return f"{shown_name(self.path)}: {self.reason}"


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED)


def _entries(folder: Path) -> list[tuple[str, int]]:
    try:
        return [(n, m) for n, m in submission_entries(folder) if not _ignored(n)]
    except OSError:
        return []


class Graded(Protocol):
    """A graded submission as far as this module cares (a SubmissionResult, or a batch's row)."""
    @property
    def files(self) -> tuple[str, ...]: ...


def ungraded_files(course: Course, assignment: Assignment, results: Iterable[Graded],
                   student: str | None = None) -> tuple[Ungraded, ...]:
    """Every entry under submitted/ (or only `student`'s folder) that grading `assignment` did not
    read, with the reason; `results` are the batch's results (their `files` are what was graded)."""
    layout = course.layout
    known = {a.name for a in course.assignments}
    graded = {f for r in results for f in r.files}
    out: list[Ungraded] = []
    base = layout.submitted_dir
    if not base.is_dir():
        return ()
    top = _entries(base)
    for name, mode in top:
        if student is not None and name != student:
            continue
        path = base / name
        if stat.S_ISLNK(mode):
            continue                        # refused with a reason in that student's results
        if name.startswith(".") and stat.S_ISDIR(mode):
            if not any(fnmatch.fnmatch(name, pattern) for pattern in HOUSEKEEPING):
                out.append(Ungraded(layout.relative(path), "a hidden folder (its name starts with '.'): no student id "
                                    "does, and nbgrader skips it, so nothing in it was graded; rename it to the "
                                    "student's id"))
            continue
        why = misnamed_folder(name) if stat.S_ISDIR(mode) else None
        if why is not None:
            out.append(Ungraded(layout.relative(path), why))
            continue
        if not stat.S_ISDIR(mode):
            out.append(Ungraded(layout.relative(path), f"a file directly in {layout.relative(base)}; expected "
                                f"{layout.relative(layout.submission('<student>', assignment.name))}/<notebook>"))
            continue
        for inner, inner_mode in _entries(path):
            item = path / inner
            if stat.S_ISDIR(inner_mode):
                if inner not in known:
                    out.append(Ungraded(layout.relative(item), f"no assignment {inner!r} in course.yml "
                                        f"(it has: {', '.join(sorted(known))})"))
                elif inner == assignment.name:
                    out.extend(_inside(course, assignment, name, graded))
            elif not stat.S_ISLNK(inner_mode):
                where = layout.relative(layout.submission(name, assignment.name))
                what = "a notebook" if is_notebook_name(inner) else "a file"
                out.append(Ungraded(layout.relative(item), f"{what} directly in the student's folder; expected "
                                    f"{where}/{shown_name(inner) if is_notebook_name(inner) else '...'}"))
    return tuple(out)


def misnamed_folder(name: str) -> str | None:
    """Why the folder submitted/`name` is not graded when no student id can be `name` (`name_problem`), or None."""
    why = name_problem(name)
    if why is None:
        return None
    return f"the folder's name {why}, so nothing in it was graded; rename it to the student's id"


def _inside(course: Course, assignment: Assignment, student: str, graded: set[str]) -> list[Ungraded]:
    layout = course.layout
    folder = layout.submission(student, assignment.name)
    expected = set(assignment.notebooks) | set(BOOKKEEPING)
    out = []
    for name, mode in _entries(folder):
        path = folder / name
        rel = layout.relative(path)
        if name in expected or {rel, os.fspath(path), shown_name(rel)} & graded:   # shown: read from results.json
            continue
        if not utf8_name(name):
            reason = "its name is not valid UTF-8, so it was not graded; rename it"
        elif stat.S_ISDIR(mode):
            reason = "a folder inside the submission; only the assignment's notebooks are graded"
        elif is_notebook_name(name):
            reason = (f"not one of the assignment's notebooks ({', '.join(assignment.notebooks)}), "
                      f"so it was not graded")
        else:
            reason = "not a notebook of the assignment, so it was not graded"
        out.append(Ungraded(rel, reason))
    return out
