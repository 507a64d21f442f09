"""The checks' generators made many at once (autograder.grading.rngs) against NumPy's own seeding."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.grading.rngs import SeededState, pcg64_states


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5, 9])
def test_pcg64_states_are_what_seedsequence_generates(length):
    """Is each row's state SeedSequence(row).generate_state(4, uint64), for entropy shorter than,
    as long as, and longer than SeedSequence's pool of 4 words (words on every bit pattern)?"""
    rng = np.random.default_rng(length)
    entropy = rng.integers(0, 2**32, size=(300, length), dtype=np.uint32)
    entropy[0] = 0
    entropy[1] = 2**32 - 1
    got = pcg64_states(entropy)
    assert got.dtype == np.uint64 and got.shape == (300, 4)
    for row, state in zip(entropy, got):
        assert np.array_equal(state, np.random.SeedSequence(row).generate_state(4, np.uint64))


def test_a_generator_from_a_seeded_state_is_default_rngs_in_everything():
    """Does PCG64(SeededState(...)) draw, jump, spawn and report what default_rng(words) does?"""
    words = np.array([123456789, 42, 2**31 + 5], dtype=np.uint32)
    (state,) = pcg64_states(words[None, :])
    ours = np.random.Generator(np.random.PCG64(SeededState(state, words)))
    want = np.random.default_rng(words)
    assert ours.bit_generator.state == want.bit_generator.state
    assert np.array_equal(ours.standard_normal(7), want.standard_normal(7))
    assert [g.integers(1 << 40) for g in ours.spawn(3)] == [g.integers(1 << 40) for g in want.spawn(3)]
    seq = ours.bit_generator.seed_seq
    assert np.array_equal(seq.generate_state(8), want.bit_generator.seed_seq.generate_state(8))
    assert np.array_equal(seq.entropy, want.bit_generator.seed_seq.entropy)
    assert np.array_equal(ours.bit_generator.jumped().random_raw(3), want.bit_generator.jumped().random_raw(3))


def test_a_seeded_state_hands_out_copies():
    """Can a caller that changes the state it was given not change the next generator's start?"""
    words = np.array([1, 2], dtype=np.uint32)
    (state,) = pcg64_states(words[None, :])
    seq = SeededState(state, words)
    seq.generate_state(4, np.uint64)[:] = 0
    assert np.array_equal(seq.generate_state(4, np.uint64), np.random.SeedSequence(words).generate_state(4, np.uint64))
