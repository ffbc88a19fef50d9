"""Percentile bootstrap confidence interval for a mean."""

from __future__ import annotations

import numpy as np

__all__ = ["bootstrap_ci", "bootstrap_diff_ci"]

_CHUNK_ELEMENTS = 2_000_000


def bootstrap_ci(
    x: object,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(x), drawing from ``rng`` (default ``default_rng(0)``).

    Degenerate samples (one value, or all values equal) return (value, value).
    """
    arr = np.asarray(x, dtype=float).ravel()
    if arr.size == 0:
        raise ValueError("x must contain at least one value")
    if not np.all(np.isfinite(arr)):
        raise ValueError("x must contain only finite values")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    if n_resamples < 1:
        raise ValueError("n_resamples must be >= 1")
    if arr.size == 1 or np.all(arr == arr[0]):
        v = float(arr[0])
        return (v, v)

    gen = np.random.default_rng(0) if rng is None else rng
    n = arr.size
    chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(n_resamples)
    done = 0
    while done < n_resamples:
        m = min(chunk, n_resamples - done)
        means[done : done + m] = arr[gen.integers(0, n, size=(m, n))].mean(axis=1)
        done += m
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))


def bootstrap_diff_ci(
    a: object,
    b: object,
    *,
    confidence: float = 0.95,
    n_resamples: int = 10_000,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """Percentile bootstrap CI of mean(a) - mean(b), each arm's seeds resampled on their
    own (independent samples), from ``rng`` (default ``default_rng(0)``)."""
    xa = np.asarray(a, dtype=float).ravel()
    xb = np.asarray(b, dtype=float).ravel()
    if xa.size == 0 or xb.size == 0:
        raise ValueError("both arms need at least one value")
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(xb))):
        raise ValueError("the arms must contain only finite values")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")
    gen = np.random.default_rng(0) if rng is None else rng
    means_a = xa[gen.integers(0, xa.size, size=(n_resamples, xa.size))].mean(axis=1)
    means_b = xb[gen.integers(0, xb.size, size=(n_resamples, xb.size))].mean(axis=1)
    alpha = 1.0 - confidence
    low, high = np.quantile(means_a - means_b, [alpha / 2, 1 - alpha / 2])
    return (float(low), float(high))
