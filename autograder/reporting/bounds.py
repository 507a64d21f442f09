"""Size caps on everything a report shows, whatever a notebook printed or raised.

Student code controls much of the text in a result (exception messages, notes about its cells,
printed output quoted in messages), so before any report is rendered the result is bounded:
at most MAX_NOTES notes (autograder.config's, which also caps `limits.max_notes`) of NOTE_CHARS
characters each, a test message of OUTPUT_CHARS, an instructor detail of DETAIL_CHARS, a crash
reason of ERROR_CHARS. With the graders' own number of
tests this keeps results.json and the feedback page small (tests come from the trusted graders and
are never dropped, so scores are unchanged); the writers also check the rendered
size against RESULTS_JSON_MAX_BYTES and FEEDBACK_MAX_BYTES and fall back to a shorter form.

Control characters in that text (NUL, escape sequences that recolour or rewrite a terminal, a lone
carriage return that hides a line) are written out visibly (`\x1b`), as Python's repr shows them:
a database column such as Gradescope's or an LMS's may refuse NUL, and a TA reading the summary in
a terminal should see what the student's text held, not have it acted on. Tabs and newlines stay.
"""
from __future__ import annotations

import dataclasses

from autograder.config import MAX_NOTES
from autograder.grading.results import SubmissionResult, TestResult
from autograder.text import CONTROL, shown_name, visible

NOTE_CHARS = 1_000
OUTPUT_CHARS = 2_000
DESCRIPTION_CHARS = 300
DETAIL_CHARS = 4_000
ERROR_CHARS = 4_000
HINT_CHARS = 600
MAX_DIAGNOSES = 10
NAME_CHARS = 300
RESULTS_JSON_MAX_BYTES = 2_000_000
FEEDBACK_MAX_BYTES = 2_000_000

ELLIPSIS = " [...]"


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, marked where it was cut; control characters but
    tab and newline written out (`\x00`), lone surrogates (which JSON can carry but UTF-8
    cannot) '?'."""
    if CONTROL.search(text) is not None:
        text = visible(text[: 4 * limit + 1])
    if len(text) > limit:
        text = text[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS
    if text.isascii():                          # nothing to replace: the common case, kept cheap
        return text
    return text.encode("utf-8", "replace").decode("utf-8")


def clip_notes(notes: tuple[str, ...], count: int = MAX_NOTES, chars: int = NOTE_CHARS) -> tuple[str, ...]:
    """At most `count` notes (the last one saying how many more there were), each clipped."""
    notes = tuple(notes)
    if len(notes) > count:
        extra = len(notes) - (count - 1)
        notes = notes[: count - 1] + (f"... and {extra} more notes, not shown.",)
    return tuple(clip(n, chars) for n in notes)


def _bound_test(t: TestResult) -> TestResult:
    if (not t.diagnoses and not t.hints and not t.stages and len(t.output) <= OUTPUT_CHARS
            and len(t.detail) <= DETAIL_CHARS and len(t.name) <= NAME_CHARS and len(t.problem) <= NAME_CHARS
            and len(t.description) <= DESCRIPTION_CHARS
            and (joined := t.name + t.problem + t.output + t.description + t.detail).isascii()
            and CONTROL.search(joined) is None):
        return t        # within every cap, nothing to replace (most tests): checked without a clip per field
    diagnoses = tuple(clip(d, NAME_CHARS) for d in t.diagnoses[:MAX_DIAGNOSES])
    name, problem = clip(t.name, NAME_CHARS), clip(t.problem, NAME_CHARS)
    output, description = clip(t.output, OUTPUT_CHARS), clip(t.description, DESCRIPTION_CHARS)
    hints = tuple(clip(h, HINT_CHARS) for h in t.hints[:len(diagnoses)])
    stages = tuple(clip(s, NAME_CHARS) for s in t.stages[:MAX_DIAGNOSES])
    detail = clip(t.detail, DETAIL_CHARS)
    if (name, problem, output, description, diagnoses, hints, stages, detail) == \
            (t.name, t.problem, t.output, t.description, t.diagnoses, t.hints, t.stages, t.detail):
        return t                                # already within every cap (the usual test)
    return dataclasses.replace(t, name=name, problem=problem, output=output, description=description,
                               diagnoses=diagnoses, hints=hints, stages=stages, detail=detail)


def bound_result(result: SubmissionResult) -> SubmissionResult:
    """`result` with every text field within the caps above (idempotent). The last result bounded is
    remembered (results are frozen): the `course` process bounds each one for results.json and then
    for the feedback page."""
    last = _LAST[0]
    if last is not None and last[0] is result:
        return last[1]
    bounded = dataclasses.replace(
        result, tests=tuple(_bound_test(t) for t in result.tests),
        notes=clip_notes(result.notes), crash_reason=clip(result.crash_reason, ERROR_CHARS),
        grader_errors=tuple(clip(e, NOTE_CHARS) for e in result.grader_errors[:MAX_NOTES]),
        files=tuple(clip(shown_name(f), NAME_CHARS) for f in result.files[:20]))
    _LAST[0] = (result, bounded)
    return bounded


_LAST: list[tuple[SubmissionResult, SubmissionResult] | None] = [None]   # (result, bounded), replaced whole


def shrunk(result: SubmissionResult) -> SubmissionResult:
    """A last resort when a bounded result still renders too large: messages and notes cut short."""
    tests = tuple(dataclasses.replace(t, output=clip(t.output, 200), detail=clip(t.detail, 200),
                                      hints=tuple(clip(h, 200) for h in t.hints))
                  for t in result.tests)
    return dataclasses.replace(result, tests=tests, notes=clip_notes(result.notes, 5, 300),
                               crash_reason=clip(result.crash_reason, 500),
                               grader_errors=tuple(clip(e, 200) for e in result.grader_errors[:5]))
