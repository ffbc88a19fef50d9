"""The key-value benchmark's GPU slice runs every code path on the CPU (--cpu-smoke), writes
its JSON, and its kernel check fails when the dispatcher is wrong."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "kvbench_gpu_slice.py"


def test_cpu_smoke_measures_training_and_the_sweep(tmp_path: Path) -> None:
    out = tmp_path / "slice.json"
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--cpu-smoke", "--train-steps", "1", "--out", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["kernels"]["ok"] and len(result["kernels"]["cases"]) == 4
    rungs = result["training"]["rungs"]
    assert [r["load"] for r in rungs] == [2, 4, 8] and all(r["tokens_per_s"] > 0 for r in rungs)
    # the smoke's token budget (512 tokens per step) sizes each rung's batch, as the loop does
    assert [r["batch"] for r in rungs] == [10, 5, 2]
    assert all(r["predicted_mib"] > 0 for r in rungs)
    lengths = result["sweep"]["lengths"]
    assert [r["length"] for r in lengths] == [240, 1008]
    assert all(set(r["kinds"]) == {"mutant", "plain"} and r["predicted_mib"] > 0 for r in lengths)
    assert result["sweep"]["memory_growth"]["length_ratio"] == pytest.approx(1008 / 240)


def test_a_wrong_kernel_fails_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("kv_slice", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "attention", lambda q, k, v, **kw: torch.zeros_like(q))
    assert mod.kernels(torch.device("cpu"), smoke=True)["ok"] is False
