"""Fisher's exact test against scipy and the paper's figures."""

from __future__ import annotations

import math

import pytest
import scipy.stats

from arbench.stats import (
    fisher_exact_one_sided,
    fisher_exact_two_sided,
)


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


def test_the_papers_one_sided_p_beside_our_two_sided():
    # the paper prints 6/6 vs 0/6 as p = 0.001: the one-sided 1/924; our tables give 2/924
    assert fisher_exact_one_sided(6, 6, 0, 6) == pytest.approx(1 / 924)
    assert round(fisher_exact_two_sided(6, 6, 0, 6), 4) == 0.0022
    for k1, n1, k2, n2 in [(7, 10, 1, 10), (4, 5, 0, 9), (2, 6, 3, 6)]:
        table = [[k1, n1 - k1], [k2, n2 - k2]]
        expected = scipy.stats.fisher_exact(table, alternative="greater").pvalue
        assert fisher_exact_one_sided(k1, n1, k2, n2) == pytest.approx(expected, rel=1e-12)


def test_fisher_edge_cases():
    assert fisher_exact_two_sided(0, 10, 0, 10) == 1.0
    assert fisher_exact_two_sided(5, 10, 5, 10) == 1.0
    assert fisher_exact_two_sided(2, 5, 3, 7) == fisher_exact_two_sided(3, 7, 2, 5)
    with pytest.raises(ValueError):
        fisher_exact_two_sided(6, 5, 0, 5)
    with pytest.raises(ValueError):
        fisher_exact_two_sided(-1, 5, 0, 5)
