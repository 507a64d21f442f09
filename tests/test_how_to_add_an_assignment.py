"""docs/how-to-add-an-assignment.md, followed to the letter on a scratch course: the files are the
page's code blocks, the commands are the page's commands, and what they print is what the page shows."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.layout import CourseLayout
from autograder.toolpath import tool_env
from conftest import ROOT, copy_course

pytestmark = pytest.mark.slow

RECIPE = ROOT / "docs" / "how-to-add-an-assignment.md"
NAME = "activations"
FENCED = re.compile(r"^```(?:python|yaml)\n# (?P<path>\S+)(?P<note>[^\n]*)\n(?P<body>.*?)^```$", re.M | re.S)


def blocks() -> dict[str, tuple[str, str]]:
    """{path: (note, file text)} for each code block of the page that starts with `# <path>`."""
    text = RECIPE.read_text(encoding="utf-8")
    return {m["path"]: (m["note"].strip(), f"# {m['path']}{m['note']}\n{m['body']}") for m in FENCED.finditer(text)}


def shown(prefix: str) -> str:
    """The line of the page's sample output that starts with `prefix` (indented four spaces)."""
    for line in RECIPE.read_text(encoding="utf-8").splitlines():
        if line.startswith("    " + prefix):
            return line[4:]
    raise AssertionError(f"the page shows no output line starting with {prefix!r}")


def course(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autograder.cli", *args], cwd=folder, capture_output=True,
                          text=True, env=tool_env(), timeout=900)


def script(folder: Path, name: str) -> None:
    proc = subprocess.run([sys.executable, name], cwd=folder, capture_output=True, text=True, env=tool_env(),
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def forget(folder: Path) -> None:
    """Take the page's assignment out of a course copy, when the course it was copied from holds it
    already (an instructor who followed the page keeps its files): its course.yml entry (the item
    `- name: activations` and the lines indented below it) and its folders. The recipe is then
    applied to the course as it was before, not on top of an earlier following of it."""
    layout = CourseLayout(folder)
    lines = layout.config.read_text(encoding="utf-8").splitlines(keepends=True)
    item = re.compile(rf"^(?P<indent>\s*)- name: {NAME}\s*(#.*)?$")
    for i, line in enumerate(lines):
        found = item.match(line)
        if found is None:
            continue
        end = i + 1
        while end < len(lines) and (not lines[end].strip()
                                    or len(lines[end]) - len(lines[end].lstrip()) > len(found["indent"])):
            end += 1
        del lines[i:end]
        break
    layout.config.write_text("".join(lines), encoding="utf-8")
    for path in (layout.source(NAME), layout.release(NAME), folder / "assignments" / NAME):
        shutil.rmtree(path, ignore_errors=True)


def apply_files(folder: Path) -> None:
    """Steps 1-3 of the page: the course.yml entry, the page's files and the notebook script's run."""
    forget(folder)
    layout = CourseLayout(folder)
    files = blocks()
    note, text = files.pop("course.yml")
    assert "append" in note
    layout.config.write_text(layout.config.read_text(encoding="utf-8") + text.split("\n", 1)[1], encoding="utf-8")
    for path, (_, text) in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text, encoding="utf-8")
    layout.source(NAME).mkdir(parents=True)
    script(folder, "make_activations_notebook.py")


@pytest.fixture(scope="module")
def followed(tmp_path_factory):
    """The scratch course after steps 1-6, with the output of each command (the submission script
    run twice, as an instructor trying it again would)."""
    folder = copy_course(tmp_path_factory.mktemp("recipe") / "course")
    layout = CourseLayout(folder)
    apply_files(folder)
    out = {"release": course(folder, "release", NAME), "validate": course(folder, "validate", NAME)}
    script(folder, "make_activations_submission.py")
    script(folder, "make_activations_submission.py")
    out["autograde"] = course(folder, "autograde", NAME)
    return layout, out


def test_recipe_files_are_all_on_the_page():
    """Does the page give the course.yml entry, both scripts, the reference and a grader per problem?"""
    assert set(blocks()) == {"course.yml", "make_activations_notebook.py", "make_activations_submission.py",
                             f"assignments/{NAME}/__init__.py", f"assignments/{NAME}/reference.py",
                             f"assignments/{NAME}/graders/test_relu.py", f"assignments/{NAME}/graders/test_softmax.py"}


def test_recipe_release_prints_what_the_page_shows(followed):
    """Does `course release` succeed and print the page's line, leaving the student notebook in release/?"""
    layout, out = followed
    assert out["release"].returncode == 0, out["release"].stderr
    assert shown("released ") in out["release"].stdout
    assert "WARNING" not in out["release"].stdout, out["release"].stdout
    assert (layout.release(NAME) / f"{NAME}.ipynb").is_file()


def test_recipe_points_changed_under_a_heading_stating_them_are_warned_of_as_the_page_shows(tmp_path):
    """With `relu: {points: 5}` in course.yml and the page's notebook still heading relu "(4 points)", does
    `course release` give the grade cell 5 points and print the page's warning, naming the notebook and cell,
    and `course validate` too, while it passes?"""
    folder = copy_course(tmp_path / "course")
    apply_files(folder)
    layout = CourseLayout(folder)
    config = layout.config.read_text(encoding="utf-8")
    assert config.count("relu: {points: 4}") == 1
    layout.config.write_text(config.replace("relu: {points: 4}", "relu: {points: 5}"), encoding="utf-8")
    proc = course(folder, "release", NAME)
    assert proc.returncode == 0, proc.stderr
    assert [line for line in proc.stdout.splitlines() if line.startswith("WARNING")] == [shown("WARNING: ")]
    cells = json.loads((layout.release(NAME) / f"{NAME}.ipynb").read_text(encoding="utf-8"))["cells"]
    assert [c["metadata"]["nbgrader"]["points"] for c in cells
            if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_relu"] == [5]
    validated = course(folder, "validate", NAME)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert [line for line in validated.stdout.splitlines() if line.startswith("WARNING")] == [shown("WARNING: ")]


def test_recipe_validate_passes_as_the_page_says(followed):
    """Does `course validate` score the source 10/10 and the release 0/10, and say ok?"""
    _, out = followed
    assert out["validate"].returncode == 0, out["validate"].stdout + out["validate"].stderr
    assert shown("autograder: ") in out["validate"].stdout
    assert shown(f"validate {NAME}: ") in out["validate"].stdout


def test_recipe_autograde_scores_the_trial_submission_as_the_page_says(followed):
    """Does the trial submission get the page's row (8/10) and the page's message for the overflow?"""
    layout, out = followed
    assert out["autograde"].returncode == 0, out["autograde"].stderr
    row = shown("ada ")
    assert row in out["autograde"].stdout
    results = json.loads(layout.results_json("ada", NAME).read_text())
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert [t["name"] for t in failed] == ["test_softmax_survives_large_inputs"]
    page = " ".join(RECIPE.read_text(encoding="utf-8").split())
    assert failed[0]["output"] in page
    assert (layout.feedback("ada", NAME) / f"{NAME}.html").is_file()


def test_recipe_python_files_pass_the_projects_lint(followed):
    """Do the page's Python files, kept in the course folder as the page says, pass `make lint`'s
    ruff check (lines of 120 characters at most, import order, ...)?"""
    layout, _ = followed
    files = [path for path in blocks() if path.endswith(".py")]
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--config",
                           str(ROOT / "pyproject.toml"), *files], cwd=layout.root, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_recipe_applies_again_to_a_course_that_followed_it(followed, tmp_path):
    """Applied to a copy of a course that already followed the page (as the course this test copies
    does once an instructor keeps the page's files), does the recipe start again from the course as
    it was, leaving course.yml with one entry for the assignment?"""
    layout, _ = followed
    before = copy_course(tmp_path / "before")
    again = shutil.copytree(layout.root, tmp_path / "again", ignore=shutil.ignore_patterns("__pycache__"))
    forget(again)
    forget(before)
    assert CourseLayout(again).config.read_text() == CourseLayout(before).config.read_text()
    assert not CourseLayout(again).source(NAME).exists() and not (again / "assignments" / NAME).exists()
    apply_files(again)
    assert CourseLayout(again).config.read_text().count(f"- name: {NAME}\n") == 1
    assert (CourseLayout(again).source(NAME) / f"{NAME}.ipynb").is_file()


def test_recipe_step_1_alone_stops_only_the_new_assignments_commands_as_the_page_says(tmp_path):
    """After step 1 alone, and again with the instructor-code folder but no notebook, does a command
    about the new assignment print the line the page shows, while a command about the course's
    live assignment still works; and does an entry copied without a new name print the page's line?"""
    import yaml

    folder = copy_course(tmp_path / "course")
    forget(folder)
    layout = CourseLayout(folder)
    live = yaml.safe_load(layout.config.read_text(encoding="utf-8"))
    _, text = blocks()["course.yml"]
    layout.config.write_text(layout.config.read_text(encoding="utf-8") + text.split("\n", 1)[1], encoding="utf-8")
    page = " ".join(RECIPE.read_text(encoding="utf-8").split())
    for step in ("declared", "package folder made"):
        proc = course(folder, "release", NAME)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert f"`{proc.stderr.strip()}`" in page, f"{step}: {proc.stderr}"
        (folder / "assignments" / NAME).mkdir(parents=True, exist_ok=True)
    first = live["assignments"][0]["name"]
    assert course(folder, "feedback", first).returncode == 0
    live["assignments"].append(dict(live["assignments"][0]))
    layout.config.write_text(yaml.safe_dump(live, sort_keys=False), encoding="utf-8")
    proc = course(folder, "feedback", first)
    assert proc.returncode == 2 and f"`{proc.stderr.strip()}`" in page, proc.stderr
