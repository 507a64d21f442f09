"""Gradescope: one assignment as a Gradescope autograder bundle, and the grading run inside it.

Gradescope's contract (https://gradescope-autograders.readthedocs.io/en/latest/specs/): a zip with
`setup.sh` (run once, as root, when Gradescope builds the autograder's Ubuntu image) and
`run_autograder` at its root. At grading time the zip's content is in /autograder/source, the
student's files in /autograder/submission, the submission's metadata in
/autograder/submission_metadata.json, and run_autograder must write /autograder/results/results.json.

`build_bundle` writes the zip:

    setup.sh            apt-get installs bubblewrap, libseccomp and a Python venv; builds the venv
                        and pip installs engine/ under constraints.txt
    run_autograder      runs `python -m autograder.gradescope` (`run`, below) with the bundled engine
    gradescope.json     the assignment and the results' visibility
    engine/             pyproject.toml, constraints.txt and the autograder package
    course/             a course of this one assignment: course.yml (only this assignment; the
                        gradebook a local SQLite file, the roster written per submission),
                        nbgrader_config.py, the course secret, source/ and release/ of the assignment,
                        assignments/<package>/ (reference, mistakes, graders)

Nothing else of the course goes in: no other assignment's notebooks or instructor code, no
submissions, results, feedback, gradebook or roster.

`run` (what run_autograder calls) lays the submission out as a one-student course folder
(`<root>/course`: submitted/<student>/<assignment>/), grades it with the real `course autograde
ASSIGNMENT --student ID --wait` (full sandbox) and copies that student's results.json to
`<root>/results/results.json`, with the bundle's visibility and its scores in whole cents
(`rounded_scores`: the tests' scores add up to the total). Whatever goes wrong, a valid
results.json is written (score 0, a message for the student, the details on stdout and in
extra_data for the instructor). The root is /autograder unless COURSE_GRADESCOPE_ROOT says otherwise.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Assignment, Course, course_data, load_course
from .errors import CourseError
from .layout import (
    INSTRUCTOR_CODE,
    NBGRADER_CONFIG,
    ROSTER_FILE,
    CourseLayout,
    is_notebook_name,
    output_problem,
    student_id_problem,
)
from .notebooks import named_like
from .reporting.results_json import VISIBILITIES, atomic_write_text
from .reporting.summary import LATE_POLICY
from .text import shown_name, truncate

ROOT_ENV = "COURSE_GRADESCOPE_ROOT"        # the /autograder folder (tests grade in a temporary one)
VENV_ENV = "COURSE_GRADESCOPE_VENV"        # the venv setup.sh builds (tests use the project's own)
DEFAULT_ROOT = "/autograder"
DEFAULT_VENV = "/opt/course-autograder/venv"

# In the zip, and so in <root>/source/:
ENGINE = "engine"                          # the project to pip install: pyproject.toml, constraints.txt, autograder/
COURSE = "course"                          # the one-assignment course
SETTINGS = "gradescope.json"               # {"assignment": ..., "visibility": ...}
SECRET = ".course_secret"                  # the course secret, in course/ (course.yml's secret_file there)
ENGINE_FILES = ("pyproject.toml", "constraints.txt")

# Under <root> at grading time (Gradescope's names), and the course folder run() grades in:
SOURCE, SUBMISSION, RESULTS, METADATA, WORK = "source", "submission", "results", "submission_metadata.json", "course"

FALLBACK_STUDENT = "student"               # when the metadata names nobody usable
_SKIPPED = ("__MACOSX", ".ipynb_checkpoints")           # an archiver's and Jupyter's folders


@dataclass(frozen=True)
class Bundle:
    """The zip `build_bundle` wrote and the names in it (sorted)."""
    path: Path
    names: tuple[str, ...]


# --------------------------------------------------------------------------- the bundle

def build_bundle(course_dir: str | Path, assignment: str, *, to: str | Path | None = None,
                 visibility: str = "visible") -> Bundle:
    """Write the Gradescope autograder zip of `assignment` (default `gradescope/<assignment>-autograder.zip`
    in the course folder, whose gradescope/ folder is made when missing). A `to` that is a folder, or
    a file in a folder that does not exist, is refused (a CourseError, one line, as `nbgrader export
    --to` refuses it: no folder is made for a file named on the command line), as is a zip that cannot
    be written. The course secret is created if the course has none yet, so that a local `course
    autograde` later draws the same hidden inputs as Gradescope."""
    from .grading.seeds import course_secret
    from .validate import readable_notebooks, require_nbgrader_mappings

    if visibility not in VISIBILITIES:
        raise CourseError(f"--visibility: expected one of {', '.join(VISIBILITIES)}, got {visibility!r}")
    problem = output_problem(to) if to is not None else None
    if problem:
        raise CourseError(f"--to {to}: {problem}; no zip written")
    course = load_course(course_dir)
    a = course.assignment(assignment)
    require_nbgrader_mappings(course, a)     # the notebooks it packs, refused as `course validate` refuses them
    readable_notebooks(course, a)
    _require_release_points(course, a)
    course_secret(course.secret_file)
    dest = Path(to).resolve() if to is not None else course.layout.gradescope_bundle(a.name)
    engine = Path(__file__).resolve().parent
    project = engine.parent
    missing = [name for name in ENGINE_FILES if not (project / name).is_file()]
    if missing:
        raise CourseError(f"{project}: {', '.join(missing)} not found: `course gradescope` bundles the engine from "
                          f"the project it runs from (a source checkout, installed with `pip install -e`)")
    with tempfile.TemporaryDirectory(prefix="course-gradescope-") as tmp:
        stage = Path(tmp)
        (stage / ENGINE).mkdir()
        for name in ENGINE_FILES:
            shutil.copy2(project / name, stage / ENGINE / name)
        shutil.copytree(engine, stage / ENGINE / engine.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        _stage_course(course, a.name, CourseLayout(stage / COURSE))
        (stage / SETTINGS).write_text(json.dumps({"assignment": a.name, "visibility": visibility}, indent=2) + "\n")
        _write_script(stage / "setup.sh", setup_script())
        _write_script(stage / "run_autograder", run_script(visibility))
        load_course(stage / COURSE).assignment(a.name)          # the bundled course reads as it will on Gradescope
        try:
            return Bundle(dest, _zip(stage, dest))
        except OSError as exc:           # permissions, a full disk: nothing is left in dest's place
            raise CourseError(f"{course.layout.relative(dest)}: cannot be written "
                              f"({exc.strerror or type(exc).__name__}); no zip written") from None


def _require_release_points(course: Course, a: Assignment) -> None:
    """Refuse (a CourseError, one line) a release whose notebooks show students other points than
    course.yml: Gradescope would grade on course.yml's while the notebook shows the old ones. The line
    names the first difference, how many more there are, and the fix."""
    from .consistency import release_points_problems

    lines = release_points_problems(course, a)
    if lines:
        first = lines[0].replace("`course release`", f"`course release {a.name}`")
        more = len(lines) - 1
        rest = f"; {more} more difference{'s' if more > 1 else ''} from course.yml in the release" if more else ""
        raise CourseError(f"{first}{rest}; no zip written")


def _stage_course(course: Course, assignment: str, into: CourseLayout) -> None:
    """The course of `assignment` alone, in `into`: see the module's docstring."""
    a = course.assignment(assignment)
    layout = course.layout
    into.root.mkdir(parents=True)
    data = course_data(layout.config.read_text(encoding="utf-8"))
    data["assignments"] = [entry for entry in data["assignments"]
                           if isinstance(entry, dict) and entry.get("name") == a.name]
    data.pop("exchange", None)
    data.update(roster=ROSTER_FILE, gradebook="sqlite:///gradebook.db", secret_file=SECRET)
    import yaml

    header = (f"# {a.name} alone, bundled by `course gradescope` from {layout.config.name}: the gradebook is local to\n"
              f"# each Gradescope run, {ROSTER_FILE} names the one student graded, {SECRET} is the course's secret.\n")
    into.config.write_text(header + yaml.safe_dump(data, sort_keys=False, allow_unicode=True), encoding="utf-8")
    if (layout.root / NBGRADER_CONFIG).is_file():
        shutil.copy2(layout.root / NBGRADER_CONFIG, into.root / NBGRADER_CONFIG)
    shutil.copy2(course.secret_file, into.root / SECRET)
    for folder, dest in ((layout.source(a.name), into.source(a.name)), (layout.release(a.name), into.release(a.name))):
        shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    code = layout.root / INSTRUCTOR_CODE
    into.package(a.package).parent.mkdir(parents=True, exist_ok=True)
    for entry in code.iterdir():             # the package's own files beside it (assignments/__init__.py)
        if entry.is_file() and entry.suffix == ".py":
            shutil.copy2(entry, into.package(a.package).parent / entry.name)
    shutil.copytree(layout.package(a.package), into.package(a.package), ignore=shutil.ignore_patterns("__pycache__"))


def _write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def _zip(stage: Path, dest: Path) -> tuple[str, ...]:
    """Zip `stage`'s files (names relative to it, executables kept executable) into `dest`, atomically."""
    names = sorted(p.relative_to(stage).as_posix() for p in stage.rglob("*") if p.is_file())
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as zf:
            for name in names:
                zf.write(stage / name, name)
        os.chmod(tmp, 0o600)                 # it holds the course secret
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tuple(names)


def setup_script() -> str:
    """setup.sh: Gradescope runs it once, as root, on its Ubuntu image (22.04's python3 is 3.10: then
    python3.11 from Ubuntu's own packages)."""
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu).
# It installs bubblewrap and libseccomp (the sandbox student code runs in), a Python of at least 3.11
# with venv, and the bundled engine ({ENGINE}/) with its pinned dependencies ({ENGINE}/constraints.txt)
# into {DEFAULT_VENV}.
set -euo pipefail
source_dir="${{{ROOT_ENV}:-{DEFAULT_ROOT}}}/{SOURCE}"
venv="${{{VENV_ENV}:-{DEFAULT_VENV}}}"
export DEBIAN_FRONTEND=noninteractive

apt-get update -q
# --no-upgrade: what the image already has stays as it is (only what is missing is installed)
apt-get install -y -q --no-upgrade --no-install-recommends bubblewrap libseccomp2 ca-certificates

python=""
for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        python="$candidate"
        break
    fi
done
if [ -z "$python" ]; then
    apt-get install -y -q --no-install-recommends python3.11 python3.11-venv
    python=python3.11
fi
version="$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
"$python" -c 'import ensurepip' 2>/dev/null || apt-get install -y -q --no-install-recommends "python$version-venv"

mkdir -p "$(dirname "$venv")"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check \\
    -c "$source_dir/{ENGINE}/constraints.txt" "$source_dir/{ENGINE}"
"$venv/bin/python" -m compileall -q "$source_dir/{ENGINE}/autograder" "$source_dir/{COURSE}/{INSTRUCTOR_CODE}"
chmod 0755 "$source_dir/run_autograder"

# Which sandbox layers this image gives (the build log shows it; grading refuses without them).
"$venv/bin/course" doctor || echo "setup.sh: course doctor found the sandbox incomplete here (see above)"
"""


def run_script(visibility: str = "visible") -> str:
    """run_autograder: the bundled engine (on PYTHONPATH) in setup.sh's venv. A valid results.json, with
    the bundle's `visibility`, even when Python cannot start."""
    fallback = json.dumps({"score": 0.0, "output": _SETUP_FAILED, "visibility": visibility, "tests": []})
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission: grade /autograder/submission with the bundled course,
# write /autograder/results/results.json ({ROOT_ENV} and {VENV_ENV} move the root and the venv).
root="${{{ROOT_ENV}:-{DEFAULT_ROOT}}}"
venv="${{{VENV_ENV}:-{DEFAULT_VENV}}}"
export {ROOT_ENV}="$root"
export PYTHONPATH="$root/{SOURCE}/{ENGINE}"
"$venv/bin/python" -m autograder.gradescope "$root"
status=$?
if [ ! -s "$root/{RESULTS}/results.json" ]; then
    echo "run_autograder: the grader exited with status $status without writing results.json" >&2
    mkdir -p "$root/{RESULTS}"
    printf '%s\\n' {shlex.quote(fallback)} > "$root/{RESULTS}/results.json"
fi
exit 0
"""


_SETUP_FAILED = ("The autograder could not grade this submission: its grading environment failed to start (this is "
                 "not a problem in your notebook). Your score is 0 until it is graded again; please tell your "
                 "instructor.")
_GRADER_FAILED = ("The autograder could not grade this submission: the grader itself failed (this is not a problem "
                  "in your notebook). Your score is 0 until it is graded again; please tell your instructor.")


# --------------------------------------------------------------------------- grading one submission

def run(root: str | Path, *, log: Callable[[str], None] = print) -> Path:
    """Grade `<root>/submission` with the bundle in `<root>/source`; write and return
    `<root>/results/results.json`. Never raises for a problem with the submission or the grading:
    the results then score 0 and say so."""
    root = Path(root)
    out = root / RESULTS / "results.json"
    visibility = "visible"
    try:
        settings = json.loads((root / SOURCE / SETTINGS).read_text(encoding="utf-8"))
        visibility = settings.get("visibility", visibility)
        doc = _grade(root, settings["assignment"], log)
    except Exception as exc:  # noqa: BLE001 - any failure still owes Gradescope a results.json
        log(f"run_autograder: {type(exc).__name__}: {exc}")
        doc = {"score": 0.0, "output": _GRADER_FAILED, "tests": [],
               "extra_data": {"error": f"{type(exc).__name__}: {exc}"}}
    doc = rounded_scores(doc)
    doc["visibility"] = visibility if visibility in VISIBILITIES else "visible"
    for test in doc.get("tests", []):        # a test's own visibility would override the submission's
        test["visibility"] = doc["visibility"]
    atomic_write_text(out, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    log(f"run_autograder: score {doc.get('score')} written to {out}")
    return out


def _grade(root: Path, assignment: str, log: Callable[[str], None]) -> dict[str, Any]:
    work = root / WORK
    if work.exists():
        shutil.rmtree(work)
    shutil.copytree(root / SOURCE / COURSE, work)
    metadata, unread = _metadata(root / METADATA)
    student, id_notes = student_id(metadata, unread)
    user = _users(metadata)[0] if _users(metadata) else {}
    roster = io.StringIO()
    csv.writer(roster, lineterminator="\n").writerows([("id", "first_name", "email"),
                                                      (student, _text(user.get("name")), _text(user.get("email")))])
    (work / ROSTER_FILE).write_text(roster.getvalue(), encoding="utf-8")
    course = load_course(work)
    a = course.assignment(assignment)
    notes = id_notes + place_notebooks(root / SUBMISSION, course.layout.submission(student, a.name), a.notebooks)
    for note in notes:
        log(f"run_autograder: {note}")
    command = [sys.executable, "-m", "autograder.cli", "autograde", a.name, f"--student={student}",  # may start with -
               "--course-dir", str(work), "--wait"]
    log(f"run_autograder: {' '.join(shlex.quote(c) for c in command)}")
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    # Gradescope writes no timestamp.txt and course.yml's late policy does not apply there
    # (docs/gradescope.md): the summary's line on submissions graded as on time is left out.
    log("\n".join(line for line in proc.stdout.rstrip().splitlines() if not line.startswith(LATE_POLICY)))
    if proc.stderr.strip():
        log(proc.stderr.rstrip())
    results = course.layout.results_json(student, a.name)
    if not results.is_file():
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"score": 0.0, "output": _GRADER_FAILED, "tests": [],
                "extra_data": {"student": student, "error": last, "exit_status": proc.returncode}}
    doc: dict[str, Any] = json.loads(results.read_text(encoding="utf-8"))
    if notes:
        doc["output"] = "\n\n".join(["\n".join(notes)] + ([doc["output"]] if doc.get("output") else []))
    return doc


def rounded_scores(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc`, a results.json document, with its scores in whole cents, as the tool writes points for
    people (`text.format_points`), and the parts adding up to the whole, since Gradescope shows both.
    Within each problem (a test number's part before the dot), the points its tests earned and then
    the points they did not earn are rounded as one running total: each piece gets the cents by which
    the rounded total grows. So a problem's tests score its score rounded once (the page's figure),
    their `max_score`s add up to its points, and a passed test shows its `max_score` as its score
    (9 checks sharing 5 points, 2 passed: 0.56 and 0.55 earned, 1.11 in all). The `score` is the sum of
    the tests' less the late penalty (extra_data's, in cents), never below 0. A document without tests
    (a crashed grading, a failure's fallback) has its `score` rounded alone. See docs/gradescope.md."""
    out = dict(doc)
    tests = [dict(t) if isinstance(t, dict) else t for t in doc.get("tests", [])]
    problems: dict[str, list[dict[str, Any]]] = {}
    for i, test in enumerate(tests):
        if isinstance(test, dict) and _cents(test.get("max_score")) is not None and \
                _cents(test.get("score")) is not None:
            problems.setdefault(str(test.get("number", i)).split(".")[0], []).append(test)
    total = 0
    for group in problems.values():
        exact = [(min(max(float(t["score"]), 0.0), float(t["max_score"])), float(t["max_score"])) for t in group]
        pieces = [earned for earned, _ in exact] + [max(top - earned, 0.0) for earned, top in exact]
        cents, running = [], 0.0
        for piece in pieces:
            cents.append(round((running + piece) * 100) - round(running * 100))
            running += piece
        for test, earned, missed in zip(group, cents[:len(group)], cents[len(group):], strict=True):
            test["score"], test["max_score"] = earned / 100, (earned + missed) / 100
            total += earned
    out["tests"] = tests
    extra = doc.get("extra_data")
    penalty = _cents(extra.get("late_penalty")) if isinstance(extra, dict) else None
    if problems:
        out["score"] = max(0, total - (penalty or 0)) / 100
    elif (score := _cents(doc.get("score"))) is not None:
        out["score"] = score / 100
    if (top := _cents(doc.get("max_score"))) is not None:
        out["max_score"] = top / 100
    return out


def _cents(value: Any) -> int | None:
    """A finite number of points in whole cents, else None (left as it is)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return round(value * 100)


def _metadata(path: Path) -> tuple[dict[str, Any], str]:
    """Gradescope's submission metadata and "", or {} and what was wrong with the file (for a note)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, "is missing"
    except (OSError, ValueError) as exc:           # a folder, no permission, not UTF-8
        return {}, f"could not be read ({type(exc).__name__}: {truncate(str(exc), 120)})"
    try:
        data = json.loads(text)
    except ValueError as exc:
        return {}, f"is not JSON ({truncate(str(exc), 120)})"
    return (data, "") if isinstance(data, dict) else ({}, "does not hold a JSON object")


def _users(metadata: dict[str, Any]) -> list[dict[str, Any]]:
    users = metadata.get("users")
    return [u for u in users if isinstance(u, dict)] if isinstance(users, list) else []


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


_ID_KEYS = {"sid": "Student ID", "email": "email", "id": "Gradescope user id"}


def student_id(metadata: dict[str, Any], unread: str = "") -> tuple[str, list[str]]:
    """The id a submission is graded under (it seeds the hidden inputs), and a note for each value
    given but passed over: the first user's `sid` (Gradescope's Student ID), else their email, else
    their Gradescope user id, else "student". A value is taken when the course would take it as a
    student id (`id_problem`). A group submission is graded once, under its first user. A submission
    graded as "student" with no value passed over (the metadata file could not be read, `unread` saying
    why, or names no one) gets a note too: every such submission draws the same hidden inputs."""
    passed: list[tuple[str, str, str]] = []       # (key, value, why not)
    chosen = ""
    for user in _users(metadata)[:1]:
        for key in _ID_KEYS:
            value = user.get(key)
            text = str(value) if isinstance(value, (str, int)) and not isinstance(value, bool) else ""
            why = id_problem(text) if text else None
            if text and why is None:
                chosen = text
                break
            if text and why is not None:
                passed.append((key, text, why))
    fell_back, chosen = not chosen, chosen or FALLBACK_STUDENT
    notes = [f"Your {_ID_KEYS[key]} on Gradescope ({shown_name(truncate(text, 60))!r}) cannot be a student id "
             f"here ({why}), so this submission was graded as student {shown_name(truncate(chosen, 60))!r}."
             for key, text, why in passed]
    if fell_back and not passed:
        why = unread or "names no user with a Student ID, email or Gradescope user id"
        notes.append(f"Gradescope's {METADATA} {shown_name(why)}, so this submission was graded as student "
                     f"{FALLBACK_STUDENT!r} rather than under your Student ID (its hidden inputs are those drawn "
                     f"for {FALLBACK_STUDENT!r}); your score stands, but please tell your instructor.")
    return chosen, notes


def id_problem(text: str) -> str | None:
    """Why `text` cannot be the id of a submission graded here, or None: the rule `course autograde
    --student` applies (`layout.student_id_problem`: no path, hidden folder, control character, more
    than MAX_ID_BYTES, or what no roster id may hold: the id goes on the run's roster)."""
    return student_id_problem(text)


def _notebooks(folder: Path) -> Iterator[Path]:
    """The regular .ipynb files under `folder` (no link followed, no hidden or archiver's folder)."""
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIPPED)
        for name in sorted(files):
            path = Path(parent) / name
            if is_notebook_name(name) and not name.startswith(".") and path.is_file() and not path.is_symlink():
                yield path


def place_notebooks(submission: Path, dest: Path, expected: tuple[str, ...]) -> list[str]:
    """Copy the submitted notebooks into `dest` (the course's submitted/<student>/<assignment>/) under
    the names the assignment expects; returns a note for the student for each one found elsewhere.

    Each expected notebook is taken from the submission's top folder, else from the one subfolder
    that holds a file of that name; an assignment of one notebook takes the submission's only
    notebook whatever its name, or among several the only one named like it (`notebooks.named_like`).
    Anything else is not copied (the grader then reports the missing notebook, after a note naming
    the notebooks that were found). Only regular files are read."""
    dest.mkdir(parents=True, exist_ok=True)
    found = list(_notebooks(submission)) if submission.is_dir() else []
    notes = []
    for name in expected:
        top = [p for p in found if p.parent == submission and p.name == name]
        named = [p for p in found if p.name == name]
        if top:
            chosen = top[0]
        elif len(named) == 1:
            chosen = named[0]
        elif len(expected) == 1 and len(found) == 1:
            chosen = found[0]
        elif len(expected) == 1 and len(like := [p for p in found if named_like(p.name, name)]) == 1:
            chosen = like[0]
        else:
            if len(named) > 1:
                notes.append(f"Your submission holds {_listed(named, submission)}, none of them in its top folder, "
                             f"so none was graded as {name}. Submit one {name}.")
            elif found:
                notes.append(f"Your submission holds no notebook named {name}, so none was graded as {name} (it "
                             f"holds {_listed(found, submission)}). Submit your notebook as {name}.")
            continue
        if chosen != submission / name:
            notes.append(f"Your notebook {chosen.relative_to(submission).as_posix()} was graded as {name}.")
        shutil.copyfile(chosen, dest / name, follow_symlinks=False)
    return notes


def _listed(paths: list[Path], folder: Path, shown: int = 5) -> str:
    """`paths` relative to `folder`, as a student reads them: "a.ipynb and work/b.ipynb"."""
    names = [shown_name(p.relative_to(folder).as_posix()) for p in paths]
    if len(names) > shown:
        names = [*names[:shown], f"{len(names) - shown} more notebooks"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def main(argv: list[str] | None = None) -> int:
    """`python -m autograder.gradescope [ROOT]` (run_autograder): grade one Gradescope submission."""
    args = sys.argv[1:] if argv is None else argv
    root = args[0] if args else os.environ.get(ROOT_ENV, DEFAULT_ROOT)
    run(root, log=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
