"""Each paper-scale job's prediction comes from its run-table row and the stored probes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.plan import Plan
from arbench.resources import ProbeTable, ResourceError, jobs

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def _plan(scale: str = "paper", **resources) -> Plan:
    raw = copy.deepcopy(RAW) | {"scale": scale}
    if resources:
        raw["resources"]["devices"]["h200"].update(resources)
    return Plan(config.resolve(raw))


@pytest.fixture(scope="module")
def paper() -> Plan:
    return _plan()


def test_every_paper_scale_job_has_its_probes_stored(paper: Plan) -> None:
    """Planning never measures in CI: after adding an arm or a shape, run
    `make paper-plan-probes` (tools/paper_plan.py --probe) and commit probes.json."""
    table = ProbeTable()
    missing = {
        f"{run.experiment}/{run.name}"
        for exp in paper.experiments
        for run in paper.table.of(exp)
        if table.missing(jobs.specs(run))
    }
    assert not missing, sorted(missing)[:10]


def test_a_training_step_holds_batch_rows_of_its_longest_row(paper: Plan) -> None:
    run = paper.run("lattice_capacity", "lattice-pairs8192")
    shape = jobs.train_shape(run)
    # P store blocks k v, then P queries k SEP: 4 P tokens, P answers
    assert (shape.rows, shape.length, shape.supervised) == (16, 4 * 8192, 8192)
    # train.micro_batch_tokens: passes of 65,536 tokens' worth of rows
    assert (shape.parts, shape.part_rows) == (8, 2)
    short = jobs.train_shape(paper.run("lattice_capacity", "lattice-pairs256"))
    assert (short.parts, short.part_rows) == (1, 16)


def test_a_token_budget_sets_the_rows_at_the_last_rung(paper: Plan) -> None:
    run = paper.run("kvbench_long", "hybrid_square")
    shape = jobs.train_shape(run)
    budget, batch = run.train["tokens_per_step"], run.train["batch"]
    assert shape.rows == max(1, min(batch, budget // shape.length))
    last = max(run.train["load"]["values"])
    assert shape.length == 2 * last * (2 + run.task["key_digits"] + run.task["value_digits"])


def test_paper_jobs_ask_for_what_the_model_predicts_and_smaller_scales_do_not(paper: Plan) -> None:
    asked = paper.job_resources("train", "paper_mqar", "armed_gdn")
    est = paper.resource_estimate("train", "paper_mqar", "armed_gdn")
    assert asked == {
        "mem_mb": est.mem_mb,
        "runtime": est.runtime_minutes,
        "gpu_mem_mb": est.device_mem_mb,
    }
    assert 0 < est.device_bytes < 2**30 and est.seconds > 0
    demo = _plan("demo")
    assert demo.job_resources("train", "paper_mqar", "armed_gdn")["gpu_mem_mb"] == 0


def test_a_job_over_its_device_fails_planning_naming_it() -> None:
    plan = _plan(memory_gib=0.001)
    first = plan.trainings()[0]
    with pytest.raises(ResourceError) as err:
        plan.check_resources()
    assert str(err.value).startswith(f"train {first[0]}/{first[1]}/seed{first[2]}: needs ")
    assert "which has 0.001 GiB" in str(err.value)


def test_every_paper_scale_job_fits_its_device(paper: Plan) -> None:
    estimates = paper.check_resources()
    assert len(estimates) == len(paper.trainings()) + sum(
        run.seeds for exp in paper.experiments for run in paper.table.of(exp)
    )
