"""course.yml parsing: typed objects from a good file, one-line errors naming the key path from bad ones."""
from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from autograder import config
from autograder.config import course_data, load_course, parse_yaml
from autograder.errors import ConfigError
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[1]

GOOD = {
    "name": "Test course",
    "roster": "roster.csv",
    "defaults": {"tolerances": {"float64": {"rtol": 1e-7, "atol": 1e-9}, "float32": {"rtol": 1e-4, "atol": 1e-5}},
                 "limits": {"cell_seconds": 5}},
    "assignments": [{
        "name": "hw",
        "package": "hw",
        "notebooks": ["hw.ipynb"],
        "due": "2026-12-14T23:59:00+00:00",
        "problems": {"layer_norm": {"points": 10},
                     "silu": {"points": 5, "tolerances": {"float32": {"rtol": 1e-3}}}},
    }],
}


def make_course(tmp_path: Path, data) -> Path:
    layout = CourseLayout(tmp_path)
    layout.source("hw").mkdir(parents=True)
    (layout.source("hw") / "hw.ipynb").write_text("{}")
    layout.package("hw").mkdir(parents=True)
    (tmp_path / "roster.csv").write_text("id,first_name\nada,Ada\nbob,Bob\n")
    text = data if isinstance(data, str) else yaml.safe_dump(data)
    layout.config.write_text(text)
    return tmp_path


def error_for(tmp_path: Path, data) -> str:
    with pytest.raises(ConfigError) as info:
        load_course(make_course(tmp_path, data))
    message = str(info.value)
    assert "\n" not in message, "config errors are one line"
    return message


def mutate(path: str, value, *, delete: bool = False):
    import copy

    data = copy.deepcopy(GOOD)
    keys = path.split(".")
    node = data
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    last = int(keys[-1]) if isinstance(node, list) else keys[-1]
    if delete:
        del node[last]
    elif isinstance(node, list) and last == len(node):
        node.append(value)
    else:
        node[last] = value
    return data


def test_config_good_file_gives_typed_objects(tmp_path):
    """Does a valid course.yml load into assignments, problems, tolerances and limits?"""
    course = load_course(make_course(tmp_path, GOOD))
    a = course.assignment("hw")
    assert [p.name for p in a.problems] == ["layer_norm", "silu"]
    assert a.max_score == 15
    assert a.problem("silu").tolerance("float32").rtol == 1e-3
    assert a.problem("silu").tolerance("float32").atol == 1e-5, "unset keys inherit the default"
    assert a.problem("layer_norm").grade_id == "test_layer_norm"
    assert a.limits.cell_seconds == 5 and a.limits.call_seconds == 10
    assert a.due.year == 2026
    assert course.roster() == ("ada", "bob")
    assert course.gradebook_url == f"sqlite:///{tmp_path.resolve() / 'gradebook.db'}"


def test_config_extensions_exchange_and_roster_details(tmp_path):
    """Do extensions give a student their own due date, the exchange a course-relative folder, and the
    roster each student's name and email?"""
    data = mutate("assignments.0.extensions", {"ada": {"days": 2, "hours": 6}})
    data["exchange"] = "../exchange"
    course = load_course(make_course(tmp_path, data))
    (tmp_path / "roster.csv").write_text("id,first_name,last_name,email\nada,Ada,Lovelace,ada@example.edu\nbob,,,\n")
    a = course.assignment("hw")
    assert a.due_for("ada") == a.due + dt.timedelta(days=2, hours=6)
    assert a.due_for("bob") == a.due
    assert a.extensions["ada"].describe() == "2 days and 6 hours"
    assert course.exchange == tmp_path.resolve() / "../exchange"
    ada, bob = course.students()
    assert (ada.first_name, ada.last_name, ada.email) == ("Ada", "Lovelace", "ada@example.edu")
    assert (bob.id, bob.email) == ("bob", "")


def test_config_the_shipped_course_file_loads():
    """Does the repository's own course.yml load, with one problem per solution cell of the source, in order?"""
    course = load_course(ROOT)
    a = course.assignment("transformer-block")
    source = json.loads((CourseLayout(ROOT).source(a.name) / a.notebooks[0]).read_text(encoding="utf-8"))
    solutions = [c["metadata"]["nbgrader"]["grade_id"].removesuffix("_solution") for c in source["cells"]
                 if c["metadata"].get("nbgrader", {}).get("solution")]
    assert [p.name for p in a.problems] == solutions


def test_config_the_shipped_course_file_reads_the_same_with_either_yaml_loader():
    """Does course.yml read with libyaml's loader (used where PyYAML has it) give the same data as
    PyYAML's pure-Python safe loader?"""
    text = (ROOT / "course.yml").read_text(encoding="utf-8")
    assert parse_yaml(text) == parse_yaml(text, yaml.SafeLoader) == yaml.safe_load(text)


def test_config_course_yml_read_back_from_the_cache_is_the_same(tmp_path, monkeypatch):
    """Is course.yml's data, read back from the user's cache by a later command, exactly what
    PyYAML reads (a later read does not parse), dates and times included; and are data that JSON
    would change (sets, NaN, bytes) never cached?"""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # a cache of this test's own
    shipped = (ROOT / "course.yml").read_text(encoding="utf-8")
    for text in (shipped, "due: 2026-12-14 23:59:00+01:30\nday: 2026-12-14\nnaive: 2026-12-14 08:00:00.5\n"):
        assert repr(course_data(text)) == repr(yaml.safe_load(text))
        with monkeypatch.context() as m:
            m.setattr(config, "parse_yaml", lambda *a: pytest.fail("parsed again"))
            assert repr(course_data(text)) == repr(yaml.safe_load(text))
    assert course_data("1: one\n") == {"1": "one"}                  # a key is its text (`_unique_keys`)
    for odd in ("x: .nan\n", "s: !!set {a, b}\n", "b: !!binary aGk=\n"):
        assert repr(course_data(odd)) == repr(yaml.safe_load(odd))
        with monkeypatch.context() as m:
            m.setattr(config, "parse_yaml", lambda *a: pytest.fail("not cached"))
            with pytest.raises(pytest.fail.Exception, match="not cached"):
                course_data(odd)


def _tolerances_text(float64: tuple[str, str], float32: tuple[str, str]) -> str:
    """A course.yml (GOOD's) whose default tolerances are written as the given texts."""
    text = yaml.safe_dump({k: v for k, v in GOOD.items() if k != "defaults"})
    return (text + f"defaults:\n  tolerances:\n    float64: {{rtol: {float64[0]}, atol: {float64[1]}}}\n"
            f"    float32: {{rtol: {float32[0]}, atol: {float32[1]}}}\n")


def test_config_tolerances_written_as_docs_config_md_shows_them_load(tmp_path):
    """Do the default tolerances written in course.yml as docs/config.md shows them (`1e-07`: no dot, which
    YAML 1.1 reads as text) load as those numbers, as the form with a dot and a signed exponent (`1.0e-7`) does,
    by either YAML loader and from the cache; while a quoted "1e-07" is still text, refused in one line?"""
    import re

    docs = (ROOT / "docs" / "config.md").read_text().splitlines()
    row = next(ln for ln in docs if ln.startswith("| `tolerances`") and "rtol" in ln)
    shown = re.findall(r"`([^`]+)`", row.split("|")[3])               # rtol, atol of float64, then float32
    assert shown == ["1e-07", "1e-09", "0.0001", "1e-05"], row
    docs_form = _tolerances_text((shown[0], shown[1]), (shown[2], shown[3]))
    dotted = _tolerances_text(("1.0e-7", "1.0e-9"), ("1.0e-4", "1.0e-5"))
    assert parse_yaml(docs_form) == parse_yaml(docs_form, yaml.SafeLoader) == parse_yaml(dotted)
    for n, text in enumerate((docs_form, dotted, docs_form)):     # the last read back from the cache
        a = load_course(make_course(tmp_path / str(n), text)).assignment("hw")
        got = [(t.rtol, t.atol) for t in (a.problems[0].tolerance("float64"), a.problems[0].tolerance("float32"))]
        assert got == [(1e-7, 1e-9), (1e-4, 1e-5)], text
    assert parse_yaml("a: 1E5\nb: -2.5e3\nc: .5e+1\nd: 1e\ne: e5\nf: 1e5x\n") == {
        "a": 100000.0, "b": -2500.0, "c": 5.0, "d": "1e", "e": "e5", "f": "1e5x"}
    quoted = docs_form.replace("rtol: 1e-07", 'rtol: "1e-07"')
    assert error_for(tmp_path / "quoted", quoted) == \
        'course.yml: defaults.tolerances.float64.rtol: expected a number >= 0, got "1e-07"'


@pytest.mark.parametrize("name, package", [("hw.2", "hw.2"), ("02-hw", "02_hw")])
def test_config_a_package_derived_from_the_name_must_be_an_identifier(tmp_path, name, package):
    """With no `package:`, is a name whose package (the name with - as _) graders could not import
    refused in one line naming `package`, even when its folders exist?"""
    import copy

    data = copy.deepcopy(GOOD)
    del data["assignments"][0]["package"]
    data["assignments"][0]["name"] = name
    layout = CourseLayout(make_course(tmp_path, data))
    layout.source("hw").rename(layout.source(name))
    layout.package("hw").rename(layout.package(package))
    with pytest.raises(ConfigError) as info:
        load_course(tmp_path)
    assert str(info.value) == (f'course.yml: assignments[0].package: "{package}" (the assignment\'s name with - as _) '
                               f"is not a Python identifier, which graders import it as: set `package:` to one "
                               f"(letters, digits and _, not first a digit)")


def test_config_invalid_yaml_names_the_line(tmp_path):
    """Is a course.yml that is not valid YAML one error naming its line?"""
    course = make_course(tmp_path, "name: x\nassignments: [\n  - name: hw\n  bad: : :\n")
    with pytest.raises(ConfigError, match=r"^course\.yml: line \d+: not valid YAML \("):
        load_course(course)


@pytest.mark.parametrize("loader", ["CSafeLoader", "SafeLoader"])
@pytest.mark.parametrize("text, line, column", [
    ("name: x\nassignments:\n\t- name: hw\n", 3, 1),           # libyaml: "cannot start any token"
    ("name: x\nlimits:\n  a: 1\n  \tb: 2\n", 4, 3),            # libyaml: "violates indentation"
])
def test_config_tab_in_yaml_is_named(text, line, column, loader):
    """Is a tab where YAML refuses one named as a tab (YAML indents with spaces), whichever loader read it?"""
    with pytest.raises(ConfigError) as info:
        config.parse_yaml(text, getattr(yaml, loader))
    assert str(info.value) == (f"course.yml: line {line}: not valid YAML (a tab character at column {column}; YAML "
                               f"indents with spaces)")


def test_config_yaml_error_elsewhere_keeps_the_parsers_words():
    """Is a YAML error at another character than a tab (here after one) still given in the parser's words?"""
    with pytest.raises(ConfigError) as info:
        config.parse_yaml("name: x\tcolour: blue\n", yaml.CSafeLoader)
    assert str(info.value) == "course.yml: line 1: not valid YAML (mapping values are not allowed in this context)"


@pytest.mark.parametrize("data, expected", [
    (mutate("assignments.0.problems.layer_norm.points", "ten"),
     'assignments[0].problems.layer_norm.points: expected a positive number of at most 1000000, got "ten"'),
    (mutate("assignments.0.problems.layer_norm.points", -3),
     "assignments[0].problems.layer_norm.points: expected a positive number of at most 1000000, got -3"),
    (mutate("assignments.0.notebooks", None, delete=True), "assignments[0].notebooks: missing (required)"),
    (mutate("name", None, delete=True), "name: missing (required)"),
    (mutate("assignments.0.problems.layer_norm.pointz", 3),
     "assignments[0].problems.layer_norm.pointz: unknown key"),
    (mutate("colour", "blue"), "colour: unknown key"),
    (mutate("defaults.tolerances.float64.rtol", -1e-6),
     "defaults.tolerances.float64.rtol: expected a number >= 0, got -1e-06"),
    (mutate("assignments.0.problems.silu.tolerances.float32.atol", -1),
     "assignments[0].problems.silu.tolerances.float32.atol: expected a number >= 0, got -1"),
    (mutate("assignments.0.problems", ["layer_norm"]),
     "assignments[0].problems: expected a mapping of problem name to settings, got a list"),
    (mutate("assignments", {}), "assignments: expected a non-empty list"),
    (mutate("assignments.0.due", "next tuesday"), "assignments[0].due: expected an ISO date-time"),
    (mutate("defaults.limits.memory_mb", "lots"),
     'defaults.limits.memory_mb: expected a positive integer of at most 1048576, got "lots"'),
    (mutate("defaults.limits.memory_mb", 2048.5),
     "defaults.limits.memory_mb: expected a positive integer of at most 1048576, got 2048.5"),
    (mutate("defaults.limits.max_notes", 50),
     "defaults.limits.max_notes: expected a positive integer of at most 40, got 50"),
    (mutate("defaults.tolerances.float16", {"rtol": 1e-3}), "defaults.tolerances.float16: unknown key"),
    (mutate("assignments.0.problems.silu.notebook", "other.ipynb"),
     "assignments[0].problems.silu.notebook: expected one of the assignment's notebooks (hw.ipynb)"),
    (mutate("assignments.0.problems.silu.grade_id", "test_layer_norm"),
     "assignments[0].problems.silu.grade_id: 'test_layer_norm' is already used by problem 'layer_norm'"),
    (mutate("assignments.0.problems.3d", {"points": 1}), 'assignments[0].problems.3d: expected a Python identifier'),
    (mutate("assignments.0.notebooks", []), "assignments[0].notebooks: expected a non-empty list, got an empty list"),
    (mutate("assignments.0.notebooks", ["hw.txt"]),
     'assignments[0].notebooks[0]: expected a notebook file name ending in .ipynb, got "hw.txt"'),
    (mutate("assignments.0.late_policy", {"penalty_per_day": 1.5}),
     "assignments[0].late_policy.penalty_per_day: expected a fraction between 0 and 1, got 1.5"),
    (mutate("assignments.1", {"name": "hw", "notebooks": ["hw.ipynb"], "problems": {"silu": {"points": 1}}}),
     "assignments[1].name: 'hw' is used twice"),
    (mutate("defaults.limits.cell_seconds", True),
     "defaults.limits.cell_seconds: expected a positive number of at most 604800, got True"),
    ("name: [unclosed", "not valid YAML"),
    (mutate("assignments.0.extensions", {"ada": {"days": -1}}),
     "assignments[0].extensions.ada.days: expected a number >= 0, got -1"),
    (mutate("assignments.0.extensions", {"ada": {"weeks": 1}}), "assignments[0].extensions.ada.weeks: unknown key"),
    (mutate("assignments.0.extensions", ["ada"]), "assignments[0].extensions: expected a mapping, got a list"),
    (mutate("assignments.0.problems.silu", 4),
     "assignments[0].problems.silu: expected a mapping, got 4 (a problem's points go under its name: "
     "`silu: {points: 4}`)"),
    (mutate("sandbox_cpus", "sometimes"), 'sandbox_cpus: expected one of spread, off, got "sometimes"'),
])
def test_config_bad_file_names_the_key_path(tmp_path, data, expected):
    """Does each broken course.yml give one line naming the key path and what was expected?"""
    message = error_for(tmp_path, data)
    assert message.startswith("course.yml")
    assert expected in message


@pytest.mark.parametrize("path, expected, largest, too_large", [
    ("defaults.limits.memory_mb", "a positive integer of at most 1048576", 2**20, 2**43),
    ("defaults.limits.scratch_mb", "a positive integer of at most 1048576", 2**20, 2**44),
    ("defaults.limits.notebook_mb", "a positive number of at most 1048576", 2**20, 1e300),
    ("defaults.limits.return_mb", "a positive number of at most 1048576", 2**20, 1e18),
    ("defaults.limits.output_kb", "an integer between 0 and 1048576", 2**20, 2**54),
    ("defaults.limits.processes", "a positive integer of at most 4194304", 2**22, 2**63),
    ("defaults.limits.max_restarts", "an integer between 0 and 1000", 1000, 10**12),
    ("defaults.limits.cell_seconds", "a positive number of at most 604800", 604800, 1e10),
    ("defaults.limits.total_seconds", "a positive number of at most 604800", 604800, 604800.5),
    ("defaults.limits.call_seconds", "a positive number of at most 604800", 604800, 1e308),
    ("defaults.limits.submission_seconds", "a positive number of at most 604800", 604800, 2**70),
    ("assignments.0.problems.layer_norm.points", "a positive number of at most 1000000", 10**6, 1e308),
])
def test_config_a_number_past_what_grading_can_take_names_the_key_and_the_range(tmp_path, path, expected, largest,
                                                                                too_large):
    """Is a limit or points value too large for the sandbox's rlimits, its waits or the reports' sums (memory_mb
    2**43 once failed as a sandbox that could not start, points 1e308 as an OverflowError after grading) one line
    naming course.yml, the key and the range allowed, while the largest value allowed loads?"""
    key = path.replace("assignments.0", "assignments[0]")
    message = error_for(tmp_path / "big", mutate(path, too_large))
    assert message == f"course.yml: {key}: expected {expected}, got {too_large!r}"
    course = load_course(make_course(tmp_path / "largest", mutate(path, largest)))
    if path.startswith("defaults.limits."):
        assert getattr(course.assignments[0].limits, path.rsplit(".", 1)[-1]) == largest
    else:
        assert course.assignments[0].problem("layer_norm").points == largest


@pytest.mark.parametrize("text", [".inf", "-.inf", ".nan", "1e400"])
def test_config_a_number_that_is_not_finite_names_the_key(tmp_path, text):
    """Is an infinite or NaN limit refused in one line naming the key and the range?"""
    data = yaml.safe_dump(GOOD).replace("cell_seconds: 5", f"cell_seconds: {text}")
    message = error_for(tmp_path, data)
    assert message.startswith("course.yml: defaults.limits.cell_seconds: expected a positive number of at most "
                              "604800, got ")


def test_config_an_assignment_not_set_up_stops_only_what_asks_for_it(tmp_path):
    """With a second assignment declared before its instructor code and source notebook exist, does the
    course still load and give the first assignment, while asking for the second is one line naming it,
    its key in course.yml and the folder missing, and `setup_problems` lists every missing part?"""
    data = mutate("assignments.1", {"name": "activations", "notebooks": ["activations.ipynb", "extra.ipynb"],
                                    "problems": {"relu": {"points": 4}}})
    course = load_course(make_course(tmp_path, data))
    assert course.assignment("hw").name == "hw" and course.setup_problems(course.entry("hw")) == ()
    with pytest.raises(ConfigError) as info:
        course.assignment("activations")
    assert str(info.value) == ("course.yml: assignments[1].package: assignment activations: folder "
                               "assignments/activations does not exist (its reference and graders go there)")
    CourseLayout(tmp_path).package("activations").mkdir(parents=True)
    (CourseLayout(tmp_path).source("activations")).mkdir(parents=True)
    (CourseLayout(tmp_path).source("activations") / "extra.ipynb").write_text("{}")
    assert course.setup_problems(course.entry("activations")) == (
        "course.yml: assignments[1].notebooks[0]: assignment activations: source notebook "
        "source/activations/activations.ipynb does not exist",)
    with pytest.raises(ConfigError, match=r"^course\.yml: assignments\[1\]\.notebooks\[0\]: assignment activations: "):
        course.assignment("activations")
    (CourseLayout(tmp_path).source("activations") / "activations.ipynb").write_text("{}")
    assert course.assignment("activations").notebooks == ("activations.ipynb", "extra.ipynb")


@pytest.mark.parametrize("where, message", [
    ("package", "assignments[0].package: assignment hw: folder assignments/hw does not exist"),
    ("notebook", "assignments[0].notebooks[0]: assignment hw: source notebook source/hw/hw.ipynb does not exist"),
])
def test_config_a_missing_package_or_notebook_is_named_when_the_assignment_is_asked_for(tmp_path, where, message):
    """Is an assignment whose instructor-code folder or source notebook is gone refused in one line
    naming the key, the path and the assignment, when a command asks for it?"""
    layout = CourseLayout(make_course(tmp_path, GOOD))
    if where == "package":
        layout.package("hw").rmdir()
    else:
        (layout.source("hw") / "hw.ipynb").unlink()
    course = load_course(tmp_path)
    with pytest.raises(ConfigError) as info:
        course.assignment("hw")
    assert str(info.value).startswith(f"course.yml: {message}")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("copied, index, first", [
    ({"name": "hw", "notebooks": ["activations.ipynb"], "problems": {"relu": {"points": 4}}}, 1, 0),
    ({"name": "hw", "package": "activations", "notebooks": ["hw.ipynb"], "problems": {"silu": {"points": 1}}}, 1, 0),
])
def test_config_an_entry_copied_and_not_renamed_is_a_name_used_twice(tmp_path, copied, index, first):
    """When an instructor copies an assignment's entry for a new one and edits its notebooks or package
    but not its name, is the error that the name is used twice, naming both keys, rather than that
    the copy's notebook or folder does not exist?"""
    message = error_for(tmp_path, mutate(f"assignments.{index}", copied))
    assert message.startswith(f"course.yml: assignments[{index}].name: 'hw' is used twice (also "
                              f"assignments[{first}].name): each assignment needs a name of its own")


def test_config_a_copy_renamed_to_another_assignments_name_is_a_name_used_twice(tmp_path):
    """With three entries, the third a copy of the first renamed to the second's name (whose folders
    hold other notebooks), is the error the name used twice, naming both keys?"""
    data = mutate("assignments.1", {"name": "activations", "notebooks": ["activations.ipynb"],
                                    "problems": {"relu": {"points": 4}}})
    data["assignments"].append({**data["assignments"][0], "name": "activations", "notebooks": ["hw2.ipynb"]})
    message = error_for(tmp_path, data)
    assert message.startswith("course.yml: assignments[2].name: 'activations' is used twice (also "
                              "assignments[1].name)")


@pytest.mark.parametrize("other", ["HW", "Hw"])
def test_config_names_that_differ_only_in_case_are_refused(tmp_path, other):
    """With `hw` and a second assignment `HW` (one folder under source/ on macOS and Windows), is the
    error one line naming both keys and both names, on this machine too, before any folder is looked for?"""
    data = mutate("assignments.1", {**GOOD["assignments"][0], "name": other, "notebooks": ["hw2.ipynb"]})
    message = error_for(tmp_path, data)
    assert message.startswith(f"course.yml: assignments[1].name: {other!r} differs from assignments[0].name 'hw' "
                              f"only in case: on a file system that ignores case (macOS, Windows) both would use "
                              f"{CourseLayout(Path()).source(other)}/")
    assert "is used twice" not in message


def test_config_names_that_differ_beyond_case_load(tmp_path):
    """Are `hw` and `hw1` (unlike `hw` and `HW`) two assignments of one course?"""
    data = mutate("assignments.1", {**GOOD["assignments"][0], "name": "hw1", "notebooks": ["hw.ipynb"]})
    course = load_course(make_course(tmp_path, data))
    assert [a.name for a in course.assignments] == ["hw", "hw1"]


@pytest.mark.parametrize("due", ["2026-12-14", '"2026-12-14"'])
def test_config_a_due_date_alone_is_the_end_of_that_day(tmp_path, monkeypatch, due):
    """Is `due:` given as a date alone the end of that day, 23:59:59 UTC, whether YAML reads it as a
    date (unquoted) or a string (quoted), rather than the start of the day when quoted?"""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # a cache of this test's own
    text = yaml.safe_dump(GOOD).replace("due: '2026-12-14T23:59:00+00:00'", f"due: {due}")
    assert f"due: {due}\n" in text
    a = load_course(make_course(tmp_path, text)).assignment("hw")
    assert a.due == dt.datetime(2026, 12, 14, 23, 59, 59, tzinfo=dt.UTC)


@pytest.mark.parametrize("due", ["2026-02-30T10:00:00", "2026-01-01T24:00:00", "2026-13-01T10:00:00",
                                 "2026-01-01T10:00:00+99:00", "2026-02-30"])
def test_config_a_due_date_that_does_not_exist_names_the_key(tmp_path, monkeypatch, due):
    """Is an unquoted `due:` that YAML reads as a date or date-time but that does not exist (February 30,
    hour 24, month 13, an offset of 99 hours) one line naming the key, as `due: tomorrow` is, rather than
    PyYAML's ValueError?"""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # a cache of this test's own
    text = yaml.safe_dump(GOOD).replace("due: '2026-12-14T23:59:00+00:00'", f"due: {due}")
    assert f"due: {due}\n" in text
    message = error_for(tmp_path, text)
    assert message.startswith(f'course.yml: assignments[0].due: "{due}" is written as an ISO date-time but no such '
                              f'date or time exists (') and "\n" not in message


@pytest.mark.parametrize("due, days", [(None, 1e12), ("9999-12-30T00:00:00", 2)])
def test_config_an_extension_past_the_last_date_names_the_key(tmp_path, due, days):
    """Is an extension whose due date cannot be computed (too many days, or past the year 9999) one line
    naming it, rather than an OverflowError while grading?"""
    data = mutate("assignments.0.extensions", {"ada": {"days": days}})
    data["assignments"][0]["due"] = due
    message = error_for(tmp_path, data)
    assert message.startswith("course.yml: assignments[0].extensions.ada: ")
    assert "beyond the last date" in message


def test_config_error_is_one_line_from_the_command(tmp_path):
    """Does the `course` command print a broken config as one line, no traceback, exit code 2?"""
    course = make_course(tmp_path, mutate("assignments.0.problems.layer_norm.points", "ten"))
    proc = subprocess.run([sys.executable, "-m", "autograder.cli", "release", "hw", "--course-dir", str(course)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        'course: error: course.yml: assignments[0].problems.layer_norm.points: expected a positive number of '
        'at most 1000000, got "ten"']
    assert "Traceback" not in proc.stderr + proc.stdout


def test_config_missing_file_is_one_line(tmp_path):
    """Does a folder without course.yml give a one-line error naming the file?"""
    with pytest.raises(ConfigError, match=r"course\.yml: not found"):
        load_course(tmp_path)
    (tmp_path / "course.yml").mkdir()
    with pytest.raises(ConfigError, match=r"course\.yml: not a file$"):
        load_course(tmp_path)


def test_config_partial_mappings_inherit_and_null_means_default(tmp_path):
    """Does an assignment's partial `limits` keep the course defaults, and does `key: null` take the default?"""
    data = mutate("assignments.0.limits", {"call_seconds": 3})
    data["course_id"] = None
    a = load_course(make_course(tmp_path, data)).assignment("hw")
    assert (a.limits.cell_seconds, a.limits.call_seconds) == (5, 3), "defaults.limits.cell_seconds is 5 in GOOD"
    assert a.limits.total_seconds == 180, "a key set nowhere takes its declared default"
    assert load_course(tmp_path).course_id == "course"


def test_config_reference_page_is_up_to_date():
    """Is docs/config.md what the declarations in autograder/config.py generate?"""
    from autograder.config import reference

    committed = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == reference(), "regenerate it: python -m autograder.config > docs/config.md"


@pytest.mark.parametrize("loader", [None, yaml.SafeLoader])
def test_config_a_key_given_twice_is_an_error_naming_both_lines(tmp_path, monkeypatch, loader):
    """Is a key given twice in one mapping of course.yml (an edit that adds a problem's new points below
    the old line, or a second `due:`) an error naming the line of each, rather than the last one silently
    winning, with either YAML loader and through the user's cache?"""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))       # a cache of this test's own
    text = "a: 1\nproblems:\n  layer_norm: {points: 12}\n  silu: {points: 5}\n  layer_norm: {points: 3}\n"
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, loader)
    assert str(info.value) == "course.yml: line 5: not valid YAML (key 'layer_norm' given twice, first on line 3)"
    with pytest.raises(ConfigError, match="key 'a' given twice, first on line 1"):
        course_data("a: 1\nb: 2\na: 3\n")
    good = "base: &b {x: 1}\nmerged:\n  <<: *b\n  y: 2\nlist: [{a: 1}, {a: 2}]\n"    # merge keys, same key in two maps
    assert parse_yaml(good, loader) == yaml.safe_load(good)
    folder = make_course(tmp_path / "c", yaml.safe_dump(GOOD) + "name: Other title\n")
    with pytest.raises(ConfigError, match=r"^course.yml: line \d+: not valid YAML \(key 'name' given twice"):
        load_course(folder)


@pytest.mark.parametrize("roster, error", [
    ("id;first_name;last_name;email\nada;Ada;Lovelace;ada@x.edu\n",
     'roster.csv: line 1: "id;first_name;last_name;email" is not a student id: it holds a \';\'; a CSV roster is '
     "comma-separated, with an 'id' column, otherwise one id per line"),
    ("id,first_name\nada,Ada\nbob,Bob\nada,Ada L.\n",
     "roster.csv: line 4: student 'ada' is listed twice (first on line 2)"),
    ("ada\n\nbob\nada\n", "roster.csv: line 4: student 'ada' is listed twice (first on line 1)"),
    ("ID,First Name\nada,Ada\n", "roster.csv: line 1: expected an 'id' column in the comma-separated header"),
    ("ada lovelace\n", 'roster.csv: line 1: "ada lovelace" is not a student id: it holds a space; a CSV'),
    ("ada\nbob\tBob\n", 'roster.csv: line 2: "bob\tBob" is not a student id: it holds a tab; a CSV'),
    ("id,first_name\nada,Ada\nb/ob,Bob\n", 'roster.csv: line 3: "b/ob" is not a student id: it holds a \'/\'; a CSV'),
    ("id,first_name\nada,Ada\nzoe,Zo\xeb\n".encode("latin-1"),
     "roster.csv: line 3: not UTF-8 (byte 0xeb at offset 28)"),
    ('id,first_name\nada,"Ada\nMarie"\n\nbob,Bob\nada,"A.\nL."\nbob,"B.\n\nB."\n',
     "roster.csv: line 6: student 'ada' is listed twice (first on line 2)"),
    ('id\nada\n"' + "x" * 200_000, "roster.csv: line 3: not valid CSV (field larger than field limit"),
    ("id,first_name,email\nada,Ada,\n,,\n,Bob,bob@x.edu\n",
     'roster.csv: line 4: a student with no id (first_name "Bob", email "bob@x.edu"); give each student an id'),
    ("id,firstname,last_name\nada,Ada,Lovelace\n",
     "roster.csv: line 1: column \"firstname\" is not one the roster reads; did you mean 'first_name'?"),
    ("id,First Name,SIS User ID\nada,Ada,S1\n",
     "roster.csv: line 1: column \"First Name\" is not one the roster reads; did you mean 'first_name'?"),
    ("\nid,e-mail\nada,ada@x.edu\n",
     "roster.csv: line 2: column \"e-mail\" is not one the roster reads; did you mean 'email'?"),
    ("id,first_name,email\nada,Ada,a@x.edu\nid,first_name,email\nbob,Bob,b@x.edu\n",
     "roster.csv: line 3: the header row again (id 'id'), not a student; remove the line"),
    ("id,first_name\nada,Ada\n.hidden,Hid\n",
     "roster.csv: line 3: \".hidden\" is not a student id: it starts with '.', and a hidden folder under submitted/ "
     "is never graded (nbgrader skips it); remove the '.'"),
    ("ada\n.bob\n", "roster.csv: line 2: \".bob\" is not a student id: it starts with '.'"),
    ("id,first_name,email\nada,Ada,Lovelace,ada@x.edu\n",
     "roster.csv: line 2: 4 values for the header's 3 columns (id, first_name, email); add the missing column to "
     "line 1, or quote a value that holds a comma"),
])
def test_config_a_roster_that_cannot_be_read_as_meant_is_an_error_naming_the_line(tmp_path, roster, error):
    """Is a roster separated by `;` (read as one id per line, it would put a student named
    "id;first_name;..." in the gradebook), a student listed twice (the later row would replace the first's
    name and email), a header without `id`, a student without an id (never graded nor in the gradebook; a
    row of empty cells is no student), a column misspelt or spelt as an LMS does ("firstname", "SIS User
    ID": it would be left unread), or a file that is not UTF-8 (saved as Latin-1) an error naming the line
    (the line a record starts on, when a quoted name before it holds a line break)?"""
    course = load_course(make_course(tmp_path, GOOD))
    (tmp_path / "roster.csv").write_bytes(roster if isinstance(roster, bytes) else roster.encode())
    with pytest.raises(ConfigError) as info:
        course.students()
    assert str(info.value).startswith(error) and "\n" not in str(info.value)


def test_config_a_roster_keeps_columns_of_its_own_unread(tmp_path):
    """Are columns nothing like the roster's own (an LMS's "Student", "Notes", "Canvas ID") left alone, the
    student read as without them?"""
    course = load_course(make_course(tmp_path, GOOD))
    (tmp_path / "roster.csv").write_text("id,Student,first_name,Notes,Canvas ID\nada,x,Ada,late joiner,12\n")
    assert [(s.id, s.first_name) for s in course.students()] == [("ada", "Ada")]


def test_config_roster_columns_are_the_roster_s_own_the_file_has(tmp_path):
    """Does `roster_columns` give the roster's own optional columns the header has (the ones whose blank cell
    clears the gradebook's value), none for a roster of one id per line, with the same students as
    `students`?"""
    course = load_course(make_course(tmp_path, GOOD))
    (tmp_path / "roster.csv").write_text("id,email, last_name ,Notes\nada,,Lovelace,x\n")
    columns, students = course.roster_columns()
    assert columns == {"email", "last_name"} and students == course.students()
    assert students[0].email == ""
    (tmp_path / "roster.csv").write_text("ada\nbob\n")
    assert course.roster_columns() == (frozenset(), course.students()) and len(course.students()) == 2


def test_config_a_roster_saved_with_a_byte_order_mark_reads_as_without(tmp_path):
    """Does a roster saved as Excel's "CSV UTF-8" (a byte-order mark before `id`) read like the same file
    without it?"""
    course = load_course(make_course(tmp_path, GOOD))
    text = "id,first_name,last_name,email\nada,Ada,Lovelace,ada@x.edu\nbob,Bob,,\n"
    (tmp_path / "roster.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    with_mark = course.students()
    (tmp_path / "roster.csv").write_text(text)
    assert with_mark == course.students() and with_mark[0].id == "ada" and with_mark[0].email == "ada@x.edu"


def test_config_a_roster_name_holding_a_line_break_is_one_student(tmp_path):
    """Is a quoted field holding a line break (a name typed on two lines of a spreadsheet's cell) part of
    its row, rather than the rest of the name read as a student of its own?"""
    course = load_course(make_course(tmp_path, GOOD))
    (tmp_path / "roster.csv").write_text('id,first_name,last_name,email\r\nada,"Ada\r\nMarie",Lovelace,ada@x.edu\r\n'
                                         'bob,Bob,,\r\n', newline="")
    assert [(s.id, s.first_name, s.last_name) for s in course.students()] == [
        ("ada", "Ada\r\nMarie", "Lovelace"), ("bob", "Bob", "")]


def test_config_a_course_yml_that_is_not_utf8_is_one_line_naming_it(tmp_path):
    """Is a course.yml saved as Latin-1 (a comment `# café`) one line naming the file, the line and the
    byte, rather than a UnicodeDecodeError?"""
    config = CourseLayout(make_course(tmp_path, GOOD)).config
    text = config.read_bytes()
    config.write_bytes(text + b"# caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_course(tmp_path)
    line, offset = len(text.splitlines()) + 1, len(text) + len(b"# caf")
    assert str(info.value) == f"course.yml: line {line}: not UTF-8 (byte 0xe9 at offset {offset}); save it as UTF-8"


def test_config_student_ids_that_yaml_would_read_as_numbers_or_dates_are_their_text(tmp_path):
    """Is an extension written for student 0042 (or 012345, 2026001, yes, 2026-01-01) for the id as
    written, as the roster's ids are text, not for the number, truth value or date YAML reads it as?"""
    ids = ["0042", "012345", "2026001", "yes", "2026-01-01", "1e3"]
    text = yaml.safe_dump(mutate("assignments.0.extensions", "EXTENSIONS"))
    text = text.replace("EXTENSIONS", "{" + ", ".join(f"{sid}: {{days: 1}}" for sid in ids) + "}")
    course = load_course(make_course(tmp_path, text))
    assert sorted(course.assignment("hw").extensions) == sorted(ids)


def test_config_a_roster_that_is_a_folder_is_one_line_naming_the_key(tmp_path):
    """Is `roster:` naming a folder (a path mistyped as the notebooks' folder) a one-line error naming the key,
    not an IsADirectoryError?"""
    course = load_course(make_course(tmp_path, GOOD))
    (tmp_path / "roster.csv").unlink()
    (tmp_path / "roster.csv").mkdir()
    with pytest.raises(ConfigError) as info:
        course.students()
    assert str(info.value).startswith("course.yml: roster: ") and "is not a file" in str(info.value)


def test_roster_typo_pairs_only_close_ids_and_case_only_ones_when_asked():
    """Is a submitter off the roster named beside a roster id a letter away (ignoring case), not beside a
    different student's id, and beside one equal but for case only when those are not said elsewhere?"""
    from autograder.config import roster_typo

    assert roster_typo("katherine", ["ada", "katherin"]) == (
        "katherine (not on the roster) may be the roster's katherin (a typo?)")
    assert roster_typo("Katherine", ["KATHERIN"]) == (
        "Katherine (not on the roster) may be the roster's KATHERIN (a typo?)")
    assert roster_typo("ada", ["alan", "adam"]) == "ada (not on the roster) may be the roster's adam (a typo?)"
    assert roster_typo("ada", ["alan", "ana", "bob"]) is None
    assert roster_typo("Ada", ["ada"]) == "Ada (not on the roster) may be the roster's ada (a typo?)"
    assert roster_typo("Ada", ["ada"], case_only=False) is None


def test_roster_typo_takes_ids_differing_only_by_unicode_normalisation_as_it_takes_a_case_clash():
    """Is a submitter 'zoë' written as 'e' and a combining mark (NFD) named beside the roster's 'zoë' as one
    code point (NFC), both with their escapes since they print alike, and left to api.case_clashes
    (`case_only` false) as an id differing in case is?"""
    from autograder.config import roster_typo

    nfc, nfd = "zo\u00eb", "zoe\u0308"
    assert roster_typo(nfd, ["ada", nfc]) == (
        f"{nfd} ('zoe\\u0308') (not on the roster) may be the roster's {nfc} ('zo\\xeb') (a typo?)")
    assert roster_typo(nfd, ["ada", nfc], case_only=False) is None
    assert roster_typo("ZOE\u0308", ["ada", nfc], case_only=False) is None
