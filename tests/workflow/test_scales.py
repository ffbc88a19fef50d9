"""Scales never share a file: paper results under results/, every other scale under
results/<scale>/, so a run at one scale leaves another's results as they were."""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

import pytest

SMOKE = "results/smoke"
# a real demo-scale run of the cheap jobs: the held-out set, its oracle, the cell table
DEMO_TARGETS = ["results/demo/datasets/factorial/oracle.json", "results/demo/tables/cells.tex"]


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _planned_paths(sm, cwd: Path, *args: str) -> list[str]:
    """Every output, log and benchmark file a forced dry run would write."""
    proc = sm("-n", "--forceall", "--cores", "8", *args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = re.findall(r"^\s+(?:output|log|benchmark): (.+)$", proc.stdout, flags=re.M)
    paths = [p.strip() for line in found for p in line.split(", ")]
    assert len(paths) > 100
    return paths


def test_a_demo_run_after_a_smoke_run_leaves_the_smoke_files_alone(
    sm, smoke_run: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    shutil.copytree(smoke_run, work, symlinks=True)
    before = _digests(work / SMOKE)
    proc = sm("--cores", "2", *DEMO_TARGETS, "--config", "scale=demo", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all((work / t).exists() for t in DEMO_TARGETS)
    assert _digests(work / SMOKE) == before
    # and the smoke DAG still has nothing to do
    again = sm("-n", "--cores", "2", "--config", "scale=smoke", cwd=work)
    assert "Nothing to be done" in again.stdout + again.stderr


# inputs fetched from packages, shared by every scale (the real-text corpus), not results
INPUTS = "data/"


@pytest.fixture(scope="module")
def planning(workflow_copy, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workflow copy to dry-run in: a forced plan needs no finished run, so these tests run
    beside the session's smoke run instead of after it."""
    return workflow_copy(tmp_path_factory.mktemp("planning"))


@pytest.mark.parametrize("scale", ["demo", "smoke"])
def test_reduced_scales_write_only_under_their_own_root(sm, planning: Path, scale: str) -> None:
    paths = _planned_paths(sm, planning, "--config", f"scale={scale}")
    outside = [p for p in paths if not p.startswith((f"results/{scale}/", INPUTS))]
    assert not outside, outside[:5]


def test_the_paper_scale_writes_outside_every_other_root(sm, planning: Path) -> None:
    paths = _planned_paths(sm, planning)
    assert all(p.startswith(("results/", INPUTS)) for p in paths)
    assert not [p for p in paths if p.startswith(("results/demo/", "results/smoke/"))]
    assert "results/tables/factorial.tex" in paths and "results/figures/factorial.pdf" in paths
