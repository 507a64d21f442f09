"""The student's feedback page: what it shows, what it never shows, escaping, file naming."""
from __future__ import annotations

from html.parser import HTMLParser

from autograder.layout import CourseLayout
from autograder.reporting.feedback import remove_stale_pages, render_feedback, write_feedback

from .conftest import HINT, MARKUP, SECRET, SEED, submission

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "area", "base", "wbr", "source", "track"}


class TagBalance(HTMLParser):
    """Collects the opened-but-unclosed tag stack and any mismatched closing tags."""

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.scripts = [], [], 0

    def handle_starttag(self, tag, attrs):
        self.scripts += tag == "script"
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack.pop() != tag:
            self.errors.append(tag)


def parse(html: str) -> TagBalance:
    p = TagBalance()
    p.feed(html)
    p.close()
    return p


def test_instructor_detail_and_seed_never_reach_the_page(bob, assignment):
    """Does a result whose detail holds a secret render without the secret or the seed?"""
    html = render_feedback(bob, assignment)
    assert SECRET not in html
    assert str(SEED) not in html
    assert "replay" not in html.lower() and "traceback" not in html.lower()


def test_roster_status_is_not_shown_to_the_student(bob, assignment):
    """Is the instructor-only roster flag kept off the page?"""
    assert "roster" not in render_feedback(bob, assignment).lower()


def test_student_controlled_text_is_escaped(bob, assignment):
    """Is markup inside an exception message shown as text, never as a tag?"""
    html = render_feedback(bob, assignment)
    assert MARKUP not in html
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in html
    assert parse(html).scripts == 0


def test_markup_in_a_student_id_or_note_is_escaped(assignment):
    """Are student ids and execution notes escaped too?"""
    result = submission('<b onmouseover="x()">', notes=("cell 2: <img src=x onerror=alert(1)>",))
    html = render_feedback(result, assignment)
    assert "<b onmouseover" not in html and "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_page_is_well_formed_and_self_contained(bob, assignment):
    """Do the tags balance, and does the page load nothing from elsewhere (no links, scripts, images)?"""
    html = render_feedback(bob, assignment)
    p = parse(html)
    assert p.errors == [] and p.stack == []
    for needle in ("http://", "https://", "<link", "<script", "<img", "src=", "@import"):
        assert needle not in html
    assert "<style>" in html


def test_page_shows_total_problem_scores_and_each_tests_message(bob, assignment):
    """Does the page give the total, each problem's score and each test's status, points and message?"""
    html = render_feedback(bob, assignment)
    assert "12.5" in html and "/ 30 points" in html
    assert "7.5 / 15" in html and "0 / 10" in html and "5 / 5" in html
    assert "512 of 512 entries differ" in html
    assert "test_split_heads_shape_and_values" in html
    assert "1 of 3 checks passed" in html      # the layer_norm check (two cases), split_heads, silu


def test_status_is_written_in_words_not_only_colour(bob, assignment):
    """Is pass/fail stated in text (and tables have header cells) so colour is not the only signal?"""
    html = render_feedback(bob, assignment)
    assert html.count("Passed</span>") == 2 and html.count("Failed</span>") == 2
    assert '<th scope="col">' in html and "<caption>" in html


def test_a_diagnosis_appears_as_a_named_misconception_with_its_hint(bob, assignment):
    """Is a recognised mistake shown by name with the hint from the catalogue?"""
    html = render_feedback(bob, assignment)
    assert "Recognised misconception: Unbiased variance" in html
    assert HINT in html


def test_execution_notes_are_listed(bob, assignment):
    """Are the notes from running the notebook on the page?"""
    html = render_feedback(bob, assignment)
    assert "Notes from running your notebook" in html
    assert "name &#39;np2&#39; is not defined" in html


def test_crashed_submission_explains_itself_and_lists_no_checks(cy, assignment):
    """Does a crashed result show 0, the reason, and no test tables?"""
    html = render_feedback(cy, assignment)
    assert "Grading could not be completed" in html
    assert "ImportError in the graders" in html
    assert '<span class="big">0</span>' in html
    assert "<table>" not in html


def test_a_crash_traceback_is_not_on_the_page(assignment):
    """Is only the first line of a crash error shown, never the grader's traceback?"""
    error = 'KeyError: \'x\'\nTraceback (most recent call last):\n  File "/course/assignments/graders/test_x.py"'
    html = render_feedback(submission("eve", state="crashed", crash_reason=error), assignment)
    assert "KeyError: &#39;x&#39;" in html
    assert "Traceback" not in html and "graders/test_x.py" not in html


def test_full_marks_page(ada, assignment):
    """Does a perfect submission show full marks with every problem passed?"""
    html = render_feedback(ada, assignment)
    assert '<span class="big">30</span>' in html
    assert html.count("All checks passed") == 3
    assert "Notes from running" not in html and "misconception" not in html


def test_page_is_written_per_notebook_like_nbgrader(tmp_path, bob, assignment):
    """Is the page written as <folder>/<notebook-stem>.html, atomically, with nothing else left?"""
    folder = CourseLayout(tmp_path).feedback("bob", "transformer-block")
    path = write_feedback(bob, assignment, folder)
    assert path == folder / "transformer-block.html"
    assert path.read_text(encoding="utf-8") == render_feedback(bob, assignment)
    assert [p.name for p in folder.iterdir()] == ["transformer-block.html"]


def test_page_without_a_graded_file_is_called_feedback(tmp_path, cy, assignment):
    """When no notebook was graded, is the page named feedback.html?"""
    result = submission("zed", files=())
    assert write_feedback(result, assignment, tmp_path).name == "feedback.html"


def test_page_for_a_notebook_that_could_not_be_read_is_named_after_it(tmp_path, assignment):
    """When the notebook was there but not read (a folder or a link in its place), is the page named
    after it, as for any other submission (nbgrader's fetch_feedback looks for that name), not
    feedback.html?"""
    result = submission("zed", files=(), unreadable_notebooks=("transformer-block.ipynb",))
    assert write_feedback(result, assignment, tmp_path).name == "transformer-block.html"


def test_an_earlier_submissions_pages_go_and_other_files_stay(tmp_path, assignment):
    """With the pages of earlier submissions in the folder (one named after a notebook no longer
    submitted, feedback.html from one without notebooks), does removing the stale pages take exactly
    those, and keep a page named after each notebook now submitted (nbgrader's generate_feedback
    writes one per notebook), a TA's own HTML file, a link to a page, and other files?"""
    folder = CourseLayout(tmp_path).feedback("zed", "transformer-block")
    for files in (("old.ipynb",), (), ("second.ipynb",)):
        write_feedback(submission("zed", files=files), assignment, folder)
    (folder / "reading.html").write_text("<!DOCTYPE html>\n<html><title>Reading</title></html>\n")
    (folder / "linked.html").symlink_to(folder / "second.html")
    (folder / "timestamp.txt").write_text("2026-12-14 18:00:00.000000 UTC")
    now = submission("zed", files=("transformer-block.ipynb", "second.ipynb"))
    page = write_feedback(now, assignment, folder)
    assert sorted(remove_stale_pages(folder, now)) == ["feedback.html", "old.html"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["linked.html", "reading.html", "second.html", "timestamp.txt", page.name])
    assert remove_stale_pages(folder, now) == []


def test_sections_kept_from_earlier_pages_give_the_page_made_afresh(ada, bob, cy, assignment, monkeypatch):
    """Rendered one after another (problem views and sections kept from the pages before, the same
    student twice, one whose checks differ only in detail and duration, a review changing a score),
    is every page the one rendered with nothing kept, and is what is kept bounded and dropped when
    the template is loaded again?"""
    from dataclasses import replace

    from autograder.reporting import feedback
    from autograder.reporting.review import ProblemReview, Review

    from .feedback_samples import dora_result, erin_result

    review = Review("bob", assignment.name, (ProblemReview("split_heads", 10.0, 0.0, 4.0, 0.0),), ())
    pages = [(dora_result(), None), (erin_result(), None), (ada, None), (bob, None), (cy, None),
             (replace(ada, student="ada2"), None), (bob, review), (dora_result(), None),
             (replace(bob, tests=tuple(replace(t, duration=9.5, detail="other") for t in bob.tests)), None)]
    monkeypatch.setattr(feedback, "KEPT_MARKUP", 6)
    fresh = []
    for result, rev in pages:
        feedback._KEPT.clear()
        feedback._VIEWS.clear()
        fresh.append(render_feedback(result, assignment, rev))
    feedback._KEPT.clear()
    feedback._VIEWS.clear()
    assert [render_feedback(result, assignment, rev) for result, rev in pages] == fresh
    assert 0 < len(feedback._KEPT) <= 6 and fresh[-1] == fresh[3]
    feedback._KEPT[("stale",)] = feedback.Markup("<p>from another template</p>")
    feedback._KEPT_FROM[0] = None                    # as if the template had been loaded again
    assert render_feedback(pages[0][0], assignment) == fresh[0] and ("stale",) not in feedback._KEPT
