"""Late policy: started late days after due date plus grace, a share per day, a last accepted day."""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.config import Assignment, LatePolicy, Limits
from autograder.grading.lateness import (
    CLOCK_SKEW_MINUTES,
    ahead_of_clock,
    late_words,
    lateness,
    parse_timestamp,
    submission_time,
)

DUE = dt.datetime(2026, 12, 14, 23, 59, tzinfo=dt.UTC)


def assignment(**policy) -> Assignment:
    return Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=(), limits=Limits(),
                      due=DUE, late_policy=LatePolicy(**policy))


def at(**delta) -> dt.datetime:
    return DUE + dt.timedelta(**delta)


def test_on_time_and_within_grace_cost_nothing():
    """Is a submission before the due date, or inside the grace minutes, not late?"""
    a = assignment(grace_minutes=15, penalty_per_day=0.1)
    assert lateness(a, at(hours=-1)).fraction == 0
    assert lateness(a, at(minutes=14)).late_days == 0


@pytest.mark.parametrize("due, grace", [(dt.datetime(9999, 12, 31, 23, 0, tzinfo=dt.UTC), 120.0),
                                        (DUE, 1e15)], ids=["due_near_9999", "grace_of_1e15_minutes"])
def test_a_grace_past_the_last_representable_date_means_never_late(due, grace):
    """Is a grace period that reaches past the year 9999 'never late', not an OverflowError for everyone?"""
    a = replace(assignment(grace_minutes=grace, penalty_per_day=0.1), due=due)
    late = lateness(a, dt.datetime(9999, 12, 31, 23, 59, tzinfo=dt.UTC))
    assert (late.late_days, late.fraction) == (0, 0.0)


def test_each_started_day_costs_the_daily_share():
    """Does one minute past grace count as a day, and 25 hours as two?"""
    a = assignment(grace_minutes=15, penalty_per_day=0.1)
    assert lateness(a, at(minutes=16)).late_days == 1
    assert lateness(a, at(hours=25, minutes=15)).late_days == 2
    assert lateness(a, at(hours=25, minutes=15)).fraction == 0.2


def test_past_the_last_accepted_day_scores_zero():
    """Is a submission later than max_late_days worth nothing?"""
    a = assignment(penalty_per_day=0.1, max_late_days=3)
    assert lateness(a, at(days=3, minutes=-1)).fraction == pytest.approx(0.3)
    assert lateness(a, at(days=3, minutes=1)).fraction == 1.0


def test_no_timestamp_or_no_due_date_is_on_time(tmp_path):
    """Is a submission without timestamp.txt, or an assignment without a due date, never late?"""
    assert submission_time(tmp_path) == (None, "")
    no_due = Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=(), limits=Limits())
    assert lateness(no_due, at(days=30)).fraction == 0


def test_nbgrader_timestamps_are_read_and_bad_ones_noted(tmp_path):
    """Are nbgrader's 'YYYY-MM-DD HH:MM:SS.ffffff UTC' stamps read, and an unreadable one noted?"""
    assert parse_timestamp("2026-12-16 12:00:00.000000 UTC") == dt.datetime(2026, 12, 16, 12, tzinfo=dt.UTC)
    (tmp_path / "timestamp.txt").write_text("yesterday-ish")
    when, note = submission_time(tmp_path)
    assert when is None and "could not be read as a time" in note
    (tmp_path / "timestamp.txt").write_text("garbage\n")
    assert submission_time(tmp_path)[1].startswith(
        "timestamp.txt could not be read as a time ('garbage': not a time (nbgrader writes '2026-12-14 "
        "23:59:00.000000 UTC'))"), "one word is named as no time, not as an empty time before a zone"


@pytest.mark.parametrize(("data", "utc"), [
    (b"\xef\xbb\xbf2026-12-15 00:30:00.000000 UTC", dt.datetime(2026, 12, 15, 0, 30, tzinfo=dt.UTC)),
    (b"\xef\xbb\xbf2026-12-15T00:30:00+01:00\r\n", dt.datetime(2026, 12, 14, 23, 30, tzinfo=dt.UTC)),
    (b"2026-12-15 00:30:00.000000 utc", dt.datetime(2026, 12, 15, 0, 30, tzinfo=dt.UTC)),
    (b"2026-12-15 00:30:00.000000 Gmt\n", dt.datetime(2026, 12, 15, 0, 30, tzinfo=dt.UTC)),
    (b"2026-12-15 01:30:00.000000 cet", dt.datetime(2026, 12, 15, 0, 30, tzinfo=dt.UTC)),
], ids=["bom_utc", "bom_iso_crlf", "lower_utc", "mixed_gmt", "lower_cet"])
def test_a_stamp_saved_with_a_byte_order_mark_or_a_lower_case_zone_is_read(tmp_path, data, utc):
    """Is a timestamp.txt edited by hand and saved as 'UTF-8 with BOM', or with its zone in lower case
    ('utc', which nbgrader reads too), read as the time it says (so the late policy applies), not noted
    as unreadable and graded on time?"""
    (tmp_path / "timestamp.txt").write_bytes(data)
    assert submission_time(tmp_path) == (utc, "")
    assert lateness(assignment(grace_minutes=15, penalty_per_day=0.1), utc).late_days == (utc.day == 15)


def test_a_byte_order_mark_is_skipped_only_before_the_time(tmp_path):
    """Is a byte-order mark anywhere but before the time still unreadable, with the note naming the stamp?"""
    stamp = "2026-12-15 00:30:00\ufeff UTC"
    (tmp_path / "timestamp.txt").write_bytes(stamp.encode())
    when, note = submission_time(tmp_path)
    assert when is None and note.startswith(f"timestamp.txt could not be read as a time ({stamp!r}: ")


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59",
                                   "0001-01-01 00:00:00 NZDT", "9999-12-31 23:59:59.999999 HST"])
def test_a_stamp_out_of_range_once_in_utc_is_unread_not_an_overflow(tmp_path, stamp):
    """Is a time whose offset takes it before the year 1 or past 9999 in UTC refused as unreadable
    (a note, treated as on time), instead of an OverflowError where it is converted later?"""
    with pytest.raises(ValueError, match="not a time between the years 1 and 9999 once in UTC"):
        parse_timestamp(stamp)
    (tmp_path / "timestamp.txt").write_text(stamp)
    when, note = submission_time(tmp_path)
    assert when is None
    assert note == (f"timestamp.txt could not be read as a time ({stamp!r}: not a time between the years 1 and "
                    f"9999 once in UTC); the submission was treated as on time.")


@pytest.mark.parametrize(("stamp", "utc"), [
    ("0001-01-01T00:00:00Z", dt.datetime(1, 1, 1)),
    ("0001-01-01T23:59:00+23:59", dt.datetime(1, 1, 1)),
    ("9999-12-31T00:00:00-23:59", dt.datetime(9999, 12, 31, 23, 59)),
    ("9999-12-31 23:59:59.999999 UTC", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    ("2026-12-15 11:00:00.000000 EST", dt.datetime(2026, 12, 15, 16)),
    ("2026-12-15T11:00:00", dt.datetime(2026, 12, 15, 11)),
])
def test_every_stamp_read_is_in_utc_and_converts_wherever_it_is_stored(stamp, utc):
    """Is a stamp read as an aware time in UTC, which the gradebook's naive UTC (as results.json
    keeps it), its SQLite text (read back as SQLAlchemy reads it) and the page all take?"""
    from autograder.grading.results import SubmissionResult
    from autograder.reporting.feedback import _readable_time
    from autograder.reporting.gradebook import submission_timestamp
    from autograder.reporting.gradebook_sql import sql_datetime

    when = parse_timestamp(stamp)
    assert when.utcoffset() == dt.timedelta(0) and when.replace(tzinfo=None) == utc
    result = SubmissionResult(student="ada", assignment="hw", state="graded", submitted_at=when.isoformat())
    assert submission_timestamp(result) == utc
    assert dt.datetime.fromisoformat(sql_datetime(utc)) == utc
    assert _readable_time(when.isoformat()).endswith(" UTC")


def test_an_extension_moves_the_students_due_date():
    """With a 2-day extension, is a submission 1 day after the due date on time for that student only,
    and one 3 days after it late by 1 day against their own due date, said so in the note?"""
    import dataclasses

    from autograder.config import Extension

    a = dataclasses.replace(assignment(penalty_per_day=0.1), extensions={"ada": Extension(days=2)})
    assert lateness(a, at(days=1), "ada").fraction == 0
    assert lateness(a, at(days=1), "ada").due == DUE + dt.timedelta(days=2)
    assert lateness(a, at(days=1), "bob").late_days == 1
    late = lateness(a, at(days=3), "ada")
    assert (late.late_days, late.fraction, late.extension) == (1, pytest.approx(0.1), "2 days")
    assert late.note(5.0) == ("Submitted 1 day after your due date (with your extension of 2 days): "
                              "late penalty of 10% (5 points).")


@pytest.mark.parametrize("stamp", ["2026-12-16 07:00:00.000000 EST", "2026-12-16 13:00:00.000000 CET",
                                   "2026-12-16 12:00:00.000000 GMT", "2026-12-16 15:00:00.000000 +03",
                                   "2026-12-16 17:30:00.000000 +0530"])
def test_stamps_written_under_another_exchange_timezone_are_read_in_that_zone(tmp_path, stamp):
    """Is a timestamp.txt that nbgrader wrote under another `Exchange.timezone` (its %Z: a zone name, or
    an offset where the zone has no name) read as that zone's time, so the late policy still applies?"""
    (tmp_path / "timestamp.txt").write_text(stamp)
    when, note = submission_time(tmp_path)
    assert (when, note) == (dt.datetime(2026, 12, 16, 12, tzinfo=dt.UTC), "")
    assert lateness(assignment(penalty_per_day=0.1), when).late_days == 2


def course_with_timezone(root, zone: str | None):
    """A course folder whose nbgrader_config.py sets Exchange.timezone to `zone` (none when None),
    and ada's submission folder in it."""
    from autograder.layout import NBGRADER_CONFIG, CourseLayout

    setting = f"c.Exchange.timezone = {zone!r}\n" if zone else ""
    (root / NBGRADER_CONFIG).write_text(f"c = get_config()  # noqa: F821\n{setting}", encoding="utf-8")
    folder = CourseLayout(root).submission("ada", "hw")
    folder.mkdir(parents=True)
    return folder


@pytest.mark.parametrize(("stamp", "utc"), [
    ("2026-12-15 11:00:00.000000 PST", dt.datetime(2026, 12, 15, 19, tzinfo=dt.UTC)),
    ("2026-07-15 11:00:00.000000 PDT", dt.datetime(2026, 7, 15, 18, tzinfo=dt.UTC)),
    ("2026-11-01 01:30:00.000000 PDT", dt.datetime(2026, 11, 1, 8, 30, tzinfo=dt.UTC)),   # the hour that
    ("2026-11-01 01:30:00.000000 PST", dt.datetime(2026, 11, 1, 9, 30, tzinfo=dt.UTC)),   # comes twice
])
def test_an_abbreviation_is_read_in_the_courses_exchange_timezone(tmp_path, stamp, utc):
    """With `c.Exchange.timezone = 'America/Los_Angeles'` in the course's nbgrader_config.py, are the
    PST and PDT that nbgrader writes read as that zone's winter and summer time (the repeated hour
    too), so a stamp 11 hours after the due date is late?"""
    folder = course_with_timezone(tmp_path, "America/Los_Angeles")
    (folder / "timestamp.txt").write_text(stamp)
    assert submission_time(folder, tmp_path) == (utc, "")
    due = dt.datetime(2026, 12, 15, 8, tzinfo=dt.UTC)
    a = Assignment(name="hw", package="hw", notebooks=("hw.ipynb",), problems=(), limits=Limits(), due=due,
                   late_policy=LatePolicy(penalty_per_day=0.1))
    assert lateness(a, submission_time(folder, tmp_path)[0]).late_days == (1 if utc.month == 12 else 0)


def test_an_abbreviation_of_several_offsets_needs_the_exchange_timezone(tmp_path):
    """Is 'IST' (India, Ireland, Israel) read in the configured zone, and without one (or in a zone that
    does not use it) not read at all, with a note that names it?"""
    folder = course_with_timezone(tmp_path, "Europe/Dublin")
    (folder / "timestamp.txt").write_text("2026-07-15 11:00:00.000000 IST")
    assert submission_time(folder, tmp_path) == (dt.datetime(2026, 7, 15, 10, tzinfo=dt.UTC), "")
    assert parse_timestamp("2026-07-15 11:00:00.000000 IST", "Asia/Kolkata") == \
        dt.datetime(2026, 7, 15, 5, 30, tzinfo=dt.UTC)
    (folder / "timestamp.txt").write_text("2026-07-15 11:00:00.000000 CST")
    when, note = submission_time(folder, tmp_path)
    assert when is None and "'CST'" in note and "Europe/Dublin" in note and "treated as on time" in note
    other = tmp_path / "other"
    other.mkdir()
    unset = course_with_timezone(other, None)
    (unset / "timestamp.txt").write_text("2026-12-15 11:00:00.000000 PST")
    when, note = submission_time(unset, other)
    assert when is None and "'PST'" in note and "Exchange.timezone" in note


@pytest.mark.slow
def test_a_batch_warns_of_an_unread_timestamp_and_reads_it_in_the_configured_zone(tmp_path):
    """Does `course autograde` say to the instructor that a PST stamp it cannot read cost no penalty,
    and, once the course's nbgrader_config.py sets Exchange.timezone, take the late penalty?"""
    from autograder import api
    from autograder.layout import NBGRADER_CONFIG, CourseLayout
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    # 11:00 PST is 19:00 UTC, 19 hours after the demo's due date (23:59 UTC the day before)
    (CourseLayout(folder).submission("ada", "transformer-block") / "timestamp.txt").write_text(
        "2026-11-17 11:00:00.000000 PST")
    lines: list[str] = []
    batch = api.autograde(folder, "transformer-block", student="ada", workers=1, log=lines.append)
    assert batch.results[0].late_penalty == 0 and "'PST'" in batch.results[0].timestamp_problem
    assert [ln for ln in lines if ln.startswith("WARNING: ada: timestamp.txt could not be read as a time")]
    with open(folder / NBGRADER_CONFIG, "a", encoding="utf-8") as fh:
        fh.write('c.Exchange.timezone = "America/Los_Angeles"  # noqa: F821\n')
    batch = api.autograde(folder, "transformer-block", student="ada", workers=1, force=True, log=lines.append)
    assert batch.results[0].late_penalty == 10.0 and batch.results[0].timestamp_problem == ""


@pytest.mark.slow
def test_a_kept_result_is_not_told_no_exchange_timezone_is_set_once_one_is(tmp_path):
    """With Exchange.timezone set after a PST stamp was graded unread, does a plain `course autograde` (which
    keeps the unchanged result) say that the timezone is set and how to grade it again, rather than repeat
    that none is set?"""
    from autograder import api
    from autograder.layout import NBGRADER_CONFIG, CourseLayout
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    (CourseLayout(folder).submission("ada", "transformer-block") / "timestamp.txt").write_text(
        "2026-11-17 11:00:00.000000 PST")
    api.autograde(folder, "transformer-block", workers=1)
    with open(folder / NBGRADER_CONFIG, "a", encoding="utf-8") as fh:
        fh.write('c.Exchange.timezone = "America/Los_Angeles"  # noqa: F821\n')
    lines: list[str] = []
    batch = api.autograde(folder, "transformer-block", workers=1, log=lines.append)
    assert batch.skipped == ("ada",) and batch.results[0].late_penalty == 0
    assert [ln for ln in lines if "timestamp.txt" in ln] == [
        "WARNING: ada: this result is kept from a run before Exchange.timezone was set (America/Los_Angeles now), "
        "when its timestamp.txt could not be read as a time. `course autograde transformer-block --student ada "
        "--force` grades it again, reading the stamp in America/Los_Angeles. No late penalty was taken (see "
        "docs/grading.md, Late submissions)."]


@pytest.mark.slow
def test_course_autograde_commits_the_grades_of_a_submission_whose_stamp_is_out_of_range(tmp_path):
    """Does `course autograde` grade a submission whose timestamp.txt is out of range once in UTC as
    on time, with the "timestamp unread" flag, commit its grades to the gradebook and exit 0; and
    does a stamp in the year 1 reach the gradebook so that nbgrader reads it back?"""
    import subprocess
    import sys

    from nbgrader.api import Gradebook

    from autograder.layout import CourseLayout
    from tests.conftest import course_with_students

    folder = course_with_students(tmp_path / "course", ("ada",))
    stamp_file = CourseLayout(folder).submission("ada", "transformer-block") / "timestamp.txt"
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    for stamp, stored in [("0001-01-01T00:00:00+23:59", None), ("9999-12-31T23:59:59-23:59", None),
                          ("0001-01-01T00:00:00Z", dt.datetime(1, 1, 1))]:
        stamp_file.write_text(stamp)
        done = subprocess.run([sys.executable, "-m", "autograder.cli", "autograde", "transformer-block",
                               "--course-dir", str(folder), "--force"], capture_output=True, text=True,
                              timeout=600, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "OverflowError" not in done.stdout + done.stderr and "gradebook: ada" not in done.stderr
        assert ("timestamp unread" in done.stdout) == (stored is None), done.stdout
        with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gb:
            submission = gb.find_submission("transformer-block", "ada")
            assert submission.score == 100.0
            assert submission.timestamp == stored


@pytest.mark.parametrize("ahead, warned", [
    (dt.timedelta(days=-1), False), (dt.timedelta(0), False), (dt.timedelta(minutes=CLOCK_SKEW_MINUTES), False),
    (dt.timedelta(minutes=CLOCK_SKEW_MINUTES, seconds=1), True), (dt.timedelta(days=8, hours=1), True),
], ids=["past", "now", "at-the-tolerance", "just-past-it", "days-ahead"])
def test_a_stamp_is_ahead_of_the_clock_only_beyond_the_tolerance_for_skew(ahead, warned):
    """Is a submission time later than this machine's clock by more than CLOCK_SKEW_MINUTES said to be ahead
    of it, by how many seconds, while one in the past, now, or up to the tolerance ahead is not?"""
    now = dt.datetime(2026, 12, 6, 19, 0, tzinfo=dt.UTC)
    assert ahead_of_clock(now + ahead, now) == (ahead.total_seconds() if warned else 0.0)
    assert ahead_of_clock((now + ahead).astimezone(dt.timezone(dt.timedelta(hours=-8))), now) == \
        ahead_of_clock(now + ahead, now), "an offset changes the zone it is written in, not the time"


@pytest.mark.parametrize("seconds, words", [
    (0.2, "1 second"), (1, "1 second"), (30, "30 seconds"), (59.999, "59 seconds"), (60, "1 minute"),
    (61, "1 minute 1 second"), (119, "1 minute 59 seconds"), (3599, "59 minutes 59 seconds"), (3600, "1 hour"),
    (3659, "1 hour 59 seconds"), (3660, "1 hour 1 minute"), (3661, "1 hour 1 minute"),
    (86399.9, "23 hours 59 minutes"), (86400, "1 day"), (86400 + 300, "1 day 5 minutes"),
    (36 * 3600, "1 day 12 hours"), (36 * 3600 + 60, "1 day 12 hours"), (2 * 86400, "2 days"),
    (3 * 86400 + 3 * 3600 + 1, "3 days 3 hours"), (3 * 86400 + 3 * 3600 + 59 * 60 + 59, "3 days 3 hours")])
def test_late_words_say_how_late_at_a_glance(seconds, words):
    """Is how late a submission was said in the two largest of days, hours, minutes and seconds that are not
    0, each whole and never rounded up (36 hours and 1 minute is "1 day 12 hours", not "37 hours"), so that
    one 30 seconds late is told "30 seconds" (not a minute, nor on time), and under a second "1 second"?"""
    assert late_words(seconds) == words


def test_a_note_says_how_late_and_how_many_days_that_counts_as():
    """Is a submission 36 hours late (2 days at 10% each: every day started counts) told "1 day 12 hours after the
    due date, counted as 2 days", and one exactly a day late just "1 day"?"""
    a = assignment(penalty_per_day=0.1)
    assert lateness(a, at(hours=36)).note(20.0) == (
        "Submitted 1 day 12 hours after the due date, counted as 2 days: late penalty of 20% (20 points).")
    assert lateness(a, at(days=1)).note(10.0) == (
        "Submitted 1 day after the due date: late penalty of 10% (10 points).")


def test_a_note_measures_from_the_due_date_it_names_not_from_the_end_of_the_grace():
    """With 15 minutes' grace, is a submission 16 minutes after the due date (1 minute past the grace, a day
    started) told "16 minutes after the due date", not "1 minute", and one with an extension measured from
    the student's own due date?"""
    import dataclasses

    from autograder.config import Extension

    a = assignment(grace_minutes=15, penalty_per_day=0.1)
    assert lateness(a, at(minutes=16)).note(8.5) == (
        "Submitted 16 minutes after the due date, counted as 1 day: late penalty of 10% (8.5 points).")
    assert lateness(a, at(hours=24, minutes=10)).note(8.5) == (
        "Submitted 1 day 10 minutes after the due date, counted as 1 day: late penalty of 10% (8.5 points).")
    a = dataclasses.replace(a, extensions={"ada": Extension(hours=12)})
    assert lateness(a, at(hours=12, minutes=20), "ada").note(8.5) == (
        "Submitted 20 minutes after your due date (with your extension of 12 hours), counted as 1 day: late "
        "penalty of 10% (8.5 points).")


@pytest.mark.parametrize("stamp, why", [
    ("hello world", "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')"),
    ("garbage 12", "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')"),
    ("2026-12-14 PST x", "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')"),
    ("2026-13-02 10:00:00 UTC", "month must be in 1..12"),
])
def test_an_unreadable_stamp_is_said_in_the_projects_words_not_pythons(tmp_path, stamp, why):
    """Is a stamp that is no time at all ('hello world') noted as "not a time", as a single word is, rather
    than with Python's "Invalid isoformat string: 'hello'", while a time that does not exist keeps its reason?"""
    (tmp_path / "timestamp.txt").write_text(stamp)
    when, note = submission_time(tmp_path)
    assert when is None
    assert note == (f"timestamp.txt could not be read as a time ({stamp!r}: {why}); the submission was treated "
                    f"as on time.")
    assert "isoformat" not in note


def test_the_exchange_timezone_is_read_once_then_kept_and_without_jsonschemas_format_checkers(tmp_path):
    """Does reading the course's Exchange.timezone (for a stamp in 'PST'), which loads the course's
    nbgrader_config.py and so nbgrader, leave out jsonschema's format-check libraries (rfc3987-syntax
    alone builds a parser for seconds of CPU), and does the next process read it from the user's cache
    without importing nbgrader, until a config file changes?"""
    import subprocess
    import sys

    from autograder.layout import NBGRADER_CONFIG
    from autograder.slowimports import FORMAT_CHECK_MODULES
    from tests.conftest import ROOT, copy_course

    course = copy_course(tmp_path / "course")
    cache = tmp_path / "tmp"
    cache.mkdir()
    code = ("import sys; from pathlib import Path; from autograder.grading.lateness import exchange_timezone; "
            "zone = exchange_timezone(Path(sys.argv[1])); "
            f"print(repr(zone), 'nbgrader' in sys.modules, sorted(n for n in {FORMAT_CHECK_MODULES!r} "
            f"if sys.modules.get(n)))")

    def read() -> str:
        done = subprocess.run([sys.executable, "-c", code, str(course)], capture_output=True, text=True, cwd=ROOT,
                              timeout=300, env={**os.environ, "TMPDIR": str(cache)})
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1]

    assert read() == "'' True []"              # loaded: nbgrader imported, no format checker
    assert read() == "'' False []"             # from the cache
    config = course / NBGRADER_CONFIG
    config.write_text(config.read_text() + "c.Exchange.timezone = 'America/Los_Angeles'\n")
    assert read() == "'America/Los_Angeles' True []"
    assert read() == "'America/Los_Angeles' False []"
