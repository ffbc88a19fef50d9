"""Confidence intervals the claims print beside a difference: the difference of means by
inverting the permutation test (exact under a location shift, so its level holds at 4 vs 4
seeds where the percentile bootstrap covers about 0.86), and the difference of two lock-in
rates by Newcombe's hybrid score interval."""

from __future__ import annotations

import itertools
import math

import numpy as np

from arbench.stats.permutation import _REL_TOL, MAX_EXACT

__all__ = ["diff_interval", "rate_diff_interval"]

MC_RELABELINGS = 20_000  # a fixed random set beyond MAX_EXACT relabelings
_BISECTIONS = 48


def diff_interval(
    a: object,
    b: object,
    confidence: float = 0.95,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """The set of shifts d for which the two-sided permutation test of (a - d) against b
    does not reject at 1 - ``confidence``: an interval of mean(a) - mean(b). Unbounded
    (an infinite end) where the test cannot reject at all at these sizes."""
    xa = np.asarray(a, dtype=float).ravel()
    xb = np.asarray(b, dtype=float).ravel()
    if xa.size == 0 or xb.size == 0 or not (np.isfinite(xa).all() and np.isfinite(xb).all()):
        raise ValueError("both arms need at least one finite value")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    alpha = 1.0 - confidence
    n_a, n_b = xa.size, xb.size
    members = _members(n_a + n_b, n_a, np.random.default_rng(0) if rng is None else rng)
    exact = members.shape[0] == math.comb(n_a + n_b, n_a)

    def pvalue(d: float) -> float:
        pooled = np.concatenate([xa - d, xb])
        total = pooled.sum()
        observed = abs(float(xa.sum() - d * n_a) / n_a - float(xb.sum()) / n_b)
        rounding = 64 * pooled.size * np.finfo(float).eps * float(np.abs(pooled).max() + 1.0)
        threshold = observed - max(_REL_TOL * observed, rounding)
        sums = members.astype(float) @ pooled
        diffs = sums / n_a - (total - sums) / n_b
        count = int(np.count_nonzero(np.abs(diffs) >= threshold))
        return count / members.shape[0] if exact else (count + 1) / (members.shape[0] + 1)

    centre = float(xa.mean() - xb.mean())
    spread = float(np.ptp(np.concatenate([xa - centre, xb]))) + 1e-9
    far = 4.0 * spread + 1.0
    ends = []
    for direction in (-1.0, 1.0):
        outer = centre + direction * far
        if pvalue(outer) > alpha:
            ends.append(direction * math.inf)
            continue
        inner = centre
        for _ in range(_BISECTIONS):
            mid = (inner + outer) / 2
            inner, outer = (mid, outer) if pvalue(mid) > alpha else (inner, mid)
        ends.append(inner)
    return (float(ends[0]), float(ends[1]))


def _members(n: int, n_a: int, rng: np.random.Generator) -> np.ndarray:
    """0/1 rows, one per relabeling, marking arm a's members: every relabeling up to
    MAX_EXACT, a fixed random set (the observed labelling first) beyond."""
    count = math.comb(n, n_a)
    if count <= MAX_EXACT:
        idx = np.array(list(itertools.combinations(range(n), n_a)), dtype=np.intp)
        rows = np.zeros((count, n), dtype=np.int8)
        np.put_along_axis(rows, idx, 1, axis=1)
        return rows
    rows = np.zeros((MC_RELABELINGS, n), dtype=np.int8)
    rows[:, :n_a] = 1
    rows[1:] = rng.permuted(rows[1:], axis=1)
    return rows


def rate_diff_interval(
    k_a: int, n_a: int, k_b: int, n_b: int, confidence: float = 0.95
) -> tuple[float, float]:
    """Newcombe's hybrid score interval (his method 10) of the difference of two rates
    k_a/n_a - k_b/n_b, from each rate's Wilson interval: its level holds at small n and at
    rates of 0 or 1, where the Wald interval collapses."""
    if n_a < 1 or n_b < 1 or not (0 <= k_a <= n_a and 0 <= k_b <= n_b):
        raise ValueError("counts must satisfy 0 <= k <= n and n >= 1")
    from scipy.stats import norm  # here, not at import: the Snakefile imports this module

    z = float(norm.ppf(1 - (1 - confidence) / 2))
    pa, pb = k_a / n_a, k_b / n_b
    la, ua = _wilson(k_a, n_a, z)
    lb, ub = _wilson(k_b, n_b, z)
    d = pa - pb
    low = d - math.sqrt((pa - la) ** 2 + (ub - pb) ** 2)
    high = d + math.sqrt((ua - pa) ** 2 + (pb - lb) ** 2)
    return (max(-1.0, low), min(1.0, high))


def _wilson(k: int, n: int, z: float) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))
