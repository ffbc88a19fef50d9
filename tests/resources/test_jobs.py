"""Each paper-scale job's prediction comes from its run-table row and the stored probes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.plan import Plan
from arbench.resources import (
    CUDA_HOST_BYTES,
    HOST_BASE_BYTES,
    PARTITION_MINUTES,
    SAFETY,
    ProbeTable,
    ResourceError,
    check,
    jobs,
)

ROOT = Path(__file__).resolve().parents[2]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def _plan(scale: str = "paper", block: dict | None = None, **resources) -> Plan:
    raw = copy.deepcopy(RAW) | {"scale": scale}
    if resources:
        raw["resources"]["devices"]["h200"].update(resources)
    raw["resources"].update(block or {})
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
        "gpu": 1,
    }
    assert 0 < est.device_bytes < 2**30 and est.seconds > 0
    demo = _plan("demo")
    assert demo.job_resources("train", "paper_mqar", "armed_gdn")["gpu_mem_mb"] == 0
    assert demo.job_resources("train", "paper_mqar", "armed_gdn")["gpu"] == 0


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


# ------------------------------------------------------------ evaluation on the GPU (issue 45)


@pytest.mark.parametrize(
    ("experiment", "arm"), [("lattice_base", "gated_deltanet"), ("kvbench_long", "hybrid_square")]
)
def test_a_gpu_evaluation_asks_for_the_gpu_and_the_host_memory_it_keeps(
    paper: Plan, experiment: str, arm: str
) -> None:
    """An evaluation sized for the GPU asks for one, as training does, and for host memory
    beyond the process's base: the CUDA runtime's share and what passes through the host
    (its weights, the held-out set or one sweep length's sequences, a batch)."""
    asked = paper.job_resources("evaluate", experiment, arm)
    est = paper.resource_estimate("evaluate", experiment, arm)
    assert asked["gpu"] == 1 and asked["gpu_mem_mb"] == est.device_mem_mb > 10_000
    floor = (HOST_BASE_BYTES + CUDA_HOST_BYTES) * SAFETY / 1e6
    assert asked["mem_mb"] == est.mem_mb > floor
    # the host holds its sequences, never the device's activations
    assert est.host_bytes < est.device_bytes
    smoke = _plan("smoke")
    first = smoke.table.of(experiment)[0].name  # smoke keeps fewer arms
    assert smoke.job_resources("evaluate", experiment, first)["gpu"] == 0


def test_the_long_sweep_keeps_one_lengths_sequences_on_the_host(paper: Plan) -> None:
    """kvbench_long holds one sweep length's sequences at once (4 of its 10^7-token rows: 2
    mutant, 2 plain), their ids, targets and predictions in int64, beside the GPU."""
    est = paper.resource_estimate("evaluate", "kvbench_long", "hybrid_square")
    pieces = jobs._eval_rows_by_length(paper.run("kvbench_long", "hybrid_square"))
    assert max(pieces) == (est.shape.length, 4)
    held = 3 * 8 * 4 * est.shape.length
    assert est.host_bytes >= HOST_BASE_BYTES + CUDA_HOST_BYTES + held


def test_a_sweep_is_priced_length_by_length(paper: Plan) -> None:
    """Every length of the sweep at its own cost per sequence: the 10^7-token rows cost what
    they cost, the shorter ones far less per token than a 10^7-token row."""
    run = paper.run("kvbench_long", "hybrid_square")
    est = paper.resource_estimate("evaluate", "kvbench_long", "hybrid_square")
    device = paper.device()
    pieces = jobs._eval_rows_by_length(run)
    expected = sum(
        n * device.seconds(k["flops"], k["ops"])
        for length, n in pieces
        for k in [jobs._own_work(run, jobs.Shape(1, length, 1), train=False)]
    )
    assert est.seconds == pytest.approx(expected)
    tokens = jobs.build_task(run.task).eval_tokens(run.examples, **jobs._eval_settings(run))
    assert sum(n * length for length, n in pieces) == pytest.approx(tokens, rel=1e-3)
    longest = jobs._own_work(run, jobs.Shape(1, est.shape.length, 1), train=False)
    all_at_longest = tokens // est.shape.length * device.seconds(longest["flops"], longest["ops"])
    assert est.seconds < 0.8 * all_at_longest


# -------------------------------------------- runtimes a partition takes (issue 45, item 3)


def test_an_early_stopping_run_is_priced_at_its_expected_stop_with_the_bound_apart(
    paper: Plan,
) -> None:
    """kvbench_long stops once its last rung passes its gate (train.load.stop): priced at
    the 2,800 steps the source ran (resources.expected_steps), spread over its 13 rungs in
    whole 50-step windows, each rung at its own shape; its 100,000 steps at the last rung
    (273,417 minutes, what it asked SLURM for) are the bound, reported apart."""
    run = paper.run("kvbench_long", "hybrid_square")
    est = paper.resource_estimate("train", "kvbench_long", "hybrid_square")
    steps = jobs.rung_steps(run, paper.expected_steps("kvbench_long"))
    assert sum(steps) == 2800 and len(steps) == 13 and all(s % 50 == 0 for s in steps)
    assert min(steps) >= 50 and steps[-1] == max(steps)
    device = paper.device()
    per_step = [
        jobs._train_step(run, s, est.job, device, paper.probes)[1] for s in jobs.rung_shapes(run)
    ]
    assert est.seconds == pytest.approx(sum(n * t for n, t in zip(steps, per_step, strict=True)))
    assert est.bound_seconds == pytest.approx(100_000 * per_step[-1])
    assert est.bound_minutes == 273_417 and est.runtime_minutes < PARTITION_MINUTES
    assert paper.job_resources("train", "kvbench_long", "hybrid_square")["runtime"] == (
        est.runtime_minutes
    )
    # without an expected stop the run is priced at its bound, as before
    plain = _plan(block={"expected_steps": {}})
    assert plain.resource_estimate("train", "kvbench_long", "hybrid_square").bound_seconds is None
    assert plain.train_minutes("kvbench_long", "hybrid_square") == PARTITION_MINUTES


def test_no_paper_job_asks_for_more_than_the_partition_limit(paper: Plan) -> None:
    """At every attempt (each retry doubles the minutes), and every job can be served: the
    check with the limit passes (evaluations within it, chained trainings checkpointing
    within each submission)."""
    limit = paper.partition_minutes
    assert limit == PARTITION_MINUTES == 2880
    for kind, name in (("train", "kvbench_long"), ("evaluate", "kvbench_long")):
        for attempt in (1, 2, 3, 10):
            assert paper.job_resources(kind, name, "hybrid_square", attempt)["runtime"] <= limit
    for est in paper.check_resources():
        assert est.request_minutes(limit, 1) <= limit and est.request_minutes(limit, 5) <= limit


def test_a_retried_job_asks_for_twice_the_minutes_up_to_the_limit(paper: Plan) -> None:
    first = paper.job_resources("train", "kvbench_long", "hybrid_square", 1)["runtime"]
    assert paper.job_resources("train", "kvbench_long", "hybrid_square", 2)["runtime"] == 2 * first
    assert paper.job_resources("train", "kvbench_long", "hybrid_square", 3)["runtime"] == 2880


def test_a_run_longer_than_the_limit_is_chained_and_must_checkpoint_within_it() -> None:
    """With a 10-hour partition kvbench_long's training (about 15 hours) takes two
    submissions of at most 600 minutes; its checkpoints, 1,000 steps apart (up to 36 hours
    at its last rung), lie further apart than a submission: planning refuses it, naming the
    setting to lower. An evaluation over the limit cannot resume and is refused too."""
    short = _plan(block={"partition_minutes": 600})
    est = short.resource_estimate("train", "kvbench_long", "hybrid_square")
    assert est.submissions(600) == 2
    assert short.job_resources("train", "kvbench_long", "hybrid_square")["runtime"] == 600
    with pytest.raises(ResourceError) as err:
        short.check_resources()
    assert str(err.value).startswith("train kvbench_long/hybrid_square/seed0: its checkpoints")
    assert str(err.value).endswith("lower train.checkpoint_every")
    check(est, short.device(), 2880)  # 48 h: every submission reaches a checkpoint
    ev = short.resource_estimate("evaluate", "kvbench_long", "hybrid_square")
    with pytest.raises(ResourceError) as err:
        check(ev, short.device(), 600)
    assert str(err.value).startswith("evaluate kvbench_long/hybrid_square/seed0: needs 2,")
    assert "an evaluation does not resume" in str(err.value)
    check(ev, short.device(), 2880)


# ------------------------------------------------------------------ item 8 (issue 45)


def test_the_kvbench_memory_model_sizes_a_pass_of_micro_batch_rows() -> None:
    """train.micro_batch_tokens on the key-value transformer: the step's memory is one pass's
    rows, its work still the whole step's."""
    from arbench.models import families
    from arbench.models import kvbench_memory as km
    from arbench.models.kvbench import TRAIN_TILE

    raw = copy.deepcopy(RAW) | {"scale": "paper"}
    raw["experiments"]["kvbench"]["train"]["micro_batch_tokens"] = 1024
    plan, whole = Plan(config.resolve(raw)), _plan()
    run = plan.run("kvbench", "hybrid_square")
    shape = jobs.train_shape(run)
    assert shape.parts > 1 and shape.part_rows < shape.rows
    est = plan.resource_estimate("train", "kvbench", "hybrid_square")
    vocab, positions = jobs._vocab_positions(run)
    cfg = families.model_config(run.model, vocab, positions=positions)
    assert est.device_bytes == km.train_step_bytes(cfg, shape.part_rows, shape.length, TRAIN_TILE)
    full = whole.resource_estimate("train", "kvbench", "hybrid_square")
    assert est.device_bytes < full.device_bytes and est.seconds >= full.seconds


@pytest.mark.parametrize("scale", ["paper", "smoke"])
def test_an_undeclared_device_fails_at_every_scale_naming_the_key(scale: str) -> None:
    raw = copy.deepcopy(RAW) | {"scale": scale}
    raw["resources"]["device"] = "h100"
    with pytest.raises(config.ConfigError) as err:
        config.resolve(raw)
    assert str(err.value).startswith("resources.device: 'h100'; not one of the declared devices")
    assert "h200" in str(err.value)


def test_expected_steps_must_name_an_experiment() -> None:
    raw = copy.deepcopy(RAW) | {"scale": "smoke"}
    raw["resources"]["expected_steps"] = {"kvbench_lng": 2800}
    with pytest.raises(config.ConfigError, match=r"^resources.expected_steps.kvbench_lng: not"):
        config.resolve(raw)
