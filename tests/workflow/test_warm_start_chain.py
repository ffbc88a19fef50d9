"""The warm start through Snakemake: the smoke run trains a warm-started run's base first (the
base's ``model.pt`` is the training job's input), and the run records the base it grew from."""

from __future__ import annotations

import json
from pathlib import Path

import torch

SMOKE = "results/smoke"
RUN = f"{SMOKE}/runs/lattice_capacity/lattice-pairs4/seed0"
BASE = f"{SMOKE}/runs/lattice_base/lattice/seed0"


def test_a_warm_started_run_trains_its_base_first(smoke_run: Path) -> None:
    """The smoke DAG trains lattice_base, then grows each capacity run from it (the edge
    itself: `tests/test_warm_start.py`); read from the session's smoke run."""
    work = smoke_run
    final = json.loads((work / RUN / "final.json").read_text())
    base = torch.load(work / BASE / "model.pt", map_location="cpu", weights_only=True)
    assert final["train"]["warm_start"] == {
        "experiment": "lattice_base",
        "arm": "lattice",
        "noise": 0.05,
        "base": base["fingerprint"],
    }
    # the base trained on 16 keys, the run on 32: its embedding grew from 34 to 66 rows
    assert final["model"]["vocab_size"] == 66
    assert base["weights"]["embed.weight"].shape[0] == 34
    log = (work / f"{SMOKE}/logs/train/lattice_capacity/lattice-pairs4/seed0.log").read_text()
    assert "warm start from" in log
