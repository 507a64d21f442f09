"""Late submissions: when a submission was made (nbgrader's timestamp.txt) and what the course's
late policy takes off for it."""
from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import Assignment
from ..layout import NBGRADER_CONFIG
from ..text import format_points, plural

TIMESTAMP_FILE = "timestamp.txt"   # written by nbgrader's collect/submit into each submission folder
TIMESTAMP_MAX_BYTES = 4096
# How far a submission's time may lie ahead of the grading machine's clock before `course autograde`
# warns of it (`ahead_of_clock`): two machines kept by NTP agree to well under a second, and one left
# to drift for months is off by a few minutes at most, while a stamp hours or days ahead is a clock
# set wrong (or a time zone taken for another) on the machine that collected it, or a file edited.
CLOCK_SKEW_MINUTES = 5
BYTE_ORDER_MARK = "\ufeff"


@dataclass(frozen=True)
class Lateness:
    submitted_at: dt.datetime | None
    late_days: int          # started days after the due date (plus grace); 0 when on time
    fraction: float         # share of the score taken off, 0..1
    due: dt.datetime | None = None   # the student's due date, extension included
    extension: str = ""     # the student's extension in words ("2 days"), "" when none
    late_seconds: float = 0.0   # how long after the due date (grace included) when late; 0 when on time (or not known)

    def note(self, penalty_points: float) -> str:
        """For the student: how long after the due date they submitted (the time the sentence names,
        the grace included: 16 minutes after a due date with 15 minutes' grace, which counts as a day
        started), the days that counts as, and the penalty."""
        if self.late_days == 0:
            return ""
        whose = f"your due date (with your extension of {self.extension})" if self.extension else "the due date"
        counted = plural(self.late_days, "day")
        how_late = late_words(self.late_seconds) if self.late_seconds > 0 else counted
        if how_late != counted:                  # every day started counts: 1 day 12 hours count as 2 days
            whose += f", counted as {counted}"
        if self.fraction >= 1:
            return (f"Submitted {how_late} after {whose}, past the last accepted day: late "
                    f"penalty of 100% ({format_points(penalty_points)} points, all of the autograder's score).")
        return (f"Submitted {how_late} after {whose}: late penalty of "
                f"{self.fraction:.0%} ({format_points(penalty_points)} points).")


LATE_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


def late_words(seconds: float) -> str:
    """How late, in words a student reads at a glance: the two largest of days, hours, minutes and seconds
    that are not 0, each a whole number, never rounded up ("30 seconds", "25 minutes 10 seconds", "1 hour 5
    minutes", "1 day", "1 day 12 hours" for 36 hours and 1 minute, "2 days 5 minutes"), so that a submission
    seconds late is told so; under a second is "1 second", never "0 seconds"."""
    left = max(int(seconds), 1)
    parts: list[str] = []
    for unit, size in LATE_UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(plural(count, unit))
    return " ".join(parts[:2])


def parse_timestamp(text: str, zone: str | Callable[[], str] = "") -> dt.datetime:
    """nbgrader's '2026-12-14 23:59:00.123456 UTC' or an ISO 8601 time, as an aware time in UTC;
    naive times are UTC.

    nbgrader writes the stamp with `%Z` of its `Exchange.timezone` (UTC unless configured), so a
    course or hub set to another zone writes the time zone database's abbreviation for it, or the
    offset where the zone has none ('+03'). An abbreviation is read as ZONE_ABBREVIATIONS says, or
    else in `zone`, the IANA name of that `Exchange.timezone` ('America/Los_Angeles': 'PST' in
    winter, 'PDT' in summer), or a function giving it, called only then. Anything else is a
    ValueError, as any unreadable stamp; so is a time that is not one in UTC (years 1 to 9999): an
    offset of up to a day takes '0001-01-01T00:00:00+23:59' or '9999-12-31T23:59:59-23:59' out of
    that range, which every later use (the gradebook's naive UTC, `nbgrader export`, the page) needs.

    A stamp edited by hand may spell its zone in lower case ('utc', which nbgrader reads too) or start
    with a UTF-8 byte-order mark (an editor saving 'UTF-8 with BOM'; nbgrader's own reader stops at
    it, so the course's nbgrader commands read stamps here: nbgrader_hooks): both are read."""
    text = text.removeprefix(BYTE_ORDER_MARK).strip()
    if text[-len(" UTC"):].upper() == " UTC":
        text = text[: -len(" UTC")] + "+00:00"
    try:
        value = _iso_time(text)
    except ValueError:
        when, _, abbreviation = text.rpartition(" ")
        if not when:                               # one word ('garbage'): no time before a zone
            raise ValueError(NOT_A_TIME) from None
        if not abbreviation.isalpha():
            raise                                  # _iso_time's reason
        local = _iso_time(when)
        if local.tzinfo is not None:
            raise
        value = _read_in_zone(local, abbreviation.upper(), zone)   # the database's are upper case
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)
    try:
        return value.astimezone(dt.UTC)
    except OverflowError:
        raise ValueError("not a time between the years 1 and 9999 once in UTC") from None


NOT_A_TIME = "not a time (nbgrader writes '2026-12-14 23:59:00.000000 UTC')"


def _iso_time(text: str) -> dt.datetime:
    """`datetime.fromisoformat`, its "Invalid isoformat string: ..." worded as NOT_A_TIME; a time written
    as one that does not exist keeps Python's reason ("month must be in 1..12")."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        if str(exc).startswith("Invalid isoformat string"):
            raise ValueError(NOT_A_TIME) from None
        raise


# Abbreviations the time zone database gives (nbgrader's `%Z`) that mean one offset (hours from UTC)
# in every zone of it, so are read without knowing the zone. Not here, because each means more than
# one: PST (also Manila), CST and CDT (US Central, China, Cuba), IST (India, Ireland, Israel); those
# are read in the course's Exchange.timezone only.
ZONE_ABBREVIATIONS: dict[str, float] = {
    "UTC": 0, "GMT": 0, "WET": 0, "WEST": 1, "BST": 1, "CET": 1, "CEST": 2, "MET": 1, "MEST": 2, "EET": 2,
    "EEST": 3, "MSK": 3, "IDT": 3, "WAT": 1, "CAT": 2, "SAST": 2, "EAT": 3, "PKT": 5, "WIB": 7, "WITA": 8,
    "WIT": 9, "HKT": 8, "JST": 9, "KST": 9, "AWST": 8, "ACST": 9.5, "ACDT": 10.5, "AEST": 10, "AEDT": 11,
    "NZST": 12, "NZDT": 13, "NST": -3.5, "NDT": -2.5, "AST": -4, "ADT": -3, "EST": -5, "EDT": -4,
    "MST": -7, "MDT": -6, "PDT": -7, "AKST": -9, "AKDT": -8, "HST": -10, "HDT": -9,
}


NO_ZONE = "no Exchange.timezone is set in nbgrader's config"     # why such an abbreviation was not read


def _read_in_zone(local: dt.datetime, abbreviation: str, zone_of: str | Callable[[], str]) -> dt.datetime:
    """`local`, a wall-clock time that nbgrader wrote as `abbreviation`, as an aware time (a fixed
    offset, named so). The table first: its abbreviations mean the same offset in any zone, so the
    zone (which may take loading nbgrader's config) is asked for only when the table lacks one."""
    hours = ZONE_ABBREVIATIONS.get(abbreviation)
    if hours is not None:
        return local.replace(tzinfo=dt.timezone(dt.timedelta(hours=hours), abbreviation))
    zone = zone_of if isinstance(zone_of, str) else zone_of()
    if zone:
        tz = _zone(zone)
        for fold in (0, 1):        # the hour repeated when summer time ends: 01:30 PDT, then 01:30 PST
            value = local.replace(tzinfo=tz, fold=fold)
            offset = value.utcoffset()
            if value.tzname() == abbreviation and offset is not None:
                return local.replace(tzinfo=dt.timezone(offset, abbreviation))
        raise ValueError(f"time zone {abbreviation!r} is not what {zone} (nbgrader's Exchange.timezone) "
                         f"calls {local:%Y-%m-%d %H:%M:%S}")
    raise ValueError(f"time zone {abbreviation!r} means more than one offset or none known, and {NO_ZONE} "
                     f"to read it in")


def _zone(name: str) -> dt.tzinfo:
    """The time zone database's zone of this name ('America/Los_Angeles'); ValueError when it has none."""
    import zoneinfo

    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (nbgrader's Exchange.timezone)") from None


ZONE_CACHE = "exchange-timezone"     # usercache kind: the Exchange.timezone read from nbgrader's config files


def exchange_timezone(course_root: Path) -> str:
    """nbgrader's `Exchange.timezone` for the course in `course_root` ("" when not set), read as
    nbgrader reads its config (autograder.nbconfig). The course's config imports nbgrader (and
    nbconvert): about 1.2 s of CPU even without jsonschema's format-check libraries
    (autograder.slowimports, left out here too: they would double it), paid by every process that
    grades such a stamp. So the value is kept in the user's cache (autograder.usercache) under a hash
    of the config files' texts and of this Python, and read from there while they are unchanged."""
    import hashlib

    from .. import usercache
    from ..nbconfig import config_files, nbgrader_settings
    from ..slowimports import skip_format_checkers

    files = config_files(course_root)
    digest = hashlib.sha256(f"{sys.prefix}\0{sys.version_info[:2]}\0".encode())
    for folder, _ in files:
        digest.update(f"{folder}\0".encode())
        with contextlib.suppress(OSError):
            digest.update(Path(folder, NBGRADER_CONFIG).read_bytes())
    key = digest.hexdigest()
    cached = usercache.read_entry(ZONE_CACHE, key)
    if isinstance(cached, dict) and isinstance(cached.get("zone"), str):
        return str(cached["zone"])
    skip_format_checkers()
    cfg = nbgrader_settings(course_root, files)
    zone = str(cfg.Exchange.timezone) if "timezone" in cfg.Exchange else ""
    usercache.write_entry(ZONE_CACHE, key, {"zone": zone})
    return zone


def submission_time(folder: Path, course_root: Path | None = None) -> tuple[dt.datetime | None, str]:
    """(time, note): the submission's timestamp, or None with a note when it is unreadable. A time
    zone abbreviation ZONE_ABBREVIATIONS lacks is read in the Exchange.timezone of the course in
    `course_root` (see `parse_timestamp`)."""
    from ..notebooks import RefusedFile, read_regular

    path = folder / TIMESTAMP_FILE
    if not os.path.lexists(path):
        return None, ""
    try:
        text = read_regular(path, TIMESTAMP_MAX_BYTES).decode("utf-8", errors="replace")
    except RefusedFile as exc:
        return None, f"{exc} The submission was treated as on time."
    try:
        return parse_timestamp(text, (lambda: exchange_timezone(course_root)) if course_root else ""), ""
    except ValueError as exc:
        return None, (f"{TIMESTAMP_FILE} could not be read as a time ({text.strip()[:60]!r}: {exc}); the "
                      f"submission was treated as on time.")


def ahead_of_clock(submitted_at: dt.datetime, now: dt.datetime | None = None) -> float:
    """How many seconds `submitted_at` (aware) lies ahead of `now` (this machine's clock, aware; default:
    the time now) when that is more than CLOCK_SKEW_MINUTES, else 0: a submission cannot have been made
    after it is graded, so its stamp is wrong, and so may be the late penalty judged from it."""
    ahead = (submitted_at - (now or dt.datetime.now(dt.UTC))).total_seconds()
    return ahead if ahead > CLOCK_SKEW_MINUTES * 60 else 0.0


def lateness(assignment: Assignment, submitted_at: dt.datetime | None, student: str = "") -> Lateness:
    """How late `student`'s submission is against their own due date (course.yml's `due` plus their
    entry in `extensions`), and what the late policy takes off for it."""
    due = assignment.due_for(student)
    extension = assignment.extensions.get(student)
    words = extension.describe() if extension is not None and extension.delta else ""
    if submitted_at is None or due is None:
        return Lateness(submitted_at, 0, 0.0, due, words)
    policy = assignment.late_policy
    try:
        deadline = due + dt.timedelta(minutes=policy.grace_minutes)
    except OverflowError:               # a grace reaching past the year 9999: nothing can be late
        return Lateness(submitted_at, 0, 0.0, due, words)
    late = (submitted_at - deadline).total_seconds()
    if late <= 0:
        return Lateness(submitted_at, 0, 0.0, due, words)
    days = math.ceil(late / 86400)          # days started after the grace
    after_due = late + policy.grace_minutes * 60
    if policy.max_late_days is not None and days > policy.max_late_days:
        return Lateness(submitted_at, days, 1.0, due, words, after_due)
    return Lateness(submitted_at, days, min(1.0, policy.penalty_per_day * days), due, words, after_due)
