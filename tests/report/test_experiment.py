"""An experiment's statistics from its per-seed evaluations: arms, contrasts, floors, sweep."""

from __future__ import annotations

import json

import numpy as np
import pytest

from arbench.experiment import runs_of
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
    assert stats["floors"]["value_marginal"] == pytest.approx(1 / 20)
    assert stats["parameters"] == {"min": 1000, "max": 1050}
    assert "sweep" not in stats


def test_a_missing_arm_is_an_error(bars_experiment, bars_evals) -> None:
    with pytest.raises(ValueError, match="no evaluations for run arm 'plain'"):
        experiment_stats("x", bars_experiment, bars_evals[:5], "demo", "bars")


def test_sweep_stats_order_lengths_and_types(sweep_experiment, sweep_evals) -> None:
    stats = experiment_stats("x", sweep_experiment, sweep_evals, "smoke", "sweep")
    sweep = stats["sweep"]
    assert sweep["configs"] == ["n32", "n64"]
    assert sweep["types"] == ["ar_valid", "passkey", "all"]  # None-valued types are dropped
    cell = sweep["table"]["armed"]["n32"]["ar_valid"]
    assert cell["n"] == 2 and cell["mean"] == pytest.approx(0.25)


def test_grid_stats_give_every_value_its_floors_contrasts_and_rebinding(
    grid_experiment, grid_evals, grid_scores
) -> None:
    stats = experiment_stats("g", grid_experiment, grid_evals, "demo", "grid")
    json.dumps(stats)
    g = stats["grid"]
    assert g["labels"] == ["2", "4"] and g["table"]["armed"]["4"] == "armed-pairs4"
    # floors per value, from the calculator of that value's task
    assert g["floors"]["2"]["uniform_pair_no_binding"] > g["floors"]["4"]["uniform_pair_no_binding"]
    assert [c["value"] for c in stats["contrasts"]] == [2, 4]
    c2 = stats["contrasts"][0]
    assert c2["diff"] == pytest.approx(
        np.mean(grid_scores[("armed", 0)]) - np.mean(grid_scores[("plain", 0)])
    )
    armed = stats["arms"]["armed-pairs2"]
    assert (armed["arm"], armed["value"]) == ("armed", 2)
    assert stats["rebinding"]
    assert armed["rebinding"]["mean"] == pytest.approx(armed["mean"] - 0.01)
    assert "tuned" not in g


def test_every_run_arm_carries_its_rows_arm_and_value(
    grid_experiment, grid_evals, bars_experiment, bars_evals
) -> None:
    """Each entry of ``arms`` names the arm it came from and its grid value (None without a
    grid), as the experiment's rows give them."""
    stats = experiment_stats("g", grid_experiment, grid_evals, "demo", "grid")
    rows = runs_of("g", grid_experiment)
    assert {n: (a["arm"], a["value"]) for n, a in stats["arms"].items()} == {
        r.name: (r.arm, r.value) for r in rows
    }
    assert stats["arms"]["plain-pairs4"]["arm"] == "plain"
    assert stats["arms"]["plain-pairs4"]["value"] == 4
    bars = experiment_stats("x", bars_experiment, bars_evals, "demo", "bars")
    assert {n: (a["arm"], a["value"]) for n, a in bars["arms"].items()} == {
        "armed": ("armed", None),
        "plain": ("plain", None),
    }


def test_a_tuned_grid_reports_each_arm_at_its_best_value(
    tuned_experiment, tuned_evals, grid_scores
) -> None:
    stats = experiment_stats("t", tuned_experiment, tuned_evals, "demo", "grid")
    tuned = stats["grid"]["tuned"]
    assert tuned["default"] == 2e-3
    assert tuned["best"] == {"armed": 1e-3, "plain": 4e-3}
    (best,) = tuned["contrasts_best"]
    assert (best["value_a"], best["value_b"]) == (1e-3, 4e-3)
    assert best["diff"] == pytest.approx(
        np.mean(grid_scores[("armed", 0)]) - np.mean(grid_scores[("plain", 2)])
    )
    assert not stats["rebinding"]


def test_chance_is_the_higher_of_the_value_and_no_binding_thresholds() -> None:
    from arbench.report.experiment import chance_threshold
    from arbench.tasks import build_task

    mqar = build_task({"name": "mqar", "pairs": 32, "n_keys": 64, "n_values": 26}).floors()
    assert chance_threshold(mqar) == pytest.approx(10 / 26)  # 0.385: the value floor's
    haystack = build_task({"name": "haystack"}).floors()
    assert chance_threshold(haystack) == pytest.approx(1.5 * haystack["best_no_binding"])
    assert chance_threshold(haystack) > 10 / 54  # a cell at the no-binding floor is chance
    assert chance_threshold({"value_marginal": 1 / 120}) == pytest.approx(10 / 120)  # S5


def test_an_arm_is_described_by_its_curriculum() -> None:
    from arbench.report.experiment import describe_arm

    ramp = {"cell": "delta_rule", "train": {"curriculum": {"ramp": "linear", "until": 0.8}}}
    assert describe_arm(ramp) == "delta_rule; linear curriculum"
    # a ramp that starts at the full gap is the paper's "uniform" curriculum, not a ramp
    full = {"cell": "delta_rule", "train": {"curriculum": {"ramp": "linear", "start": 1.0}}}
    assert describe_arm(full) == "delta_rule; full-range curriculum"
    assert describe_arm({"cell": "delta_rule", "train": {"curriculum": None}}).endswith(
        "no curriculum"
    )


def test_an_arm_is_chance_by_the_binomial_test_where_its_answers_are_counted(
    bars_experiment, bars_evals
) -> None:
    """An arm whose evaluation counts its answers is chance unless the one-sided binomial
    test puts it above the strongest no-binding floor: 0.40 on 200 answers per seed against
    this task's best no-binding 0.32 is off chance, 0.33 is not, though both are far above
    the 1/20 value floor; without counts the threshold rule stays."""
    counted = []
    for e in bars_evals:
        acc = 0.33 if e["arm"] == "plain" else 0.40
        counted.append(
            {
                **e,
                "scores": {
                    **e["scores"],
                    "accuracy": acc,
                    "correct": round(acc * 200),
                    "supervised": 200,
                },
            }
        )
    stats = experiment_stats("x", bars_experiment, counted, "demo", "bars")
    armed, plain = stats["arms"]["armed"], stats["arms"]["plain"]
    assert armed["chance_test"]["rule"] == "binomial" and not armed["chance"]
    assert armed["chance_test"]["answers"] == 1000 and armed["chance_test"]["p"] < 1e-3
    assert plain["chance"] and plain["chance_test"]["p"] > 1e-3
    assert stats["contrasts"][0]["b_chance"] and not stats["contrasts"][0]["a_chance"]
    bare = experiment_stats("x", bars_experiment, bars_evals, "demo", "bars")
    assert bare["arms"]["plain"]["chance_test"]["rule"] == "threshold"
    assert bare["chance_rules"] == ["threshold"] and stats["chance_rules"] == ["binomial"]


def test_the_paper_rebinding_control_is_tested_against_its_binder_floor(
    bars_experiment, bars_evals
) -> None:
    """On the paper's rebinding control (values deranged, scored against the original answer)
    a binder falls to 1/V: the rebinding block tests the pooled control answers against that
    floor (binomial), so 0.04 on 2,048 answers a seed is at it and 0.12 is above it."""
    exp = {**bars_experiment, "task": {"name": "paper_mqar", "pairs": 32}}
    evals = []
    for e in bars_evals:
        rebound = 0.12 if e["arm"] == "plain" else 0.04
        scores = {"accuracy": 0.9, "correct": 1843, "supervised": 2048}
        evals.append({**e, "scores": {**scores, "rebinding_accuracy": rebound}})
    stats = experiment_stats("x", exp, evals, "demo", "bars")
    armed = stats["arms"]["armed"]["rebinding"]
    plain = stats["arms"]["plain"]["rebinding"]
    assert armed["chance_test"]["rule"] == "binomial"
    assert armed["chance_test"]["floor"] == pytest.approx(1 / 26)
    assert armed["chance_test"]["answers"] == 5 * 2048
    assert armed["chance"] and armed["chance_test"]["p"] > 1e-3
    assert not plain["chance"] and plain["chance_test"]["p"] < 1e-3
