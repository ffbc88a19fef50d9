"""The planned DAG equals its snapshot at every scale (tools/plan_snapshot.py): the same jobs,
params and resources, so a change to how the config expands is seen in review."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("plan_snapshot", ROOT / "tools/plan_snapshot.py")
snapshot = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(snapshot)


def test_the_planned_dag_equals_its_snapshot() -> None:
    # its own process: Snakemake's API sets up logging and paths for the whole interpreter
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tools/plan_snapshot.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, (
        f"{proc.stdout[-3000:]}{proc.stderr[-2000:]}"
        "(python tools/plan_snapshot.py --write, if the plan is meant to change)"
    )


def test_the_comparison_names_a_changed_param() -> None:
    jobs = [{"rule": "train", "output": ["a"], "params": {"lr": 1}}]
    changed = [{"rule": "train", "output": ["a"], "params": {"lr": 2}}]
    assert snapshot.differences(jobs, changed) == ["train -> a: params differ"]
    assert snapshot.differences(jobs, []) == ["only in the snapshot: train -> a"]
