"""The eval JSON holds nothing that differs between an uninterrupted and a resumed training:
after a kill and a resume it is the same bytes. The training's wall time, which differs, is
the run's final.json's alone; the stats read it from there (`with_training`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from arbench import run
from arbench.io import sha256_file
from arbench.models import families
from arbench.report.experiment import with_training
from arbench.tasks import build_task
from arbench.train.loop import train
from arbench.train.settings import TrainConfig

TASK = {"name": "kvbench", "n": 8, "key_digits": 7, "value_digits": 3, "mutant_j": 7}
MODEL = {"family": "kvbench", "d_model": 16, "layers": 2, "heads": 2, "kv_heads": 2,
         "head_dim": 8, "ffn_hidden": 32, "dropout": 0.1}  # fmt: skip
TRAIN = {"steps": 12, "batch": 8, "lr": 6e-3, "warmup": 2, "checkpoint_every": 4, "log_every": 4}


def _eval_json(run_dir: Path, data: Path) -> bytes:
    """The eval JSON scripts/evaluate.py writes for the run."""
    result = run.evaluate_run(run_dir, TASK, data_dir=data, examples=8)
    return json.dumps({"experiment": "x", "arm": "a", "seed": 0, **result}).encode()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """One run trained straight through and one stopped at step 6 (checkpoint at 4), then
    resumed (a dropout arm, whose masks come from the run seed), and the held-out set."""
    whole, resumed, data = (tmp_path_factory.mktemp(n) for n in ("whole", "resumed", "data"))
    run.write_eval_set(TASK, 8, data / "eval.npz")
    run.train_run(TASK, MODEL, TRAIN, 0, whole)
    adapter = build_task(TASK)
    cfg = families.model_config(MODEL, adapter.vocab_size)
    train(adapter, cfg, TrainConfig.from_dict(TRAIN), 0, resumed, stop_after=6, task_settings=TASK)
    assert run.train_run(TASK, MODEL, TRAIN, 0, resumed)["resumed_from_step"] == 4
    return whole, resumed, data


def test_a_resumed_run_gives_the_same_eval_json_bytes(runs) -> None:
    whole, resumed, data = runs
    assert (whole / "model.pt").read_bytes() == (resumed / "model.pt").read_bytes()
    a, b = _eval_json(whole, data), _eval_json(resumed, data)
    assert a == b
    ev = json.loads(a)
    assert "train_wall_time_s" not in ev and "wall_time_s" not in ev
    assert ev["model_sha256"] == sha256_file(whole / "model.pt")  # the bytes it scored


def test_the_stats_read_the_wall_time_from_final_json(runs) -> None:
    whole, _, data = runs
    final = json.loads((whole / "final.json").read_text())
    ev = json.loads(_eval_json(whole, data))
    assert with_training(ev, final)["train_wall_time_s"] == final["wall_time_s"]
