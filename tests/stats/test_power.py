"""Minimum detectable effects: Fisher power against a brute-force sum over tables, the
permutation power's p-values against the permutation test itself, the MDE's bracket (power
at it reaches 80 %, just below it does not), and None where no effect is detectable."""

from __future__ import annotations

import math

import numpy as np
import pytest

from arbench.stats import fisher_exact_two_sided, permutation_test
from arbench.stats import power as P


def _brute_fisher_power(n_a: int, n_b: int, ra: float, rb: float, alpha: float) -> float:
    total = 0.0
    for ka in range(n_a + 1):
        for kb in range(n_b + 1):
            if fisher_exact_two_sided(ka, n_a, kb, n_b) < alpha:
                pa = math.comb(n_a, ka) * ra**ka * (1 - ra) ** (n_a - ka)
                pb = math.comb(n_b, kb) * rb**kb * (1 - rb) ** (n_b - kb)
                total += pa * pb
    return total


@pytest.mark.parametrize(("n_a", "n_b", "ra", "rb"), [(4, 4, 0.8, 0.2), (10, 7, 0.9, 0.3)])
def test_fisher_power_is_the_sum_over_the_tables_the_test_rejects(n_a, n_b, ra, rb) -> None:
    got = P.fisher_power(n_a, n_b, ra, rb)
    assert got == pytest.approx(_brute_fisher_power(n_a, n_b, ra, rb, 0.05), abs=1e-12)


def test_fisher_at_four_seeds_has_little_power_and_its_mde_brackets_80_percent() -> None:
    assert P.fisher_power(4, 4, 0.8, 0.2) == pytest.approx(0.168, abs=1e-3)
    assert P.fisher_power(10, 10, 0.3, 0.3) <= 0.05  # the test keeps its size
    mde = P.fisher_mde(10, 10, 0.5)
    assert mde is not None and 0.4 < mde < 0.8
    low = 0.5 - mde / 2
    assert P.fisher_power(10, 10, low + mde, low) >= 0.8
    below = mde - 0.005
    assert P.fisher_power(10, 10, 0.5 + below / 2, 0.5 - below / 2) < 0.8
    assert P.fisher_mde(2, 2, 0.5) is None  # no table of 2 vs 2 reaches p < 0.05
    assert P.fisher_mde(20, 20, 0.5) < mde  # more seeds, smaller effects


def test_simulated_pvalues_are_the_permutation_tests() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.6, 0.1, 5), rng.normal(0.5, 0.1, 4)
    sims = P._Simulations(a, b, 12, np.random.default_rng(0))
    for shift in (0.0, 0.15):
        got = sims.pvalues(shift)
        for row, p in zip(sims.samples(shift), got, strict=True):
            want = permutation_test(row[:5], row[5:]).pvalue
            assert p == pytest.approx(want, abs=1e-12)


def test_permutation_mde_brackets_80_percent_and_shrinks_with_seeds() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.normal(0.5, 0.1, 5), rng.normal(0.5, 0.1, 5)
    mde = P.permutation_mde(a, b, rng=np.random.default_rng(1))
    assert mde is not None and 0.05 < mde < 0.5
    assert P.permutation_power(a, b, mde, rng=np.random.default_rng(1)) >= 0.8
    assert P.permutation_power(a, b, mde - 0.01, rng=np.random.default_rng(1)) < 0.8
    assert P.permutation_power(a, b, 0.0, rng=np.random.default_rng(1)) <= 0.1
    noisier = P.permutation_mde(a * 3, b * 3, rng=np.random.default_rng(1))
    assert noisier is not None and noisier > mde  # three times the noise, a larger MDE


def test_no_detectable_effect_where_no_p_reaches_alpha() -> None:
    assert P.permutation_mde([0.5, 0.6], [0.4, 0.5]) is None  # 2 vs 2: p >= 1/3
    assert P.permutation_mde([0.5], [0.4]) is None
    with pytest.raises(ValueError, match="at least one score"):
        P.permutation_mde([], [0.4])
