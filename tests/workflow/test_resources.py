"""A paper-scale job that cannot fit its declared device stops planning with one line naming
it, before any job (what each job asks for: tests/resources/test_jobs.py and the sbatch call
in tests/workflow/test_slurm.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory, workflow_copy) -> Path:
    return workflow_copy(tmp_path_factory.mktemp("resources"))


def test_an_over_memory_job_fails_planning_with_its_name(sm, work: Path) -> None:
    # the declared device shrunk below what the first paper-scale training needs
    (work / "small_gpu.yaml").write_text(
        "resources:\n  device: h200\n  devices:\n    h200: {memory_gib: 0.001, "
        "host_memory_gib: 120, tflops: 67, utilisation: 0.35, op_overhead_us: 12}\n"
    )
    proc = sm("-n", "--cores", "1", "--configfile", "small_gpu.yaml", cwd=work, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    lines = [line for line in out.splitlines() if line.startswith("invalid plan: ")]
    assert len(lines) == 1, out[-3000:]
    assert re.match(
        r"invalid plan: train \w+/[\w.-]+/seed\d+: needs [\d,.]+ GiB on h200, which has "
        r"0\.001 GiB \(\d+ rows x [\d,]+ tokens a pass\)$",
        lines[0],
    ), lines[0]
    assert "Building DAG" not in out and "Traceback" not in out, out[-3000:]


@pytest.mark.parametrize("scale", ["paper", "smoke"])
def test_an_undeclared_device_fails_planning_at_every_scale(sm, work: Path, scale: str) -> None:
    """resources.device naming a device resources.devices does not declare: one line naming
    the key at every scale (it was a raw KeyError at paper scale and passed at smoke, which
    never reads it)."""
    (work / "other_gpu.yaml").write_text("resources:\n  device: h100\n")
    args = ("-n", "--cores", "1", "--configfile", "other_gpu.yaml", "--config", f"scale={scale}")
    proc = sm(*args, cwd=work, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    lines = [line for line in out.splitlines() if line.startswith("invalid config: ")]
    assert len(lines) == 1 and lines[0].startswith(
        "invalid config: resources.device: 'h100'; not one of the declared devices "
        "(resources.devices: h200)"
    ), out[-3000:]
    assert "KeyError" not in out and "Traceback" not in out, out[-3000:]
