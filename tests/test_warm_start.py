"""The warm start (``train.warm_start``): a run continues another run's model, vocabulary grown.

The plan gives each warm-started training job its base run's ``model.pt`` of the same seed as
an input, the base's settings join the run's identity, a bad pointer fails before any job
naming the key, and the model a warm-started run starts from is exactly `extend_vocabulary` of
its base's weights.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import torch
import yaml

from arbench import config
from arbench.experiment import RunTable
from arbench.models.vocab_extension import extend_vocabulary
from arbench.plan import Plan
from arbench.run import train_run
from arbench.train.run_files import load_model_file

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def _plan(scale: str) -> Plan:
    return Plan(config.resolve({**copy.deepcopy(RAW), "scale": scale}))


def test_each_warm_started_training_job_reads_its_bases_model_of_the_same_seed() -> None:
    plan = _plan("smoke")
    for experiment in ("lattice_capacity", "lattice_forgetting", "lattice_realtext"):
        for run in plan.table.of(experiment):
            base = run.train["warm_start"]
            assert base == {"experiment": "lattice_base", "arm": run.arm, "noise": 0.05}
            assert plan.warm_start_model(experiment, run.name, 0) == [
                f"results/smoke/runs/lattice_base/{run.arm}/seed0/model.pt"
            ]
    for run in plan.table.of("lattice_base"):
        assert plan.warm_start_model("lattice_base", run.name, 0) == []


def test_an_arm_can_opt_out_and_train_from_scratch() -> None:
    plan = _plan("paper")
    scratch = plan.run("lattice_capacity", "lattice_scratch-pairs256")
    assert "warm_start" not in scratch.train
    assert plan.warm_start_model("lattice_capacity", scratch.name, 0) == []
    assert plan.warm_start_model("lattice_capacity", "lattice-pairs256", 2) == [
        "results/runs/lattice_base/lattice/seed2/model.pt"
    ]


def test_the_base_run_is_part_of_the_warm_started_runs_identity() -> None:
    cfg = config.resolve({**copy.deepcopy(RAW), "scale": "smoke"})
    before = RunTable(cfg["experiments"], set())
    run = before.row("lattice_capacity", "lattice-pairs4")
    edited = copy.deepcopy(cfg["experiments"])
    edited["lattice_base"]["task"]["pairs"] = 2  # the base changes; the run's blocks do not
    after = RunTable(edited, set())
    same = after.row("lattice_capacity", "lattice-pairs4")
    assert run.identity == same.identity
    assert before.identity(run) != after.identity(same)
    assert before.identity(run).startswith(run.identity)


def _set_warm(c: dict, **warm: object) -> None:
    c["experiments"]["lattice_capacity"]["train"]["warm_start"] = warm


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda c: _set_warm(c, experiment="lattice_bse", noise=0.05),
            "lattice_capacity (run arm lattice-pairs256).train.warm_start.experiment: "
            "'lattice_bse' is not an experiment",
        ),
        (
            lambda c: _set_warm(c, experiment="lattice_base", arm="lattic", noise=0.05),
            "lattice_capacity (run arm lattice-pairs256).train.warm_start.arm: 'lattic' is "
            "not a run arm of lattice_base",
        ),
        (
            lambda c: c["experiments"]["lattice_base"]["model"].update(d_model=32),
            "lattice_capacity (run arm lattice-pairs256).train.warm_start: the base "
            "lattice_base/lattice has another model shape (differs in ['d_model'])",
        ),
        (
            lambda c: c["experiments"]["lattice_base"]["task"].update(n_keys=16384, n_values=16384),
            "lattice_capacity (run arm lattice-pairs256).train.warm_start: the base "
            "lattice_base/lattice has vocabulary 32770, not smaller than this run's 32770",
        ),
        (
            lambda c: c["experiments"]["lattice_base"].update(seeds=1),
            "the base lattice_base/lattice trains 1 seed(s), fewer than this run's 3",
        ),
    ],
)
def test_a_bad_warm_start_fails_before_any_job_naming_the_key(edit, needle: str) -> None:
    cfg = config.dealias(RAW)  # unshared, so an edit reaches one experiment only
    edit(cfg)
    with pytest.raises(config.ConfigError) as err:
        config.resolve(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert re.search(re.escape(needle), message), message


TASK = {"name": "lattice_recall", "pairs": 4, "n_keys": 8, "n_values": 8}
MODEL = {
    "d_model": 16,
    "layers": 1,
    "mlp_ratio": 2,
    "cell": "lattice",
    "cell_options": {"heads": 1, "d_v": 4, "addr_scale": 2.5},
}
TRAIN = {"steps": 6, "batch": 4, "lr": 1e-2, "warmup": 1, "checkpoint_every": 3, "log_every": 3}


def test_a_warm_started_run_starts_from_extend_vocabulary_of_its_base(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    base_dir, run_dir = tmp_path / "base", tmp_path / "run"
    train_run(TASK, MODEL, TRAIN, 3, base_dir)
    task = {**TASK, "n_keys": 32, "n_values": 32}
    warm = {"experiment": "base", "arm": "lattice", "noise": 0.05}
    # zero steps: the model file holds the weights the run starts from
    record = train_run(
        task,
        MODEL,
        {**TRAIN, "steps": 0, "warm_start": warm},
        3,
        run_dir,
        warm_start=base_dir / "model.pt",
    )
    base = load_model_file(base_dir / "model.pt")
    started = load_model_file(run_dir / "model.pt")["weights"]
    expected = extend_vocabulary(base["weights"], 8, 32, 0.05, torch.Generator().manual_seed(3))
    assert started.keys() == expected.keys()
    for name, tensor in expected.items():
        assert torch.equal(started[name], tensor), name
    assert started["embed.weight"].shape[0] == 66
    # the base's fingerprint is part of the run's settings (a retrained base restarts it)
    assert record["train"]["warm_start"] == {**warm, "base": base["fingerprint"]}

    # a base with another model shape is refused, naming the field
    with pytest.raises(Exception, match="d_model"):
        train_run(
            task,
            {**MODEL, "d_model": 8},
            {**TRAIN, "warm_start": warm},
            3,
            tmp_path / "other",
            warm_start=base_dir / "model.pt",
        )
    # a warm start without its base file (or a base file without a warm start) is refused
    with pytest.raises(ValueError, match="train.warm_start"):
        train_run(task, MODEL, {**TRAIN, "warm_start": warm}, 3, tmp_path / "none")


def test_a_warm_started_run_resumes_from_its_own_checkpoint(tmp_path: Path) -> None:
    """A killed warm-started run resumes from its checkpoint, not from the base again, and
    reproduces the uninterrupted run."""
    from arbench.models import families
    from arbench.run import warm_start_weights
    from arbench.tasks import build_task
    from arbench.train.loop import train
    from arbench.train.settings import TrainConfig

    torch.set_num_threads(1)
    train_run(TASK, MODEL, TRAIN, 0, tmp_path / "base")
    task = {**TASK, "n_keys": 16, "n_values": 16}
    warm = {"experiment": "base", "arm": "lattice", "noise": 0.05}
    whole = train_run(
        task,
        MODEL,
        {**TRAIN, "warm_start": warm},
        0,
        tmp_path / "whole",
        warm_start=tmp_path / "base" / "model.pt",
    )
    adapter = build_task(task)
    cfg = families.model_config(MODEL, adapter.vocab_size)
    weights, fp = warm_start_weights(tmp_path / "base" / "model.pt", cfg, 0.05, 0)
    settings = {**TRAIN, "warm_start": {**warm, "base": fp}}
    train(
        adapter,
        cfg,
        TrainConfig.from_dict(settings),
        0,
        tmp_path / "killed",
        stop_after=3,
        task_settings=task,
        initial_weights=weights,
    )
    resumed = train_run(
        task,
        MODEL,
        {**TRAIN, "warm_start": warm},
        0,
        tmp_path / "killed",
        warm_start=tmp_path / "base" / "model.pt",
    )
    assert resumed["resumed_from_step"] == 3
    a = load_model_file(tmp_path / "whole" / "model.pt")["weights"]
    b = load_model_file(tmp_path / "killed" / "model.pt")["weights"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert whole["fingerprint"] == resumed["fingerprint"]


def test_a_run_without_a_warm_start_keeps_its_fingerprint() -> None:
    """Adding the option left every other run's fingerprint as it was recorded before."""
    from dataclasses import asdict

    from arbench.train.run_files import fingerprint, run_settings
    from arbench.train.settings import TrainConfig

    cfg = asdict(TrainConfig.from_dict(TRAIN))
    assert cfg["warm_start"] is None
    before = {k: v for k, v in cfg.items() if k != "warm_start"}
    assert fingerprint(run_settings(MODEL, cfg, TASK, 0)) == fingerprint(
        run_settings(MODEL, before, TASK, 0)
    )
    warm = {**cfg, "warm_start": {"experiment": "b", "arm": "a", "noise": 0.05, "base": "x"}}
    assert fingerprint(run_settings(MODEL, warm, TASK, 0)) != fingerprint(
        run_settings(MODEL, cfg, TASK, 0)
    )


def test_a_corrupt_base_model_is_one_line_naming_it_and_what_to_do(tmp_path: Path) -> None:
    """A truncated base model.pt (torch says EOFError or a zip error, naming no file) is one
    line naming the base's file and how to retrain it."""
    from arbench.train.run_files import UnreadableFile

    torch.set_num_threads(1)
    train_run(TASK, MODEL, TRAIN, 0, tmp_path / "base")
    base = tmp_path / "base" / "model.pt"
    base.write_bytes(base.read_bytes()[:100])
    warm = {"experiment": "base", "arm": "lattice", "noise": 0.05}
    task = {**TASK, "n_keys": 16, "n_values": 16}
    with pytest.raises(UnreadableFile) as caught:
        train_run(task, MODEL, {**TRAIN, "warm_start": warm}, 0, tmp_path / "run", warm_start=base)
    said = str(caught.value)
    assert said.startswith(f"{base}: unreadable (") and "delete it and rerun" in said
    assert "\n" not in said
