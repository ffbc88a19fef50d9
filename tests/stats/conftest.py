"""Shared by the statistics tests: scipy's exact permutation p-value as the reference."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import scipy.stats


def _scipy_perm_p(a, b) -> float:
    """Exact two-sided p of the absolute difference of means, by scipy."""

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


@pytest.fixture
def scipy_perm_p() -> Callable[[list[float], list[float]], float]:
    return _scipy_perm_p
