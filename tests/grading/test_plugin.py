"""The grading plugin and its session: points shared by weight, failures turned into student-safe
messages, internal errors kept apart, seeded rng per test; graders collected once and re-run; the
lean loop and pytest's own protocol giving the same outcomes."""
from __future__ import annotations

import importlib.util
import re
import textwrap
import zlib
from pathlib import Path

import numpy as np
import pytest

from autograder.config import Assignment, Limits, Problem, Tolerance
from autograder.grading.engine import score
from autograder.grading.plugin import INTERNAL_ERROR, GradingPlugin, uint32_words
from autograder.grading.session import GraderSession, InstructorCode
from autograder.sandbox.outcomes import FunctionMissing

TOL = {"float64": Tolerance(1e-7, 1e-9), "float32": Tolerance(1e-4, 1e-5)}


def assignment(**points) -> Assignment:
    return Assignment(name="hw", package="hw", notebooks=("hw.ipynb",),
                      problems=tuple(Problem(n, p, f"test_{n}", "hw.ipynb", TOL) for n, p in points.items()),
                      limits=Limits())


class FakeProxy:
    """Stands for the notebook: `double` works, everything else is missing."""
    last_call = None

    def __init__(self, factor: int = 2):
        self.factor = factor

    def for_problem(self, problem):
        return self

    def __getattr__(self, name):
        if name == "double":
            return lambda x: self.factor * x
        def missing(*a, **k):
            raise FunctionMissing(name)
        return missing


def session(tmp_path: Path, files: dict[str, str], *, lean: bool = True, **points) -> GraderSession:
    graders = tmp_path / "graders"
    graders.mkdir(exist_ok=True)
    for name, body in files.items():
        (graders / f"{name}.py").write_text(textwrap.dedent(body))
    return GraderSession(assignment(**points), InstructorCode(None, None, graders), lean=lean)


def run(tmp_path: Path, files: dict[str, str], *, lean: bool = True, proxy=None, **points):
    with session(tmp_path, files, lean=lean, **points) as s:
        graded = s.run({"hw.ipynb": proxy or FakeProxy()}, seed=7)
    return {t.name.split("::")[-1]: t for t in score(graded, assignment(**points)).tests}, graded


DOUBLE = {"test_double": """
    import pytest

    @pytest.mark.points(3)
    def test_double_big(student):
        assert student.double(2) == 4

    @pytest.mark.points(1)
    @pytest.mark.parametrize("x", [1, 2])
    def test_double_small(student, x):
        assert student.double(x) == 3 * x
"""}


def test_points_are_shared_in_proportion_to_weights(tmp_path):
    """Does a problem's points split by `points` weights, a parametrised test sharing its weight?"""
    results, _ = run(tmp_path, DOUBLE, double=8)
    assert results["test_double_big"].max_score == pytest.approx(6)
    assert results["test_double_big"].score == pytest.approx(6)
    assert results["test_double_small[1]"].max_score == pytest.approx(1)
    assert results["test_double_small[1]"].status == "failed"
    assert sum(t.max_score for t in results.values()) == pytest.approx(8)


def test_student_errors_become_their_feedback(tmp_path):
    """Does a call to a missing function fail the test with the sandbox's student-safe sentence?"""
    results, graded = run(tmp_path, {"test_halve": """
        def test_halve_works(student):
            '''Does halve halve?'''
            assert student.halve(4) == 2
    """}, halve=5)
    t = results["test_halve_works"]
    assert t.status == "failed" and t.score == 0
    assert "`halve` is not defined in your notebook" in t.output
    assert t.description == "Does halve halve?"
    assert not any(c.internal_error for c in graded.checks)


def test_grader_bugs_are_internal_errors_not_student_messages(tmp_path):
    """Is an exception in the grader itself reported as an internal error, its traceback kept for the instructor?"""
    results, graded = run(tmp_path, {"test_double": """
        def test_double_buggy(student):
            {}["no such key"]
    """}, double=1)
    t = results["test_double_buggy"]
    assert t.output == INTERNAL_ERROR
    assert "KeyError" in t.detail
    assert [c.name for c in graded.checks if c.internal_error] == ["test_double.py::test_double_buggy"]


def test_rng_is_seeded_per_test_and_repeatable(tmp_path):
    """Does each test get its own rng, the same on every run with the same seed?"""
    files = {"test_double": """
        def test_double_a(rng):
            assert False, rng.integers(1 << 30)

        def test_double_b(rng):
            assert False, rng.integers(1 << 30)
    """}
    first, _ = run(tmp_path, files, double=2)
    second, _ = run(tmp_path, files, double=2)
    assert first["test_double_a"].output == second["test_double_a"].output
    assert first["test_double_a"].output != first["test_double_b"].output


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "pytest"])
def test_rng_streams_stay_those_of_the_seed_and_the_node_id(tmp_path, lean):
    """Is a test's rng still np.random.default_rng([seed, crc32(node id)]), in both loops, so a
    regrade draws the hidden inputs every earlier grading drew?"""
    files = {"test_double": """
        def test_double_a(rng):
            assert False, rng.integers(1 << 30)
    """}
    tests, graded = run(tmp_path, files, lean=lean, double=2)
    nodeid = graded.checks[0].name
    expected = np.random.default_rng([7, zlib.crc32(nodeid.encode())]).integers(1 << 30)
    assert tests["test_double_a"].output == repr(expected)


UNITTEST_DOUBLE = {"test_double": """
    import unittest

    import pytest

    class TestDouble(unittest.TestCase):
        def setUp(self):
            self.doubled_two = self.student.double(2)

        @pytest.mark.points(3)
        def test_double_of_two(self):
            self.assertEqual(self.doubled_two, 4)

        def test_double_of_three(self):
            self.assertEqual(self.student.double(3), 6)

        def test_double_draws(self):
            self.fail(repr(self.rng.integers(1 << 30)))

        def test_double_knows_its_problem(self):
            self.assertEqual((self.problem, self.seed, hasattr(self, "ref")), ("double", 7, False))
"""}


def test_a_unittest_testcase_grader_gets_the_fixtures_as_attributes(tmp_path):
    """Can a grader be a unittest.TestCase, reading self.student, self.rng, ... (set before setUp),
    weighted by `points`, each check drawing the stream its node id gives?"""
    tests, graded = run(tmp_path, UNITTEST_DOUBLE, double=6)
    assert not graded.broken
    assert tests["test_double_of_two"].status == "passed"
    assert tests["test_double_of_two"].max_score == pytest.approx(3)
    assert tests["test_double_of_three"].status == "passed"
    assert tests["test_double_knows_its_problem"].status == "passed"
    nodeid = next(c.name for c in graded.checks if c.name.endswith("test_double_draws"))
    expected = np.random.default_rng([7, zlib.crc32(nodeid.encode())]).integers(1 << 30)
    assert tests["test_double_draws"].output == repr(expected)

    wrong, _ = run(tmp_path, UNITTEST_DOUBLE, proxy=FakeProxy(factor=3), double=6)
    assert wrong["test_double_of_two"].status == "failed"
    assert wrong["test_double_of_two"].output == "6 != 4"
    assert wrong["test_double_of_three"].output == "9 != 6"


@pytest.mark.parametrize("seed", [0, 1, 7, 2**32 - 1, 2**32, 2**32 + 1, 2**62 + 12345, 2**63 - 1, 2**64 + 3])
@pytest.mark.parametrize("salt", [0, 1, 2**31, 2**32 - 1])
def test_rng_for_draws_what_default_rng_of_seed_and_salt_draws(seed, salt):
    """Does the plugin's seeding (the pair as 32-bit words) give np.random.default_rng([seed, salt])'s
    numbers for seeds and salts on every word boundary?"""
    plugin = GradingPlugin(assignment(double=1), reference=None, catalogue=None)
    plugin.begin({}, seed)
    plugin._salts["node"] = uint32_words(salt)
    got = plugin.rng_for("node")
    want = np.random.default_rng([seed, salt])
    assert got.bit_generator.state == want.bit_generator.state
    assert np.array_equal(got.standard_normal(5), want.standard_normal(5))


def test_a_negative_seed_is_refused_where_numpy_refused_it():
    """Is a negative seed refused when a check asks for its rng (as NumPy refused it there), not
    when the submission begins?"""
    plugin = GradingPlugin(assignment(double=1), reference=None, catalogue=None)
    plugin.begin({}, -1)
    with pytest.raises(ValueError):
        plugin.rng_for("node")


def test_a_module_for_an_unknown_problem_breaks_the_session(tmp_path):
    """Is a grader module whose name matches no problem reported (and its problem's lack of graders), not ignored?"""
    s = session(tmp_path, {"test_other": "def test_other_x():\n    pass\n"}, double=1)
    assert any("no problem named 'other'" in e for e in s.broken)
    assert any("no graders for problem double" in e for e in s.broken)
    graded = s.run({"hw.ipynb": FakeProxy()}, seed=1)
    assert graded.broken == s.broken and graded.checks == ()
    s.close()


def test_a_check_that_cannot_be_graded_gets_its_own_status_and_no_points(tmp_path):
    """Does NotGraded from a check give status "not_graded", score 0 and its reason as the message?"""
    results, graded = run(tmp_path, {"test_double": """
        from autograder.grading.checks import NotGraded

        def test_double_needs_halve(student):
            raise NotGraded("halve", "`halve` is not defined in your notebook")
    """}, double=4)
    t = results["test_double_needs_halve"]
    assert (t.status, t.score, t.max_score) == ("not_graded", 0.0, 4.0)
    assert t.output.startswith("Not graded: this check needs your `halve`")
    assert not t.passed and not any(c.internal_error for c in graded.checks)
    assert [c.needs for c in graded.checks] == ["halve"]       # the block it waits for, for the engine


def test_an_outcome_tells_a_probes_stages_from_catalogued_mistakes():
    """Does a check's outcome keep, beside its diagnoses, which of them are a probe's localised stages?"""
    from types import SimpleNamespace

    from autograder.grading.diagnosis import Mistake
    from autograder.grading.plugin import classify

    found = [Mistake("double.off_by_one", "Known."), Mistake("double.scaling", "A stage.", stage=True)]
    outcome = classify(AssertionError("off"), SimpleNamespace(found=found))
    assert outcome.diagnoses == ("double.off_by_one", "double.scaling") and outcome.stages == ("double.scaling",)


def test_advice_carries_no_points(tmp_path):
    """Does a check marked points(0) count for nothing, whether it passes or fails?"""
    results, _ = run(tmp_path, {"test_double": """
        import pytest

        @pytest.mark.points(1)
        def test_double_works(student):
            assert student.double(2) == 4

        @pytest.mark.points(0)
        def test_double_advice(student):
            assert False, "advice"
    """}, double=5)
    assert results["test_double_works"].max_score == 5
    advice = results["test_double_advice"]
    assert (advice.status, advice.max_score, advice.score) == ("failed", 0.0, 0.0)


class WithStub(FakeProxy):
    """`double` works, `stub` is written but returns None (a body of `pass`), the rest is missing."""

    def __getattr__(self, name):
        return (lambda x: None) if name == "stub" else super().__getattr__(name)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "pytest"])
def test_advice_with_no_result_to_look_at_is_not_run_never_passed(tmp_path, lean):
    """Does an advice check whose function gives no result (missing, or None) end "not run" with its
    reason, in both loops, while the same check on a function that answers passes?"""
    results, graded = run(tmp_path, {"test_double": """
        import pytest

        @pytest.mark.points(1)
        def test_double_works(student):
            assert student.double(2) == 4

        @pytest.mark.points(0)
        def test_halve_touches_nothing(student, expect):
            expect.call_or_not_run(student.halve, 4)

        @pytest.mark.points(0)
        def test_double_touches_nothing(student, expect):
            expect.call_or_not_run(student.double, 4)

        @pytest.mark.points(0)
        def test_nothing_returned(student, expect):
            if expect.call_or_not_run(student.stub, 4) is None:
                expect.not_run("`stub` returned None")
    """}, lean=lean, proxy=WithStub(), double=5)
    halve = results["test_halve_touches_nothing"]
    assert (halve.status, halve.score, halve.max_score) == ("not_run", 0.0, 0.0)
    assert halve.output == "Not run: `halve` is not defined in your notebook, so there was nothing for this check " \
                           "to look at."
    none = results["test_nothing_returned"]
    assert (none.status, none.output) == (
        "not_run", "Not run: `stub` returned None, so there was nothing for this check to look at.")
    assert results["test_double_touches_nothing"].status == "passed"
    assert not any(c.internal_error for c in graded.checks)


def test_graders_are_collected_once_and_rerun_per_submission(tmp_path):
    """Does one session grade submission after submission, each against its own proxy, without collecting again?"""
    with session(tmp_path, DOUBLE, double=8) as s:
        modules = {id(item.module) for item in s.items}
        right = score(s.run({"hw.ipynb": FakeProxy(2)}, seed=1), assignment(double=8))
        wrong = score(s.run({"hw.ipynb": FakeProxy(5)}, seed=1), assignment(double=8))
        again = score(s.run({"hw.ipynb": FakeProxy(2)}, seed=1), assignment(double=8))
        assert {id(item.module) for item in s.items} == modules and s.runs == 3
    assert right.raw_score == again.raw_score == 6 and wrong.raw_score == 0


def _ids(text: str) -> str:
    """Text without object addresses (two runs build their own proxies)."""
    return re.sub(r"0x[0-9a-f]+", "0x?", text)


MIXED = {"test_double": """
    import pytest
    from autograder.grading.checks import NotGraded

    @pytest.fixture
    def four():
        return 4

    @pytest.mark.points(2)
    @pytest.mark.parametrize("x", [1, 2, 3])
    def test_double_values(student, x):
        assert student.double(x) == 2 * x, f"double({x}) is off"

    def test_double_with_other_fixture(student, four):
        assert student.double(four) == 8

    @pytest.mark.skip(reason="not today")
    def test_double_skipped(student):
        assert True

    def test_double_missing_function(student):
        student.triple(1)

    def test_double_grader_bug(student, rng):
        raise ZeroDivisionError(rng.integers(10))

    def test_double_needs(student):
        raise NotGraded("halve", "it raised")

    def test_double_fails_loudly(student):
        pytest.fail("not like this")
"""}


@pytest.mark.parametrize("factor", [2, 3])
def test_the_lean_loop_gives_the_outcomes_pytests_protocol_gives(tmp_path, factor):
    """Do the lean loop and pytest's runtest protocol agree on every check's outcome (status, message, diagnoses)?"""
    def outcomes(lean: bool):
        with session(tmp_path, MIXED, lean=lean, double=10) as s:
            lean_checks = s.lean_checks
            graded = s.run({"hw.ipynb": FakeProxy(factor)}, seed=3)
        return lean_checks, [(c.name, c.status, _ids(c.output), c.diagnoses, c.weight, c.internal_error,
                              _ids(c.detail if not c.internal_error else c.detail.splitlines()[-1]))
                             for c in graded.checks]

    lean_count, lean = outcomes(True)
    pytest_count, by_pytest = outcomes(False)
    assert lean == by_pytest
    assert (lean_count, pytest_count) == (7, 0)        # the check with its own fixture and the skipped one use pytest
    assert len(lean) == 9
    skipped = next(c for c in lean if c[0].endswith("::test_double_skipped"))
    assert (skipped[1], skipped[5]) == ("failed", True), "a skipped check must not pass unseen: it is a grader error"


def test_graders_are_collected_from_their_own_folder_and_no_conftest_above_it_is_read(tmp_path):
    """Does collection stay in the graders' folder (a conftest.py above it is not imported, the
    folders above it are not listed), while a conftest.py among the graders is still read?"""
    (tmp_path / "conftest.py").write_text("raise RuntimeError('a conftest above the graders was imported')\n")
    (tmp_path / "graders").mkdir()
    (tmp_path / "graders" / "conftest.py").write_text("import pytest\n\n\n@pytest.fixture\ndef two():\n    return 2\n")
    with session(tmp_path, {"test_double": "def test_double_uses_the_graders_conftest(two):\n    assert two == 2\n"},
                 double=1) as s:
        assert not s.broken
        assert [i.nodeid for i in s.items] == ["test_double.py::test_double_uses_the_graders_conftest"]
        chain = [node.path for node in s.items[0].listchain()[1:-1]]
    assert chain == [tmp_path / "graders", tmp_path / "graders" / "test_double.py"]


def test_rng_for_node_ids_asked_for_one_after_another_draws_each_ones_own_stream():
    """Is every generator of a submission default_rng([seed, crc32(node id)]), the first one asked
    for (which seeds all at once) and those asked for later alike?"""
    plugin = GradingPlugin(assignment(double=1), reference=None, catalogue=None)
    for seed in (3, 2**40 + 9):
        plugin.begin({}, seed)
        for nodeid in ("a.py::t[0]", "a.py::t[1]", "b.py::u", "a.py::t[0]"):
            want = np.random.default_rng([seed, zlib.crc32(nodeid.encode())])
            assert plugin.rng_for(nodeid).bit_generator.state == want.bit_generator.state


@pytest.mark.parametrize("body, message", [
    ("def test_double_x(student):\n    pass\n\ndef broken(:\n",
     "test_double.py, line 4: SyntaxError: invalid syntax, at 'def broken(:'"),
    ("def test_double_x(student):\n    pass\n  x = 1\n",
     "test_double.py, line 3: IndentationError: unindent does not match any outer indentation level, at 'x = 1'"),
    ("import numpy as np\nnp2.ones(3)\n\ndef test_double_x(student):\n    pass\n",
     "test_double.py, line 2: NameError: name 'np2' is not defined, at 'np2.ones(3)'"),
    ("import numpy as np\nfrom nosuchmodule import x\n",
     "test_double.py, line 2: ModuleNotFoundError: No module named 'nosuchmodule', at 'from nosuchmodule import x'"),
], ids=["syntax", "indentation", "name", "import"])
def test_a_grader_that_does_not_import_is_named_with_its_file_and_line(tmp_path, body, message):
    """Does a grader file that cannot be imported (a syntax error, an error at import) break the
    session with its file, the line at fault and that line's text, not pytest's last report line?"""
    with session(tmp_path, {"test_double": body}, double=1) as s:
        assert s.broken == (f"graders could not be collected: {message}; no graders for problem double",)


def test_an_unknown_mark_on_a_check_breaks_the_session_naming_file_and_test(tmp_path):
    """Is a mark pytest does not know (`point` for `points`, on the test or on its module) a
    collection error naming the file and the test once, rather than a check left at weight 1?"""
    body = ("import pytest\n\n@pytest.mark.point(3)\n@pytest.mark.parametrize('x', [1, 2])\n"
            "def test_double_x(student, x):\n    pass\n\n@pytest.mark.points(1)\n"
            "@pytest.mark.skipif(False, reason='pytest marks are known')\ndef test_double_y(student):\n    pass\n")
    with session(tmp_path, {"test_double": body}, double=1) as s:
        assert len(s.broken) == 1 and s.broken[0].count("unknown mark") == 1, s.broken
        assert s.broken[0].startswith("graders could not be collected: test_double.py::test_double_x: unknown mark "
                                      "@pytest.mark.point (a check's weight is @pytest.mark.points(w)")
    with session(tmp_path, {"test_double": "import pytest\n\npytestmark = pytest.mark.slow\n\n"
                                           "def test_double_y(student):\n    pass\n"}, double=1) as s:
        assert s.broken == ("graders could not be collected: test_double.py::test_double_y: unknown mark "
                            "@pytest.mark.slow (a check's weight is @pytest.mark.points(w); graders may use "
                            "filterwarnings, parametrize, points, skip, skipif, tryfirst, trylast, usefixtures, "
                            "xfail)",)


def instructor_code(tmp_path: Path, reference: str | None, graders: dict[str, str]) -> InstructorCode:
    """A package folder as assignments/<package>/ holds it: reference.py (imported as the session's
    reference module; None: no such file) and graders/, shown in messages as assignments/hw."""
    package = tmp_path / "hw"
    (package / "graders").mkdir(parents=True)
    for name, body in graders.items():
        (package / "graders" / f"{name}.py").write_text(textwrap.dedent(body))
    module = None
    if reference is not None:
        (package / "reference.py").write_text(textwrap.dedent(reference))
        spec = importlib.util.spec_from_file_location(f"reference_{tmp_path.name}", package / "reference.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return InstructorCode(module, None, package / "graders", shown="assignments/hw")


class Doubler:
    """Stands for a notebook whose `double` is right (a named function, as the reference's is)."""
    last_call = None

    def for_problem(self, problem):
        return self

    def double(self, x):
        return 2 * x


BROKEN_REFERENCE = """\
import numpy as np


def double(x):
    x = np.asarray(x)
    return (2 * x).astype(x.dtyp)
"""
AGAINST_REFERENCE = {"test_double": """
    def test_double_matches(student, expect):
        expect.matches_reference(student.double, (2.0,), what="double of 2")
"""}


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "pytest"])
def test_an_error_in_the_reference_names_its_file_and_line_beside_the_check(tmp_path, lean):
    """When a check fails because the reference function raises, does the grader error name
    reference.py and the line at fault (beside the check), while the student sees only that the
    error is on our side?"""
    code = instructor_code(tmp_path, BROKEN_REFERENCE, AGAINST_REFERENCE)
    with GraderSession(assignment(double=1), code, lean=lean) as s:
        graded = s.run({"hw.ipynb": Doubler()}, seed=7)
    scored = score(graded, assignment(double=1))
    assert scored.grader_errors == ("test_double.py::test_double_matches: assignments/hw/reference.py, line 6: "
                                    "AttributeError: 'numpy.ndarray' object has no attribute 'dtyp'",)
    assert [t.output for t in scored.tests] == [INTERNAL_ERROR]


def test_an_error_in_the_grader_itself_names_no_other_file(tmp_path):
    """Does a grader whose own line raises (after calling the reference fine) keep the plain reason?"""
    code = instructor_code(tmp_path, "def double(x):\n    return 2 * x\n", {"test_double": """
        def test_double_then_breaks(student, ref):
            ref.double(1)
            {}["no such key"]
    """})
    with GraderSession(assignment(double=1), code) as s:
        graded = s.run({"hw.ipynb": FakeProxy()}, seed=7)
    assert score(graded, assignment(double=1)).grader_errors == (
        "test_double.py::test_double_then_breaks: KeyError: 'no such key'",)


def test_a_missing_reference_module_is_named_as_the_file_that_does_not_exist(tmp_path):
    """With no reference.py, does a check comparing with the reference say that
    assignments/<package>/reference.py does not exist, rather than that a module lacks a function?"""
    code = instructor_code(tmp_path, None, AGAINST_REFERENCE)
    with GraderSession(assignment(double=1), code) as s:
        graded = s.run({"hw.ipynb": Doubler()}, seed=7)
    (error,) = score(graded, assignment(double=1)).grader_errors
    assert error.startswith("test_double.py::test_double_matches: RuntimeError: assignments/hw/reference.py does "
                            "not exist"), error


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "pytest"])
def test_a_fixture_typo_is_named_in_one_line_with_the_fixtures_there_are(tmp_path, lean):
    """Does a grader asking for a fixture that does not exist (`rgn`) get one line naming it and the
    grading fixtures first among those available, instead of pytest's FixtureLookupError repr?"""
    code = instructor_code(tmp_path, "def double(x):\n    return 2 * x\n", {"test_double": """
        def test_double_typo(student, expect, rgn):
            assert student.double(1) == 2
    """})
    with GraderSession(assignment(double=1), code, lean=lean) as s:
        graded = s.run({"hw.ipynb": FakeProxy()}, seed=7)
    (error,) = score(graded, assignment(double=1)).grader_errors
    assert error.startswith("test_double.py::test_double_typo: fixture 'rgn' not found; available: student, "
                            "expect, rng, ref, tol, seed, problem"), error
    assert "\n" not in error and "FixtureRequest" not in error


@pytest.mark.parametrize("mark, why", [
    ("points(-1)", "@pytest.mark.points(-1): a check's weight is a finite number, 0 or more"),
    ("points(float('nan'))", "@pytest.mark.points(nan): a check's weight is a finite number, 0 or more"),
    ("points(float('inf'))", "@pytest.mark.points(inf): a check's weight is a finite number, 0 or more"),
    ("points(10 ** 400)", "@pytest.mark.points(1000000000"),
    ("points(True)", "@pytest.mark.points(True): a check's weight is a number, not a bool"),
    ("points('3')", "@pytest.mark.points('3'): a check's weight is a number, not a str"),
    ("points()", "@pytest.mark.points(): a check's weight is one number, as @pytest.mark.points(2)"),
    ("points(w=2)", "@pytest.mark.points(w=2): a check's weight is one number, as @pytest.mark.points(2)"),
], ids=["negative", "nan", "inf", "huge", "bool", "str", "none", "keyword"])
def test_a_weight_that_is_not_a_finite_number_of_0_or_more_breaks_the_session_naming_file_and_test(
        tmp_path, mark, why):
    """Is a `points` mark whose weight is negative, not finite, not a number or not given as one
    number a collection error naming the file and the test, rather than a weight that lets the
    problem's other checks score past its points (3 and -1 gave the first 6 of 4 points)?"""
    body = (f"import pytest\n\n@pytest.mark.points(3)\ndef test_double_a(student):\n    pass\n\n"
            f"@pytest.mark.{mark}\ndef test_double_b(student):\n    assert False\n")
    with session(tmp_path, {"test_double": body}, double=4) as s:
        assert len(s.broken) == 1, s.broken
        assert s.broken[0].startswith(f"graders could not be collected: test_double.py::test_double_b: {why}"), (
            s.broken)
        graded = s.run({"hw.ipynb": FakeProxy()}, seed=7)
    assert graded.checks == () and score(graded, assignment(double=4)).tests == ()


def test_a_problem_whose_checks_all_weigh_0_breaks_the_session_saying_so(tmp_path):
    """When every check of a problem weighs 0, is that a collection error naming the grader file, the
    problem and its points (rather than everyone scoring 0 with no grader error), while a check of
    weight 0 beside one that weighs more is still a check that counts for nothing?"""
    zero = ("import pytest\n\n@pytest.mark.points(0)\n@pytest.mark.parametrize('x', [1, 2])\n"
            "def test_double_a(student, x):\n    pass\n\n@pytest.mark.points(0.0)\ndef test_double_b(student):\n"
            "    pass\n")
    with session(tmp_path, {"test_double": zero}, double=4) as s:
        assert s.broken == ("graders could not be collected: test_double.py: all checks of problem double weigh 0, "
                            "so none of its 4 points can be scored; give one of them @pytest.mark.points(w) with w "
                            "above 0",)
    results, graded = run(tmp_path, {"test_double": zero.replace("points(0.0)", "points(2)")}, double=4)
    assert graded.broken == ()
    assert [(t.max_score, t.score) for t in results.values()] == [(0.0, 0.0), (0.0, 0.0), (4.0, 4.0)]


def test_two_classes_with_a_test_of_the_same_name_are_two_checks_each_with_its_weight(tmp_path):
    """Do methods of the same name in two test classes of one grader file keep their own weights (3 and
    1 of a problem worth 4), rather than sharing one weight as the cases of one parametrised test?"""
    body = """
        import pytest

        @pytest.mark.points(3)
        class TestDoubleA:
            def test_double_x(self, student):
                assert student.double(2) == 4

        @pytest.mark.points(1)
        class TestDoubleB:
            @pytest.mark.parametrize("x", [1, 2])
            def test_double_x(self, student, x):
                assert student.double(x) == 2 * x
    """
    _, graded = run(tmp_path, {"test_double": body}, double=4)
    assert graded.broken == ()
    assert {t.name: t.max_score for t in score(graded, assignment(double=4)).tests} == {
        "test_double.py::TestDoubleA::test_double_x": pytest.approx(3),
        "test_double.py::TestDoubleB::test_double_x[1]": pytest.approx(0.5),
        "test_double.py::TestDoubleB::test_double_x[2]": pytest.approx(0.5)}


@pytest.mark.parametrize("function_mark, case_mark, error", [
    ("", "points(-5)", "test_double.py::test_double_a[2]: @pytest.mark.points(-5): a check's weight is a finite "
                       "number, 0 or more"),
    ("", "points(float('nan'))", "test_double.py::test_double_a[2]: @pytest.mark.points(nan): a check's weight "
                                 "is a finite number, 0 or more"),
    ("", "points(0)", "test_double.py::test_double_a: a weight on one case of a parametrised check: put "
                      "@pytest.mark.points on the test function"),
    ("@pytest.mark.points(2)\n", "points(-5)", "test_double.py::test_double_a[2]: @pytest.mark.points(-5): a "
                                               "check's weight is a finite number, 0 or more"),
    ("@pytest.mark.points(2)\n", "points(3)", "test_double.py::test_double_a: a weight on one case of a "
                                              "parametrised check: put @pytest.mark.points on the test function"),
], ids=["negative", "nan", "zero", "negative-under-a-test-weight", "another-weight"])
def test_a_weight_on_one_case_of_a_parametrised_check_breaks_the_session_naming_file_and_test(
        tmp_path, function_mark, case_mark, error):
    """Is a `points` mark on one case of a parametrised test (`pytest.param(2, marks=...)`) read, so
    that a weight refused anywhere is refused there too, and one that differs from the other cases'
    is a collection error, rather than a mark silently ignored?"""
    body = (f"import pytest\n\n{function_mark}@pytest.mark.parametrize('x', [1, pytest.param(2, marks=pytest.mark."
            f"{case_mark}), 3])\ndef test_double_a(student, x):\n    pass\n\n@pytest.mark.points(1)\n"
            f"def test_double_b(student):\n    pass\n")
    with session(tmp_path, {"test_double": body}, double=4) as s:
        assert s.broken == (f"graders could not be collected: {error}",)
        graded = s.run({"hw.ipynb": FakeProxy()}, seed=7)
    assert graded.checks == () and score(graded, assignment(double=4)).tests == ()



@pytest.mark.parametrize("marks, error", [
    ("[pytest.mark.points(1), pytest.mark.points(-3)]",
     "test_double.py::test_double_a[2]: @pytest.mark.points(-3): a check's weight is a finite number, 0 or more"),
    ("[pytest.mark.points(1), pytest.mark.points(2)]",
     "test_double.py::test_double_a[2]: several @pytest.mark.points on one case, weighing otherwise: give it one"),
], ids=["a-refused-second-mark", "two-weights"])
def test_every_points_mark_of_one_case_is_read(tmp_path, marks, error):
    """A case carrying two `points` marks: is a refused weight in the second one refused, and two weights that
    differ a collection error, rather than the first mark read and the other silently ignored?"""
    body = (f"import pytest\n\n@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.points(1)), "
            f"pytest.param(2, marks={marks})])\ndef test_double_a(student, x):\n    pass\n")
    with session(tmp_path, {"test_double": body}, double=4) as s:
        assert s.broken == (f"graders could not be collected: {error}",)
