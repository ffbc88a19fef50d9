"""The recall-memory frontier: threshold crossings on the log-state axis, the stats view
built from an experiment's evaluations, its LaTeX tables and its figure."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from arbench import frontier_arms
from arbench.experiment import run_of, runs_of
from arbench.report.experiment import experiment_stats
from arbench.report.frontier import crossing, thresholds
from arbench.report.layouts import layout_of
from arbench.report.tables import render
from arbench.tasks import build_task

FRONTIER = {
    "title": "A frontier",
    "layout": "frontier",
    "task": {"name": "zoology_mqar", "vocab": 64, "seq_len": 0, "pairs": 4, "power_a": 0.01},
    "model": {"d_model": 16, "layers": 2, "mlp_ratio": 4},
    "train": {"steps": 10, "batch": 4, "lr": 1e-3, "warmup": 1},
    "eval": {"examples": 50},
    "seeds": 3,
    "grid": {"key": "task.pairs", "values": [4, 8]},
    "frontier": {
        "cells": ["delta_rule", "mamba2"],
        "states": [64, 256, 1024],
        "widths": [16, 16, 32],
        "options": {"conv": True},
        "control": {"cell": "attention", "widths": [16], "options": {"heads": 1}},
    },
}
# accuracy rises with state and falls with K; seed s adds 0.02 * s
BASE = {64: 0.3, 256: 0.85, 1024: 0.995}


def test_crossing_interpolates_on_log2_state() -> None:
    # 0.5 -> 1.0 between 2^6 and 2^8: 0.9 is 80% of the way, 2^(6 + 1.6)
    got = crossing([64, 256], [0.5, 1.0], 0.9)
    assert got["bound"] == "=" and got["state"] == pytest.approx(2**7.6)
    assert crossing([64, 256], [0.95, 1.0], 0.9) == {"state": 64.0, "bound": "<="}
    assert crossing([64, 256], [0.1, 0.5], 0.9) == {"state": 256.0, "bound": ">"}


def test_crossing_rejects_unordered_states() -> None:
    with pytest.raises(ValueError, match="states must increase"):
        crossing([256, 64], [0.1, 0.9], 0.5)


def test_thresholds_give_seed_spread_and_state_per_binding() -> None:
    curve = [
        {"state": s, "mean": a, "seeds": [0, 1], "scores": [a - 0.02, a + 0.02]}
        for s, a in ((64, 0.5), (256, 1.0))
    ]
    t = thresholds(curve, load=8)["0.9"]
    assert t["per_binding"] == pytest.approx(2**7.6 / 8)
    assert t["seed_min"] < t["state"] < t["seed_max"]
    assert t["seeds_reached"] == 2 and t["n_seeds"] == 2


def _expanded() -> dict[str, Any]:
    exp = copy.deepcopy(FRONTIER)
    frontier_arms.expand("frontier", exp)
    return exp


def _evals(exp: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for run_arm in [r.name for r in runs_of("", exp)]:
        arm, pairs = run_arm.split("-pairs")
        cell_state = arm.rsplit("_s", 1)
        state = int(cell_state[1]) if len(cell_state) == 2 and cell_state[1].isdigit() else 0
        for seed in range(3):
            acc = (BASE[state] if state else 0.5) - 0.1 * (int(pairs) == 8) + 0.02 * seed
            out.append(
                {
                    "experiment": "frontier",
                    "arm": run_arm,
                    "seed": seed,
                    "scores": {"accuracy": min(acc, 1.0)},
                    "n_parameters": 1000,
                    "state_size_per_layer": state,
                    "train_wall_time_s": 1.0,
                }
            )
    return out


def _self_tests(exp: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each run arm's data self-tests, as its oracle report records them (run.validate_stream)."""
    out = {}
    for run_arm in [r.name for r in runs_of("", exp)]:
        task = build_task(run_of(exp, run_arm).task)
        out[run_arm] = task.self_tests(task.eval_set(int(exp["eval"]["examples"])))
    return out


@pytest.fixture(scope="module")
def stats() -> dict[str, Any]:
    exp = _expanded()
    return experiment_stats(
        "frontier", exp, _evals(exp), "test", "frontier", self_tests=_self_tests(exp)
    )


def test_expansion_makes_one_arm_per_cell_and_state_plus_the_control() -> None:
    exp = _expanded()
    assert list(exp["arms"]) == [
        "delta_rule_s64",
        "delta_rule_s256",
        "delta_rule_s1024",
        "mamba2_s64",
        "mamba2_s256",
        "mamba2_s1024",
        "attention_d16",
    ]
    assert exp["arms"]["delta_rule_s1024"]["model"] == {"d_model": 32}
    assert exp["arms"]["delta_rule_s64"]["conv"] is True  # an option the cell takes
    assert "conv" not in exp["arms"]["mamba2_s64"]  # mamba2 takes no conv option


@pytest.mark.parametrize(
    "change, message",
    [
        ({"widths": [16]}, "frontier.widths"),
        ({"cells": ["nope"]}, "unknown cell 'nope'"),
        ({"typo": 1}, "unknown key 'typo'"),
        ({"states": [64, 256, 99]}, "at state 99: no shape"),
    ],
)
def test_bad_frontier_declarations_name_the_key(change: dict[str, Any], message: str) -> None:
    exp = copy.deepcopy(FRONTIER)
    exp["frontier"].update(change)
    with pytest.raises(frontier_arms.FrontierError, match=message):
        frontier_arms.expand("frontier", exp)


def test_arms_and_frontier_together_are_an_error() -> None:
    exp = {**copy.deepcopy(FRONTIER), "arms": {"x": {"cell": "delta_rule"}}}
    with pytest.raises(frontier_arms.FrontierError, match="both arms and frontier"):
        frontier_arms.expand("frontier", exp)


def test_stats_place_cells_by_state_and_attention_at_its_kv_cache(stats) -> None:
    f = stats["frontier"]
    assert f["cells"] == ["delta_rule", "mamba2", "attention"] and f["loads"] == [4, 8]
    delta = f["curves"]["delta_rule|4"]
    assert [p["state"] for p in delta] == [64, 256, 1024]
    att = f["curves"]["attention|8"][0]
    assert att["kind"] == "kv_cache" and att["state"] == 2 * 16 * 64  # 2 d_model L, L = 8K
    row = next(r for r in f["rows"] if r["cell"] == "delta_rule" and r["K"] == 4)
    assert row["config"] == "V64-L32-K4-a0.01"
    # random filler repeats a stored key, unlabelled: (L - 3K) positions x K/V per sequence
    assert row["repeats_per_sequence"] == pytest.approx((32 - 12) * 4 / 64, rel=0.3)
    t = row["thresholds"]["0.9"]  # 0.85 -> 0.995 (mean over seeds +0.02)
    expected = 2 ** (8 + (0.9 - 0.87) / (1.0 - 0.87) * 2)  # seed 2 capped at 1.0
    assert t["bound"] == "=" and t["state"] == pytest.approx(expected, rel=0.02)
    assert row["thresholds"]["0.99"]["bound"] in ("=", ">")


def test_a_reversed_curve_moves_the_threshold(stats) -> None:
    """The test above can fail: the same rows with the accuracies reversed cross elsewhere."""
    exp = _expanded()
    evals = _evals(exp)
    for e in evals:
        s = e["state_size_per_layer"]
        if s:
            e["scores"]["accuracy"] = BASE[{64: 1024, 256: 256, 1024: 64}[s]]
    flipped = experiment_stats("frontier", exp, evals, "test", "frontier")
    row = next(r for r in flipped["frontier"]["rows"] if r["cell"] == "delta_rule")
    assert row["thresholds"]["0.9"]["bound"] == "<="


def test_table_renders_both_tables(stats) -> None:
    tex = render(layout_of("frontier").template_file, source="stats/frontier.json", **stats)
    assert tex.count("\\begin{table}") == 2
    assert "V64-L32-K4-a0.01" in tex and "per binding" in tex and "$2^{6}$" in tex


def test_table_compiles(stats, tmp_path: Path, compile_tex) -> None:
    compile_tex(
        render(layout_of("frontier").template_file, source="stats/frontier.json", **stats), tmp_path
    )


def test_figure_draws_a_panel_per_load(stats, tmp_path: Path) -> None:
    out = [tmp_path / "f.png", tmp_path / "f.pdf"]
    layout_of("frontier").builder()(stats, out)
    assert all(p.stat().st_size > 5000 for p in out)
    assert not math.isnan(stats["frontier"]["rows"][0]["thresholds"]["0.9"]["state"])
