"""Percentile bootstrap of the mean against scipy and normal theory."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats

from arbench.stats import (
    bootstrap_ci,
)


def test_bootstrap_contains_mean_and_matches_normal_theory():
    x = np.random.default_rng(3).normal(0.5, 0.1, 400)
    low, high = bootstrap_ci(x, rng=np.random.default_rng(1))
    assert low < x.mean() < high
    half = 1.959964 * x.std(ddof=1) / math.sqrt(x.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)


def test_bootstrap_close_to_scipy_percentile():
    x = np.random.default_rng(5).gamma(2.0, 1.0, 30)
    low, high = bootstrap_ci(x, confidence=0.9, rng=np.random.default_rng(2))
    ref = scipy.stats.bootstrap(
        (x,), np.mean, confidence_level=0.9, method="percentile", rng=np.random.default_rng(9)
    ).confidence_interval
    scale = x.std(ddof=1) / math.sqrt(x.size)
    assert abs(low - ref.low) < 0.1 * scale
    assert abs(high - ref.high) < 0.1 * scale


def test_bootstrap_narrows_with_n():
    rng = np.random.default_rng(11)
    small = rng.uniform(0, 1, 10)
    large = rng.uniform(0, 1, 1000)
    ls, hs = bootstrap_ci(small)
    ll, hl = bootstrap_ci(large)
    assert (hl - ll) < (hs - ls) / 3


def test_bootstrap_deterministic_and_confidence_ordering():
    x = [0.1, 0.4, 0.35, 0.8, 0.95, 0.2]
    assert bootstrap_ci(x) == bootstrap_ci(x)
    assert bootstrap_ci(x, rng=np.random.default_rng(4)) == bootstrap_ci(
        x, rng=np.random.default_rng(4)
    )
    l90, h90 = bootstrap_ci(x, confidence=0.9)
    l99, h99 = bootstrap_ci(x, confidence=0.99)
    assert l99 <= l90 < h90 <= h99


def test_bootstrap_degenerate():
    assert bootstrap_ci([0.7]) == (0.7, 0.7)
    assert bootstrap_ci([0.25, 0.25, 0.25]) == (0.25, 0.25)
    with pytest.raises(ValueError):
        bootstrap_ci([])
    with pytest.raises(ValueError):
        bootstrap_ci([1.0, 2.0], confidence=1.0)


def test_bootstrap_of_a_difference_matches_normal_theory_and_scipy() -> None:
    """The difference's interval: centred on the difference of means, its half-width the
    normal theory's for independent arms, and close to scipy's two-sample percentile CI."""
    from arbench.stats import bootstrap_diff_ci

    rng = np.random.default_rng(7)
    a, b = rng.normal(0.8, 0.1, 300), rng.normal(0.5, 0.2, 200)
    low, high = bootstrap_diff_ci(a, b, rng=np.random.default_rng(1))
    diff = a.mean() - b.mean()
    assert low < diff < high
    half = 1.959964 * math.sqrt(a.var(ddof=1) / a.size + b.var(ddof=1) / b.size)
    assert (high - low) / 2 == pytest.approx(half, rel=0.1)
    ref = scipy.stats.bootstrap(
        (a, b),
        lambda x, y: np.mean(x) - np.mean(y),
        method="percentile",
        rng=np.random.default_rng(9),
    ).confidence_interval
    assert low == pytest.approx(ref.low, abs=0.01) and high == pytest.approx(ref.high, abs=0.01)
    assert bootstrap_diff_ci([0.5], [0.2]) == pytest.approx((0.3, 0.3))
    with pytest.raises(ValueError, match="at least one value"):
        bootstrap_diff_ci([], [0.2])
