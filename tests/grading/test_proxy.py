"""The graders' proxy: lazy start, plain values back, restarts after hangs and crashes, substitutes."""
from __future__ import annotations

import time

import numpy as np
import pytest

from autograder.config import Limits
from autograder.grading.proxy import StudentProxy
from autograder.sandbox.launcher import Sandbox
from autograder.sandbox.outcomes import BadReturnValue, CallTimeout, ChildCrashed, FunctionMissing, NotebookFailed

LIMITS = Limits(cell_seconds=1.0, total_seconds=20.0, call_seconds=1.0, memory_mb=1024)

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
def hang():
    while True:
        pass

def crash():
    os._exit(1)

def masked(x):
    return np.ma.masked_array(x)

def warns(x):
    return np.exp(x)
""",
]


def reference_layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    return gamma * (x - mean) / np.sqrt(x.var(axis=-1, keepdims=True) + eps) + beta


class Factory:
    """Counts sandboxes made; closes them at the end of the test."""

    def __init__(self, sources=NOTEBOOK, limits=LIMITS, start=False):
        self.sources, self.limits, self.start = sources, limits, start
        self.made: list[Sandbox] = []

    def __call__(self) -> Sandbox:
        box = Sandbox([{"index": i, "source": s} for i, s in enumerate(self.sources, 1)], self.limits)
        if self.start:
            box.start()
        self.made.append(box)
        return box


@pytest.fixture
def factory():
    f = Factory()
    yield f
    for box in f.made:
        box.close()


@pytest.fixture
def inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal((2, 3, 8)), rng.standard_normal(8), rng.standard_normal(8)


def test_the_sandbox_starts_on_first_use(factory, inputs):
    """Is nothing started until the first call, and then exactly one sandbox?"""
    proxy = StudentProxy(factory, call_seconds=1.0)
    assert factory.made == []
    proxy.layer_norm(*inputs)
    proxy.layer_norm(*inputs)
    assert len(factory.made) == 1
    proxy.close()


def test_a_started_sandbox_from_the_factory_is_used_as_is(inputs):
    """Does the proxy accept a factory that already started its sandbox (no second run)?"""
    factory = Factory(start=True)
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        proxy.layer_norm(*inputs)
        assert factory.made[0].starts == 1


def test_tampered_numpy_in_the_notebook_cannot_fake_a_pass(factory, inputs):
    """With np.allclose overridden in the notebook, does the grader still see the wrong array?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        got = proxy.layer_norm(*inputs)
        assert type(got) is np.ndarray and got.shape == (2, 3, 8)
        assert not np.allclose(got, reference_layer_norm(*inputs))


def test_execution_reports_the_first_run(factory):
    """Does `execution` give the first run's cell errors and skipped magics as notes?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        notes = proxy.execution.notes
        assert proxy.start() is proxy.execution
    assert "cell 1: skipped IPython magic `%matplotlib inline`" in notes
    assert "cell 4 raised ZeroDivisionError: division by zero (line 1: `1 / 0`)" in notes


def test_last_call_carries_the_metadata(factory):
    """After a call, does last_call hold its warnings; after a failed call, is it cleared?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        proxy.warns(np.array([1000.0]))
        assert proxy.last_call.warnings == ("RuntimeWarning: overflow encountered in exp (cell 5, line 13)",)
        with pytest.raises(FunctionMissing):
            proxy.nope()
        assert proxy.last_call is None and isinstance(proxy.last_error, FunctionMissing)


def test_a_hang_costs_one_call_and_the_next_call_works(factory, inputs):
    """After a CallTimeout, does the next call run in a fresh child (notebook re-run), counting a restart?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        started = time.monotonic()
        with pytest.raises(CallTimeout):
            proxy.hang()
        assert time.monotonic() - started < 6.0, "the call limit bounds the wait"
        first = proxy.execution
        assert proxy.layer_norm(*inputs).shape == (2, 3, 8)
        assert proxy.restarts == 1 and proxy.execution is first
        assert proxy.sandbox.starts == 2 and len(factory.made) == 1


def test_a_crash_costs_one_call_and_the_next_call_works(factory, inputs):
    """After a ChildCrashed, does the next call work again?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        with pytest.raises(ChildCrashed):
            proxy.crash()
        assert proxy.layer_norm(*inputs).shape == (2, 3, 8) and proxy.restarts == 1


def test_a_function_that_keeps_failing_is_not_called_again(factory, inputs):
    """After two crashes (or hangs) of one function, do its calls fail at once while others still work?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        for _ in range(2):
            with pytest.raises(ChildCrashed):
                proxy.crash()
        starts = proxy.sandbox.starts
        for _ in range(10):
            with pytest.raises(ChildCrashed, match="not called again") as info:
                proxy.crash()
            assert proxy.sandbox.starts == starts, "refused without running the notebook again"
        assert "exited with status 1" in info.value.feedback
        with pytest.raises(CallTimeout):
            proxy.hang()
        assert proxy.layer_norm(*inputs).shape == (2, 3, 8)
        assert proxy.restarts == 3


def test_restarts_are_capped(factory):
    """Once max_restarts is used up, do further calls fail at once instead of re-running the notebook?"""
    with StudentProxy(factory, call_seconds=1.0, max_restarts=1) as proxy:
        with pytest.raises(ChildCrashed):
            proxy.crash()
        with pytest.raises(CallTimeout):
            proxy.hang()
        starts = proxy.sandbox.starts
        with pytest.raises(ChildCrashed, match="restarted 1 times"):
            proxy.layer_norm(np.ones(2), 1.0, 0.0)
        assert proxy.sandbox.starts == starts, "refused without running the notebook again"


def test_bad_return_values_are_refused(factory):
    """Is an ndarray subclass returned by the student a BadReturnValue for the grader?"""
    with StudentProxy(factory, call_seconds=1.0) as proxy, pytest.raises(BadReturnValue, match="MaskedArray"):
        proxy.masked(np.ones(3))


def test_using_swaps_in_a_trusted_callable(factory, inputs):
    """Does proxy.using(layer_norm=ref) make pre_ln_block use the trusted layer_norm, for that view only?"""
    x, gamma, beta = inputs
    params = {"gamma": gamma, "beta": beta}
    with StudentProxy(factory, call_seconds=1.0) as proxy:
        fixed = proxy.using(layer_norm=reference_layer_norm).pre_ln_block(x, params)
        np.testing.assert_allclose(fixed, x + reference_layer_norm(x, gamma, beta))
        own = proxy.pre_ln_block(x, params)
        assert not np.allclose(own, fixed)
        view = proxy.using(layer_norm=reference_layer_norm)
        view.pre_ln_block(x, params)
        assert view.last_call is proxy.last_call and view.restarts == proxy.restarts == 0


def test_names_that_clash_with_proxy_attributes_are_reachable(factory):
    """Can a student function named like a proxy method (`close`) still be called via proxy['close']?"""
    f = Factory(sources=["def close(x):\n    return x * 3"])
    with StudentProxy(f, call_seconds=1.0) as proxy:
        assert proxy["close"](2) == 6
    for box in f.made:
        box.close()


def test_a_notebook_that_cannot_finish_fails_every_call_without_restarts():
    """When the notebook exceeds its total time, do calls raise NotebookFailed without re-running it?"""
    f = Factory(sources=["import time\ndef f():\n    return 1", "time.sleep(0.6)", "time.sleep(0.6)"],
                limits=Limits(cell_seconds=1.0, total_seconds=1.0, call_seconds=1.0, memory_mb=1024))
    with StudentProxy(f, call_seconds=1.0) as proxy:
        assert proxy.execution.state == "timeout"
        with pytest.raises(NotebookFailed):
            proxy.f()
        with pytest.raises(NotebookFailed):
            proxy.f()
        assert proxy.restarts == 0 and proxy.sandbox.starts == 1
