"""Each check's random generator, `np.random.default_rng([seed, salt])`, made for many checks at
once: NumPy's SeedSequence hashing done column by column for every check of a submission (the
same numbers), then one PCG64 per check started from its share."""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.random.bit_generator import ISpawnableSeedSequence

# NumPy's SeedSequence (numpy/random/bit_generator.pyx), its constants and pool of 4 words.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _MASK32, _POOL = 0xCA01F9DD, 0x4973F715, 0xFFFFFFFF, 4


def pcg64_states(entropy: np.ndarray) -> np.ndarray:
    """`np.random.SeedSequence(row).generate_state(4, np.uint64)` for every row of `entropy` (an
    (n, L) array of uint32 words, L >= 1), as an (n, 4) uint64 array: what `PCG64(row)` is seeded
    with. SeedSequence's hashing, column by column, for all rows at once (its constants depend on
    no data): one seeding costs ~10 us of NumPy's per-call overhead, most of a check's generator."""
    n, length = entropy.shape
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value *= np.uint32(hash_const)
        value ^= value >> 16
        return value

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result = x * np.uint32(_MIX_MULT_L)
        result -= y * np.uint32(_MIX_MULT_R)
        result ^= result >> 16
        return result

    words = np.ascontiguousarray(entropy, dtype=np.uint32).T
    pool = [hashmix(words[i] if i < length else np.zeros(n, np.uint32)) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, length):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(words[src]))
    out = np.empty((n, 2 * _POOL), np.uint32)
    hash_const = _INIT_B
    for i in range(2 * _POOL):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value *= np.uint32(hash_const)
        value ^= value >> 16
        out[:, i] = value
    # as SeedSequence does: the words read as little-endian 64-bit numbers, in native order
    return out.astype("<u4").view("<u8").astype(np.uint64)


class SeededState(ISpawnableSeedSequence):
    """The seed sequence of `words` with its PCG64 state already worked out (`pcg64_states`): a
    `PCG64(SeededState(state, words))` starts where `PCG64(SeedSequence(words))` does. Anything
    else asked of it (other states, spawning, its entropy) goes to a real SeedSequence(words)."""
    __slots__ = ("_pcg64", "_real", "_words")

    def __init__(self, pcg64: np.ndarray, words: np.ndarray):
        self._pcg64 = pcg64
        self._words = words
        self._real: np.random.SeedSequence | None = None

    @property
    def seed_sequence(self) -> np.random.SeedSequence:
        if self._real is None:
            self._real = np.random.SeedSequence(self._words)
        return self._real

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        if n_words == _POOL and np.dtype(dtype) == _UINT64:
            return self._pcg64.copy()
        return self.seed_sequence.generate_state(n_words, dtype)

    def spawn(self, n_children: int) -> list[Any]:        # SeedSequences, as numpy's own spawn gives
        return self.seed_sequence.spawn(n_children)

    def __getattr__(self, name: str) -> Any:          # entropy, pool, spawn_key, state, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.seed_sequence, name)


_UINT64 = np.dtype(np.uint64)
