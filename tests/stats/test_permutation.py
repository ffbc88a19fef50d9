"""Two-sided permutation test against scipy and closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arbench.stats import (
    PermutationResult,
    permutation_test,
)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0.91, 0.42, 0.77, 0.88, 0.63], [0.31, 0.55, 0.12, 0.47, 0.60]),
        ([1.0, 0.5, 0.5], [0.5, 0.0, 0.0, 0.5]),  # 3 vs 4 with ties
        ([1.0, 1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 1.0, 0.0, 0.0]),  # binary, heavy ties
        ([0.2, 0.2, 0.2], [0.2, 0.2, 0.2, 0.2]),  # all equal -> p = 1
        ([3.0, 1.0, 4.0, 1.0, 5.0, 9.0], [2.0, 6.0, 5.0, 3.0]),
    ],
)
def test_permutation_exact_matches_scipy(a, b, scipy_perm_p):
    res = permutation_test(a, b)
    assert isinstance(res, PermutationResult)
    assert res.exact
    assert res.n_permutations == math.comb(len(a) + len(b), len(a))
    assert (res.n_a, res.n_b) == (len(a), len(b))
    assert res.statistic == pytest.approx(np.mean(a) - np.mean(b))
    assert res.pvalue == pytest.approx(scipy_perm_p(a, b), rel=1e-12, abs=1e-15)


def test_permutation_fully_separated_closed_form():
    # Only the observed split and its mirror are as extreme: p = 2 / C(10, 5).
    res = permutation_test([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert res.pvalue == pytest.approx(2 / 252)
    assert res.statistic == pytest.approx(-5.0)


def test_permutation_symmetric_in_groups():
    a, b = [0.9, 0.8, 0.85, 0.4], [0.3, 0.5, 0.45, 0.6, 0.2]
    r1, r2 = permutation_test(a, b), permutation_test(b, a)
    assert r1.pvalue == pytest.approx(r2.pvalue)
    assert r1.statistic == pytest.approx(-r2.statistic)


def test_permutation_monte_carlo_close_to_exact_and_deterministic():
    rng = np.random.default_rng(123)
    a = rng.normal(0.6, 0.2, 10)
    b = rng.normal(0.45, 0.2, 10)
    exact = permutation_test(a, b, max_exact=200_000)
    assert exact.exact and exact.n_permutations == 184_756
    mc = permutation_test(a, b, max_exact=100_000, rng=np.random.default_rng(7))
    assert not mc.exact and mc.n_permutations == 100_000
    assert 0.02 < exact.pvalue < 0.98  # a non-trivial p, so the comparison means something
    assert abs(mc.pvalue - exact.pvalue) < 0.01
    again = permutation_test(a, b, max_exact=100_000, rng=np.random.default_rng(7))
    assert again.pvalue == mc.pvalue
    assert permutation_test(a, b).exact  # 10 vs 10 seeds is enumerated by default
    other = permutation_test(a, b, max_exact=100_000, rng=np.random.default_rng(8))
    assert other.pvalue != mc.pvalue
    assert abs(other.pvalue - exact.pvalue) < 0.01


def test_permutation_monte_carlo_pvalue_never_zero():
    a, b = np.arange(12.0), np.arange(12.0) + 100
    res = permutation_test(a, b, n_resamples=1000, rng=np.random.default_rng(0))
    assert not res.exact
    assert res.pvalue == pytest.approx(1 / 1001)


def test_permutation_rejects_bad_input():
    with pytest.raises(ValueError):
        permutation_test([], [1.0])
    with pytest.raises(ValueError):
        permutation_test([1.0, np.nan], [1.0])
