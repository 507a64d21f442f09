"""The adversarial corpus through the real `course autograde`: every attack is contained.

For every attack in `attacks.ATTACKS`, one batch grades a victim, the attacker and another victim
on a scratch course, and the test asserts what is promised (docs/security.md):

- the batch finishes (exit 0) with a result for every student, the attacker's "graded" with a
  reason where one is expected;
- the attacker scores no more than its twin (the same wrong code without the attack);
- every victim's result (each check's status and score) and gradebook rows are those of a batch
  without the attacker, and each student's gradebook rows match their results.json;
- every file outside the batch's outputs is unchanged: the course folder (instructor code,
  submissions, the secret), the engine's source, the venv's site-packages, canary files in the
  grader's home and /tmp; no file carrying the attack's token is left anywhere the test looks;
- nothing hidden (instructor code, the course secret, other students' notebooks and ids) shows in
  the attacker's results.json or feedback page;
- no process of the submission is alive after the batch; nothing connected to a listener on
  127.0.0.1;
- the grader's peak memory stays under GRADER_PEAK_MB and the attacker's grading under
  ATTACKER_SECONDS.
"""
from __future__ import annotations

import os
import secrets
import shutil
import site
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from autograder.layout import CourseLayout

from .attacks import ATTACKS, NAMES, NO_NOTEBOOK, TWINS, Attack
from .harness import (
    ASSIGNMENT,
    ATTACKER_SECONDS,
    GRADER_PEAK_MB,
    NB,
    OUTPUTS,
    ROOT,
    SURVIVOR_GRACE,
    Listener,
    Scratch,
    attack_notebook,
    empty_gradebook,
    expected_rows,
    files_named,
    gradebook_rows,
    kill_pids,
    load_results,
    make_scratch,
    run_autograde,
    statuses,
    token_processes,
    tree_digest,
    twin_notebook,
    write_layout,
    write_notebook,
)

pytestmark = pytest.mark.slow

ENGINE = ROOT / "autograder"
# The repository itself (the engine and the instructor code the scratch courses are copied from).
REPO_SKIP = (".git", ".venv", ".venv-ci", ".demo", ".hypothesis", "build", "autograded", "feedback", "gradebook.db",
             ".course_secret", ".gradebook.lock", ".gradebook-pending")
INSTRUCTOR_MARKS = ("reference.py", "mistakes.py", "graders/test_layer_norm.py", "graders/_inputs.py")


def _site_packages() -> list[Path]:
    return sorted({Path(p) for p in site.getsitepackages() + [p for p in sys.path if p.endswith("site-packages")]
                   if Path(p).is_dir()})


@dataclass(frozen=True)
class Baseline:
    """The batch without an attacker: victims and every twin, graded once."""
    secret: str
    victims: tuple[str, str]
    victim_marks: dict
    instructor_marks: dict
    results: dict
    rows: dict
    gradebook: Path          # an empty gradebook to copy into each scratch course


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Baseline:
    secret = secrets.token_hex(32)
    victims = (f"a-victim-{secrets.token_hex(4)}", f"z-victim-{secrets.token_hex(4)}")
    victim_marks = {sid: f"victim-marker-{secrets.token_hex(6)}" for sid in victims}
    instructor_marks = {rel: f"instructor-marker-{secrets.token_hex(6)}" for rel in INSTRUCTOR_MARKS}
    gradebook = empty_gradebook(tmp_path_factory.mktemp("gradebook") / "course")
    scratch = make_scratch(tmp_path_factory.mktemp("baseline") / "course", secret, victims, victim_marks,
                           instructor_marks, gradebook)
    for twin in TWINS:
        write_notebook(CourseLayout(scratch.course).submission(f"t-{twin}", ASSIGNMENT) / NB, twin_notebook(twin))
    run = run_autograde(scratch.course)
    assert run.returncode == 0 and not run.problems, run.stdout[-2000:] + run.stderr[-2000:] + str(run.problems)
    students = (*victims, *(f"t-{t}" for t in TWINS))
    results = {sid: load_results(scratch.course, sid) for sid in students}
    return Baseline(secret=secret, victims=victims, victim_marks=victim_marks, instructor_marks=instructor_marks,
                    results=results, rows=gradebook_rows(scratch.course), gradebook=gradebook)


def test_baseline_twins_lose_points_and_victims_are_graded(baseline):
    """Without attackers, does each twin lose points (so an attack has something to gain) and is each victim graded?"""
    for twin in TWINS:
        doc = baseline.results[f"t-{twin}"]
        assert doc["extra_data"]["state"] == "graded"
        assert 0 < doc["score"] < doc["max_score"], (twin, doc["score"])
    first, last = (baseline.results[v] for v in baseline.victims)
    assert first["score"] == 100 and 0 < last["score"] < 100


def _twin_score(attack: Attack, baseline: Baseline) -> float:
    return 0.0 if attack.twin == NO_NOTEBOOK else baseline.results[f"t-{attack.twin}"]["score"]


def _canaries(tag: str) -> dict[Path, str]:
    made = {}
    for place, name in ((Path.home(), f".canary-{tag}"), (Path("/tmp"), f"canary-{tag}")):
        path = place / name
        text = f"canary {secrets.token_hex(8)}\n"
        path.write_text(text)
        made[path] = text
    return made


def _check_outputs(attack: Attack, scratch: Scratch, baseline: Baseline, attacker: str, v: list[str]) -> None:
    course = scratch.course
    docs = {sid: load_results(course, sid) for sid in (*scratch.victims, attacker)}
    for sid, doc in list(docs.items()):
        if doc is None:
            v.append(f"no results.json for {sid}")
        elif not isinstance(doc.get("extra_data"), dict) or "tests" not in doc["extra_data"]:
            v.append(f"results.json of {sid} is not the grader's")
            docs[sid] = None
    mine = docs[attacker]
    if mine is not None:
        extra = mine["extra_data"]
        if extra.get("state") != "graded":
            v.append(f"attacker state {extra.get('state')!r}: {extra.get('error', '')[:300]}")
        twin = _twin_score(attack, baseline)
        if mine["score"] > twin + 1e-9:
            v.append(f"attacker scored {mine['score']} > twin {twin}")
        if mine["max_score"] != baseline.results[scratch.victims[0]]["max_score"]:
            v.append(f"attacker's max_score changed to {mine['max_score']}")
        notes = mine.get("output", "") + "\n".join(extra.get("notes", []))
        if attack.note and attack.note not in notes:
            v.append(f"attacker's notes lack {attack.note!r}: {notes[:300]!r}")
        if extra.get("execution_time", mine.get("execution_time", 0)) > ATTACKER_SECONDS:
            v.append(f"grading the attacker took {mine['execution_time']} s > {ATTACKER_SECONDS} s")
    for sid in scratch.victims:
        doc, base = docs[sid], baseline.results[sid]
        if doc is not None and (doc["score"] != base["score"] or statuses(doc) != statuses(base)):
            changed = [a[0] for a, b in zip(statuses(doc), statuses(base)) if a != b]
            v.append(f"victim {sid} changed: {doc['score']} vs {base['score']} without the attacker {changed[:3]}")
    rows = gradebook_rows(course)
    if set(rows) != set(docs):
        v.append(f"gradebook students {sorted(rows)} != {sorted(docs)}")
    for sid, doc in docs.items():
        if doc is not None and rows.get(sid) != expected_rows(doc):
            v.append(f"gradebook rows of {sid} do not match its results.json: {rows.get(sid)}")
        if sid in scratch.victims and rows.get(sid) != baseline.rows.get(sid):
            v.append(f"gradebook rows of victim {sid} changed")
        pages = list((CourseLayout(course).feedback(sid, ASSIGNMENT)).glob("*.html"))
        if not pages:
            v.append(f"no feedback page for {sid}")
        elif sid not in pages[0].read_text(errors="replace"):
            v.append(f"feedback page of {sid} is not the grader's")
    # nothing hidden in what the attacker is shown
    shown = ""
    for path in [CourseLayout(course).results_json(attacker, ASSIGNMENT),
                 *(CourseLayout(course).feedback(attacker, ASSIGNMENT)).glob("*.html")]:
        if path.is_file():
            shown += path.read_text(errors="replace")
    for what, marker in scratch.markers.items():
        if marker in shown:
            v.append(f"the attacker's outputs show {what}")
    copied = CourseLayout(course).autograded(attacker, ASSIGNMENT)
    for path in (copied.iterdir() if copied.is_dir() else ()):
        if path.is_symlink():
            v.append(f"{path.name} among the attacker's autograded copies is a symbolic link")
        elif scratch.secret.encode() in path.read_bytes():
            v.append(f"{path.name} among the attacker's autograded copies holds the course secret")


def run_attack(attack: Attack, baseline: Baseline, tmp_path: Path) -> list[str]:
    """Grade `attack` between two victims; every violation of the promises, in words."""
    scratch = make_scratch(tmp_path / "course", baseline.secret, baseline.victims, baseline.victim_marks,
                           baseline.instructor_marks, baseline.gradebook)
    course = scratch.course
    attacker = f"m-{attack.name}"
    token = "pwn" + secrets.token_hex(4)
    folder = CourseLayout(course).submission(attacker, ASSIGNMENT)
    listener = Listener()
    canaries = _canaries(secrets.token_hex(4))
    engine_files = {p: p.read_bytes() for p in ENGINE.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    site_before = {str(p): sorted(os.listdir(p)) for p in _site_packages()}
    repo_before = tree_digest(ROOT, skip=REPO_SKIP)
    v: list[str] = []
    survivors: list[int] = []
    try:
        if attack.layout:
            write_layout(attack, folder, scratch)
        else:
            values = {"TOKEN": token, "COURSE": str(course), "HOME": str(Path.home()), "PORT": str(listener.port)}
            write_notebook(folder / NB, attack_notebook(attack, values))
        course_before = tree_digest(course, skip=OUTPUTS)
        secret_before = (course / ".course_secret").read_bytes()
        run = run_autograde(course)
        time.sleep(SURVIVOR_GRACE)
        survivors = token_processes(token)
        kill_pids(survivors)
        time.sleep(0.5)
        v.extend(run.problems)
        if run.returncode != 0:
            v.append(f"course autograde exited {run.returncode}: {(run.stderr or run.stdout)[-600:]!r}")
        if survivors:
            v.append(f"{len(survivors)} attack process(es) alive after the batch (killed: {survivors[:5]})")
        if run.peak_mb is not None and run.peak_mb > GRADER_PEAK_MB:
            v.append(f"grader peak memory {run.peak_mb:.0f} MB > {GRADER_PEAK_MB} MB")
        if listener.connections:
            v.append(f"connections reached 127.0.0.1:{listener.port}: {listener.connections[:3]}")
        _check_outputs(attack, scratch, baseline, attacker, v)
        after = tree_digest(course, skip=OUTPUTS)
        changed = sorted(k for k in set(course_before) | set(after) if course_before.get(k) != after.get(k))
        if changed:
            v.append(f"course files changed: {changed[:5]}")
        if (course / ".course_secret").read_bytes() != secret_before:
            v.append("the course secret changed")
        for path, text in canaries.items():
            if not path.is_file() or path.read_text() != text:
                v.append(f"canary {path} changed")
        places = [Path.home(), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), course, ENGINE, *_site_packages()]
        left = files_named(token, places)
        if left:
            v.append(f"files left by the attack: {left[:5]}")
        edited = [str(p.relative_to(ROOT)) for p, data in engine_files.items()
                  if not p.is_file() or p.read_bytes() != data]
        new = [str(p.relative_to(ROOT)) for p in ENGINE.rglob("*")
               if p.is_file() and "__pycache__" not in p.parts and p not in engine_files]
        if edited or new:
            v.append(f"engine source changed: {(edited + new)[:5]}")
        repo_after = tree_digest(ROOT, skip=REPO_SKIP)
        touched = sorted(k for k in set(repo_before) | set(repo_after) if repo_before.get(k) != repo_after.get(k))
        if touched:
            v.append(f"repository files changed: {touched[:5]}")
        site_after = {str(p): sorted(os.listdir(p)) for p in _site_packages()}
        if site_after != site_before:
            v.append("site-packages changed: " + ", ".join(
                sorted({n for v in site_after.values() for n in v} ^ {n for v in site_before.values() for n in v})[:5]))
    finally:
        listener.close()
        kill_pids(token_processes(token))
        for path in canaries:
            path.unlink(missing_ok=True)
        for place in [Path.home(), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), ENGINE, *_site_packages()]:
            for found in files_named(token, [place], depth=1 if place in (Path("/tmp"), Path.home()) else 3):
                p = Path(found)
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)
        for p, data in engine_files.items():
            if not p.is_file() or p.read_bytes() != data:
                p.write_bytes(data)
        big = folder / NB
        if attack.layout == "200mb" and big.is_file():
            big.unlink()
    return v


@pytest.mark.parametrize("attack", ATTACKS, ids=NAMES)
def test_attack_is_contained(attack, baseline, tmp_path):
    """Does the attack score no more than its twin and leave every other student, file and process untouched?"""
    violations = run_attack(attack, baseline, tmp_path)
    assert not violations, f"{attack.name} ({attack.what}):\n- " + "\n- ".join(violations)


def test_corpus_has_at_least_thirty_cases_each_with_its_expectation():
    """Does the corpus hold 30+ attacks, each with a twin, what it does and what stops it?"""
    assert len(ATTACKS) >= 30
    for a in ATTACKS:
        assert a.what and a.stops and (a.twin in TWINS or a.twin == NO_NOTEBOOK)
        assert a.cells or a.early or a.layout


def test_docs_security_table_is_the_corpus():
    """Does docs/security.md's corpus table list exactly the attacks of tests/security/attacks.py?"""
    from .attacks import markdown_table

    assert markdown_table() in (ROOT / "docs" / "security.md").read_text(), \
        "stale: paste tests.security.attacks.markdown_table() into docs/security.md"
