"""The feedback pages in a real browser: Debian's Chromium, driven by Playwright, at 360 and 1280 px.

The demo class is graded through the real `course autograde` (the session's `graded_demo`); every
page is opened at a phone's and a desktop's width. A page must not scroll sideways, must show every
failed check's message on screen (not folded away), and must log no console error. Screenshots go
to the test's own output folder (tmp_path) for a person to look at.
"""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from autograder.reporting.feedback import write_feedback

from .feedback_samples import dora_result, erin_result

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]
WIDTHS = (360, 1280)
# A page that lost almost nothing is mostly folded: measured 1,822 px at 360 px for 99.5/100 and
# at most 2,557 px for the demo's students with 95 points or more (25,700 px before passed checks
# were folded); the bound leaves room for other fonts.
SHORT_PAGE_PX = 3500


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """One headless Chromium (a fresh profile) for the module; closed, with its processes, at the end."""
    if not CHROMIUM.is_file():
        pytest.fail(f"{CHROMIUM} not found: install Debian's chromium (apt-get install -y chromium), as .ci/run does")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=str(CHROMIUM),
            headless=True, args=FLAGS, viewport={"width": WIDTHS[0], "height": 800})
        try:
            yield context
        finally:
            context.close()


class Look:
    """What one page shows at one width."""

    def __init__(self, context, path: Path, width: int, shots: Path, name: str):
        page = context.new_page()
        self.errors: list[str] = []
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        try:
            page.set_viewport_size({"width": width, "height": 800})
            page.goto(path.as_uri(), wait_until="load")
            self.viewport = page.evaluate("window.innerWidth")
            self.scroll_width = page.evaluate("document.documentElement.scrollWidth")
            self.widest = page.evaluate("Math.max(...Array.from(document.querySelectorAll('body *'),"
                                        " e => e.getBoundingClientRect().right))")
            self.height = page.evaluate("document.documentElement.scrollHeight")
            self.text = " ".join(page.evaluate("document.body.innerText").split())
            self.shot = shots / f"{name}-{width}.png"
            page.screenshot(path=str(self.shot), full_page=True)
        finally:
            page.close()


def demo_pages(graded_demo) -> dict[str, Path]:
    """student id -> the feedback page `course autograde` wrote for the demo class."""
    return {path.parts[-3]: path for path in sorted(graded_demo.folder.glob("feedback/*/transformer-block/*.html"))}


def failed_messages(doc: dict) -> dict[str, list[str]]:
    """For each failed check (grader function) of a results.json, the messages of its failed cases."""
    out: dict[str, list[str]] = {}
    for t in doc["tests"]:
        if t["status"] == "failed" and t["max_score"] > 0:
            message = t["output"].split("\nRecognised mistake")[0]
            out.setdefault(t["name"].split("[")[0], []).append(" ".join(message.replace("`", "").split()))
    return out


def problems_with(look: Look, student: str, width: int, failed: dict[str, list[str]]) -> list[str]:
    where = f"{student} at {width} px"
    out = []
    if look.scroll_width > look.viewport or look.widest > look.viewport + 0.5:
        out.append(f"{where}: scrolls sideways (content {look.scroll_width} px, widest element "
                   f"{look.widest:.0f} px, window {look.viewport} px); see {look.shot}")
    for check, messages in failed.items():
        if not any(m in look.text for m in messages):
            out.append(f"{where}: failed check {check} has no message on screen; see {look.shot}")
    out.extend(f"{where}: console error {e}" for e in look.errors)
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_demo_pages_fit_and_show_every_failed_check(graded_demo, browser, tmp_path, width):
    """Does every demo student's page fit the width, show each failed check's message and log no errors?"""
    assert graded_demo.proc.returncode == 0, graded_demo.proc.stderr[-2000:]
    pages = demo_pages(graded_demo)
    assert len(pages) == len(graded_demo.results) == 13
    problems = []
    for student, path in pages.items():
        look = Look(browser, path, width, tmp_path, student)
        problems += problems_with(look, student, width, failed_messages(graded_demo.results[student]))
    assert not problems, "\n".join(problems)
    assert len(list(tmp_path.glob(f"*-{width}.png"))) == 13


def test_pages_with_full_or_nearly_full_marks_are_short_on_a_phone(graded_demo, browser, tmp_path):
    """Are the pages of a 99.5/100 student, and of every demo student with 95 points or more, short at 360 px?"""
    pages = {"erin": write_feedback(erin_result(), None, tmp_path / "erin")}
    pages.update((student, path) for student, path in demo_pages(graded_demo).items()
                 if graded_demo.results[student]["score"] >= 95)
    too_long = []
    for who, path in pages.items():
        look = Look(browser, path, 360, tmp_path, who)
        if look.height >= SHORT_PAGE_PX:
            too_long.append(f"{who}: {look.height} px tall at 360 px; see {look.shot}")
    assert not too_long, "\n".join(too_long)


@pytest.mark.parametrize("width", WIDTHS)
def test_pages_with_not_graded_checks_advice_and_cascades_fit(browser, tmp_path, width):
    """Do pages with not-graded checks, advice, advice not run, grouped failures and a NameError cascade fit
    and show them?"""
    problems = []
    for result in (dora_result(), erin_result()):
        path = write_feedback(result, None, tmp_path / result.student)
        look = Look(browser, path, width, tmp_path, result.student)
        failed: dict[str, list[str]] = {}
        for t in result.tests:
            if t.status == "failed" and t.max_score > 0:
                failed.setdefault(t.name.split("[")[0], []).append(" ".join(t.output.replace("`", "").split()))
        problems += problems_with(look, result.student, width, failed)
        if result.student == "dora":
            for needle in ("Not graded: this check needs your split_heads", "Advice (no points)",
                           "Not run (no points)", "Because of this, 8 later cells stopped"):
                if needle not in look.text:
                    problems.append(f"dora at {width} px: {needle!r} not on screen; see {look.shot}")
            if re.search(r"NameError: name 'split_heads'", look.text):
                problems.append(f"dora at {width} px: the NameError cascade is not folded; see {look.shot}")
    assert not problems, "\n".join(problems)


# What the notebook runner writes when a student's cell loads a file from their own machine: the
# path is one long token with no space, hyphen or joint the page breaks at.
LOCAL_PATH = "/Users/mariagonzalez/Documents/DeepLearning/homework5/pretrained/block_weights.npz"
FILE_NOT_FOUND = (f"transformer-block.ipynb: The 2nd code cell (`weights = np.load('/Users/mariagonzal...`) raised "
                  f"FileNotFoundError: [Errno 2] No such file or directory: '{LOCAL_PATH}' "
                  f"(line 1: `weights = np.load('{LOCAL_PATH}')`)")


# A helper named in camelCase, whose cell failed, then called by a later cell: the page names it in the
# folded "Because of this, ... was never defined" line.
HELPER = "computeScaledDotProductAttentionWeightsForAllHeadsAtOnce"
NEVER_DEFINED = (
    f"transformer-block.ipynb: The 32nd code cell (`def {HELPER}`) raised SyntaxError: '(' was never closed "
    f"(line 2: `return softmax(q @ k.T / np.sqrt(q.shape[-1])`)",
    f"transformer-block.ipynb: The 33rd code cell (`w = computeScaledDotProductAttentionW...`) raised NameError: "
    f"name '{HELPER}' is not defined (line 1: `w = {HELPER}(np.ones((2, 4)), np.ones((2, 4)))`)")


@pytest.mark.parametrize("notes", [(FILE_NOT_FOUND,), NEVER_DEFINED], ids=["file_path", "never_defined_helper"])
def test_a_note_with_a_long_token_fits_on_a_phone(browser, tmp_path, notes):
    """Does a page whose notes quote a long token (a file path, a long helper's name) fit 360 px?"""
    result = replace(erin_result(), student="maria", notes=notes)
    look = Look(browser, write_feedback(result, None, tmp_path / "maria"), 360, tmp_path, "maria")
    assert notes[0].split("(", 1)[0].strip() in look.text
    assert not problems_with(look, "maria", 360, {}), f"see {look.shot}"


def test_a_hashed_student_id_fits_the_narrowest_phone(browser, tmp_path):
    """Does the page of a student whose id is a 32-digit hash (as JupyterHub's LTI logins name users)
    fit 320 px, the narrowest phone width in use?"""
    student = "6f1ed002ab5595859014ebf0951522d9"
    result = replace(erin_result(), student=student)
    look = Look(browser, write_feedback(result, None, tmp_path / student), 320, tmp_path, student)
    assert student in look.text
    assert not problems_with(look, student, 320, {}), f"see {look.shot}"
