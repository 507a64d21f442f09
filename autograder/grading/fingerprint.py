"""What a grade depends on, as hashes: the submission's content and the graders' version.

A submission is graded again only when one of these changed (or when asked with --force):

- the submission: the names, kinds and bytes of the entries grading reads in
  submitted/<student>/<assignment>/ (every *.ipynb and timestamp.txt; a symbolic link counts by
  its name and kind, it is never followed);
- the graders: the engine's version and source, every file of the assignment's instructor code
  (assignments/<package>/: reference, mistakes, graders; a symbolic link to a file counts by that file's
  bytes, as Python imports through it), and its course.yml entry as parsed
  (problems, points, tolerances, limits, due date, late policy), but for what course.yml gives
  single students (`PER_STUDENT`: their extensions), which would otherwise grade the whole class
  again for one student's extension;
- the student's own extension, hidden-input seed, whether they are on the roster, and the sandbox
  layers that apply on this machine (a result graded with --insecure is graded again once the
  sandbox works).

The graders also hold what grading runs from outside assignments/<package>/: the assignment's release
(release/<name>/: its locked and given cells are run as released, whatever the submission holds there;
each notebook counts by what grading reads of it, its code cells and nbgrader cells, not its Markdown,
outputs or JSON layout, and any other file by its bytes) and every file under assignments/ that the
instructor code imports, directly or through another such file (a shared helper module, another
assignment's input builders); another assignment's other files do not count.
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import re
import stat
from collections.abc import Collection
from pathlib import Path

from ..cellplan import source_text
from ..config import Assignment, Course
from ..layout import INSTRUCTOR_CODE, is_notebook_name
from ..notebooks import RefusedFile, hash_regular, submission_entries
from .lateness import TIMESTAMP_FILE

SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints"}

# The fields of an assignment's course.yml entry that are given per student: each is in the student's own
# grading key (`student_extension`), not in the graders' version every student's key shares.
PER_STUDENT = ("extensions",)


def _followed_into(digest: hashlib._Hash, path: Path) -> None:
    """Feed the bytes of the file at `path` into `digest`, through a symbolic link as Python imports it."""
    try:
        digest.update(path.read_bytes())
    except OSError as exc:
        digest.update(f"unreadable {exc.errno}".encode())


def _tree(digest: hashlib._Hash, root: Path, suffixes: tuple[str, ...] | None = None, *,
          follow: bool = False, notebooks: Collection[str] = (), _seen: frozenset[Path] = frozenset()) -> None:
    """Feed every regular file under `root` (sorted) into `digest`. A symbolic link counts by its kind, or
    with `follow` by its target's bytes when that is a regular file (as Python imports through it) and by
    the files under its target when that is a folder (each folder once on a path, so a link to a folder
    above it ends there). A file named in `notebooks` (a path relative to `root`) counts by what grading
    reads of it (`_notebook_canonical`), or by its bytes when that cannot be read."""
    if not root.is_dir():
        digest.update(b"absent\0")
        return
    seen = _seen | {root.resolve()}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if SKIP_PARTS & set(rel.parts) or path.suffix == ".pyc":
            continue
        if suffixes is not None and path.suffix not in suffixes:
            continue
        mode = path.lstat().st_mode
        if stat.S_ISDIR(mode):
            continue
        digest.update(str(rel).encode() + b"\0")
        canonical = _notebook_canonical(path) if str(rel) in notebooks else None
        if canonical is not None:
            digest.update(b"notebook cells\0" + canonical)
        elif stat.S_ISREG(mode):
            hash_regular(path, digest)
        elif follow and stat.S_ISLNK(mode) and path.is_file():
            digest.update(b"link to\0")
            _followed_into(digest, path)
        elif follow and stat.S_ISLNK(mode) and path.is_dir() and path.resolve() not in seen:
            digest.update(b"link to folder\0")
            _tree(digest, path, suffixes, follow=True, _seen=seen)
        else:
            digest.update(f"mode {stat.S_IFMT(mode)}".encode())
        digest.update(b"\0")


def _notebook_canonical(path: Path) -> bytes | None:
    """What grading reads of the released notebook at `path`, as bytes: in order, every cell that is code or carries
    nbgrader metadata, by its type, source (as one string), nbgrader metadata and, for an nbgrader cell, Jupyter id
    (`notebooks.as_released`, `cellplan.released_sources`, the redefinition and def line notes read no more).
    Markdown and Raw cells without nbgrader metadata, outputs, execution counts, other metadata, the notebook's own
    metadata and the JSON layout are left out: Jupyter saving the release again, or a typo fixed in a Markdown cell,
    grades no one again. None when the file is no notebook that can be read."""
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    except (OSError, ValueError, KeyError, TypeError, IndexError, RecursionError):
        return None
    if not isinstance(cells, list):
        return None
    kept: list[object] = []
    for cell in cells:
        if not isinstance(cell, dict):
            kept.append({"not a cell": cell})
            continue
        meta = cell.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        has_nbgrader = "nbgrader" in meta
        if cell.get("cell_type") != "code" and not has_nbgrader:
            continue
        source = cell.get("source")
        text = source_text(source)
        # a Jupyter id is read only of an nbgrader cell (`notebooks._paired`): a plain code cell's may change
        kept.append({"id": cell.get("id") if has_nbgrader else None, "cell_type": cell.get("cell_type"),
                     "source": source if text is None else text,
                     "nbgrader": meta.get("nbgrader"), "has nbgrader": has_nbgrader})
    try:
        return json.dumps(kept, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogatepass")
    except (TypeError, ValueError, RecursionError):
        return None


def _release_into(digest: hashlib._Hash, course: Course, assignment: Assignment) -> None:
    """Feed the assignment's release (release/<name>/) into `digest`: grading runs its locked and given
    cells as released, so a release made again from a fixed source grades differently. Each of the
    assignment's notebooks counts by what grading reads of it (`_notebook_canonical`), any other file
    (data a notebook may open) by its bytes."""
    digest.update(b"release\0")
    _tree(digest, course.layout.release(assignment.name), notebooks=frozenset(assignment.notebooks))
    digest.update(b"\0")


_MODULE_NAME = re.compile(rf"{INSTRUCTOR_CODE}(\.[A-Za-z_][A-Za-z0-9_]*)+")


def _module_files(root: Path, parts: list[str]) -> list[Path]:
    """The files importing the module `parts` (["assignments", ...]) may run: the __init__.py of each
    package on the way, and the module's own file (a package's __init__.py, or <name>.py)."""
    found: list[Path] = []
    for end in range(1, len(parts) + 1):
        folder = root.joinpath(*parts[:end])
        candidates = [folder / "__init__.py"] + ([folder.with_name(folder.name + ".py")] if end > 1 else [])
        found.extend(candidate for candidate in candidates if candidate.is_file())
    return found


def _submodules(root: Path, parts: list[str]) -> list[str]:
    """The modules of the package `parts` (["assignments", ...]) that `from <it> import *` may import
    (those its `__all__` names, whatever it computes): each <name>.py and each folder holding an
    __init__.py of the package's folder, sorted; [] when it is no package folder."""
    folder = root.joinpath(*parts)
    if not folder.is_dir():
        return []
    names = []
    for child in sorted(folder.iterdir()):
        if child.suffix == ".py" and child.stem != "__init__" and child.stem.isidentifier() and child.is_file():
            names.append(child.stem)
        elif child.is_dir() and child.name.isidentifier() and (child / "__init__.py").is_file():
            names.append(child.name)
    return names


def _imported_modules(root: Path, path: Path, source: bytes) -> list[list[str]]:
    """The modules under assignments/ the file `path` (below `root`) may import, as name parts: its
    `import assignments...` and `from ... import` statements (absolute or relative; each imported name
    also taken for a submodule, and a star import from a package for each of its modules, `_submodules`),
    wherever they are in the file, and any string that reads as such a
    module's dotted name (an importlib.import_module argument). [] when the file does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    package = list(path.relative_to(root).parent.parts)
    modules: list[list[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(alias.name.split(".") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[:len(package) - (node.level - 1)]
            else:
                base = []
            module = base + (node.module.split(".") if node.module else [])
            modules.append(module)
            modules.extend(module + [alias.name] for alias in node.names if alias.name != "*")
            if any(alias.name == "*" for alias in node.names):
                modules.extend(module + [name] for name in _submodules(root, module))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_NAME.fullmatch(node.value):
            modules.append(node.value.split("."))
    return [parts for parts in modules if parts and parts[0] == INSTRUCTOR_CODE]


_RELATIVE_FROM = re.compile(rb"\bfrom\s*((?:\.\s*)+)")
# what may import a module this quick read cannot name: an import by a computed name, an import statement
# continued on the next line with a backslash
_DYNAMIC = re.compile(rb"import_module|__import__|importlib|runpy|exec\s*\(|spec_from|sys\.modules"
                      rb"|(?:^|[;:])[ \t]*(?:from|import)\b[^\n]*\\\r?\n", re.MULTILINE)


def _may_leave(source: bytes, rel: Path, package: str) -> bool:
    """Whether the package's file at `rel` (below assignments/<package>/) may import a file outside the package, read
    cheaply (a superset; parsing every file of the package costs tens of milliseconds a run): it names `assignments`
    other than as `assignments.<package>` or the path `assignments/<package>` (an import, a string, a comment), or a
    relative import in it climbs out of the package."""
    if re.search(rb"\b" + INSTRUCTOR_CODE.encode() + rb"\b(?![./]" + re.escape(package.encode()) + rb"\b)", source):
        return True
    if _DYNAMIC.search(source):         # a name built or escaped in a string, an import split over lines
        return True
    out = len(rel.parts) + 1                # the dots of `from ..` that reach assignments/ from this file
    return any(match.group(1).count(b".") >= out for match in _RELATIVE_FROM.finditer(source))


def imported_helpers(course: Course, assignment: Assignment) -> list[Path]:
    """The files under assignments/ outside assignments/<package>/ that importing the package runs:
    assignments/__init__.py, and what the package's modules import, directly or through one another (a
    static scan of their import statements, see `_imported_modules`), sorted. A file that cannot be read
    or parsed leads to no further file."""
    root = course.root
    package = course.layout.package(assignment.package)
    todo = [path for path in sorted(package.rglob("*.py"))
            if not SKIP_PARTS & set(path.relative_to(package).parts) and path.is_file()]
    todo += _module_files(root, [INSTRUCTOR_CODE])
    seen = set(todo)
    helpers = []
    while todo:
        path = todo.pop()
        if not path.is_relative_to(package):
            helpers.append(path)
        try:
            source = path.read_bytes()
        except OSError:
            continue
        if path.is_relative_to(package) and not _may_leave(source, path.relative_to(package), package.name):
            continue                   # what it imports is in the package, whose every file counts already
        for parts in _imported_modules(root, path, source):
            for found in _module_files(root, parts):
                if found not in seen:
                    seen.add(found)
                    todo.append(found)
    return sorted(helpers)


def _helpers_into(digest: hashlib._Hash, course: Course, assignment: Assignment) -> None:
    """Feed the files `imported_helpers` finds into `digest`, each by its path and bytes (as Python
    imports it: a symbolic link is followed)."""
    digest.update(b"imported\0")
    for path in imported_helpers(course, assignment):
        digest.update(course.layout.relative(path).encode() + b"\0")
        _followed_into(digest, path)
        digest.update(b"\0")


def graders_version(course: Course, assignment: Assignment) -> str:
    """A hash of the engine, the assignment's instructor code and the files under assignments/ it
    imports, its release and its course.yml entry but for what it gives single students (`PER_STUDENT`)."""
    import autograder

    digest = hashlib.sha256()
    digest.update(f"engine {autograder.__version__}\0".encode())
    _tree(digest, Path(autograder.__file__).resolve().parent, (".py", ".html"))
    _release_into(digest, course, assignment)
    _helpers_into(digest, course, assignment)
    digest.update(b"instructor\0")
    package = course.layout.package(assignment.package)
    init = package.parent / "__init__.py"
    if init.is_file():                  # through a symbolic link, as Python imports it
        _followed_into(digest, init)
    _tree(digest, package, follow=True)
    shared = {f.name: getattr(assignment, f.name) for f in dataclasses.fields(assignment)
              if f.name not in PER_STUDENT}
    digest.update(b"config\0" + repr(shared).encode())
    return digest.hexdigest()


def student_extension(assignment: Assignment, student: str) -> str:
    """What the assignment's course.yml entry gives `student` alone, for their grading key: the length of
    their extension in seconds, however written (`{days: 2}` and `{hours: 48}` are one key; "" without
    one, or with one of no time, which grades as none)."""
    extension = assignment.extensions.get(student)
    return f"{extension.delta.total_seconds()!r} s" if extension is not None and extension.delta else ""


def course_version(course: Course, assignment: Assignment) -> str:
    """`graders_version` with every student's extension: what two machines grading the same batch
    (a Dask cluster's) must agree on."""
    per_student = {name: getattr(assignment, name) for name in PER_STUDENT}
    return hashlib.sha256(f"{graders_version(course, assignment)}\0{per_student!r}".encode()).hexdigest()


def submission_hash(folder: Path) -> str:
    """A hash of what grading reads from one submission folder."""
    digest = hashlib.sha256()
    for name, mode in submission_entries(folder):
        if not (is_notebook_name(name) or name == TIMESTAMP_FILE):
            continue
        digest.update(f"{name}\0{stat.S_IFMT(mode)}\0".encode())
        if stat.S_ISREG(mode):
            try:
                hash_regular(folder / name, digest)
            except RefusedFile as exc:
                digest.update(f"refused: {exc}".encode())
        digest.update(b"\0")
    return digest.hexdigest()


KEY_SEPARATOR = "/"


GRADERS_TAG_LENGTH = 16     # hex digits of the graders' version a key carries: enough to tell two apart


def grading_key(graders: str, submission: str, *, seed: int, on_roster: bool,
                isolation: tuple[str, ...] = (), extension: str = "") -> str:
    """The key stored with a result: equal keys mean grading again would give the same result. It
    ends with the start of the graders' version (`graders_of`) and the submission's own hash
    (`submission_of`), so a later run can tell a new submission from the same one graded again
    under other graders (a course.yml change, --force), and new graders from another extension
    (`student_extension`), seed, roster status or sandbox."""
    text = (f"graders {graders}\0submission {submission}\0seed {seed}\0roster {on_roster}"
            f"\0isolation {','.join(sorted(isolation))}" + (f"\0extension {extension}" if extension else ""))
    return (f"{hashlib.sha256(text.encode()).hexdigest()}{KEY_SEPARATOR}{graders[:GRADERS_TAG_LENGTH]}"
            f"{KEY_SEPARATOR}{submission}")


def submission_of(key: str) -> str:
    """The submission hash a grading key ends with ("" for a key without one)."""
    _, sep, submission = key.rpartition(KEY_SEPARATOR)
    return submission if sep else ""


def graders_of(key: str) -> str:
    """The start of the graders' version a grading key carries ("" for a key without one: empty, or
    written before keys held it)."""
    parts = key.split(KEY_SEPARATOR)
    return parts[1] if len(parts) == 3 else ""


def regraded(before: str, graders: str) -> bool:
    """Whether the result keyed `before` was graded under other graders than `graders` (the engine,
    the assignment's instructor code or its course.yml entry changed since); False when the key does
    not tell."""
    old = graders_of(before)
    return bool(old) and old != graders[:GRADERS_TAG_LENGTH]


def resubmitted(before: str, now: str) -> bool:
    """Whether the submission graded under key `now` differs from the one graded under `before` (False
    when either key does not tell: empty, or written before keys held the submission hash)."""
    old, new = submission_of(before), submission_of(now)
    return bool(old and new) and old != new
