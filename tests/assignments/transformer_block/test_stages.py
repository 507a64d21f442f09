"""The probes that localise a wrong function's error to a stage: quiet on the reference, and every
catalogued wrong variant localised to a stage of its own problem (run in-process on the variants)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from assignments.transformer_block import mistakes
from assignments.transformer_block import reference as ref
from autograder.config import load_course
from autograder.grading.diagnosis import ProbeContext

ROOT = Path(__file__).resolve().parents[3]

CATALOGUE = mistakes.catalogue
PROBLEMS = [p.name for p in load_course(ROOT).assignment("transformer-block").problems]
VARIANTS = [m for m in CATALOGUE.mistakes() if m.variant is not None]


def context(problem, function) -> ProbeContext:
    """Probing `function` as if it were the student's `problem` (accepted: the reference's answer)."""
    reference = getattr(ref, problem)

    def accepts(out, args, kwargs):
        expected, out = np.asarray(reference(*args, **kwargs)), np.asarray(out)
        return out.shape == expected.shape and bool(np.allclose(out.astype(float), expected, rtol=1e-7, atol=1e-9))
    return ProbeContext(call=function, accepts=accepts, reference=ref)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_every_problem_has_a_probe_that_finds_nothing_wrong_with_the_reference(problem):
    """Does each course problem have a probe, and does it localise nothing when given the reference itself?"""
    assert CATALOGUE.has_probe(problem)
    assert CATALOGUE.localise(problem, context(problem, getattr(ref, problem))) == ()


@pytest.mark.parametrize("mistake", VARIANTS, ids=[m.id for m in VARIANTS])
def test_every_catalogued_variant_is_also_localised_to_a_stage_of_its_problem(mistake):
    """Would a catalogued mistake, had nobody written it down, still be localised to a stage of its own problem?"""
    found = CATALOGUE.localise(mistake.problem, context(mistake.problem, mistake.variant))
    assert found and all(m.stage and m.problem == mistake.problem for m in found), [m.id for m in found]


def test_localisation_is_the_same_every_time():
    """Do probes use fixed inputs of their own, so the same function always gets the same stages?"""
    variant = CATALOGUE["multi_head_attention.scale_by_d_model"]
    first = CATALOGUE.localise("multi_head_attention", context("multi_head_attention", variant.variant))
    assert first == CATALOGUE.localise("multi_head_attention", context("multi_head_attention", variant.variant))


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("answer", [None, [1.0, 2.0]], ids=["none", "list"])
def test_a_function_that_gives_no_array_is_localised_to_no_stage(problem, answer):
    """A stub whose body is `pass` returns None: does every probe name no stage for it (nor for a
    list), since there is no answer to find a misconception in?"""
    assert CATALOGUE.localise(problem, context(problem, lambda *args, **kwargs: answer)) == ()


def test_a_probe_stops_quietly_when_the_function_raises():
    """When the student's function raises on a probe's inputs, is what was found so far kept and nothing else?"""
    def raises(*args, **kwargs):
        raise ValueError("not written yet")
    assert CATALOGUE.localise("layer_norm", context("layer_norm", raises)) == ()


@pytest.mark.parametrize("problem", ["layer_norm", "rms_norm"])
def test_eps_added_after_normalising_is_not_told_the_normalisation_is_right(problem):
    """A norm that adds eps to its output instead of under the square root fails the gamma check
    first: does the stage it is localised to point at eps, rather than say the normalisation is right?"""
    def eps_outside(x, gamma, *rest, eps=1e-5):
        beta = rest[0] if rest else 0.0
        centred = x - x.mean(axis=-1, keepdims=True) if rest else x
        scale = np.sqrt((centred * centred).mean(axis=-1, keepdims=True))
        return gamma * centred / scale + beta + eps
    found = CATALOGUE.localise(problem, context(problem, eps_outside))
    assert found, "no stage found"
    for m in found:
        assert "normalisation is right" not in m.hint and "eps" in m.hint, (m.id, m.hint)


@pytest.mark.parametrize("problem", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [(3, 3), (16,), (2, 5, 16)], ids=["3x3", "one_row", "extra_axis"])
def test_a_norm_of_the_wrong_shape_is_localised_to_no_stage(problem, shape):
    """A norm returning an array of another shape than x (a constant np.ones((3, 3))) is not a stage's
    mistake: does its probe name none (rather than statistics across tokens), leaving the shape check to speak?"""
    assert CATALOGUE.localise(problem, context(problem, lambda *args, **kwargs: np.ones(shape))) == ()


def test_a_norm_that_mixes_tokens_is_still_localised_to_statistics_across_tokens():
    """The shape guard ends the probe only for a wrong shape: a norm of the right shape whose statistics
    are taken over every token is still named for that stage."""
    def whole_array(x, gamma, beta, eps=1e-5):
        return gamma * (x - x.mean()) / np.sqrt(x.var() + eps) + beta
    found = CATALOGUE.localise("layer_norm", context("layer_norm", whole_array))
    assert [m.id for m in found] == ["layer_norm.statistics_across_tokens"]
