"""The interference study: simulation against the closed form, the delta rule's known
limits, determinism, and settings errors."""

from __future__ import annotations

import numpy as np
import pytest

from arbench.analysis.interference import Rule, additive_error, curves, simulate, study
from arbench.report.interference import run_study


def test_additive_simulation_matches_closed_form_at_every_n_and_age() -> None:
    c = curves(Rule(None), [1, 4, 16, 64], age_n=32, d_k=16, d_v=8, trials=400, seed=1)
    closed = additive_error(c.n, 16)
    assert np.all(np.abs(c.error_vs_n - closed) <= 5 * c.se_vs_n + 1e-12)
    flat = additive_error(32, 16)  # the same at every age
    assert np.mean(np.abs(c.error_vs_age - flat) <= 5 * c.se_vs_age) > 0.95


def test_closed_form_is_not_what_a_wrong_rule_gives() -> None:
    """The comparison above can fail: delta-rule errors are far from (n-1)/d_k."""
    c = curves(Rule(1.0), [64], age_n=8, d_k=16, d_v=8, trials=200, seed=1)
    assert abs(c.error_vs_n[0] - additive_error(64, 16)) > 10 * c.se_vs_n[0]


def test_delta_rule_beta_one_stores_the_newest_pair_exactly() -> None:
    err = simulate(Rule(1.0), 12, d_k=8, d_v=4, trials=20, rng=np.random.default_rng(0))
    newest = np.array([err[t, :, t] for t in range(12)])
    assert np.abs(newest).max() < 1e-20
    # and with n <= d_k orthogonal-enough writes the error grows with age
    c = curves(Rule(1.0), [8], age_n=8, d_k=64, d_v=8, trials=300, seed=2)
    assert c.error_vs_age[0] < c.error_vs_age[-1]


def test_half_step_leaves_each_pair_a_quarter_error() -> None:
    """With one pair and beta = 0.5 the read is v/2, so its error is exactly 1/4."""
    err = simulate(Rule(0.5), 1, d_k=8, d_v=8, trials=5, rng=np.random.default_rng(0))
    assert np.allclose(err[0, :, 0], 0.25)


def test_study_is_deterministic_and_rules_draw_independently() -> None:
    a = study(8, 8, [1, 4, 8], [0.5], age_n=4, trials=10, seed=3)
    b = study(8, 8, [1, 4, 8], [0.5], age_n=4, trials=10, seed=3)
    assert all(np.array_equal(x.error_vs_n, y.error_vs_n) for x, y in zip(a, b, strict=True))
    c = study(8, 8, [1, 4, 8], [0.5], age_n=4, trials=10, seed=4)
    assert not np.array_equal(a[1].error_vs_n, c[1].error_vs_n)


def test_unknown_setting_names_the_key() -> None:
    settings = dict(d_k=8, d_v=8, n=[1], betas=[1.0], age_n=1, trials=2, seed=0, beta=1)
    with pytest.raises(ValueError, match="interference: unknown key 'beta'; allowed"):
        run_study(settings)
