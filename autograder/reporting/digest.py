"""A submission's checks and notes, grouped for reading.

Graders report one TestResult per test case, and the sandbox one note per cell that failed; read
as they come, a submission with one unfinished function shows sixteen identical failures and a
syntax error shows up as eight NameErrors. This module groups them, without changing a score:

- the cases of a parametrised grader form one `Check` ("5 of 6 cases");
- failed checks of a problem that all report the very same message form one `FailureGroup`;
- checks worth no points (`max_score == 0`) are advice, and checks with status "not_graded" (a
  check that could not run because a building block failed) are kept apart from failures;
- advice with status "not_run" (the function gave no result to look at: not written yet, raised,
  returned None) is kept apart too: it is neither passed nor advice;
- execution notes that report the same error form one `NoteGroup`, and NameErrors for a name that
  an earlier failed cell defines are attached to that cell's note as its consequences.

Everything here is rendered by the feedback page and by the grade-cell annotations; both show
only student-safe fields (`output`, `description`, diagnoses, hints and which diagnoses are only a
probe's localised stage), never `detail`.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

from autograder.grading.results import SubmissionResult, TestResult

from .results_json import numbered_tests, ordered_problems, short_name

CheckKind = Literal["failed", "not_graded", "advice", "not_run", "passed"]

NOT_GRADED = "not_graded"
NOT_RUN = "not_run"


# --------------------------------------------------------------------------- checks

def case_label(test: TestResult) -> str:
    """The parameters of a parametrised test (`n5_d8_h2`), or "" for a plain one."""
    name = short_name(test)
    return name[name.index("[") + 1:-1] if name.endswith("]") and "[" in name else ""


def function_name(test: TestResult) -> str:
    """The grader function of a test, without its parameters: `test_layer_norm_matches_reference`."""
    name = short_name(test)
    return name[:name.index("[")] if name.endswith("]") and "[" in name else name


def is_advice(test: TestResult) -> bool:
    """A check worth no points: what it reports is advice (e.g. an argument changed in place)."""
    return test.max_score == 0


def case_state(test: TestResult) -> CheckKind:
    """passed, failed, not_graded (could not run), advice (no points; only when it has something to
    say) or not_run (advice with nothing to look at: the function gave no result). A check worth
    points that was not run lost them: it is failed."""
    if is_advice(test):
        if test.status == NOT_RUN:
            return "not_run"
        return "passed" if test.passed else "advice"
    if test.passed:
        return "passed"
    if test.status == NOT_GRADED:
        return "not_graded"
    return "failed"


@dataclass(frozen=True)
class Case:
    number: str           # "1.3", as in results.json
    label: str            # parameters, "" for an unparametrised test
    test: TestResult

    @cached_property          # asked for again and again while a page is rendered: worked out once
    def state(self) -> CheckKind:
        return case_state(self.test)


@dataclass(frozen=True)
class Check:
    """One grader function with all its cases (a single case when it is not parametrised)."""
    function: str
    description: str
    cases: tuple[Case, ...]

    @cached_property
    def kind(self) -> CheckKind:
        states = {c.state for c in self.cases}
        for kind in ("failed", "not_graded", "advice", "not_run"):
            if kind in states:
                return kind
        return "passed"

    @property
    def parametrised(self) -> bool:
        return len(self.cases) > 1 or any(c.label for c in self.cases)

    def cases_in(self, state: CheckKind) -> tuple[Case, ...]:
        return tuple(c for c in self.cases if c.state == state)

    @property
    def score(self) -> float:
        return round(sum(c.test.score for c in self.cases), 6)

    @property
    def max_score(self) -> float:
        return round(sum(c.test.max_score for c in self.cases), 6)

    @cached_property
    def messages(self) -> tuple[str, ...]:
        """The distinct messages of the cases that did not pass, in order."""
        seen: dict[str, None] = {}
        for c in self.cases:
            if c.state != "passed" and c.test.output:
                seen.setdefault(c.test.output.strip(), None)
        return tuple(seen)

    @property
    def diagnoses(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for c in self.cases:
            for d in c.test.diagnoses:
                seen.setdefault(d, None)
        return tuple(seen)

    @property
    def partly_graded(self) -> bool:
        """A check not graded in some cases whose other cases passed and earned their points: neither
        "not graded" nor "no points" describes it."""
        return self.kind == "not_graded" and any(c.state == "passed" for c in self.cases)


@dataclass(frozen=True)
class FailureGroup:
    """Failed (or not graded) checks of one problem; more than one only when every one of them said `message`."""
    checks: tuple[Check, ...]
    message: str          # the shared message when len(checks) > 1, else ""

    @property
    def same_error(self) -> bool:
        return len(self.checks) > 1

    @property
    def partly_graded(self) -> bool:
        """Checks not graded of which some earned points in the cases that passed."""
        return any(c.partly_graded for c in self.checks)


@dataclass(frozen=True)
class ProblemDigest:
    name: str
    number: int
    score: float
    max_score: float
    checks: tuple[Check, ...]

    def of_kind(self, kind: CheckKind) -> tuple[Check, ...]:
        return self._by_kind.get(kind, ())

    @cached_property
    def _by_kind(self) -> dict[CheckKind, tuple[Check, ...]]:
        kinds: dict[CheckKind, list[Check]] = {}
        for c in self.checks:
            kinds.setdefault(c.kind, []).append(c)
        return {kind: tuple(checks) for kind, checks in kinds.items()}

    @property
    def failures(self) -> tuple[FailureGroup, ...]:
        """Failed checks, those that share one message grouped where the first of them stands."""
        return group_alike(self.of_kind("failed"))

    @property
    def not_graded(self) -> tuple[FailureGroup, ...]:
        """Checks that could not be graded, grouped by their one reason like failures."""
        return group_alike(self.of_kind("not_graded"))

    @property
    def advice(self) -> tuple[Check, ...]:
        """Advice checks with something new to say: one that only repeats the message of a failed or
        not-graded check of the same problem (its call raised the same error) is left out."""
        said = {m for kind in ("failed", "not_graded") for c in self.of_kind(kind) for m in c.messages}
        return tuple(c for c in self.of_kind("advice") if not set(c.messages) <= said)

    @property
    def not_run(self) -> tuple[Check, ...]:
        """Advice checks that had nothing to look at (the function gave no result): never passed."""
        return self.of_kind("not_run")

    @property
    def partly_graded(self) -> int:
        """Of the checks not graded, those that earned points in the cases that passed."""
        return sum(c.partly_graded for c in self.of_kind("not_graded"))

    def count(self, state: CheckKind) -> int:
        """How many cases (results.json's tests) are in `state`."""
        return self._counts.get(state, 0)

    @cached_property
    def _counts(self) -> dict[CheckKind, int]:
        counts: dict[CheckKind, int] = {}
        for check in self.checks:
            for c in check.cases:
                counts[c.state] = counts.get(c.state, 0) + 1
        return counts

    @property
    def graded_cases(self) -> int:
        """Cases worth points."""
        return sum(not is_advice(c.test) for check in self.checks for c in check.cases)

    @property
    def graded_checks(self) -> int:
        """Checks (grader functions) worth points: what the reports count, as their cards show checks."""
        return sum(check.max_score > 0 for check in self.checks)

    @property
    def full_marks(self) -> bool:
        return bool(self.checks) and self.count("failed") == 0 and self.count("not_graded") == 0

    @property
    def needs_reading(self) -> bool:
        """Anything to read beyond "all passed": lost points, checks not graded, advice, advice not
        run, or no checks at all."""
        return not self.full_marks or bool(self.advice) or bool(self.not_run)

    @property
    def diagnoses(self) -> tuple[tuple[str, str], ...]:
        """(diagnosis id, hint) of every recognised mistake in this problem, first hint kept."""
        seen: dict[str, str] = {}
        for check in self.checks:
            for c in check.cases:
                hints = c.test.hints + ("",) * (len(c.test.diagnoses) - len(c.test.hints))
                for d, hint in zip(c.test.diagnoses, hints):
                    if d not in seen or (not seen[d] and hint):
                        seen[d] = hint
        return tuple(seen.items())

    @property
    def stages(self) -> tuple[str, ...]:
        """Those diagnoses that are a probe's guess of the stage where the output first goes wrong,
        not a catalogued mistake (`TestResult.stages`)."""
        return tuple(dict.fromkeys(s for check in self.checks for c in check.cases for s in c.test.stages))


def group_alike(checks: tuple[Check, ...]) -> tuple[FailureGroup, ...]:
    """Checks in order; those whose cases all gave one identical message grouped where the first stands."""
    by_message: dict[str, list[Check]] = {}
    for check in checks:
        if len(check.messages) == 1:
            by_message.setdefault(check.messages[0], []).append(check)
    out: list[FailureGroup] = []
    done: set[int] = set()
    for check in checks:
        if id(check) in done:
            continue
        same = by_message.get(check.messages[0], []) if len(check.messages) == 1 else []
        if len(same) > 1:
            out.append(FailureGroup(tuple(same), check.messages[0]))
            done.update(id(c) for c in same)
        else:
            out.append(FailureGroup((check,), ""))
            done.add(id(check))
    return tuple(out)


def group_checks(tests: Iterable[tuple[str, TestResult]]) -> tuple[Check, ...]:
    """Numbered tests of one problem -> Checks, one per grader function, in first-seen order."""
    groups: dict[str, list[Case]] = {}
    descriptions: dict[str, str] = {}
    for number, test in tests:
        fn = function_name(test)
        groups.setdefault(fn, []).append(Case(number, case_label(test), test))
        descriptions.setdefault(fn, test.description)
    return tuple(Check(fn, descriptions[fn], tuple(cases)) for fn, cases in groups.items())


ProblemTests = tuple[int, str, float, float, list[tuple[str, TestResult]]]   # number, name, score, max, tests


def problem_tests(result: SubmissionResult) -> Iterator[ProblemTests]:
    """Every problem of the submission in course.yml order: its number, name, score, max score and
    numbered tests, what its digest is made from."""
    points = dict(result.problem_points)
    by_problem: dict[str, list[tuple[str, TestResult]]] = {name: [] for name in ordered_problems(result)}
    for n, t in numbered_tests(result):      # one pass over the tests, not one per problem
        by_problem[t.problem].append((n, t))
    for index, (name, mine) in enumerate(by_problem.items(), start=1):
        score = result.problem_score(name)
        max_score = points.get(name, round(sum(t.max_score for _, t in mine), 6))
        yield index, name, score, max_score, mine


def problem_digest(tests: ProblemTests) -> ProblemDigest:
    index, name, score, max_score, mine = tests
    return ProblemDigest(name=name, number=index, score=score, max_score=max_score, checks=group_checks(mine))


def digest_key(tests: ProblemTests) -> tuple[object, ...]:
    """All a problem's digest is made from but its tests' `detail` (never shown to students) and
    `duration` (never shown): equal keys, equal digests as far as a report reads them, so a
    report's part for the problem may be kept by this key for the next student."""
    index, name, score, max_score, mine = tests
    return (index, name, score, max_score,
            tuple((t.name, t.problem, t.score, t.max_score, t.status, t.output, t.description, t.diagnoses, t.hints,
                   t.stages) for _, t in mine))


def digest_problems(result: SubmissionResult) -> tuple[ProblemDigest, ...]:
    """Every problem of the submission in course.yml order, its checks grouped."""
    return tuple(problem_digest(tests) for tests in problem_tests(result))


# --------------------------------------------------------------------------- notes

# "<where it happened> raised <Type>[: <message>][ (<where in the code>)]"
_RAISED = re.compile(r"^(?P<place>.*?)\braised (?P<error>[A-Z_][\w.]*(?:[:\s].*)?)$", re.S)
_LOCATION_START = ("line ", "cell ", "at ", "in ", "the ", "code cell", "called from")
_NAME_ERROR = re.compile(r"^NameError: name '(?P<name>[A-Za-z_]\w*)' is not defined")


def _strip_location(error: str) -> str:
    """`NameError: name 'f' is not defined (line 2: ...)` -> `NameError: name 'f' is not defined`."""
    text = error.rstrip()
    if not text.endswith(")"):
        return text
    start = len(text)
    while True:
        start = text.rfind(" (", 0, start)
        if start < 0:
            return text
        inner = text[start + 2:-1]
        depth, balanced, quoted = 0, True, False
        for ch in inner:            # parentheses inside `code` do not count
            quoted ^= ch == "`"
            if quoted:
                continue
            depth += ch == "("
            depth -= ch == ")"
            if depth < 0:
                balanced = False
                break
        if balanced and depth == 0 and inner.lower().startswith(_LOCATION_START):
            return text[:start].rstrip()


@dataclass(frozen=True)
class Note:
    text: str
    error: str = ""       # "<Type>: <message>" without where it happened; "" for other notes
    undefined: str = ""   # the name of a NameError "name 'x' is not defined"

    @property
    def key(self) -> str:
        return self.error or self.text


def parse_note(text: str) -> Note:
    m = _RAISED.match(text.strip())
    if not m:
        return Note(text)
    raw = m.group("error").strip()
    error = _strip_location(raw)
    if ":" not in error:
        # no message (a bare `assert`, `raise NotImplementedError()`): the same error only when the
        # same statement raised it
        code = re.findall(r"`([^`]+)`", raw[len(error):])
        error += f" at `{code[-1].strip()}`" if code else f" {raw[len(error):].strip()}"
    undefined = _NAME_ERROR.match(error)
    return Note(text, error, undefined.group("name") if undefined else "")


@dataclass(frozen=True)
class NoteGroup:
    first: str                       # the note as written
    repeats: tuple[str, ...] = ()    # later notes reporting the same error
    consequences: tuple[str, ...] = ()   # NameErrors for a name that `first`'s cell failed to define
    undefined: str = ""              # that name


def _defines(note: Note, name: str) -> bool:
    return bool(re.search(rf"\b(?:def|class)\s+{re.escape(name)}\b", note.text))


def group_notes(notes: Iterable[str]) -> tuple[NoteGroup, ...]:
    """Group execution notes, kept in the order they come (the notebook's, cell by cell): notes in a row
    that report the same error together, NameErrors under the failed cell that defines the name. Notes
    of one error with another note between them are not grouped, so that no cell's note is shown above
    the note of an earlier cell (a note that reports no error, repeated word for word, is one note)."""
    parsed = [parse_note(n) for n in notes]
    keys: dict[str, list[int]] = {}
    for i, note in enumerate(parsed):
        keys.setdefault(note.key, []).append(i)
    cause_of: dict[str, int] = {}          # undefined name -> index of the note whose cell defines it
    for key, members in keys.items():
        note = parsed[members[0]]
        if not note.undefined:
            continue
        for j in range(members[0] - 1, -1, -1):
            other = parsed[j]
            if other.error and other.undefined != note.undefined and _defines(other, note.undefined):
                cause_of[key] = j
                break
    caused: dict[int, list[int]] = {}
    for key, j in cause_of.items():
        caused.setdefault(j, []).extend(keys[key])
    runs: list[list[int]] = []            # the notes shown in turn, each with those of the same error right after it
    for i, note in enumerate(parsed):
        if note.key in cause_of:
            continue                       # shown under its cause
        if runs and parsed[runs[-1][0]].key == note.key:
            runs[-1].append(i)
        elif not note.error and (same := [r for r in runs if parsed[r[0]].key == note.key]):
            same[0].append(i)              # a note that reports no error, repeated word for word: one note
        else:
            runs.append([i])
    out = []
    for members in runs:
        note = parsed[members[0]]
        consequences = [k for m in members for k in caused.get(m, [])]
        names = {parsed[k].undefined for k in consequences}
        out.append(NoteGroup(
            first=note.text,
            repeats=tuple(parsed[m].text for m in members[1:]),
            consequences=tuple(parsed[k].text for k in sorted(consequences)),
            undefined=names.pop() if len(names) == 1 else ""))
    return tuple(out)
