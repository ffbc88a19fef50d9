"""Tests for arbench.stats against scipy and closed-form/independent computations."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import scipy.stats

from arbench.stats import (
    PermutationResult,
    bootstrap_ci,
    compare_lock_in,
    contrast,
    describe,
    fisher_exact_two_sided,
    lock_in,
    permutation_test,
)


def _scipy_perm_p(a, b) -> float:
    def stat(x, y, axis):
        return np.abs(np.mean(x, axis=axis) - np.mean(y, axis=axis))

    res = scipy.stats.permutation_test(
        (np.asarray(a, float), np.asarray(b, float)),
        stat,
        permutation_type="independent",
        alternative="greater",
        vectorized=True,
        n_resamples=np.inf,
    )
    return float(res.pvalue)


# ---------------------------------------------------------------- permutation


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
def test_permutation_exact_matches_scipy(a, b):
    res = permutation_test(a, b)
    assert isinstance(res, PermutationResult)
    assert res.exact
    assert res.n_permutations == math.comb(len(a) + len(b), len(a))
    assert (res.n_a, res.n_b) == (len(a), len(b))
    assert res.statistic == pytest.approx(np.mean(a) - np.mean(b))
    assert res.pvalue == pytest.approx(_scipy_perm_p(a, b), rel=1e-12, abs=1e-15)


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
    mc = permutation_test(a, b, rng=np.random.default_rng(7))
    assert not mc.exact and mc.n_permutations == 100_000
    assert 0.02 < exact.pvalue < 0.98  # a non-trivial p, so the comparison means something
    assert abs(mc.pvalue - exact.pvalue) < 0.01
    again = permutation_test(a, b, rng=np.random.default_rng(7))
    assert again.pvalue == mc.pvalue
    assert permutation_test(a, b).pvalue == permutation_test(a, b).pvalue  # default seed
    other = permutation_test(a, b, rng=np.random.default_rng(8))
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


# ---------------------------------------------------------------- Fisher


@pytest.mark.parametrize("n1", [5, 6, 9, 10])
@pytest.mark.parametrize("n2", [5, 6, 9, 10])
def test_fisher_matches_scipy_grid(n1, n2):
    for k1 in range(n1 + 1):
        for k2 in range(n2 + 1):
            expected = scipy.stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
            got = fisher_exact_two_sided(k1, n1, k2, n2)
            assert got == pytest.approx(expected, rel=1e-9), (k1, n1, k2, n2)


def test_fisher_paper_figures():
    assert round(fisher_exact_two_sided(7, 10, 1, 10), 4) == 0.0198
    assert round(fisher_exact_two_sided(3, 10, 1, 10), 4) == 0.5820
    for k1, n1, k2, n2 in [(4, 5, 0, 9), (6, 6, 0, 6)]:
        expected = scipy.stats.fisher_exact([[k1, n1 - k1], [k2, n2 - k2]]).pvalue
        assert fisher_exact_two_sided(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-12)
    # Closed forms: 6/6 vs 0/6 -> 2 / C(12, 6); 4/5 vs 0/9 -> only the observed table is that
    # unlikely given the margins, so p = C(4,4) C(10,1) / C(14,5).
    assert fisher_exact_two_sided(6, 6, 0, 6) == pytest.approx(2 / math.comb(12, 6))
    assert fisher_exact_two_sided(4, 5, 0, 9) == pytest.approx(
        (math.comb(4, 4) * math.comb(10, 1)) / math.comb(14, 5)
    )


def test_fisher_edge_cases():
    assert fisher_exact_two_sided(0, 10, 0, 10) == 1.0
    assert fisher_exact_two_sided(5, 10, 5, 10) == 1.0
    assert fisher_exact_two_sided(2, 5, 3, 7) == fisher_exact_two_sided(3, 7, 2, 5)
    with pytest.raises(ValueError):
        fisher_exact_two_sided(6, 5, 0, 5)
    with pytest.raises(ValueError):
        fisher_exact_two_sided(-1, 5, 0, 5)


# ---------------------------------------------------------------- bootstrap


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


# ---------------------------------------------------------------- lock-in and summary


def test_lock_in_threshold_inclusive():
    assert lock_in([0.9, 0.89, 1.0, 0.1]) == (2, 4)
    assert lock_in([0.5, 0.6], threshold=0.55) == (1, 2)


def test_compare_lock_in_paper_case():
    a = [0.99] * 7 + [0.2] * 3
    b = [0.95] + [0.3] * 9
    out = compare_lock_in(a, b, threshold=0.9)
    assert (out["k_a"], out["n_a"], out["k_b"], out["n_b"]) == (7, 10, 1, 10)
    assert out["rate_a"] == pytest.approx(0.7) and out["rate_b"] == pytest.approx(0.1)
    assert round(out["p"], 4) == 0.0198
    json.dumps(out)


def test_describe_and_contrast_json_ready():
    x = [0.2, 0.4, 0.9, 0.5]
    d = describe(x)
    assert d["mean"] == pytest.approx(np.mean(x))
    assert d["sd"] == pytest.approx(np.std(x, ddof=1))
    assert d["n"] == 4 and d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert describe([0.3]) == {"mean": 0.3, "sd": 0.0, "n": 1, "ci_low": 0.3, "ci_high": 0.3}
    c = contrast(x, [0.1, 0.1, 0.3], rng=np.random.default_rng(0))
    assert c["diff"] == pytest.approx(np.mean(x) - 0.5 / 3)
    assert c["p"] == pytest.approx(_scipy_perm_p(x, [0.1, 0.1, 0.3]))
    assert c["exact"] is True and (c["n_a"], c["n_b"]) == (4, 3)
    for obj in (d, c):
        json.loads(json.dumps(obj))
        assert all(type(v) in (float, int, bool) for v in obj.values())
