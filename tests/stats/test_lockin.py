"""Lock-in counts and their Fisher comparison."""

from __future__ import annotations

import json

import pytest

from arbench.stats import (
    compare_lock_in,
    lock_in,
)


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
