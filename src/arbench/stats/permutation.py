"""Two-sample permutation test on the difference of means (per-seed scores)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["PermutationResult", "permutation_test"]

# Relative tolerance so relabelings whose |mean diff| ties the observed one up to float
# rounding are counted as "at least as extreme".
_REL_TOL = 1e-9
# Upper bound on elements materialised per chunk (rows x group size).
_CHUNK_ELEMENTS = 2_000_000
# Enumerate every relabeling up to this many: C(20, 10) = 184,756, so 10 vs 10 seeds is exact.
MAX_EXACT = 200_000


@dataclass(frozen=True)
class PermutationResult:
    """Outcome of a two-sided permutation test of mean(a) - mean(b)."""

    statistic: float
    pvalue: float
    n_a: int
    n_b: int
    exact: bool
    n_permutations: int


def _as_sample(x: object, name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError(f"{name} must contain at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values")
    return arr


def _mean_diffs(sum_a: np.ndarray, total: float, n_a: int, n_b: int) -> np.ndarray:
    return sum_a / n_a - (total - sum_a) / n_b


def permutation_test(
    a: object,
    b: object,
    *,
    max_exact: int = MAX_EXACT,
    n_resamples: int = 100_000,
    rng: np.random.Generator | None = None,
) -> PermutationResult:
    """Two-sided permutation test of mean(a) - mean(b) for independent samples.

    Exact over all C(n_a+n_b, n_a) relabelings when that count <= max_exact, otherwise
    Monte Carlo with n_resamples relabelings from ``rng`` (default ``default_rng(0)``).
    """
    xa = _as_sample(a, "a")
    xb = _as_sample(b, "b")
    n_a, n_b = xa.size, xb.size
    n = n_a + n_b
    pooled = np.concatenate([xa, xb])
    total = float(pooled.sum())

    statistic = float(xa.mean() - xb.mean())
    # Observed value computed with the same formula as the null values, so ties agree.
    observed = abs(float(_mean_diffs(np.array([xa.sum()]), total, n_a, n_b)[0]))
    # Absolute floor covers summation rounding when |observed| is tiny relative to the data.
    rounding = 64 * n * np.finfo(float).eps * float(np.abs(pooled).max())
    threshold = observed - max(_REL_TOL * observed, rounding)

    n_comb = math.comb(n, n_a)
    chunk = max(1, _CHUNK_ELEMENTS // n)
    count = 0
    if n_comb <= max_exact:
        combos = itertools.combinations(range(n), n_a)
        dtype = np.dtype((np.intp, (n_a,)))
        while True:
            idx = np.fromiter(itertools.islice(combos, chunk), dtype=dtype)
            if idx.shape[0] == 0:
                break
            sums = pooled[idx].sum(axis=1)
            count += int(np.count_nonzero(np.abs(_mean_diffs(sums, total, n_a, n_b)) >= threshold))
        pvalue = count / n_comb
        return PermutationResult(statistic, float(min(pvalue, 1.0)), n_a, n_b, True, n_comb)

    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    gen = np.random.default_rng(0) if rng is None else rng
    done = 0
    while done < n_resamples:
        m = min(chunk, n_resamples - done)
        shuffled = gen.permuted(np.broadcast_to(pooled, (m, n)), axis=1)
        sums = shuffled[:, :n_a].sum(axis=1)
        count += int(np.count_nonzero(np.abs(_mean_diffs(sums, total, n_a, n_b)) >= threshold))
        done += m
    pvalue = (count + 1) / (n_resamples + 1)
    return PermutationResult(statistic, float(pvalue), n_a, n_b, False, n_resamples)
