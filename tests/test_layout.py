"""The course folder layout has one owner: `autograder.layout.CourseLayout`."""
from __future__ import annotations

import ast
import os
import re
from pathlib import Path

import pytest

from autograder.layout import (
    COURSE_PARTS,
    CourseLayout,
    copy_course,
    output_problem,
    write_problem,
    write_problems,
)
from conftest import ROOT, as_other_user

STEPS = ("source", "release", "submitted", "autograded", "feedback")
OWNER = ROOT / "autograder" / "layout.py"
# "submitted/<student>/..." or "release/{name}" inside text: a step folder followed by more path
STEP_IN_TEXT = re.compile(r"(?:^|[\s(`'\"])(" + "|".join(STEPS) + r")/(?!\s)")


def test_layout_student_steps_are_step_student_assignment():
    """Are per-student paths <step>/<student>/<assignment>, as nbgrader's format_path builds them?"""
    layout = CourseLayout(Path("/c"))
    assert layout.submission("ada", "hw") == Path("/c/submitted/ada/hw")
    assert layout.autograded("ada", "hw") == Path("/c/autograded/ada/hw")
    assert layout.results_json("ada", "hw") == Path("/c/autograded/ada/hw/results.json")
    assert layout.feedback("ada", "hw") == Path("/c/feedback/ada/hw")
    assert layout.source("hw") == Path("/c/source/hw") and layout.release("hw") == Path("/c/release/hw")
    assert layout.graders("hw_pkg") == Path("/c/assignments/hw_pkg/graders")
    assert layout.relative(layout.feedback("<student>", "hw")) == "feedback/<student>/hw"


def test_layout_refuses_a_student_where_the_step_has_none():
    """Does asking for a student's release folder, or a submission without a student, fail loudly?"""
    layout = CourseLayout(Path("/c"))
    with pytest.raises(ValueError, match="not per student"):
        layout.format_path("release", "ada", "hw")
    with pytest.raises(ValueError, match="needs a student"):
        layout.format_path("submitted", None, "hw")


def test_layout_copy_course_takes_the_course_and_no_generated_state(tmp_path):
    """Does a scratch copy hold course.yml, the notebooks and instructor code, but no grades or caches?"""
    dest = copy_course(ROOT, tmp_path / "copy")
    assert sorted(p.name for p in dest.iterdir()) == sorted(p for p in COURSE_PARTS if (ROOT / p).exists())
    assert not list(dest.rglob("__pycache__"))


def _builds_step_path(node: ast.AST) -> str | None:
    """The step name when `node` joins one into a path: `x / "submitted"`, `Path("feedback", ...)`,
    `os.path.join(..., "release")`, `.joinpath("source")`, or an f-string with "autograded/"."""
    def step(value: ast.AST) -> str | None:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            head = value.value.split("/")[0]
            return head if head in STEPS and (value.value == head or "/" in value.value) else None
        return None

    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return step(node.left) or step(node.right)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("Path", "PurePath", "join", "joinpath"):
            return next((s for s in map(step, node.args) if s), None)
    if isinstance(node, ast.JoinedStr):
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                match = STEP_IN_TEXT.search(part.value)
                if match:
                    return match.group(1)
    return None


def test_output_problem_refuses_a_folder_and_a_file_in_a_missing_folder(tmp_path, monkeypatch):
    """For a file named on the command line (`--to`): is a folder refused, a file in a missing folder (or
    under a file) refused naming that folder, with nothing made, and a new or existing file, relative
    or not, accepted?"""
    (tmp_path / "old.csv").write_text("x")
    monkeypatch.chdir(tmp_path)
    assert output_problem(tmp_path) == "is a folder: name the file to write (in it or elsewhere)"
    assert output_problem(tmp_path / "no" / "such" / "x.csv") == (
        f"its folder {tmp_path / 'no' / 'such'} does not exist, and none is made for a file named here: "
        f"create it first")
    assert output_problem(tmp_path / "old.csv" / "x.csv") == f"{tmp_path / 'old.csv'} is not a folder"
    assert not (tmp_path / "no").exists()
    for fine in ("new.csv", "old.csv", str(tmp_path / "new.csv")):
        assert output_problem(fine) is None, fine


def test_write_problem_names_a_folder_another_user_cannot_write(shared_dir):
    """Is a read-only folder (or the nearest folder above a missing one) named with its owner and
    mode, for a user who does not own it, and a folder anyone may write passed?"""
    locked, open_to_all = shared_dir / "locked", shared_dir / "open"
    for folder, mode in ((locked, 0o555), (open_to_all, 0o777)):
        folder.mkdir()
        folder.chmod(mode)
    below, itself, fine = as_other_user(lambda: (write_problem(locked / "ada" / "hw"), write_problem(locked),
                                                 write_problem(open_to_all / "ada" / "hw")))
    assert below == itself
    assert below.startswith(f"{locked} cannot be written by uid ") and "mode dr-xr-xr-x" in below
    assert fine is None


def test_write_problems_is_one_line_naming_the_first_folders(tmp_path):
    """Are five folders under a file one line naming three of them, relative as asked, and 'and 2 more'?"""
    (tmp_path / "file").write_text("")
    folders = [tmp_path / "file" / f"s{i}" for i in range(5)] + [tmp_path / "ok"]
    assert write_problem(tmp_path / "file" / "s0") == f"{tmp_path / 'file'} is not a folder"
    line = write_problems([tmp_path / f"f{i}" for i in range(5)])
    assert line is None
    (tmp_path / f"f{0}").write_text("")
    files = [tmp_path / f"f{i}" for i in range(5)]
    for f in files[1:]:
        f.write_text("")
    line = write_problems([f / "x" for f in files] + folders, lambda p: p.name)
    assert line == "f0 is not a folder; f1 is not a folder; f2 is not a folder (and 3 more folders)"


def test_no_step_folder_is_joined_outside_the_layout():
    """Outside autograder/layout.py, does any Python file build a source/release/submitted/autograded/
    feedback path by hand (instead of asking CourseLayout)?"""
    offenders = []
    for folder in ("autograder", "assignments", "tests", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == OWNER:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                found = _builds_step_path(node)
                if found:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {found}")
    assert not offenders, "use autograder.layout.CourseLayout:\n" + "\n".join(offenders)


@pytest.mark.parametrize(("code", "found"), [
    ('root / "submitted" / s', "submitted"),
    ('Path(root, "feedback")', "feedback"),
    ('os.path.join(root, "autograded/x")', "autograded"),
    ('f"release/{name}/x.ipynb"', "release"),
    ('"submitted"', None),
    ('root / "course.yml"', None),
    ('f"not a source/ path: {x}"', None),
])
def test_the_path_check_sees_hand_built_paths(code, found):
    """Does the check above catch each way of joining a step folder by hand, and leave other strings alone?"""
    tree = ast.parse(code, mode="eval")
    assert next(filter(None, map(_builds_step_path, ast.walk(tree))), None) == found


def test_write_problem_says_a_read_only_file_system_is_one(tmp_path, monkeypatch):
    """Is a folder on a file system mounted read-only named as such, not as a permission matter of its owner?"""
    import os

    real = os.statvfs(tmp_path)

    class ReadOnly:
        f_flag = real.f_flag | os.ST_RDONLY

    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly())
    assert write_problem(tmp_path, name=lambda p: "autograded") == \
        "autograded is on a read-only file system (mounted read-only)"


def test_the_gitignore_keeps_student_data_out_and_the_demo_s_submissions_in(tmp_path):
    """Does the project's .gitignore leave out a course's submissions, gradebook and every export file README's
    examples write (`nbgrader export --to canvas.csv`, ...), while the demo's bundled submissions and roster
    and the roster template stay tracked?"""
    import shutil
    import subprocess

    from autograder.layout import EXAMPLES, ROSTER_FILE

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    exports = {"grades.csv", *re.findall(r"nbgrader export --to (\S+\.csv)", readme)}
    assert {"canvas.csv", "blackboard.csv", "grades-excel.csv"} <= exports
    course, demo = CourseLayout(tmp_path), CourseLayout(tmp_path / EXAMPLES)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    student_data = [course.submission("ada", "hw") / "hw.ipynb", course.root / "gradebook.db",
                    *(course.root / name for name in sorted(exports | {"moodle.csv"}))]
    kept = [demo.submission("ada", "hw") / "hw.ipynb", demo.root / ROSTER_FILE, course.root / ROSTER_FILE]

    def ignored(paths: list[Path]) -> set[str]:
        names = [course.relative(p) for p in paths]
        done = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "--no-index", *names],
                              capture_output=True, text=True)
        return set(done.stdout.split())

    assert ignored(student_data) == {course.relative(p) for p in student_data}
    assert ignored(kept) == set()


def test_make_clean_removes_build_products_and_never_the_course_s_data(tmp_path):
    """Does `make clean`, run in a course folder, leave its gradebook, submissions, graded copies, pages and
    exports in place while it removes the virtual environment and the demo's scratch copy?"""
    import shutil
    import subprocess

    course = CourseLayout(tmp_path)
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    data = [course.root / "gradebook.db", course.submission("ada", "hw") / "hw.ipynb",
            course.autograded("ada", "hw") / "results.json", course.feedback("ada", "hw") / "hw.html",
            course.root / "canvas.csv"]
    products = [tmp_path / ".venv" / "pyvenv.cfg", tmp_path / ".venv-usr-bin-python3.11" / "pyvenv.cfg",
                tmp_path / ".demo" / "course.yml", tmp_path / ".ruff_cache" / "x"]
    for path in data + products:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x", encoding="utf-8")
    # not the variables of a `make test PYTHON=...` this suite may run under (make hands them down)
    env = {k: v for k, v in os.environ.items() if k not in {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "PYTHON", "VENV"}}
    subprocess.run(["make", "-s", "-C", str(tmp_path), "clean"], check=True, capture_output=True, env=env)
    assert [course.relative(p) for p in data if not p.exists()] == []
    assert [course.relative(p) for p in products if p.exists()] == []
