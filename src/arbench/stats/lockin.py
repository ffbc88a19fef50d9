"""Lock-in counts: how many seeds reach a score threshold, and group comparisons."""

from __future__ import annotations

import numpy as np

from arbench.stats.fisher import fisher_exact_two_sided

__all__ = ["compare_lock_in", "lock_in"]


def lock_in(scores: object, threshold: float = 0.9) -> tuple[int, int]:
    """Return (number of scores >= threshold, number of scores)."""
    arr = np.asarray(scores, dtype=float).ravel()
    if np.any(np.isnan(arr)):
        raise ValueError("scores must not contain NaN")
    return int(np.count_nonzero(arr >= threshold)), int(arr.size)


def compare_lock_in(a: object, b: object, threshold: float = 0.9) -> dict[str, float | int]:
    """Compare lock-in counts of two groups with a two-sided Fisher exact test."""
    k_a, n_a = lock_in(a, threshold)
    k_b, n_b = lock_in(b, threshold)
    if n_a == 0 or n_b == 0:
        raise ValueError("both groups need at least one score")
    return {
        "threshold": float(threshold),
        "k_a": k_a,
        "n_a": n_a,
        "rate_a": k_a / n_a,
        "k_b": k_b,
        "n_b": n_b,
        "rate_b": k_b / n_b,
        "p": fisher_exact_two_sided(k_a, n_a, k_b, n_b),
    }
