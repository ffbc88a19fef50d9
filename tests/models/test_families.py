"""Model families: the key-value benchmark's transformer trains, resumes and is scored
through the same run layer as the cell language model, from its model block alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arbench import run
from arbench.models import families
from arbench.models.kvbench import KVModelConfig
from arbench.models.lm import ModelConfig
from arbench.tasks import build_task
from arbench.train.loop import train
from arbench.train.run_files import load_model_file
from arbench.train.settings import TrainConfig

TASK = {"name": "kvbench", "n": 2}
MODEL = {"family": "kvbench", "variant": "hybrid_square", "d_model": 16, "layers": 2,
         "heads": 2, "kv_heads": 1, "head_dim": 8, "ffn_hidden": 32}  # fmt: skip
TRAIN = {"steps": 6, "batch": 4, "lr": 3e-3, "warmup": 1, "log_every": 3, "checkpoint_every": 3}


def test_a_block_names_its_family_and_round_trips_through_the_record() -> None:
    cfg = families.model_config(MODEL, 12)
    assert isinstance(cfg, KVModelConfig) and cfg.family == "kvbench"
    from dataclasses import asdict

    assert families.config_from_record(json.loads(json.dumps(asdict(cfg)))) == cfg
    lm = families.model_config({"d_model": 16, "cell": "delta_rule"}, 10)
    assert isinstance(lm, ModelConfig)
    with pytest.raises(ValueError, match="model.family: unknown 'nope'"):
        families.model_config({"family": "nope"}, 10)


def test_seeded_builds_are_equal_and_leave_the_global_rng_alone() -> None:
    cfg = families.model_config(MODEL, 12)
    before = torch.random.get_rng_state()
    a, b = families.build(cfg, 3), families.build(cfg, 3)
    assert torch.equal(before, torch.random.get_rng_state())
    assert all(
        torch.equal(x, y)
        for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True)
    )


def test_kvbench_trains_resumes_bit_for_bit_and_is_scored(tmp_path: Path) -> None:
    task = build_task(TASK)
    cfg = families.model_config(MODEL, task.vocab_size)
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    train(task, cfg, TrainConfig.from_dict(TRAIN), 0, whole, task_settings=TASK)
    train(task, cfg, TrainConfig.from_dict(TRAIN), 0, cut, stop_after=3, task_settings=TASK)
    train(task, cfg, TrainConfig.from_dict(TRAIN), 0, cut, task_settings=TASK)
    a, b = load_model_file(whole / "model.pt"), load_model_file(cut / "model.pt")
    assert all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
    data = tmp_path / "data"
    run.write_eval_set(TASK, 8, data / "eval.npz")
    run_dir = tmp_path / "run"
    record = run.train_run(TASK, MODEL, TRAIN, 0, run_dir)
    assert record["model"]["family"] == "kvbench" and record["state_size_per_layer"] == 0
    scores = run.evaluate_run(run_dir, TASK, data_dir=data)["scores"]
    assert 0.0 <= scores["accuracy"] <= 1.0 and scores["second_occurrences"] == 8 * 2


def test_a_family_names_its_own_memory_model_and_the_rest_use_the_probe_table() -> None:
    from arbench.models import kvbench_memory

    assert families.memory_model({"family": "kvbench"}) is kvbench_memory
    assert families.memory_model({}) is None and families.memory_model({"family": "lm"}) is None
    assert set(families.MEMORY_MODELS) <= set(families.FAMILIES)
