"""benchmarks/gpu_check.py, the CUDA machine's check, on the CPU: without CUDA every part says
skipped and why; --cpu-smoke runs every part tiny and reports the documented JSON; a cell whose
chunked form is wrong fails; the time budget stops an item and skips the rest."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

from arbench.cells import CELLS

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
PARTS = ("equivalence", "training", "streaming")


@pytest.fixture(scope="module")
def gpu_check() -> Iterator[ModuleType]:
    """The script imported as a module (registered while it runs: its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def run_script(tmp_path: Path, *args: str) -> tuple[int, dict, dict]:
    """(exit status, JSON printed, JSON written to --out), CUDA hidden even on a GPU host."""
    out = tmp_path / "check.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), *args],
        capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout), json.loads(out.read_text())


def test_without_cuda_every_part_is_skipped_with_the_reason(tmp_path: Path) -> None:
    rc, printed, written = run_script(tmp_path)
    assert rc == 0 and printed == written
    assert printed["mode"] == "cuda" and printed["passed"] is True and not printed["out_of_time"]
    device = printed["device"]
    assert device["cuda_available"] is False
    assert {"name", "torch", "cuda"} <= device.keys() and device["torch"] == torch.__version__
    for part in PARTS:
        assert printed[part]["status"] == "skipped"
        assert "CUDA is not available" in printed[part]["reason"]


def test_cpu_smoke_runs_every_part_and_reports_the_documented_shape(tmp_path: Path) -> None:
    rc, printed, written = run_script(tmp_path, "--cpu-smoke")
    assert rc == 0 and printed == written and printed["passed"] is True
    assert printed["mode"] == "cpu-smoke" and printed["elapsed_s"] < printed["budget_s"]
    assert printed["out_of_time"] == []

    eq = printed["equivalence"]
    assert eq["status"] == "ok" and eq["dtype"] == "float32" and eq["device"] == "cpu"
    assert set(eq["cells"]) == set(CELLS)  # every registered cell, checked or skipped
    checked = {n: r for n, r in eq["cells"].items() if r["status"] != "skipped"}
    assert {"delta_rule", "diagonal", "attention", "mamba2", "kda", "rwkv7"} <= set(checked)
    for name, row in eq["cells"].items():
        if row["status"] == "skipped":
            assert row["reason"], name
            continue
        assert row["status"] == "pass", (name, row)
        # the numbers themselves are fp32-small (gradients of one-per-head parameters, such
        # as mamba2's dt_bias, lose digits to cancellation: see gpu_check.TOLERANCE)
        assert 0 < row["max_rel_err"]["forward"] < 1e-5, (name, row)
        assert 0 <= row["max_rel_err"]["gradient"] < 1e-4, (name, row)
        assert max(row["max_abs_err"].values()) < 1e-3, (name, row)
        assert row["worst_over_allowed"] <= 1 and row["tensors_compared"] >= 4

    runs = printed["training"]["runs"]
    assert set(runs) == {"delta_rule", "diagonal"}  # the factorial's cell families
    for cell, run in runs.items():
        assert run["status"] == "ok" and run["cell"] == cell and run["steps_per_s"] > 0
        assert run["batch"] == 2 and run["seq_len"] == 128  # paper-scale task, tiny batch
        assert run["timed_steps"] == 2 and run["paper_steps"] == 4000

    stream = printed["streaming"]
    assert stream["status"] == "ok" and stream["tokens"] == 4096 and stream["tokens_per_s"] > 0
    assert stream["arm"] == "delta_conv" and stream["max_memory_allocated_mib"] is None


def broken_chunked(gpu_check: ModuleType, name: str, error: float):
    """A factory of `name` whose chunked kernel is off by `error` (of its largest output) in
    one channel at the last position of every sequence: a wrong boundary, say."""

    build = gpu_check.zoo()[name]

    def make():
        cell = build()
        right = cell.kernel

        def kernel(form: str):
            inner = right(form)
            if form != "chunked":
                return inner

            def wrong(*args):
                o, s = inner(*args)
                o = o.clone()  # one channel: a whole position's scale a norm would undo
                o[:, :, -1, 0] = o[:, :, -1, 0] + error * o.detach().abs().max()
                return o, s

            return wrong

        cell.kernel = kernel
        return cell

    return make


def test_a_wrong_chunked_form_fails(gpu_check: ModuleType) -> None:
    """One kernel output off by 1% of the largest: the check fails the cell, and already its
    forward output is off by far more than fp32 rounding (mamba2's norm and projection damp
    the error most: from about 2e-5 of the output's scale, with the seeded weights)."""
    budget = gpu_check.Budget(60, time.monotonic())
    families = ("delta_rule", "mamba2", "kda")
    cells = {"delta_rule": gpu_check.zoo()["delta_rule"]}
    cells |= {f"broken_{n}": broken_chunked(gpu_check, n, 1e-2) for n in families}
    out = gpu_check.equivalence(torch.device("cpu"), gpu_check.SMOKE_SIZES, budget, cells)
    rows = out["cells"]
    assert out["status"] == "failed"
    assert rows["delta_rule"]["status"] == "pass"
    for name in families:
        row = rows[f"broken_{name}"]
        assert row["status"] == "fail" and row["worst_over_allowed"] > 1, row
        forward = row["max_abs_err"]["forward"]
        assert forward > gpu_check.SLACK * row["fp32_rounding"]["forward"], row


def test_a_failing_cell_fails_the_run(gpu_check: ModuleType, monkeypatch, tmp_path) -> None:
    broken = broken_chunked(gpu_check, "delta_rule", 1e-2)
    monkeypatch.setattr(gpu_check, "zoo", lambda: {"broken": broken})
    assert gpu_check.main(["--cpu-smoke", "--out", str(tmp_path / "x.json")]) == 1
    result = json.loads((tmp_path / "x.json").read_text())
    assert result["passed"] is False
    assert result["equivalence"]["cells"]["broken"]["status"] == "fail"


def test_the_budget_stops_a_running_item_and_skips_the_rest(gpu_check: ModuleType) -> None:
    budget = gpu_check.Budget(0.3, time.monotonic())

    def long() -> dict:  # 3 s of Python work: the budget must stop it at 0.3 s
        end = time.monotonic() + 3
        while time.monotonic() < end:
            sum(range(1000))
        return {"ran": "to the end"}

    stopped = gpu_check.run_item(budget, 0.0, long)
    assert stopped["status"] == "skipped" and "end of the budget" in stopped["reason"]
    assert stopped["seconds"] < 2
    later = gpu_check.run_item(budget, 5.0, lambda: {"never": True})
    assert later["status"] == "skipped" and "needs ~5 s" in later["reason"]
    erred = gpu_check.run_item(gpu_check.Budget(60, time.monotonic()), 0.0, lambda: 1 / 0)
    assert erred["status"] == "error" and erred["error"] == "ZeroDivisionError: division by zero"


def test_a_budget_past_eight_minutes_is_rejected(gpu_check: ModuleType, capsys) -> None:
    with pytest.raises(SystemExit):
        gpu_check.main(["--budget-s", "900"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--budget-s 900" in err and "(0, 470]" in err


def test_a_spent_budget_skips_every_item_and_names_each(gpu_check: ModuleType) -> None:
    result = gpu_check.check(cpu_smoke=True, budget_s=0.01, start=time.monotonic())
    assert result["passed"] is True  # nothing failed: nothing ran
    unbuildable = {n for n, make in gpu_check.zoo().items() if isinstance(make, str)}
    want = [f"equivalence/{n}" for n in CELLS if n not in unbuildable]
    assert result["out_of_time"] == [*want, "training/delta_rule", "training/diagonal", "streaming"]
    assert "streaming budget" in result["streaming"]["reason"]
