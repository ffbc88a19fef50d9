"""The workflow's view of the config: per-scale roots and what each task declares."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config
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
    paths += [plan.gate(e) for e in plan.experiments] + plan.release_sidecars("passkey_swar")
    prefix = "results/" if scale == "paper" else f"results/{scale}/"
    assert all(p.startswith(prefix) for p in paths)
    if scale == "paper":  # never inside another scale's folder
        assert not any(p.startswith(("results/demo/", "results/smoke/")) for p in paths)


def test_data_follows_the_task_declaration() -> None:
    plan = _plan("demo")
    assert plan.experiments_with("stream") == ["factorial"]
    assert plan.experiments_with("release") == ["passkey_swar"]
    assert plan.gate("factorial") == "results/demo/datasets/factorial/oracle.json"
    assert plan.eval_inputs("factorial") == ["results/demo/datasets/factorial/eval.npz"]
    assert plan.data_dir("passkey_swar") == "results/demo/datasets/passkey_swar"
    assert plan.gate("passkey_swar") == "results/demo/datasets/passkey_swar/oracle_report.json"
    assert (plan.layout("factorial"), plan.layout("passkey_swar")) == ("bars", "sweep")
    assert len(plan.release_splits("passkey_swar")) == 4 + 2 * 10


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
