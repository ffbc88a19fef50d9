"""Each job re-runs only when what it reads changes: cosmetic edits re-plan no training job,
and one arm's setting re-plans exactly that arm's runs and what depends on them."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml


@pytest.fixture
def finished(smoke_run: Path, tmp_path: Path) -> Path:
    """A private copy of the finished smoke run (results and Snakemake's records included)."""
    work = tmp_path / "work"
    shutil.copytree(smoke_run, work, symlinks=True)
    return work


def _edit(work: Path, change) -> None:
    cfg = yaml.safe_load((work / "config.yaml").read_text())
    change(cfg)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _planned(sm, work: Path) -> dict[str, int]:
    proc = sm("-n", "--cores", "2", "--config", "scale=smoke", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    return {rule: int(n) for rule, n in counts.items() if rule != "total"}


def _planned_runs(sm, work: Path) -> set[str]:
    proc = sm("-n", "--cores", "2", "--config", "scale=smoke", cwd=work)
    return set(re.findall(r"wildcards: experiment=(\w+), arm=(\w+), seed=\d+", proc.stdout))


def test_nothing_to_do_after_a_finished_run(sm, finished: Path) -> None:
    assert _planned(sm, finished) == {}


def test_a_title_contrast_or_threshold_edit_plans_no_training(sm, finished: Path) -> None:
    def cosmetic(cfg: dict) -> None:
        exp = cfg["experiments"]["factorial"]
        exp["title"] = "Another title"
        exp["lock_in_threshold"] = 0.8
        exp["contrasts"][0]["within"] = "renamed"
        exp["contrasts"].pop()

    _edit(finished, cosmetic)
    planned = _planned(sm, finished)
    assert planned == {"stats": 1, "table": 1, "figure": 1, "all": 1}, planned


def test_one_arm_setting_plans_that_arm_and_its_dependents(sm, finished: Path) -> None:
    _edit(
        finished, lambda cfg: cfg["experiments"]["factorial"]["arms"]["diagonal"].update(conv=True)
    )
    planned = _planned(sm, finished)
    seeds = 1  # smoke scale
    assert planned == {
        "train": seeds,
        "evaluate": seeds,
        "stats": 1,
        "table": 1,
        "figure": 1,
        "all": 1,
    }, planned
    assert _planned_runs(sm, finished) == {("factorial", "diagonal")}


def test_a_new_stream_length_plans_no_throughput_timing(sm, finished: Path) -> None:
    _edit(
        finished,
        lambda cfg: cfg["scales"]["smoke"]["set"].update({"bench.stream_tokens": [10000, 20000]}),
    )
    planned = _planned(sm, finished)
    assert planned == {"bench_stream": 1, "bench_cells": 1, "all": 1}, planned
