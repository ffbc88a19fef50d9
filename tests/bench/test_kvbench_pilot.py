"""The key-value pilot trains one seed with the plan's settings at a scale, overriding only
what it is told, and reports the training accuracy and the sweep at each n."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kvbench_pilot.py"


def test_a_smoke_pilot_reports_its_settings_and_the_sweep(tmp_path: Path) -> None:
    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "smoke", "--seed", "1", "--steps", "3",
         "--lr", "0.002", "--keep", str(run)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (row["arm"], row["seed"], row["steps"], row["lr"]) == ("hybrid_square", 1, 3, 0.002)
    final = json.loads((run / "final.json").read_text())
    assert final["train"]["steps"] == 3 and final["train"]["lr"] == 0.002  # what it trained
    assert final["train"]["batch"] == row["batch"]  # the plan's own batch, not overridden
    assert all(0.0 <= row[f"n{n}"] <= 1.0 for n in (8, 16, 32, 64))
    assert 0.0 <= row["train_accuracy"] <= 1.0
