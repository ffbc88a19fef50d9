"""Each job re-runs only when what it reads changes: cosmetic edits re-plan no training job,
and one arm's setting re-plans exactly that arm's runs and what depends on them."""

from __future__ import annotations

import json
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
    """Apply ``change`` to one experiment's copy of each setting (YAML anchors unshared), as
    an edit of one line that no other experiment aliases."""
    cfg = json.loads(json.dumps(yaml.safe_load((work / "config.yaml").read_text())))
    change(cfg)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def _planned(sm, work: Path) -> dict[str, int]:
    proc = sm("-n", "--cores", "2", "--config", "scale=smoke", cwd=work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout, flags=re.M))
    return {rule: int(n) for rule, n in counts.items() if rule != "total"}


def _planned_runs(sm, work: Path, rule: str = "train") -> set[tuple[str, str]]:
    """(experiment, run arm) of every planned job of ``rule``."""
    proc = sm("-n", "--cores", "2", "--config", "scale=smoke", cwd=work)
    jobs = [
        j
        for j in re.split(r"\n(?=(?:local)?rule \w+:)", proc.stdout)
        if j.startswith(f"rule {rule}:")
    ]
    pattern = r"wildcards: experiment=(\w+), arm=([\w.+-]+), seed=\d+"
    return {hit for job in jobs for hit in re.findall(pattern, job)}


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
    # the claims report reads the stats, so it re-renders too
    assert planned == {"stats": 1, "table": 1, "figure": 1, "claims": 1, "all": 1}, planned


def test_one_arm_setting_plans_that_arm_and_its_dependents(sm, finished: Path) -> None:
    # an arm no other experiment trains identically, so exactly its own runs re-plan
    _edit(
        finished,
        lambda cfg: cfg["experiments"]["factorial"]["arms"]["diagonal_conv_decay"].update(
            qk_bias=0.5
        ),
    )
    planned = _planned(sm, finished)
    seeds = 1  # smoke scale
    assert planned == {
        "train": seeds,
        "evaluate": seeds,
        "stats": 1,
        "table": 1,
        "figure": 1,
        "claims": 1,
        "all": 1,
    }, planned
    assert _planned_runs(sm, finished) == {("factorial", "diagonal_conv_decay")}


def test_a_shared_run_is_trained_once_and_evaluated_by_each_experiment(sm, finished) -> None:
    # the transition ablation's K = 32 arms are the factorial's runs: an edit of the factorial's
    # delta arm alone retrains nothing of the transition experiment's but moves its K = 32
    # delta run to its own folder (it is no longer the factorial's)
    _edit(
        finished, lambda cfg: cfg["experiments"]["factorial"]["arms"]["delta"].update(qk_bias=0.5)
    )
    runs = _planned_runs(sm, finished)
    assert ("factorial", "delta") in runs
    assert ("transition", "delta-pairs32") in runs
    assert not any(exp == "decay" for exp, _ in runs)  # decay's delta now follows transition


def test_a_new_stream_length_plans_no_throughput_timing(sm, finished: Path) -> None:
    _edit(
        finished,
        lambda cfg: cfg["scales"]["smoke"]["set"].update({"bench.stream_tokens": [10000, 20000]}),
    )
    planned = _planned(sm, finished)
    assert planned == {"bench_stream": 1, "bench_cells": 1, "all": 1}, planned
