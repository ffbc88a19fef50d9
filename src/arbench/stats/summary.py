"""JSON-ready summaries of per-seed scores built from the stats primitives."""

from __future__ import annotations

import numpy as np

from arbench.stats.bootstrap import bootstrap_ci
from arbench.stats.permutation import permutation_test

__all__ = ["contrast", "describe"]


def describe(
    x: object, *, rng: np.random.Generator | None = None, confidence: float = 0.95
) -> dict[str, float | int]:
    """Mean, sample sd (ddof=1; 0 when n=1), n and a percentile-bootstrap CI of the mean."""
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError("x must contain at least one value")
    low, high = bootstrap_ci(arr, confidence=confidence, rng=rng)
    return {
        "mean": float(arr.mean()),
        "sd": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "n": int(arr.size),
        "ci_low": low,
        "ci_high": high,
    }


def contrast(
    a: object, b: object, rng: np.random.Generator | None = None
) -> dict[str, float | int | bool]:
    """Difference of means (a - b) with its two-sided permutation p-value."""
    res = permutation_test(a, b, rng=rng)
    return {
        "diff": res.statistic,
        "p": res.pvalue,
        "exact": bool(res.exact),
        "n_a": int(res.n_a),
        "n_b": int(res.n_b),
    }
