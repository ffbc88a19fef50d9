"""An experiment's statistics from its per-seed evaluations: arms, contrasts, floors, sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arbench.report.experiment import experiment_stats


def test_bars_stats_keep_arm_order_and_compute_contrasts(bars_experiment, bars_evals) -> None:
    stats = experiment_stats("x", bars_experiment, bars_evals[::-1], "demo", "bars")
    json.dumps(stats)
    assert list(stats["arms"]) == ["armed", "plain"] and stats["layout"] == "bars"
    armed = stats["arms"]["armed"]
    assert armed["seeds"] == [0, 1, 2, 3, 4] and armed["n"] == 5
    assert armed["mean"] == pytest.approx(np.mean([0.95, 0.97, 0.99, 0.5, 0.92]))
    assert armed["lock_in"] == 4 and stats["arms"]["plain"]["lock_in"] == 1
    (c,) = stats["contrasts"]
    assert c["diff"] == pytest.approx(armed["mean"] - stats["arms"]["plain"]["mean"])
    assert c["exact"] and 0 < c["p"] < 0.1  # 5 vs 5: exact enumeration
    assert c["lock_in"]["k_a"] == 4 and c["lock_in"]["k_b"] == 1
    assert stats["floors"]["value_marginal"] == pytest.approx(1 / 8)
    assert stats["parameters"] == {"min": 1000, "max": 1050}
    assert "sweep" not in stats


def test_a_missing_arm_is_an_error(bars_experiment, bars_evals) -> None:
    with pytest.raises(ValueError, match="no evaluations for arm 'plain'"):
        experiment_stats("x", bars_experiment, bars_evals[:5], "demo", "bars")


def test_sweep_stats_order_lengths_and_types(sweep_experiment, sweep_evals) -> None:
    stats = experiment_stats("x", sweep_experiment, sweep_evals, "smoke", "sweep")
    sweep = stats["sweep"]
    assert sweep["configs"] == ["n32", "n64"]
    assert sweep["types"] == ["ar_valid", "passkey", "all"]  # None-valued types are dropped
    cell = sweep["table"]["armed"]["n32"]["ar_valid"]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(0.25)
