"""The graders' proxy: plain values back, a process per problem, restarts after hangs and crashes."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.config import Limits
from autograder.grading.proxy import StudentProxy
from autograder.notebooks import cell_label
from autograder.sandbox.host import SandboxHost
from autograder.sandbox.outcomes import (
    BadReturnValue,
    CallTimeout,
    ChildCrashed,
    FunctionMissing,
    NotebookFailed,
    StudentRaised,
)

LIMITS = Limits(cell_seconds=2.0, total_seconds=20.0, call_seconds=1.0, memory_mb=1024)

NOTEBOOK = [
    "import numpy as np\nimport os\n%matplotlib inline",
    """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1)          # the unbiased-variance mistake
    return gamma * (x - mean) / np.sqrt(var + eps) + beta

def pre_ln_block(x, params):
    return x + layer_norm(x, params["gamma"], params["beta"])
""",
    "np.allclose = lambda *a, **k: True\nnp.testing.assert_allclose = lambda *a, **k: None",
    "1 / 0",
    """
calls = 0

def count():
    global calls
    calls += 1
    return calls

def hang():
    while True:
        pass

def crash():
    os._exit(1)

def masked(x):
    return np.ma.masked_array(x)

def warns(x):
    return np.exp(x)

def close():
    return "the notebook's own close()"
""",
]


def reference_layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) + beta


@pytest.fixture(scope="module")
def host():
    with SandboxHost() as h:
        h.start()
        yield h


@pytest.fixture
def proxy(host):
    cells = [{"index": i, "label": cell_label(i, s), "source": s} for i, s in enumerate(NOTEBOOK, 1)]
    with StudentProxy(host.submission(cells, LIMITS)) as p:
        yield p


@pytest.fixture
def inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal((2, 3, 8)), rng.standard_normal(8), rng.standard_normal(8)


def test_tampered_numpy_in_the_notebook_cannot_fake_a_pass(proxy, inputs):
    """Does the trusted side get the student's real (wrong) array whatever the notebook did to numpy?"""
    got = proxy.for_problem("layer_norm").layer_norm(*inputs)
    assert type(got) is np.ndarray and not np.allclose(got, reference_layer_norm(*inputs))


def test_execution_reports_the_notebook_run(proxy):
    """Does `execution` hold the notebook's report: the failing cell, by the name a student finds it?"""
    report = proxy.execution
    assert report.cell(4).status == "error" and report.cell(4).error_type == "ZeroDivisionError"
    assert any(n.startswith("The 4th code cell (`1 / 0`) raised ZeroDivisionError") for n in report.notes)
    assert "seccomp" in proxy.isolation


def test_last_call_carries_the_metadata(proxy):
    """After a call, does last_call hold its warnings (and after a failure, last_error the error)?"""
    proxy.for_problem("warns").warns(np.array([1000.0]))
    assert proxy.last_call.warnings and "overflow" in proxy.last_call.warnings[0]
    with pytest.raises(FunctionMissing):
        proxy.nothing_here()
    assert proxy.last_call is None and isinstance(proxy.last_error, FunctionMissing)


def test_each_problem_gets_a_fresh_copy_of_the_notebook_state(proxy):
    """Does switching problems give a process where the notebook's globals are as the notebook left them?"""
    proxy.for_problem("a")
    assert [proxy.count() for _ in range(3)] == [1, 2, 3]
    proxy.for_problem("b")
    assert proxy.count() == 1
    proxy.for_problem("b")                      # same problem again: same process
    assert proxy.count() == 2


def test_a_hang_costs_one_call_and_the_next_call_works(proxy, inputs):
    """After a call times out, does the next call get a fresh process (a restart, not a re-run)?"""
    proxy.for_problem("hang")
    with pytest.raises(CallTimeout):
        proxy.hang()
    assert proxy.layer_norm(*inputs).shape == (2, 3, 8)
    assert proxy.restarts == 1


def test_a_crash_costs_one_call_and_the_next_call_works(proxy, inputs):
    """After a call kills its process, does the next call work in a fresh one?"""
    proxy.for_problem("crash")
    with pytest.raises(ChildCrashed, match="exited with status 1"):
        proxy.crash()
    assert proxy.layer_norm(*inputs).shape == (2, 3, 8)


def test_bad_return_values_are_refused(proxy):
    """Is an ndarray subclass refused with a reason, and the process still usable?"""
    proxy.for_problem("masked")
    with pytest.raises(BadReturnValue, match="MaskedArray"):
        proxy.masked(np.ones(2))
    assert proxy.count() == 1


def test_call_many_returns_values_and_errors(proxy):
    """Does call_many give a value or the error per call, in one round trip?"""
    out = proxy.for_problem("many").call_many([("count", (), {}), ("nothing", (), {}), ("count", (), {})])
    assert out[0] == 1 and isinstance(out[1], FunctionMissing) and out[2] == 2


def test_names_that_clash_with_proxy_attributes_are_reachable(proxy):
    """Is a student function named like a proxy method reachable as proxy[name]?"""
    assert proxy.for_problem("clash")["close"]() == "the notebook's own close()"


def test_a_notebook_that_cannot_finish_fails_every_call(host):
    """When the notebook ran out of time with no time left for a last run (see the sandbox's tests),
    does every call fail with that reason and no restart?"""
    limits = Limits(cell_seconds=2.0, total_seconds=1.0, call_seconds=1.0, memory_mb=1024, submission_seconds=1.5)
    cells = [{"index": 1, "label": "the 1st code cell", "source": "def f():\n    return 1\nwhile True:\n    pass"}]
    with StudentProxy(host.submission(cells, limits)) as proxy:
        for problem in ("a", "b"):
            with pytest.raises(NotebookFailed, match="did not finish within 1 s"):
                proxy.for_problem(problem).f()
        assert proxy.restarts == 0


def test_the_student_code_raising_is_a_student_error(proxy):
    """Does an exception in the student's function come back as StudentRaised, naming the function?"""
    with pytest.raises(StudentRaised, match="`pre_ln_block` raised"):
        proxy.for_problem("block").pre_ln_block(np.ones((1, 8)), {})


COUNTER = """
calls = 0

def count(step):
    global calls
    calls += step
    if calls == 2:
        raise ValueError('two')
    return calls
"""


def test_expect_call_each_is_expect_call_one_by_one(host):
    """Does expect.call_each give what expect.call gives one call at a time: the values recorded,
    the first failure raised, and no call made after it?"""
    from autograder.config import Tolerance
    from autograder.grading.checks import Expect

    def attempt(each: bool):
        cells = [{"index": 1, "label": cell_label(1, COUNTER), "source": COUNTER}]
        with StudentProxy(host.submission(cells, LIMITS)) as p:
            student = p.for_problem("count")
            ex = Expect(problem="count", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9), catalogue=None,
                        last_call=lambda: student.last_call, student=student)
            first = (ex.call_each(student.count, (1,)) if each else [ex.call(student.count, 1)])
            with pytest.raises(StudentRaised) as raised:
                if each:
                    ex.call_each(student.count, (1,), (1,))
                else:
                    for _ in range(2):
                        ex.call(student.count, 1)
            return first, [c.value for c in ex.calls], raised.value.feedback, student.last_error, student.count(10)

    batched, alone = attempt(True), attempt(False)
    assert batched[:3] == alone[:3] == ([1], [1], batched[2])
    assert batched[3] is not None and alone[3] is not None
    assert batched[4] == alone[4] == 12             # the call after the failure was not made


def test_expect_call_each_returns_every_value(proxy):
    """When every call returns, does call_each give the values in order and record each call?"""
    from autograder.config import Tolerance
    from autograder.grading.checks import Expect

    student = proxy.for_problem("each")
    ex = Expect(problem="each", tolerance_for=lambda dtype: Tolerance(1e-7, 1e-9), catalogue=None,
                last_call=lambda: student.last_call, student=student)
    assert ex.call_each(student.count, (), (), ()) == [1, 2, 3]
    assert [c.function for c in ex.calls] == ["count"] * 3 and student.last_call.value == 3
