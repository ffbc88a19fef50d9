"""The run layer: a run trains, records its model, and is scored from that record; data is
written and validated for both kinds of task, and rejected data stops the job."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from arbench import run
from arbench.mismatch import SettingsMismatch
from arbench.tasks import IGNORE
from arbench.tasks.base import load_eval_set, save_eval_set
from arbench.train.run_files import load_model_file

TASK = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
MODEL = {"d_model": 16, "layers": 1, "mlp_ratio": 2, "cell": "delta_rule", "cell_options": {}}
TRAIN = {"steps": 6, "batch": 4, "lr": 3e-3, "warmup": 1, "log_every": 3}


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    data = tmp_path_factory.mktemp("data")
    run.write_eval_set(TASK, 32, data / "eval.npz")
    run_dir = tmp_path_factory.mktemp("run")
    run.train_run(TASK, MODEL, TRAIN, 3, run_dir, record={"arm": "a", "scale": "smoke"})
    return run_dir, data


def test_the_record_holds_the_model_the_task_and_the_caller_fields(trained) -> None:
    run_dir, _ = trained
    final = json.loads((run_dir / "final.json").read_text())
    defaults = {"embed_std": None, "tied_embeddings": True}  # ModelConfig fields MODEL leaves out
    assert final["model"] == {"vocab_size": 18, **defaults, **MODEL}
    assert final["task"] == TASK and final["arm"] == "a" and final["scale"] == "smoke"
    assert final["seed"] == 3 and (run_dir / "model.pt").exists()
    assert final["fingerprint"] == load_model_file(run_dir / "model.pt")["fingerprint"]


def test_evaluation_reads_the_shape_from_the_record(trained, tmp_path: Path) -> None:
    run_dir, data = trained
    result = run.evaluate_run(run_dir, TASK, data_dir=data, examples=32)
    assert result["scores"]["supervised"] == 32 * 4
    assert (
        result["n_parameters"] == json.loads((run_dir / "final.json").read_text())["n_parameters"]
    )
    # a record describing another model than its weights: an error naming both and the field
    edited = tmp_path / "run"
    edited.mkdir()
    (edited / "model.pt").write_bytes((run_dir / "model.pt").read_bytes())
    final = json.loads((run_dir / "final.json").read_text())
    final["model"]["d_model"] = 8
    (edited / "final.json").write_text(json.dumps(final))
    with pytest.raises(SettingsMismatch, match=r"run/model.pt .* record .*final.json"):
        run.evaluate_run(edited, TASK, data_dir=data)
    with pytest.raises(SettingsMismatch, match="model.d_model: 16 vs 8"):
        run.evaluate_run(edited, TASK, data_dir=data)


def test_evaluation_scores_on_the_device_it_is_given(trained, monkeypatch) -> None:
    """On the CPU the scores are today's, bit for bit; a device the job is given gets the
    model (and the evaluator draws its batches onto the model's device): here a stand-in
    device, since this machine may have no GPU."""
    import torch

    from arbench import device as devices
    from arbench.tasks.mqar import MQARTask

    run_dir, data = trained
    before = run.evaluate_run(run_dir, TASK, data_dir=data, examples=32)
    assert run.evaluate_run(run_dir, TASK, data_dir=data, examples=32, device="cpu") == before
    if not torch.cuda.is_available():  # "auto" without CUDA: the CPU
        assert run.evaluate_run(run_dir, TASK, data_dir=data, examples=32, device="auto") == before
    asked, seen = [], []
    monkeypatch.setattr(
        devices, "resolve_device", lambda name: asked.append(name) or torch.device("meta")
    )
    monkeypatch.setattr(
        MQARTask,
        "evaluate",
        lambda self, model, **_: seen.append(next(model.parameters()).device) or {},
    )
    run.evaluate_run(run_dir, TASK, data_dir=data, examples=32, device="cuda")
    assert asked == ["cuda"] and seen == [torch.device("meta")]


def test_a_model_file_of_another_config_is_an_error_not_a_score(trained, tmp_path: Path) -> None:
    run_dir, data = trained
    # the same shape trained with another lr: it would load and score silently
    other = tmp_path / "other"
    run.train_run(TASK, MODEL, {**TRAIN, "lr": 1e-3}, 3, other)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "final.json").write_bytes((run_dir / "final.json").read_bytes())
    (mixed / "model.pt").write_bytes((other / "model.pt").read_bytes())
    with pytest.raises(SettingsMismatch, match=r"mixed/model.pt was trained .*train.lr: 0.001 vs"):
        run.evaluate_run(mixed, TASK, data_dir=data, examples=32)


def test_a_run_of_other_task_settings_is_not_scored(trained) -> None:
    run_dir, data = trained
    with pytest.raises(SettingsMismatch, match=r"final.json: .* task.pairs: 4 vs 3"):
        run.evaluate_run(run_dir, {**TASK, "pairs": 3}, data_dir=data, examples=32)


def test_stream_validation_accepts_clean_and_rejects_corrupt_data(tmp_path: Path) -> None:
    held_out = run.write_eval_set(TASK, 16, tmp_path / "eval.npz")
    report = run.validate_stream(TASK, tmp_path, seeds=2, batch=4)
    assert report["valid"] and report["eval_set"]["sequences"] == 16
    assert set(report["train_stream"]) == {"seed0", "seed1"}
    assert report["self_tests"]["rebinding"]["ok"]  # MQAR's control checks itself
    loaded = load_eval_set(tmp_path)
    assert (loaded.tokens == held_out.tokens).all() and loaded.tokens.dtype == np.int64
    loaded.targets[5, np.flatnonzero(loaded.targets[5] != IGNORE)[0]] += 1
    save_eval_set(loaded, tmp_path / "eval.npz")
    with pytest.raises(run.DataRejected, match="row 5"):
        run.validate_stream(TASK, tmp_path, seeds=1, batch=4)


def test_release_written_split_by_split_then_validated(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    settings = {"params": {}, "split_seeds": {"train": 1}, "examples": 6, "shard_rows": 4}
    side = run.write_release_split("passkey_swar", settings, "n32", "train", tmp_path)
    assert side["examples"] == 6 and (tmp_path / "stats/n32/train.json").exists()
    assert len(list(tmp_path.glob("data/n32/train-*.parquet"))) == 2
    check = {
        "params": {},
        "split_seeds": {"train": 1, "validation": 2, "test": 3},
        "train_configs": [32],
        "eval_configs": [],
        "examples": {"train": 6, "validation": 1, "test": 1},
    }
    run.write_release_index("passkey_swar", check, tmp_path)
    assert (tmp_path / "README.md").exists() and (tmp_path / "vocab.json").exists()
    report = run.validate_release("passkey_swar", check, tmp_path)
    assert report["ok"] and report["examples_checked"] == 6
    shard = sorted(tmp_path.glob("data/n32/train-*.parquet"))[0]
    table = pq.read_table(shard).to_pylist()
    table[0]["input_ids"][2], table[0]["input_ids"][-5] = 24, 25  # passkey no longer recalled
    pq.write_table(pq.read_table(shard).from_pylist(table, schema=pq.read_schema(shard)), shard)
    with pytest.raises(run.DataRejected, match="train-00000-of-00002.parquet row 0"):
        run.validate_release("passkey_swar", check, tmp_path)
    with pytest.raises(ValueError, match="has no release"):
        run.validate_release("mqar", check, tmp_path)


def test_stream_validation_rejects_a_control_that_fails_its_self_test(tmp_path, monkeypatch):
    import arbench.tasks.mqar as mqar

    run.write_eval_set(TASK, 64, tmp_path / "eval.npz")
    monkeypatch.setattr(mqar, "rebinding_set", lambda batch, cfg: batch)  # rebinds nothing
    with pytest.raises(run.DataRejected, match="self-test rebinding failed"):
        run.validate_stream(TASK, tmp_path, seeds=1, batch=4)
