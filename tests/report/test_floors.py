"""The floors table: a row per distinct task block, every floor from its task's calculator."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.plan import Plan
from arbench.report.floors import floor_rows
from arbench.report.tables import TEMPLATES, render
from arbench.tasks import build_task

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def test_identical_task_blocks_share_a_row_naming_every_experiment() -> None:
    k8 = {"name": "mqar", "pairs": 8, "n_keys": 16, "n_values": 26}
    k4 = {**k8, "pairs": 4}
    rows = floor_rows(
        [
            {"experiment": "a", "task": k8},
            {"experiment": "b", "task": dict(k8)},
            {"experiment": "b", "task": k4},
        ]
    )
    assert [r["experiments"] for r in rows] == [["a", "b"], ["b"]]
    assert rows[0]["floors"] == {
        k: v for k, v in build_task(k8).floors().items() if k in rows[0]["floors"]
    }
    assert rows[1]["floors"]["rebinding_control"] == pytest.approx(1 / 4 + 3 / (4 * 26))
    assert rows[0]["summary"].startswith("K=8, 16 keys, 26 values")


def test_the_config_floors_table_has_every_task_and_the_papers_values() -> None:
    plan = Plan(config.resolve(copy.deepcopy(RAW)))
    rows = floor_rows(plan.task_blocks())
    tasks = {r["task"] for r in rows}
    assert tasks == {b["task"]["name"] for b in plan.task_blocks()}
    k32 = next(r for r in rows if r["summary"].startswith("K=32, 64 keys"))
    assert "factorial" in k32["experiments"] and "transition" in k32["experiments"]
    assert round(k32["floors"]["value_marginal"], 3) == 0.038  # appendix C: 1/26
    assert abs(k32["floors"]["uniform_pair_no_binding"] - 0.068) < 1e-3  # appendix C: ~0.068
    passkey = next(r for r in rows if r["task"] == "passkey_swar")
    assert passkey["floors"]["best_no_binding"] is None and "always_null" in passkey["other"]
    tex = render(
        TEMPLATES / "floors.tex.j2",
        source="f.json",
        rows=rows,
        scale="paper",
        chance_factor=10,
        no_binding_factor=1.5,
        chance_rule="not above the strongest no-binding floor by a binomial test",
    )
    assert tex.count(r"\\") >= len(rows) and "-- & -- & --" in tex
    assert r"lr\_sweep" in tex and "0.0685" in tex
    # the paper's appendix C floors of the later tasks: 1/54 for haystack and collision, the
    # collision no-binding floor of about 0.26, and 1/120 exactly for S5
    collision = next(r for r in rows if r["task"] == "collision")
    assert round(collision["floors"]["value_marginal"], 3) == 0.019
    assert abs(collision["floors"]["uniform_pair_no_binding"] - 0.26) < 0.005
    s5 = next(r for r in rows if r["task"] == "s5")
    assert s5["floors"]["value_marginal"] == 1 / 120
