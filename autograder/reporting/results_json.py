"""results.json in Gradescope's autograder format, rendered from one SubmissionResult.

Students see `score`, `output` and each entry of `tests`; `extra_data` is stored for
instructors only and holds the full picture (seed, roster status, instructor detail per test).

Every score here is the autograder's, as it graded the submission: the file is written when a
submission is graded and never changed for what people enter in the gradebook afterwards (a TA's
override or extra credit in formgrader). It says so in `extra_data.score_note`; the student's final
score is the gradebook's (the feedback page, the class table, `nbgrader export`, the LMS export).

Shape of the file (Gradescope's field names):

    {"score": 62.5, "max_score": 100.0, "execution_time": 4.2,
     "output": "Notes from running your notebook: ...", "output_format": "text",
     "visibility": "visible", "stdout_visibility": "hidden",
     "tests": [{"name": ..., "number": "1.3", "score": ..., "max_score": ..., "status": "failed",
                "output": ..., "visibility": "visible", "tags": ["problem:layer_norm", ...]}],
     "extra_data": {"student": ..., "state": "graded", "score_note": SCORE_NOTE, "seed": ...,
                    "tests": [{"detail": ...}]}}

Every text field is marked "text" so Gradescope never renders student-controlled text as HTML.
The test numbers ("<problem index>.<test index>", both from 1, problems in course.yml order) are
shared with the feedback page and the summary so all three agree.
"""
from __future__ import annotations

import json.encoder
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from autograder.grading.results import TEST_STATUSES, SubmissionResult, SubmissionState, TestResult
from autograder.text import truncate

from .bounds import RESULTS_JSON_MAX_BYTES, bound_result, shrunk
from .jsontext import dumps_indented, dumps_nested

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")

# What every score of the file is, in its extra_data: a reader who finds a TA's change elsewhere (the page,
# the class table, nbgrader export) learns why this file does not hold it (docs/grading.md).
SCORE_NOTE = ("score, raw_score, late_penalty and the problems' and tests' scores are the autograder's only: a TA's "
              "overrides and extra credit in the gradebook are not in this file (the feedback page, the class table "
              "of `course autograde` and nbgrader export give the student's final score)")


# --------------------------------------------------------------------------- shared by every report

def ordered_problems(result: SubmissionResult) -> tuple[str, ...]:
    """Problem names in course.yml order; a problem seen only in a test comes last."""
    names: dict[str, None] = {}
    for name in result.problems:
        names.setdefault(name, None)
    for name, _ in result.problem_points:
        names.setdefault(name, None)
    for test in result.tests:
        names.setdefault(test.problem, None)
    return tuple(names)


def numbered_tests(result: SubmissionResult) -> tuple[tuple[str, TestResult], ...]:
    """Each test with its number "p.t": p the problem's place, t the test's place within it. The
    last result numbered is remembered (results.json and the page number the same one)."""
    last = _NUMBERED[0]
    if last is not None and last[0] is result:
        return last[1]
    by_problem: dict[str, list[TestResult]] = {name: [] for name in ordered_problems(result)}
    for t in result.tests:                   # one pass over the tests, not one per problem
        by_problem[t.problem].append(t)
    numbered = tuple((f"{p}.{i}", t) for p, mine in enumerate(by_problem.values(), start=1)
                     for i, t in enumerate(mine, start=1))
    _NUMBERED[0] = (result, numbered)
    return numbered


_NUMBERED: list[tuple[SubmissionResult, tuple[tuple[str, TestResult], ...]] | None] = [None]


def short_name(test: TestResult) -> str:
    """The test function and its parameters, without the grader file: `test_x_matches[seed0]`."""
    return test.name.rsplit("::", 1)[-1]


# How the chapter writes the terms that catalogue ids spell in snake_case.
_TERMS = {"d_k": "d_k", "d_model": "d_model", "d_ff": "d_ff", "n_heads": "n_heads",
          "layer_norm": "LayerNorm", "post_ln": "Post-LN", "pre_ln": "Pre-LN"}
_WORDS = {"ffn": "FFN", "ln": "LN", "mha": "MHA", "relu": "ReLU", "gelu": "GELU", "silu": "SiLU",
          "swiglu": "SwiGLU", "eps": "eps", "exp": "exp", "sqrt": "sqrt", "qkv": "QKV"}


def misconception_name(diagnosis: str) -> str:
    """A readable name for a catalogue id: "layer_norm.unbiased_variance" -> "Unbiased variance",
    "block.missing_ffn_residual" -> "Missing FFN residual", "mha.scale_by_d_k" -> "Scale by d_k"."""
    text = diagnosis.rsplit(".", 1)[-1].strip("_")
    if not text:
        return diagnosis
    for term in sorted(_TERMS, key=len, reverse=True):
        text = re.sub(rf"(?<![a-z0-9]){term}(?![a-z0-9])", _TERMS[term].replace("_", "\0"), text)
    words = [_WORDS.get(w, w) for w in text.split("_") if w]
    name = " ".join(words).replace("\0", "_")
    first = words[0]
    keep = first in _WORDS.values() or first in _TERMS.values()
    return name if keep else name[:1].upper() + name[1:]


def reported_score(result: SubmissionResult) -> float:
    """The score a student is given: the sum of test scores, or 0 when grading crashed."""
    return 0.0 if result.state == "crashed" else result.score


def student_error(result: SubmissionResult, limit: int = 300) -> str:
    """What a student is told about a crash: the first line of `crash_reason` (the full text, which
    may hold a traceback of instructor code, stays in extra_data)."""
    lines = [ln.strip() for ln in result.crash_reason.splitlines() if ln.strip()]
    first = lines[0] if lines else "the grader stopped unexpectedly"
    return truncate(first, limit)


def atomic_write_bytes(path: str | Path, data: bytes, *, sync: bool = True) -> Path:
    """Write `data` to `path` via a temporary file in the same folder and os.replace:
    a reader sees the old file or the new one, never half of one. With `sync` (the default) the
    data reaches the disk before the rename (fsync); without it, a crash of the machine may leave
    the file empty, for a file that is then simply written again.

    The file gets the mode open() would give it (`new_file_mode`: 0644 under the usual umask, as
    nbgrader's own copies), not the temporary file's 0600: the pages, copies and results written
    this way are read by TAs in the course's group (formgrader run as another user). Nothing
    secret is written through here (the course secret is created 0600 by grading.seeds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), new_file_mode())
            fh.write(data)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def new_file_mode() -> int:
    """The mode open() gives a new file: 0666 less this process's umask (read from /proc, since
    os.umask can only be read by setting it; elsewhere set for a moment to a stricter mask, which a
    file another thread creates meanwhile only makes more private)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o077)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_text(path: str | Path, text: str, *, sync: bool = True) -> Path:
    """`atomic_write_bytes` of `text` as UTF-8 with \\n line ends."""
    return atomic_write_bytes(path, text.encode("utf-8"), sync=sync)


# --------------------------------------------------------------------------- results.json

def _student_output(result: SubmissionResult) -> str:
    parts = []
    if result.state == "crashed":
        parts.append(f"Grading could not be completed for this submission: {student_error(result)}\n"
                     "Your score is 0 until it is graded again; your instructor can see what happened.")
    if result.notes:
        parts.append("Notes from running your notebook:\n" + "\n".join(f"- {n}" for n in result.notes))
    return "\n\n".join(parts)


def diagnosis_heading(diagnosis: str, stages: tuple[str, ...]) -> str:
    """How a report introduces a diagnosis: a catalogued mistake the student's function reproduces
    exactly is recognised ("Recognised misconception: Unbiased variance"); a stage a probe localised
    the error to is a guess of where the output first goes wrong, and says so ("Where it first goes
    wrong: Statistics across tokens")."""
    if diagnosis in stages:
        return f"Where it first goes wrong: {misconception_name(diagnosis)}"
    return f"Recognised misconception: {misconception_name(diagnosis)}"


def _with_hints(test: TestResult) -> str:
    """The test's message followed by each diagnosis and its hint: a recognised mistake, or where a
    probe found the output first goes wrong."""
    lines = [test.output] if test.output else []
    for diagnosis, hint in zip(test.diagnoses, test.hints):
        if diagnosis in test.stages:
            lines.append(f"Where it first goes wrong ({misconception_name(diagnosis)}): {hint}")
        else:
            lines.append(f"Recognised mistake ({misconception_name(diagnosis)}): {hint}")
    return "\n".join(lines)


def _test_entry(number: str, test: TestResult) -> dict[str, Any]:
    """A test as Gradescope shows it. Gradescope knows only "passed" and "failed": a check not graded
    or not run is "failed" (no points), its output saying which and why ("Not graded: ...", "Not
    run: ..."), never "passed"."""
    return {
        "name": short_name(test),
        "number": number,
        "score": test.score,
        "max_score": test.max_score,
        "status": "passed" if test.passed else "failed",
        "output": _with_hints(test),
        "output_format": "text",
        "name_format": "text",
        "visibility": "visible",
        "tags": list(test.tags),
    }


def _instructor_view(result: SubmissionResult, numbered: tuple[tuple[str, TestResult], ...]) -> dict[str, Any]:
    return {
        "student": result.student,
        "assignment": result.assignment,
        "state": result.state,
        "score_note": SCORE_NOTE,
        "crash_reason": result.crash_reason,
        "grader_errors": list(result.grader_errors),
        "seed": result.seed,
        "on_roster": result.on_roster,
        "raw_score": result.raw_score,
        "late_penalty": result.late_penalty,
        "submitted_at": result.submitted_at or None,
        "timestamp_problem": result.timestamp_problem or None,
        "unreadable_notebooks": list(result.unreadable_notebooks),
        "due": result.due or None,
        "extension": result.extension or None,
        "graded_at": result.graded_at or None,
        "files": list(result.files),
        "isolation": list(result.isolation),
        "problems": [{"problem": p.problem, "score": p.score, "max_score": p.max_score}
                     for p in result.problem_scores()],
        "diagnoses": list(result.diagnoses),
        "notes": list(result.notes),
        "tests": [_instructor_test(number, t) for number, t in numbered],
    }


def _instructor_test(number: str, t: TestResult) -> dict[str, Any]:
    return {
        "number": number,
        "name": t.name,
        "problem": t.problem,
        "status": t.status,
        "score": t.score,
        "max_score": t.max_score,
        "diagnoses": list(t.diagnoses),
        "hints": list(t.hints),
        **({"stages": list(t.stages)} if t.stages else {}),
        "output": t.output,
        "description": t.description,
        "detail": t.detail,
        "duration": round(t.duration, 3),
    }


def to_results_json(result: SubmissionResult, *, visibility: str = "visible",
                    stdout_visibility: str = "hidden", grading_key: str | None = None,
                    gradebook_key: str | None = None) -> dict[str, Any]:
    """The results.json document for one submission (a plain, JSON-ready dict).

    A crashed submission scores 0, lists no tests to the student (its scores are not to be
    trusted) and explains why in `output`; whatever ran is still in `extra_data`. Text fields
    are bounded (see `bounds`). `grading_key` (see grading.fingerprint) is stored in extra_data
    so an unchanged submission is not graded again; `gradebook_key`, see `gradebook_key_of`.
    """
    return _document(result, visibility, stdout_visibility, grading_key, entries=True,
                     gradebook_key=gradebook_key)[0]


def gradebook_key_of(doc: Any) -> str:
    """The grading key of the result the gradebook held when this results.json was written without its
    own key (a batch writes it at once, and adds its key only once the gradebook has its grades): when
    that commit never came (rolled back, the batch stopped), the next run still tells a resubmission or
    a regrade under new graders from it, so a TA's review on the earlier submission is still named and
    flagged. "" when there is none."""
    extra = doc.get("extra_data") if isinstance(doc, dict) else None
    key = extra.get("gradebook_key") if isinstance(extra, dict) else None
    return key if isinstance(key, str) else ""


def _document(result: SubmissionResult, visibility: str, stdout_visibility: str, grading_key: str | None, *,
              entries: bool, gradebook_key: str | None = None
              ) -> tuple[dict[str, Any], SubmissionResult, tuple[tuple[str, TestResult], ...]]:
    """(the document, the bounded result, its numbered tests); without `entries`, both lists of test
    entries are left empty (`_render` writes them from the tests). `gradebook_key`: see `gradebook_key_of`."""
    for key, value in (("visibility", visibility), ("stdout_visibility", stdout_visibility)):
        if value not in VISIBILITIES:
            raise ValueError(f"{key}: expected one of {', '.join(VISIBILITIES)}, got {value!r}")
    result = bound_result(result)
    numbered = numbered_tests(result)
    tests = [] if result.state == "crashed" or not entries else [_test_entry(n, t) for n, t in numbered]
    doc = {
        "score": reported_score(result),
        "max_score": result.max_score,
        "execution_time": round(result.execution_time, 3),
        "output": _student_output(result),
        "output_format": "text",
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": visibility,
        "stdout_visibility": stdout_visibility,
        "tests": tests,
        "extra_data": {**_instructor_view(result, numbered if entries else ()),
                       **({"gradebook_key": gradebook_key} if gradebook_key and not grading_key else {}),
                       **({"grading_key": grading_key} if grading_key else {})},
    }
    return doc, result, numbered


def render_results_json(result: SubmissionResult, **options: Any) -> str:
    """results.json as text, at most RESULTS_JSON_MAX_BYTES (messages are cut shorter if needed).

    A batch writes a student's results.json twice: at once without its grading key, then with the
    key once the gradebook holds the grades. The text without a key of the last few results is
    kept, so the second write only adds the key (the last entry of extra_data, the document's last
    entry) to it: the same text as rendering the whole document again."""
    key = options.pop("grading_key", None)
    remembered = (id(result), tuple(sorted(options.items())))
    known = _RECENT.get(remembered)
    if known is not None and known[0] is result:
        text = known[1]
    else:
        text = _render(result, **options)
        _RECENT[remembered] = (result, text)
        while len(_RECENT) > _RECENT_RESULTS:
            _RECENT.pop(next(iter(_RECENT)))
    if not key:
        return text
    # the text without a key ends with extra_data's last entry: the gradebook's key (written only until
    # this one is in), or the entry before it
    held = options.get("gradebook_key")
    ending = f",\n    {_string('gradebook_key')}: {_string(held)}{_END}" if isinstance(held, str) and held else _END
    if isinstance(key, str) and text.endswith(ending):
        keyed = f"{text[:-len(ending)]},\n    {_string('grading_key')}: {_string(key)}{_END}"
        if len(keyed.encode("utf-8")) <= RESULTS_JSON_MAX_BYTES:
            return keyed
    return _render(result, grading_key=key, **options)


def _render(result: SubmissionResult, **options: Any) -> str:
    try:
        text = _document_text(result, **options) + "\n"
    except (TypeError, ValueError):          # what only json.dumps encodes (NaN: its error), or an odd option
        text = dumps_indented(to_results_json(result, **options), 2) + "\n"
    if len(text.encode("utf-8")) > RESULTS_JSON_MAX_BYTES:
        text = dumps_indented(to_results_json(shrunk(bound_result(result)), **options), 1) + "\n"
    return text


def _document_text(result: SubmissionResult, *, visibility: str = "visible", stdout_visibility: str = "hidden",
          grading_key: str | None = None, gradebook_key: str | None = None) -> str:
    """`dumps_indented(to_results_json(result, ...), 2)`, each test's two entries (the student's and
    extra_data's) taken from `_ENTRIES` when an earlier student's test gave the same ones: a passed
    check's entries are the same for everyone but for the time it took (extra_data's last value, added
    to the entry kept). ValueError (TypeError) for what dumps_indented leaves to json.dumps."""
    doc, bounded, numbered = _document(result, visibility, stdout_visibility, grading_key, entries=False,
                                       gradebook_key=gradebook_key)
    students, instructors = _entries(numbered, student=bounded.state != "crashed")
    parts = []
    for name, value in doc.items():
        if name == "tests":
            text = students
        elif name == "extra_data":
            text = "{\n    " + ",\n    ".join(
                _string(k) + ": " + (instructors if k == "tests" else dumps_nested(v, 2, 2))
                for k, v in value.items()) + "\n  }"
        else:
            text = dumps_nested(value, 1, 2)
        parts.append(_string(name) + ": " + text)
    return "{\n  " + ",\n  ".join(parts) + "\n}"


def _entries(numbered: tuple[tuple[str, TestResult], ...], *, student: bool) -> tuple[str, str]:
    """(the list of the tests' entries for students (`_test_entry`; "[]" without `student`), the list of
    extra_data's (`_instructor_test`)), as they are nested in the document. Both entries of a test are
    kept together, under one key made of what either is made from: extra_data's without its duration,
    which is added to it."""
    if not numbered:
        return "[]", "[]"
    students, instructors = [], []
    for number, t in numbered:
        if type(t.score) is not float or type(t.max_score) is not float:
            raise ValueError("a score that is not a float: not kept")
        key = (number, t.name, t.problem, t.status, t.score.hex(), t.max_score.hex(), t.output,
               t.diagnoses, t.hints, t.stages, t.description, t.detail)
        kept = _ENTRIES.pop(key, None)
        if kept is None:
            entry = _instructor_test(number, t)
            del entry["duration"]             # its text ends with "\n      }": the duration goes before it
            kept = ["", dumps_nested(entry, 3, 2)[:-len(_INSTRUCTOR_CLOSING)] + _DURATION]
            while len(_ENTRIES) >= _ENTRIES_KEPT:
                del _ENTRIES[next(iter(_ENTRIES))]
        _ENTRIES[key] = kept                  # now the most recently used
        if student:
            if not kept[0]:                   # made when first needed (a crashed result lists none)
                kept[0] = dumps_nested(_test_entry(number, t), 2, 2)
            students.append(kept[0])
        instructors.append(kept[1] + dumps_nested(round(t.duration, 3), 0, 2) + _INSTRUCTOR_CLOSING)
    return (("[\n    " + ",\n    ".join(students) + "\n  ]") if student else "[]",
            "[\n      " + ",\n      ".join(instructors) + "\n    ]")


# what a test's entries are made from -> [its student entry ("" until needed), extra_data's up to its duration]
_ENTRIES: dict[tuple[Any, ...], list[str]] = {}
_ENTRIES_KEPT = 1024                         # tests kept, least recently used out
_INSTRUCTOR_CLOSING = "\n      }"           # how an entry of extra_data's tests ends (nested 3 deep)
_DURATION = ',\n        "duration": '       # its last value, the time the test took
_RECENT: dict[tuple[int, tuple[tuple[str, Any], ...]], tuple[SubmissionResult, str]] = {}
_RECENT_RESULTS = 32            # more than the results a batch has waiting for the gradebook at once
_END = "\n  }\n}\n"            # how an indented document whose last entry is a non-empty object ends
_string = json.encoder.encode_basestring


def write_results_json(result: SubmissionResult, path: str | Path, **options: Any) -> Path:
    """Write results.json for `result` to `path` atomically; returns the path."""
    return atomic_write_text(path, render_results_json(result, **options))


def _text(value: Any, default: str = "") -> str:
    return value if isinstance(value, str) else default


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"expected a number, got {value!r}")
    return float(value)


def result_from_json(doc: Any) -> tuple[SubmissionResult, str]:
    """(the SubmissionResult, its grading key) read back from a results.json document written by
    `to_results_json`; ValueError when the document is not one."""
    try:
        extra = doc["extra_data"]
        tests = tuple(TestResult(
            name=_text(t["name"]), problem=_text(t["problem"]), score=_number(t["score"]),
            max_score=_number(t["max_score"]),
            status=t["status"] if t["status"] in TEST_STATUSES else "failed",
            output=_text(t.get("output")), description=_text(t.get("description")),
            diagnoses=tuple(_text(d) for d in t.get("diagnoses", [])),
            hints=tuple(_text(h) for h in t.get("hints", [])), detail=_text(t.get("detail")),
            stages=tuple(_text(s) for s in t.get("stages", [])),
            duration=_number(t.get("duration", 0.0))) for t in extra["tests"])
        problems = [(p["problem"], _number(p["max_score"])) for p in extra["problems"]]
        state: SubmissionState = "graded" if extra["state"] == "graded" else "crashed"
        result = SubmissionResult(
            student=_text(extra["student"]), assignment=_text(extra["assignment"]), state=state,
            tests=tests, problems=tuple(p for p, _ in problems), notes=tuple(_text(n) for n in extra["notes"]),
            seed=extra.get("seed") if isinstance(extra.get("seed"), int) else None,
            execution_time=_number(doc.get("execution_time", 0.0)), crash_reason=_text(extra.get("crash_reason")),
            grader_errors=tuple(_text(e) for e in extra.get("grader_errors", [])),
            on_roster=extra.get("on_roster") is not False, files=tuple(_text(f) for f in extra.get("files", [])),
            problem_points=tuple(problems), submitted_at=_text(extra.get("submitted_at")),
            timestamp_problem=_text(extra.get("timestamp_problem")),
            unreadable_notebooks=tuple(_text(n) for n in extra.get("unreadable_notebooks", [])),
            late_penalty=_number(extra.get("late_penalty", 0.0)),
            due=_text(extra.get("due")), extension=_text(extra.get("extension")),
            isolation=tuple(_text(x) for x in extra.get("isolation", [])), graded_at=_text(extra.get("graded_at")))
        return result, _text(extra.get("grading_key"))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a results.json written by this grader ({type(exc).__name__}: {exc})") from None


def results_of(data: bytes, student: str, assignment: str) -> tuple[SubmissionResult, str]:
    """(the SubmissionResult, its grading key) from a results.json's bytes that hold `student`'s results
    in `assignment`; ValueError, saying why in a few words, when they do not: not JSON, not a document
    written by `to_results_json`, or another student's or assignment's results."""
    try:
        result, key = result_from_json(json.loads(data))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    except RecursionError as exc:                  # nested too deep to be ours
        raise ValueError(str(exc) or type(exc).__name__) from None
    if result.student != student or result.assignment != assignment:
        raise ValueError(f"the results of {result.student!r} in {result.assignment!r}, not of {student!r} "
                         f"in {assignment!r}")
    return result, key
