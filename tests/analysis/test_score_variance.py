"""The score-variance study: raw scores dilute like 1/n, squared scores hold their variance,
cubed scores go one-hot; with keys as values the raw variance levels off near 1/d."""

from __future__ import annotations

import numpy as np
import pytest

from arbench.analysis.score_variance import dependent, independent, study


def test_raw_dilutes_squared_holds_cubed_goes_one_hot() -> None:
    rng = np.random.default_rng(0)
    raw = [independent(n, 1, 400, rng)[0] for n in (64, 4096)]
    sq = [independent(n, 2, 400, rng)[0] for n in (64, 4096)]
    cube = [independent(n, 3, 400, rng)[0] for n in (64, 4096)]
    assert raw[1] < raw[0] / 30  # about 1/n: 64x fewer... at least 30x smaller
    assert 0.5 < sq[1] / sq[0] < 2.0 and sq[1] > 0.2  # no dilution
    assert cube[1] > cube[0] and cube[1] > 0.8  # towards one-hot


def test_one_key_has_variance_one_whatever_the_map() -> None:
    for p in (1, 2, 3):
        assert independent(1, p, 10, np.random.default_rng(0))[0] == pytest.approx(1.0)


def test_keys_as_values_level_off_near_one_over_d() -> None:
    got, se = dependent(4096, 1, 32, 40, np.random.default_rng(1))
    assert abs(got - 1 / 32) < 0.3 / 32  # not 1/4096
    assert got > 10 / 4096


def test_study_is_deterministic_and_checks_its_keys() -> None:
    s = dict(n=[2, 8], trials=5, dependent_trials=2, d=4, seed=3)
    assert study(s) == study(s)
    with pytest.raises(ValueError, match="score_variance: unknown key 'p'"):
        study({**s, "p": 2})
