"""The mistakes catalogue: every wrong variant runs, is far from the reference, and can be told apart."""
from __future__ import annotations

import inspect
import itertools
import re
from pathlib import Path

import numpy as np
import pytest

from assignments.transformer_block import mistakes
from assignments.transformer_block import reference as ref
from assignments.transformer_block.stages import confirmation_calls
from autograder.config import load_course
from autograder.layout import CourseLayout

ROOT = Path(__file__).resolve().parents[3]
GRADERS = CourseLayout(ROOT).graders("transformer_block")
CATALOGUE = mistakes.catalogue
COURSE_PROBLEMS = {p.name: p for p in load_course(ROOT).assignment("transformer-block").problems}
TOL = COURSE_PROBLEMS["layer_norm"].tolerance("float64")       # the float64 default: rtol 1e-7, atol 1e-9
FAR = 1000                                                     # "far more" than the tolerance

# The misconceptions the catalogue must always recognise (each id names its problem).
REQUIRED = {
    "layer_norm.unbiased_variance", "layer_norm.eps_outside_sqrt", "layer_norm.wrong_axis",
    "split_heads.reshape_without_transpose", "merge_heads.reshape_without_transpose",
    "multi_head_attention.reshape_without_transpose", "multi_head_attention.merge_without_transpose",
    "multi_head_attention.missing_scale", "multi_head_attention.softmax_wrong_axis",
    "multi_head_attention.mask_inverted", "pre_ln_block.post_ln", "pre_ln_block.missing_residual",
    "pre_ln_block.exact_gelu", "swiglu_ffn.gate_on_up_branch", "swiglu_ffn.silu_before_gate_projection",
}


# --------------------------------------------------------------------------- inputs per problem
# The catalogue's confirmation inputs (assignments/transformer_block/stages.py), drawn with a seed.
problem_calls = confirmation_calls


def outputs(function, calls) -> list[np.ndarray]:
    return [np.asarray(function(*args, **kwargs), dtype=float) for args, kwargs in calls]


def far_apart(a: np.ndarray, b: np.ndarray, factor: float = FAR) -> bool:
    """True when a and b differ by more than `factor` times the float64 tolerance somewhere."""
    return a.shape != b.shape or not np.allclose(a, b, rtol=factor * TOL.rtol, atol=factor * TOL.atol)


VARIANT_CASES = [(m.id, m.problem) for m in CATALOGUE if m.variant is not None]
VARIANT_IDS = [f"{mid}-{problem}" for mid, problem in VARIANT_CASES]
PROBLEMS_WITH_VARIANTS = sorted({problem for _, problem in VARIANT_CASES})


# --------------------------------------------------------------------------- the catalogue's shape

@pytest.mark.parametrize("mistake_id", sorted(REQUIRED))
def test_required_mistake_is_catalogued_with_a_variant(mistake_id):
    """Is each required mistake registered with a wrong variant?"""
    assert mistake_id in CATALOGUE
    assert CATALOGUE[mistake_id].variant is not None


def test_every_id_is_its_problem_dot_snake_case():
    """Is every mistake id `<course problem>.<snake_case>` (or `general.<snake_case>` for any problem)?"""
    pattern = re.compile(r"^[a-z][a-z0-9_]*\.[a-z][a-z0-9]*(_[a-z0-9]+)*$")
    assert [m.id for m in CATALOGUE if not pattern.match(m.id)] == []
    assert {m.problem for m in CATALOGUE} <= set(COURSE_PROBLEMS) | {"general"}


def test_the_hint_on_an_argument_changed_in_place_fits_silu_too():
    """Is the hint shown for any function that changes its argument in place (silu among them) free of
    layer_norm's mean?"""
    hint = CATALOGUE["general.mutates_input"].hint
    assert "in place" in hint and "mean" not in hint, hint


def test_every_hint_is_one_or_two_sentences_without_values():
    """Is every hint one or two full sentences, with no literal values (decimals or multi-digit numbers)?"""
    for m in CATALOGUE:
        sentences = re.findall(r"[.!?](?=\s|$)", m.hint)
        assert 1 <= len(sentences) <= 2 and m.hint.endswith("."), (m.id, m.hint)
        assert not re.search(r"(?<![\w.])\d+\.\d+|(?<![\w.])\d{2,}", m.hint), (m.id, m.hint)


def test_every_course_problem_has_a_wrong_variant():
    """Does every problem in course.yml have at least one numeric wrong variant to diagnose with?"""
    assert set(PROBLEMS_WITH_VARIANTS) == set(COURSE_PROBLEMS)


def test_every_id_the_graders_diagnose_is_catalogued():
    """Is every id passed to expect.diagnose(...) in the graders registered in the catalogue?"""
    used = {mid for path in GRADERS.glob("*.py")
            for mid in re.findall(r"""diagnose\(\s*["']([^"']+)["']""", path.read_text())}
    assert sorted(used - {m.id for m in CATALOGUE}) == []


@pytest.mark.parametrize("mistake_id,problem", VARIANT_CASES, ids=VARIANT_IDS)
def test_variant_accepts_the_problems_signature(mistake_id, problem):
    """Does the variant accept exactly the arguments the reference function for its problem accepts, and
    any keyword-only parameter of its own is one of the reference's building blocks, with the same default?"""
    reference = inspect.signature(getattr(ref, problem)).parameters.values()
    variant = inspect.signature(CATALOGUE[mistake_id].variant).parameters.values()
    assert [(p.name, p.default) for p in variant if p.kind is not p.KEYWORD_ONLY] == \
        [(p.name, p.default) for p in reference if p.kind is not p.KEYWORD_ONLY]   # keyword-only: the blocks
    blocks = {p.name: p.default for p in reference if p.kind is p.KEYWORD_ONLY}
    assert all(p.name in blocks and p.default is blocks[p.name] for p in variant if p.kind is p.KEYWORD_ONLY)


@pytest.mark.parametrize("mistake", CATALOGUE.for_problem("pre_ln_block"), ids=lambda m: m.id)
def test_every_block_variant_can_be_wired_from_the_students_own_layer_norm_and_attention(mistake):
    """Does every pre_ln_block variant take layer_norm and multi_head_attention (keyword-only), and build
    on the ones it is given, so that the engine can run it on the student's own?"""
    params = inspect.signature(mistake.variant).parameters
    assert {"layer_norm", "multi_head_attention"} <= {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    (args, kwargs), *_ = problem_calls("pre_ln_block")
    used = []

    def layer_norm(x, gamma, beta, eps=1e-5):
        used.append("layer_norm")
        return 2.0 * ref.layer_norm(x, gamma, beta, eps)

    def multi_head_attention(*a):
        used.append("multi_head_attention")
        return 2.0 * ref.multi_head_attention(*a)

    wired = mistake.variant(*args, **kwargs, layer_norm=layer_norm, multi_head_attention=multi_head_attention)
    assert set(used) == {"layer_norm", "multi_head_attention"}
    assert far_apart(np.asarray(wired), np.asarray(mistake.variant(*args, **kwargs)))


# --------------------------------------------------------------------------- behaviour on random inputs

@pytest.mark.parametrize("mistake_id,problem", VARIANT_CASES, ids=VARIANT_IDS)
def test_variant_runs_and_keeps_the_reference_shape(mistake_id, problem):
    """Does the variant run on the problem's inputs (positional and keyword) and give finite output of the
    reference's shape?"""
    calls = problem_calls(problem)
    for wrong, right in zip(outputs(CATALOGUE[mistake_id].variant, calls), outputs(getattr(ref, problem), calls)):
        assert wrong.shape == right.shape
        assert np.all(np.isfinite(wrong))


@pytest.mark.parametrize("mistake_id,problem", VARIANT_CASES, ids=VARIANT_IDS)
def test_variant_differs_far_from_the_reference(mistake_id, problem):
    """Does the variant differ from the reference by far more than the float64 tolerance on random inputs?"""
    calls = problem_calls(problem)
    wrong = np.concatenate([o.ravel() for o in outputs(CATALOGUE[mistake_id].variant, calls)])
    right = np.concatenate([o.ravel() for o in outputs(getattr(ref, problem), calls)])
    assert far_apart(wrong, right)


@pytest.mark.parametrize("problem", PROBLEMS_WITH_VARIANTS)
def test_variants_of_a_problem_are_pairwise_distinguishable(problem):
    """Do any two variants of the same problem disagree (beyond the float64 tolerance) on the same inputs?"""
    calls = problem_calls(problem)
    outs = {m.id: np.concatenate([o.ravel() for o in outputs(m.variant, calls)])
            for m in CATALOGUE.for_problem(problem)}
    agreeing = [(a, b) for a, b in itertools.combinations(outs, 2) if not far_apart(outs[a], outs[b], 1)]
    assert agreeing == []


@pytest.mark.parametrize("mistake_id,problem", VARIANT_CASES, ids=VARIANT_IDS)
def test_catalogue_match_names_only_this_variant(mistake_id, problem):
    """When a student's output is the variant's, does Catalogue.match name that mistake and no other?"""
    mistake = CATALOGUE[mistake_id]
    named_somewhere = False
    for args, kwargs in problem_calls(problem, seed=1):
        wrong = mistake.variant(*args, **kwargs)
        right = getattr(ref, problem)(*args, **kwargs)
        if not far_apart(np.asarray(wrong, dtype=float), np.asarray(right, dtype=float)):
            continue                                 # this input does not exercise the mistake
        found = CATALOGUE.match(problem, args, kwargs, wrong, rtol=TOL.rtol, atol=TOL.atol)
        assert [m.id for m in found] == [mistake_id]
        named_somewhere = True
    assert named_somewhere


@pytest.mark.parametrize("mistake_id,problem", VARIANT_CASES, ids=VARIANT_IDS)
def test_variant_leaves_its_inputs_unchanged(mistake_id, problem):
    """Does running the variant (as Catalogue.match does on a grader's arrays) leave every input unchanged?"""
    calls = problem_calls(problem)
    before = problem_calls(problem)
    outputs(CATALOGUE[mistake_id].variant, calls)
    for (args, kwargs), (args0, kwargs0) in zip(calls, before):
        for a, b in zip([*args, *kwargs.values()], [*args0, *kwargs0.values()]):
            if isinstance(a, dict):
                assert all(np.array_equal(a[k], b[k]) for k in a)
            else:
                assert np.array_equal(a, b)
