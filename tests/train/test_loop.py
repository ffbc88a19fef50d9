"""Training: bitwise reproducibility, and resume after a hard kill."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

from arbench.models import ModelConfig
from arbench.tasks import build_task
from arbench.train.loop import TrainConfig, train

TASK = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
MODEL = {"d_model": 16, "layers": 2, "cell": "delta_rule", "cell_options": {"conv": True}}
TRAIN = {"steps": 24, "batch": 8, "lr": 3e-3, "warmup": 4, "checkpoint_every": 5, "log_every": 3}


def _run(run_dir: Path, **kw) -> dict:
    task = build_task(TASK)
    mc = ModelConfig(vocab_size=task.vocab_size, **MODEL)
    return train(task, mc, TrainConfig.from_dict(TRAIN), 7, run_dir, threads=1, **kw)


def test_same_seed_same_scores_bitwise(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert a["scores"] == b["scores"]
    wa = torch.load(tmp_path / "a" / "model.pt", weights_only=True)
    wb = torch.load(tmp_path / "b" / "model.pt", weights_only=True)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (
        tmp_path / "b" / "metrics.jsonl"
    ).read_text()
    assert not (tmp_path / "a" / "checkpoint.pt").exists()  # finished runs leave weights only
    for key in ("versions", "threads", "wall_time_s", "n_parameters", "state_size_per_layer"):
        assert key in a


KILLER = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from test_loop import _run
from pathlib import Path
def progress(msg):
    if msg.startswith("step 12/"):
        os.kill(os.getpid(), signal.SIGKILL)  # a hard kill between checkpoints
_run(Path({run_dir!r}), progress=progress)
"""


def test_killed_run_resumes_to_identical_result(tmp_path: Path) -> None:
    reference = _run(tmp_path / "ref")
    victim = tmp_path / "victim"
    code = KILLER.format(tests=str(Path(__file__).parent), run_dir=str(victim))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    ck = torch.load(victim / "checkpoint.pt", weights_only=True)
    assert ck["step"] == 10  # last checkpoint before the kill at step 12
    messages: list[str] = []
    resumed = _run(victim, progress=messages.append)
    assert resumed["resumed_from_step"] == 10
    assert any("resumed from checkpoint at step 10" in m for m in messages)
    assert resumed["scores"] == reference["scores"]
    lines = [json.loads(x) for x in (victim / "metrics.jsonl").read_text().splitlines()]
    ref = [json.loads(x) for x in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    assert lines == ref
