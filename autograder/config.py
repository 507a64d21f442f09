"""course.yml: parsed once into typed, validated, frozen objects.

Every error names the key path and what was expected, in one line:
    course.yml: assignments[0].problems.layer_norm.points: expected a positive number, got "ten"
Unknown keys are errors.
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from .errors import ConfigError

CONFIG_NAME = "course.yml"
DTYPES = ("float64", "float32")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float


@dataclass(frozen=True)
class Limits:
    cell_seconds: float = 30.0      # one notebook cell
    total_seconds: float = 180.0    # all cells of one notebook
    call_seconds: float = 10.0      # one call from a grader into student code
    memory_mb: int = 2048           # address space of the student process
    notebook_mb: float = 20.0       # a submitted notebook larger than this is not loaded
    submission_seconds: float = 300.0   # wall clock for one submission: notebook runs, restarts and calls together
    max_restarts: int = 5           # fresh processes after a call hung or crashed, per submission
    return_mb: float = 16.0         # one value returned by a student function
    output_kb: int = 8              # printed output kept per cell or call (the rest is dropped in the sandbox)
    max_notes: int = 50             # notes about running the notebook kept per submission
    processes: int = 64             # processes the student's code may have at once
    scratch_mb: int = 64            # the private scratch folders (each problem's and the notebook's)


@dataclass(frozen=True)
class LatePolicy:
    grace_minutes: float = 0.0
    penalty_per_day: float = 0.0    # fraction of the score lost per started late day
    max_late_days: float | None = None  # later than this scores 0; None: no cut-off


@dataclass(frozen=True)
class Problem:
    name: str                       # the student function, e.g. "layer_norm"
    points: float
    grade_id: str                   # nbgrader grade cell of this problem
    notebook: str                   # file name of the notebook that defines it
    tolerances: dict[str, Tolerance]  # by dtype name, defaults merged in

    def tolerance(self, dtype: Any) -> Tolerance:
        import numpy as np

        name = np.dtype(dtype).name if dtype is not None else "float64"
        return self.tolerances.get(name, self.tolerances["float64"])


@dataclass(frozen=True)
class Assignment:
    name: str                       # folder name under source/, release/, submitted/<student>/
    package: str                    # assignments/<package>/: reference and graders
    notebooks: tuple[str, ...]
    problems: tuple[Problem, ...]
    limits: Limits
    due: dt.datetime | None = None
    late_policy: LatePolicy = LatePolicy()

    @property
    def max_score(self) -> float:
        return sum(p.points for p in self.problems)

    def problem(self, name: str) -> Problem:
        for p in self.problems:
            if p.name == name:
                return p
        raise KeyError(name)


@dataclass(frozen=True)
class Course:
    root: Path
    name: str
    course_id: str
    assignments: tuple[Assignment, ...]
    roster_file: Path | None
    gradebook_url: str
    secret_file: Path

    def assignment(self, name: str) -> Assignment:
        for a in self.assignments:
            if a.name == name:
                return a
        known = ", ".join(a.name for a in self.assignments) or "none"
        raise ConfigError(f"{CONFIG_NAME}: no assignment named {name!r} (known: {known})")

    def roster(self) -> tuple[str, ...]:
        """Student ids from the roster file (CSV with an `id` column, or one id per line)."""
        if self.roster_file is None:
            return ()
        if not self.roster_file.exists():
            raise ConfigError(f"{CONFIG_NAME}: roster: file {self.roster_file} does not exist")
        import csv

        text = self.roster_file.read_text(encoding="utf-8")
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if lines and "," in lines[0] or (lines and lines[0].strip() == "id"):
            rows = list(csv.DictReader(lines))
            if rows and "id" not in rows[0]:
                raise ConfigError(f"{self.roster_file.name}: expected an 'id' column in the header")
            return tuple(r["id"].strip() for r in rows if r.get("id", "").strip())
        return tuple(ln.strip() for ln in lines)

    def source_dir(self, assignment: str) -> Path:
        return self.root / "source" / assignment

    def release_dir(self, assignment: str) -> Path:
        return self.root / "release" / assignment

    def package_dir(self, assignment: Assignment) -> Path:
        return self.root / "assignments" / assignment.package


# --------------------------------------------------------------------------- parsing helpers

def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "nothing"
    if isinstance(value, (dict, list)):
        return f"a {'mapping' if isinstance(value, dict) else 'list'}"
    return repr(value)


class _Reader:
    """Walks one mapping, recording which keys were read, so leftovers are reported as unknown."""

    def __init__(self, data: Any, path: str):
        if not isinstance(data, dict):
            raise ConfigError(f"{CONFIG_NAME}: {path or 'top level'}: expected a mapping, got {_show(data)}")
        self.data = data
        self.path = path
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, parse: Callable[[Any, str], Any], default: Any = ..., ) -> Any:
        self.seen.add(name)
        if name not in self.data or self.data[name] is None and default is not ...:
            if default is ...:
                raise ConfigError(f"{CONFIG_NAME}: {self.key(name)}: missing (required)")
            return default
        return parse(self.data[name], self.key(name))

    def finish(self, allowed_extra: tuple[str, ...] = ()) -> None:
        unknown = [k for k in self.data if k not in self.seen and k not in allowed_extra]
        if unknown:
            known = ", ".join(sorted(self.seen))
            raise ConfigError(f"{CONFIG_NAME}: {self.key(str(unknown[0]))}: unknown key (expected one of: {known})")


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected a non-empty string, got {_show(value)}")
    return value


def _name(value: Any, path: str) -> str:
    value = _str(value, path)
    if not NAME_RE.match(value):
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected a folder-safe name (letters, digits, - _ .), got {_show(value)}")
    return value


def _ident(value: Any, path: str) -> str:
    value = _str(value, path)
    if not IDENT_RE.match(value):
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected a Python identifier, got {_show(value)}")
    return value


def _number(value: Any, path: str, *, positive: bool = False, nonnegative: bool = False) -> float:
    what = "a positive number" if positive else "a number >= 0" if nonnegative else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected {what}, got {_show(value)}")
    if positive and value <= 0 or nonnegative and value < 0:
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected {what}, got {_show(value)}")
    return float(value)


def _positive(value: Any, path: str) -> float:
    return _number(value, path, positive=True)


def _nonnegative(value: Any, path: str) -> float:
    return _number(value, path, nonnegative=True)


def _datetime(value: Any, path: str) -> dt.datetime:
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, dt.date):
        parsed = dt.datetime.combine(value, dt.time(23, 59, 59))
    elif isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            raise ConfigError(f"{CONFIG_NAME}: {path}: expected an ISO date-time like 2026-12-14T23:59:00+00:00, got {_show(value)}") from None
    else:
        raise ConfigError(f"{CONFIG_NAME}: {path}: expected an ISO date-time like 2026-12-14T23:59:00+00:00, got {_show(value)}")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return parsed


def _list_of(parse: Callable[[Any, str], Any]) -> Callable[[Any, str], tuple]:
    def inner(value: Any, path: str) -> tuple:
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{CONFIG_NAME}: {path}: expected a non-empty list, got {_show(value)}")
        return tuple(parse(item, f"{path}[{i}]") for i, item in enumerate(value))
    return inner


def _tolerance(value: Any, path: str, base: Tolerance | None = None) -> Tolerance:
    r = _Reader(value, path)
    rtol = r.get("rtol", _nonnegative, base.rtol if base else ...)
    atol = r.get("atol", _nonnegative, base.atol if base else ...)
    r.finish()
    return Tolerance(rtol=rtol, atol=atol)


def _tolerances(value: Any, path: str, base: dict[str, Tolerance]) -> dict[str, Tolerance]:
    r = _Reader(value, path)
    out = dict(base)
    for dtype in DTYPES:
        out[dtype] = r.get(dtype, lambda v, p, d=dtype: _tolerance(v, p, base.get(d)), base.get(dtype, ...) if base else ...)
    r.finish()
    return out


def _limits(value: Any, path: str, base: Limits) -> Limits:
    r = _Reader(value, path)
    limits = Limits(
        cell_seconds=r.get("cell_seconds", _positive, base.cell_seconds),
        total_seconds=r.get("total_seconds", _positive, base.total_seconds),
        call_seconds=r.get("call_seconds", _positive, base.call_seconds),
        memory_mb=int(r.get("memory_mb", _positive, base.memory_mb)),
        notebook_mb=r.get("notebook_mb", _positive, base.notebook_mb),
        submission_seconds=r.get("submission_seconds", _positive, base.submission_seconds),
        max_restarts=int(r.get("max_restarts", _nonnegative, base.max_restarts)),
        return_mb=r.get("return_mb", _positive, base.return_mb),
        output_kb=int(r.get("output_kb", _nonnegative, base.output_kb)),
        max_notes=int(r.get("max_notes", _positive, base.max_notes)),
        processes=int(r.get("processes", _positive, base.processes)),
        scratch_mb=int(r.get("scratch_mb", _positive, base.scratch_mb)),
    )
    r.finish()
    return limits


def _late_policy(value: Any, path: str) -> LatePolicy:
    r = _Reader(value, path)
    policy = LatePolicy(
        grace_minutes=r.get("grace_minutes", _nonnegative, 0.0),
        penalty_per_day=r.get("penalty_per_day", _nonnegative, 0.0),
        max_late_days=r.get("max_late_days", _nonnegative, None),
    )
    if policy.penalty_per_day > 1:
        raise ConfigError(f"{CONFIG_NAME}: {path}.penalty_per_day: expected a fraction between 0 and 1, got {policy.penalty_per_day!r}")
    r.finish()
    return policy


DEFAULT_TOLERANCES = {
    "float64": Tolerance(rtol=1e-7, atol=1e-9),
    "float32": Tolerance(rtol=1e-4, atol=1e-5),
}


def _assignment(value: Any, path: str, root: Path, tolerances: dict[str, Tolerance], limits: Limits) -> Assignment:
    r = _Reader(value, path)
    name = r.get("name", _name)
    package = r.get("package", _ident, name.replace("-", "_"))
    notebooks = r.get("notebooks", _list_of(_str))
    for i, nb in enumerate(notebooks):
        if not nb.endswith(".ipynb") or "/" in nb or "\\" in nb:
            raise ConfigError(f"{CONFIG_NAME}: {path}.notebooks[{i}]: expected a notebook file name ending in .ipynb, got {_show(nb)}")
        source = root / "source" / name / nb
        if not source.is_file():
            raise ConfigError(f"{CONFIG_NAME}: {path}.notebooks[{i}]: source notebook {source.relative_to(root)} does not exist")
    limits = r.get("limits", lambda v, p: _limits(v, p, limits), limits)
    due = r.get("due", _datetime, None)
    late = r.get("late_policy", _late_policy, LatePolicy())

    r.seen.add("problems")
    raw = r.data.get("problems")
    ppath = f"{path}.problems"
    if raw is None:
        raise ConfigError(f"{CONFIG_NAME}: {ppath}: missing (required)")
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{CONFIG_NAME}: {ppath}: expected a mapping of problem name to settings, got {_show(raw)}")
    problems = []
    grade_ids: dict[str, str] = {}
    for pname, pvalue in raw.items():
        pkey = f"{ppath}.{pname}"
        _ident(pname, pkey)
        pr = _Reader(pvalue if pvalue is not None else {}, pkey)
        points = pr.get("points", _positive)
        grade_id = pr.get("grade_id", _name, f"test_{pname}")
        notebook = pr.get("notebook", _str, notebooks[0])
        if notebook not in notebooks:
            raise ConfigError(f"{CONFIG_NAME}: {pkey}.notebook: expected one of the assignment's notebooks ({', '.join(notebooks)}), got {_show(notebook)}")
        tols = pr.get("tolerances", lambda v, p: _tolerances(v, p, tolerances), tolerances)
        pr.finish()
        if grade_id in grade_ids:
            raise ConfigError(f"{CONFIG_NAME}: {pkey}.grade_id: {grade_id!r} is already used by problem {grade_ids[grade_id]!r}")
        grade_ids[grade_id] = pname
        problems.append(Problem(name=pname, points=points, grade_id=grade_id, notebook=notebook, tolerances=tols))
    r.finish()
    pkg = root / "assignments" / package
    if not pkg.is_dir():
        raise ConfigError(f"{CONFIG_NAME}: {path}.package: folder assignments/{package} does not exist")
    return Assignment(name=name, package=package, notebooks=notebooks, problems=tuple(problems),
                      limits=limits, due=due, late_policy=late)


def parse_course(data: Any, root: Path) -> Course:
    """Validate the loaded YAML of course.yml (rooted at `root`) into a Course."""
    r = _Reader(data if data is not None else {}, "")
    name = r.get("name", _str)
    course_id = r.get("course_id", _name, "course")
    roster = r.get("roster", _str, None)
    gradebook = r.get("gradebook", _str, "sqlite:///gradebook.db")
    secret = r.get("secret_file", _str, ".course_secret")

    defaults = r.get("defaults", lambda v, p: v, {})
    dr = _Reader(defaults, "defaults")
    tolerances = dr.get("tolerances", lambda v, p: _tolerances(v, p, DEFAULT_TOLERANCES), DEFAULT_TOLERANCES)
    limits = dr.get("limits", lambda v, p: _limits(v, p, Limits()), Limits())
    dr.finish()

    raw = r.get("assignments", lambda v, p: v)
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{CONFIG_NAME}: assignments: expected a non-empty list, got {_show(raw)}")
    assignments = tuple(_assignment(a, f"assignments[{i}]", root, tolerances, limits) for i, a in enumerate(raw))
    names = [a.name for a in assignments]
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(f"{CONFIG_NAME}: assignments[{i}].name: {n!r} is used twice")
    r.finish()

    if gradebook.startswith("sqlite:///") and not gradebook.startswith("sqlite:////"):
        rel = gradebook[len("sqlite:///"):]
        gradebook = f"sqlite:///{(root / rel).resolve()}"
    return Course(
        root=root,
        name=name,
        course_id=course_id,
        assignments=assignments,
        roster_file=(root / roster) if roster else None,
        gradebook_url=gradebook,
        secret_file=root / secret,
    )


def load_course(course_dir: str | Path = ".") -> Course:
    """Read and validate DIR/course.yml."""
    root = Path(course_dir).resolve()
    path = root / CONFIG_NAME
    if not path.is_file():
        raise ConfigError(f"{path}: not found (run from the course folder or pass --course-dir)")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{CONFIG_NAME}:{where}: not valid YAML ({problem})") from None
    return parse_course(data, root)
