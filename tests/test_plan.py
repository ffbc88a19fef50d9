"""The workflow's view of the config: per-scale roots and what each task declares."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config, experiment
from arbench.plan import Plan, results_root

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def _plan(scale: str) -> Plan:
    return Plan(config.resolve(copy.deepcopy(RAW) | {"scale": scale}))


def test_roots_per_scale() -> None:
    assert results_root("paper") == "results"
    assert results_root("demo") == "results/demo"


@pytest.mark.parametrize("scale", ["paper", "demo", "smoke"])
def test_every_path_is_under_the_scale_root(scale: str) -> None:
    plan = _plan(scale)
    paths = [*plan.targets(), *plan.run_files("factorial", "final.json")]
    paths += [
        plan.gate(e, a)
        for e in plan.experiments
        for a in [r.name for r in experiment.runs_of("", plan.experiments[e])]
    ]
    paths += plan.release_sidecars("passkey_swar")
    prefix = "results/" if scale == "paper" else f"results/{scale}/"
    assert all(p.startswith(prefix) for p in paths)
    if scale == "paper":  # never inside another scale's folder
        assert not any(p.startswith(("results/demo/", "results/smoke/")) for p in paths)


def test_data_follows_the_task_declaration() -> None:
    plan = _plan("demo")
    assert plan.experiments_with("release") == ["passkey_swar"]
    assert "factorial" in plan.experiments_with("stream")
    assert plan.gate("factorial", "delta") == "results/demo/datasets/factorial/oracle.json"
    assert plan.eval_inputs("factorial", "delta") == [
        "results/demo/datasets/factorial/eval.npz",
        "results/demo/datasets/factorial/oracle.json",  # a shared run's scoring is gated too
    ]
    assert plan.data_dir("passkey_swar", "gated_deltanet") == "results/demo/datasets/passkey_swar"
    assert (
        plan.gate("passkey_swar", "gated_deltanet")
        == "results/demo/datasets/passkey_swar/oracle_report.json"
    )
    assert (plan.layout("factorial"), plan.layout("passkey_swar")) == ("bars", "sweep")
    assert plan.layout("capacity") == "grid"
    release = plan.releases["passkey_swar"]  # train configs once, eval configs twice
    expected = len(release["train_configs"]) + 2 * len(release["eval_configs"])
    assert len(plan.release_splits("passkey_swar")) == expected == 4 + 2 * 3


def test_jobs_receive_only_what_they_read() -> None:
    plan = _plan("paper")
    model = plan.model("factorial", "delta_conv")
    assert model == {
        "d_model": 32,
        "layers": 2,
        "mlp_ratio": 4,
        "cell": "delta_rule",
        "cell_options": {"heads": 1, "qk_bias": 1.0, "conv": True, "decay": False},
        "embed_std": 1.0,
    }
    one = plan.release_split_settings("passkey_swar", "n64", "train")
    assert one["examples"] == 100_000 and one["split_seeds"] == {"train": 1}
    ref = plan.reference(plan.cfg["zoo"]["reference"])
    assert ref["task"]["name"] == "mqar" and ref["model"]["cell"] == "delta_rule"


def test_a_grid_over_a_task_setting_gives_each_value_its_own_dataset() -> None:
    plan = _plan("paper")
    assert plan.dataset("transition", "delta-pairs16") == "transition-pairs16"
    assert plan.datasets["transition-pairs16"]["task"]["pairs"] == 16
    assert plan.task_settings("capacity", "mamba2-pairs128")["pairs"] == 128
    # a grid over a training setting keeps the experiment's one dataset
    assert plan.dataset("lr_sweep", "delta-lr0.002") == "lr_sweep"
    assert plan.train_settings("lr_sweep", "delta-lr0.002")["lr"] == 0.002
    assert plan.train_settings("lr_sweep", "delta-lr0.002")["steps"] == 4000


def test_the_arm_wildcard_and_the_held_out_count_come_from_the_rows() -> None:
    """The rules' ``arm`` wildcard is the table's run-arm names (no naming pattern in the
    rules), and an evaluation scores its row's held-out count."""
    plan = _plan("paper")
    names = plan.run_arms()
    assert names == sorted({run.name for run in plan.table})
    assert {"delta", "delta-pairs16", "delta-lr0.002"} <= set(names)
    assert "delta-pairs99" not in names
    row = plan.run("lr_sweep", "delta-lr0.002")
    assert plan.eval_examples("lr_sweep", "delta-lr0.002") == row.examples
    assert row.examples == plan.experiments["lr_sweep"]["eval"]["examples"]


def test_identical_runs_are_trained_once() -> None:
    plan = _plan("paper")
    factorial = "results/runs/factorial/delta/seed3"
    assert plan.run_dir("transition", "delta-pairs32", 3) == factorial
    assert plan.run_dir("decay", "delta", 3) == factorial
    assert plan.run_dir("lr_sweep", "delta-lr0.006", 3) == factorial
    assert plan.run_dir("mamba2", "delta-pairs32", 3) == factorial  # its q/k options per arm
    # the decay experiment's seeds beyond the factorial's ten are its own
    assert plan.run_dir("decay", "delta", 15) == "results/runs/decay/delta/seed15"
    assert plan.run_dir("transition", "delta-pairs16", 0) == (
        "results/runs/transition/delta-pairs16/seed0"
    )
    assert plan.run_dir("lr_sweep", "delta-lr0.002", 0) == (
        "results/runs/lr_sweep/delta-lr0.002/seed0"
    )
    total = sum(len(plan.run_files(e, "final.json")) for e in plan.experiments)
    assert len(plan.trainings()) < total
    assert len(plan.trainings()) == len(
        {p for e in plan.experiments for p in plan.run_files(e, "final.json")}
    )


def test_the_floors_table_reads_every_task_block() -> None:
    plan = _plan("paper")
    blocks = plan.task_blocks()
    pairs = sorted(b["task"]["pairs"] for b in blocks if b["experiment"] == "capacity")
    assert pairs == [4, 8, 16, 32, 64, 128]
    assert {b["experiment"] for b in blocks} == set(plan.experiments)
    assert f"{plan.root}/tables/floors.tex" in plan.targets()


def test_an_arm_that_changes_the_task_reads_its_own_dataset() -> None:
    plan = _plan("paper")
    ref = "attention_reference"
    assert plan.dataset(ref, "rotary_fixed") == ref
    assert plan.dataset(ref, "absolute_shifting") == f"{ref}-absolute_shifting"
    # an identical task block shares the first arm's dataset
    assert plan.dataset(ref, "rotary_shifting") == f"{ref}-absolute_shifting"
    assert plan.datasets[f"{ref}-rotary_shifting_collision"]["task"]["name"] == "collision"
    assert plan.dataset("ramps", "shaped") == "ramps-uniform"
    assert plan.datasets["ramps-time_based"]["task"]["seq_len"] == 512


def test_the_wall_baseline_is_the_curriculum_experiments_control() -> None:
    plan = _plan("paper")
    assert (
        plan.run_dir("curriculum", "end_only", 2) == "results/runs/haystack/delta-seq_len64/seed2"
    )
    assert plan.layout("curriculum") == "lockin"
    assert plan.layout("haystack") == "grid"
