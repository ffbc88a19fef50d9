"""Per-arm summaries and contrasts, JSON-ready."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arbench.stats import (
    contrast,
    describe,
)


def test_describe_and_contrast_json_ready(scipy_perm_p):
    x = [0.2, 0.4, 0.9, 0.5]
    d = describe(x)
    assert d["mean"] == pytest.approx(np.mean(x))
    assert d["sd"] == pytest.approx(np.std(x, ddof=1))
    assert d["n"] == 4 and d["ci_low"] <= d["mean"] <= d["ci_high"]
    assert describe([0.3]) == {"mean": 0.3, "sd": 0.0, "n": 1, "ci_low": 0.3, "ci_high": 0.3}
    c = contrast(x, [0.1, 0.1, 0.3], rng=np.random.default_rng(0))
    assert c["diff"] == pytest.approx(np.mean(x) - 0.5 / 3)
    assert c["p"] == pytest.approx(scipy_perm_p(x, [0.1, 0.1, 0.3]))
    assert c["exact"] is True and (c["n_a"], c["n_b"]) == (4, 3)
    for obj in (d, c):
        json.loads(json.dumps(obj))
        assert all(type(v) in (float, int, bool) for v in obj.values())
