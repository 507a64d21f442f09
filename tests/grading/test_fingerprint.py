"""The grading key tells a new submission from the same one graded again; the graders' version it
carries holds the release and the files under assignments/ the instructor code imports."""
from __future__ import annotations

import json
from pathlib import Path

from autograder.config import load_course
from autograder.grading.fingerprint import (
    graders_version,
    grading_key,
    imported_helpers,
    regraded,
    resubmitted,
    submission_of,
)
from autograder.layout import CourseLayout


def test_the_key_tells_a_new_submission_from_new_graders():
    """Is a key's submission hash read back, a changed submission told apart from the same one graded under
    other graders (a course.yml change) or another seed, and a key without the hash (older results.json, or
    none) never taken for a resubmission?"""
    first = grading_key("g1", "s1", seed=1, on_roster=True)
    assert submission_of(first) == "s1"
    assert resubmitted(first, grading_key("g1", "s2", seed=1, on_roster=True))
    assert not resubmitted(first, grading_key("g2", "s1", seed=7, on_roster=False, isolation=("seccomp",)))
    assert not resubmitted(first, first)
    assert not resubmitted("0" * 64, first) and not resubmitted("", first) and submission_of("0" * 64) == ""
    assert first != grading_key("g2", "s1", seed=1, on_roster=True)      # still a key of everything graded


def test_the_key_tells_new_graders_from_another_seed_roster_or_sandbox():
    """Is a result keyed under other graders told apart (whatever its submission), while another seed, roster
    status or sandbox under the same graders, and a key that does not carry the graders (empty, or written
    before keys held them), are never taken for new graders?"""
    first = grading_key("g1" * 32, "s1", seed=1, on_roster=True)
    assert regraded(first, "g2" * 32)
    assert regraded(grading_key("g1" * 32, "s2", seed=1, on_roster=True), "g2" * 32)
    assert not regraded(first, "g1" * 32)
    assert not regraded(grading_key("g1" * 32, "s1", seed=7, on_roster=False, isolation=("seccomp",)), "g1" * 32)
    assert not regraded("0" * 64 + "/s1", "g2" * 32) and not regraded("", "g2" * 32)
    assert submission_of("0" * 64 + "/s1") == "s1"                  # a key written before it held the graders


A = "transformer-block"
PACKAGE = "transformer_block"


def _version(folder: Path) -> str:
    course = load_course(folder)
    return graders_version(course, course.assignment(A))


def _helpers(folder: Path) -> list[str]:
    course = load_course(folder)
    return [course.layout.relative(path) for path in imported_helpers(course, course.assignment(A))]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_changed_release_changes_the_graders_version(course_copy):
    """Grading runs the release's locked and given cells as released: does a release made again from a
    fixed source (a changed given cell), or a file added to it, change the graders' version, and with it
    the identity a warm worker is chosen by?"""
    from autograder.batch.serve import identity

    release = CourseLayout(course_copy).release(A)
    course = load_course(course_copy)
    before, served = _version(course_copy), identity(course, course.assignment(A), insecure=False)
    notebook = release / f"{A}.ipynb"
    doc = json.loads(notebook.read_text())
    setup = next(cell for cell in doc["cells"] if cell["metadata"].get("nbgrader", {}).get("grade_id") == "setup")
    setup["source"] = "".join(setup["source"]) + "\n\ndef clip0(x):\n    return np.maximum(x, 0)\n"
    notebook.write_text(json.dumps(doc))
    fixed = _version(course_copy)
    assert fixed != before
    assert identity(course, course.assignment(A), insecure=False) != served
    _write(release / "data.csv", "x\n1\n")
    assert _version(course_copy) not in (before, fixed)


def _write_all(root: Path, files: dict[str, str]) -> None:
    for relative, text in files.items():
        _write(root / relative, text)


def _import_first(layout: CourseLayout, line: str) -> None:
    """Make the assignment's grader module test_silu.py start with the import `line`."""
    grader = layout.graders(PACKAGE) / "test_silu.py"
    grader.write_text(line + "\n" + grader.read_text())


def _cell(doc: dict, cell_id: str) -> dict:
    return next(cell for cell in doc["cells"] if cell.get("id") == cell_id)


def test_the_release_counts_by_what_grading_reads_of_its_notebooks(course_copy):
    """Does a release made again with a Markdown cell fixed, or saved again by Jupyter (other indentation, notebook and
    cell metadata, outputs, execution counts, a plain code cell's id), leave the graders' version and a warm
    worker's identity as they were, while a changed locked given cell, a changed public-check code cell, a grade
    cell's points or a data file beside the notebook change it?"""
    from autograder.batch.serve import identity

    notebook = CourseLayout(course_copy).release(A) / f"{A}.ipynb"
    course = load_course(course_copy)
    before, served = _version(course_copy), identity(course, course.assignment(A), insecure=False)
    doc = json.loads(notebook.read_text())
    _cell(doc, "lesson-heads")["source"] = "## 2. Why several heads, and what they cost (fixed typo)\n"
    doc["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)"}
    doc["metadata"]["widgets"] = {"state": {}}
    check = _cell(doc, "silu-check")
    check["execution_count"] = 7
    check["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    check["metadata"]["collapsed"] = True
    check["metadata"]["ExecuteTime"] = {"end_time": "2026-01-01T00:00:00"}
    _cell(doc, "demo-reshape")["id"] = "pasted-again"     # a plain code cell's id: read by no grading
    notebook.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    assert _version(course_copy) == before
    assert identity(course, course.assignment(A), insecure=False) == served
    versions = {before}
    edits = (("setup", lambda cell: cell.update(source="".join(cell["source"]) + "\nEPS = 1e-6\n")),
             ("silu-check", lambda cell: cell.update(source="".join(cell["source"]) + "\n_check_silu(None)\n")),
             ("silu-test", lambda cell: cell["metadata"]["nbgrader"].update(points=6)))
    for cell_id, edit in edits:
        edit(_cell(doc, cell_id))
        notebook.write_text(json.dumps(doc, indent=1))
        changed = _version(course_copy)
        assert changed not in versions, cell_id
        versions.add(changed)
    _write(notebook.parent / "weights.csv", "w\n1\n")
    assert _version(course_copy) not in versions
    notebook.write_text("{ not json")
    broken = _version(course_copy)
    notebook.write_text("{ not json ")
    assert _version(course_copy) != broken          # unreadable: by its bytes


def test_a_linked_module_in_the_package_counts_by_its_target(course_copy):
    """Python imports through a symbolic link in the package: does editing the file a grader module links
    to (outside the package) change the graders' version?"""
    layout = CourseLayout(course_copy)
    target = layout.package(PACKAGE).parent / "shared" / "consts.py"
    _write(target, "SCALE = 1.0\n")
    (layout.graders(PACKAGE) / "_consts.py").symlink_to(Path("..", "..", "shared", "consts.py"))
    version = _version(course_copy)
    target.write_text("SCALE = 2.0\n")
    assert _version(course_copy) != version


def test_a_linked_folder_in_the_package_counts_by_its_files_and_a_linked_init_is_read(course_copy):
    """Python imports through a symbolic link to a folder too: does editing a module in the folder a link in
    the package points to change the graders' version (a link to a folder above it ending there), and is an
    assignments/__init__.py that is a link read through it rather than refused?"""
    layout = CourseLayout(course_copy)
    shared = layout.package(PACKAGE).parent.parent / "shared_dir"
    _write(shared / "util.py", "K = 1\n")
    (layout.package(PACKAGE) / "common").symlink_to(Path("..", "..", "shared_dir"))
    (shared / "loop").symlink_to(Path(".."))
    version = _version(course_copy)
    (shared / "util.py").write_text("K = 2\n")
    assert _version(course_copy) != version
    init = layout.package(PACKAGE).parent / "__init__.py"
    _write(shared / "init.py", init.read_text() if init.is_file() else "")
    init.unlink(missing_ok=True)
    init.symlink_to(Path("..", "shared_dir", "init.py"))
    version = _version(course_copy)
    (shared / "init.py").write_text("# changed\n")
    assert _version(course_copy) != version


def test_a_star_import_from_a_package_counts_its_modules(course_copy):
    """`from assignments.shared import *` imports the modules the package's `__all__` names: do they count
    (and what they import), while a module of another package does not?"""
    layout = CourseLayout(course_copy)
    shared = layout.package(PACKAGE).parent / "shared"
    _write_all(layout.package(PACKAGE).parent, {
        "shared/__init__.py": '__all__ = ["consts", "tools"]\n',
        "shared/consts.py": "from assignments.other import VALUE\n\nSCALE = 1.0\n",
        "shared/tools/__init__.py": "", "other.py": "VALUE = 1\n", "unused.py": "VALUE = 1\n"})
    _import_first(layout, "from assignments.shared import *  # noqa: F403")
    assert _helpers(course_copy) == ["assignments/__init__.py", "assignments/other.py",
                                     "assignments/shared/__init__.py", "assignments/shared/consts.py",
                                     "assignments/shared/tools/__init__.py"]
    version = _version(course_copy)
    (shared / "consts.py").write_text("from assignments.other import VALUE\n\nSCALE = 2.0\n")
    assert _version(course_copy) != version


def test_a_helper_module_the_graders_import_counts_in_the_graders_version(course_copy):
    """Does a file under assignments/ outside the assignment's package count when its graders import it
    (`from assignments.common import ...`), and so do the files that one imports in turn (relative import,
    a package's __init__.py on the way, importlib.import_module with the module's dotted name), each change
    changing the graders' version?"""
    layout = CourseLayout(course_copy)
    shared = layout.package(PACKAGE).parent
    _write_all(shared, {
        "common.py": "from .tools.scale import FACTOR\n\nEXTRA = 0.0\n",
        "tools/__init__.py": '"""Shared tools."""\n',
        "tools/scale.py": "import importlib\n\nFACTOR = 1.0\n"
                          "OFFSETS = importlib.import_module('assignments.tools.offsets')\n",
        "tools/offsets.py": "SHIFT = 0\n", "tools/unused.py": "NOTHING = None\n"})
    assert _helpers(course_copy) == ["assignments/__init__.py"]      # run whenever a package of it is
    _import_first(layout, "from assignments.common import EXTRA")
    assert _helpers(course_copy) == ["assignments/__init__.py", "assignments/common.py",
                                     "assignments/tools/__init__.py", "assignments/tools/offsets.py",
                                     "assignments/tools/scale.py"]
    version = _version(course_copy)
    for helper, text in (("common.py", "EXTRA = 1.0\nfrom .tools.scale import FACTOR\n"),
                         ("tools/scale.py", "import importlib\n\nFACTOR = 2.0\n"
                                            "OFFSETS = importlib.import_module('assignments.tools.offsets')\n"),
                         ("tools/offsets.py", "SHIFT = 1\n"), ("tools/__init__.py", "")):
        (shared / helper).write_text(text)
        changed = _version(course_copy)
        assert changed != version, helper
        version = changed
    (shared / "tools" / "unused.py").write_text("NOTHING = 1\n")
    assert _version(course_copy) == version


def test_another_assignments_files_count_only_when_imported(course_copy):
    """Does a change in another assignment's package leave this assignment's graders' version as it was,
    except in the module its graders import from there (the input builders of another assignment's
    graders/) and what that module imports?"""
    layout = CourseLayout(course_copy)
    other = layout.package("activations")
    _write(other / "__init__.py", '"""Another assignment."""\n')
    _write(other / "reference.py", "def relu(x):\n    return x\n")
    _write(layout.graders("activations") / "_builders.py", "from ..reference import relu\n\nSIZE = 3\n")
    _write(layout.graders("activations") / "test_relu.py", "def test_relu():\n    pass\n")
    version = _version(course_copy)
    (layout.graders("activations") / "test_relu.py").write_text("def test_relu():\n    assert True\n")
    (layout.graders("activations") / "_builders.py").write_text("from ..reference import relu\n\nSIZE = 4\n")
    assert _version(course_copy) == version
    _import_first(layout, "from assignments.activations.graders import _builders")
    assert _helpers(course_copy) == ["assignments/__init__.py", "assignments/activations/__init__.py",
                                     "assignments/activations/graders/_builders.py",
                                     "assignments/activations/reference.py"]
    version = _version(course_copy)
    for changed in (layout.graders("activations") / "_builders.py", other / "reference.py"):
        changed.write_text(changed.read_text() + "\n# changed\n")
        assert _version(course_copy) != version, changed
        version = _version(course_copy)
    (layout.graders("activations") / "test_relu.py").write_text("def test_relu():\n    assert 1\n")
    assert _version(course_copy) == version


def test_the_graders_version_leaves_out_extensions_which_the_students_own_keys_carry(course_copy):
    """Is one student's extension left out of the graders' version every key shares (so it grades no one
    else again) and in that student's own key, where another extension, or none, makes another key; while a
    shared setting (a tolerance, the due date) changes the graders' version, and a cluster's machines must
    still agree on the extensions (`course_version`)?"""
    import dataclasses

    from autograder.config import Extension, Tolerance, load_course
    from autograder.grading.fingerprint import course_version, graders_version, student_extension

    course = load_course(course_copy)
    a = course.assignments[0]
    given = dataclasses.replace(a, extensions={"alan": Extension(days=2)})
    assert graders_version(course, given) == graders_version(course, a)
    assert course_version(course, given) != course_version(course, a)
    assert student_extension(given, "ada") == student_extension(a, "alan") == ""
    assert student_extension(dataclasses.replace(a, extensions={"alan": Extension()}), "alan") == ""
    in_hours = dataclasses.replace(a, extensions={"alan": Extension(hours=48)})
    assert student_extension(in_hours, "alan") == student_extension(given, "alan") != ""   # the same length
    keys = {grading_key("g", "s", seed=1, on_roster=True, extension=student_extension(b, "alan"))
            for b in (a, given, dataclasses.replace(a, extensions={"alan": Extension(days=3)}))}
    assert len(keys) == 3
    problem = dataclasses.replace(a.problems[0], tolerances={**a.problems[0].tolerances,
                                                             "float64": Tolerance(rtol=1e-3, atol=1e-9)})
    assert graders_version(course, dataclasses.replace(a, problems=(problem, *a.problems[1:]))) != graders_version(
        course, a)
    assert graders_version(course, dataclasses.replace(a, due=None)) != graders_version(course, a)


def test_only_a_package_file_that_may_import_from_outside_it_is_parsed(course_copy, monkeypatch):
    """Parsing every file of the package costs tens of milliseconds a run: is a file of the shipped package,
    whose imports all stay inside it, left unparsed, while one naming another module under assignments/ or
    climbing out with a relative import is parsed and what it imports counted?"""
    from autograder.grading import fingerprint

    layout = CourseLayout(course_copy)
    package = layout.package(PACKAGE)
    parsed: list[str] = []
    real = fingerprint._imported_modules

    def counting(root, path, source):
        parsed.append(layout.relative(path))
        return real(root, path, source)

    monkeypatch.setattr(fingerprint, "_imported_modules", counting)
    assert _helpers(course_copy) == ["assignments/__init__.py"]
    assert [name for name in parsed if name.startswith(layout.relative(package))] == []
    _write(package.parent / "common.py", "EXTRA = 0.0\n")
    _write(package.parent / "deep.py", "DEEP = 0.0\n")
    _write(package / "graders" / "_a.py", "from assignments import common\n")
    _write(package / "graders" / "_b.py", "from ...deep import DEEP\n")
    _write(package / "graders" / "_c.py", "from .. import reference\n")          # stays in the package
    _write(package / "graders" / "_d.py", "from ..\\\n. import split\n")      # continued: read
    _write(package / "graders" / "_e.py", "importlib.import_module('assign' 'ments.shared')\n")
    _write(package.parent / "split.py", "S = 0\n")
    _write(package.parent / "shared.py", "T = 0\n")
    parsed.clear()
    assert _helpers(course_copy) == ["assignments/__init__.py", "assignments/common.py", "assignments/deep.py",
                                     "assignments/shared.py", "assignments/split.py"]
    assert sorted(name.rsplit("/", 1)[1] for name in parsed if "/graders/" in name) == ["_a.py", "_b.py", "_d.py",
                                                                                         "_e.py"]
