"""Training: bitwise reproducibility, resume after a hard kill, and only ever of the same run:
a checkpoint or model file written under other settings is never taken for this run's.

The reproducibility and kill tests run two arms: a recurrent cell without randomness in its
forward pass, and the key-value transformer with dropout (kvbench_long's smoke arm), whose
masks must come from the run's seed: the same bytes in another process, and after a kill."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from arbench.mismatch import SettingsMismatch
from arbench.models import ModelConfig, families
from arbench.tasks import build_task
from arbench.train.loop import train
from arbench.train.run_files import UnreadableFile, load_model_file, load_trained, run_settings
from arbench.train.settings import TrainConfig

TASK = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
MODEL = {"d_model": 16, "layers": 2, "cell": "delta_rule", "cell_options": {"conv": True}}
TRAIN = {"steps": 24, "batch": 8, "lr": 3e-3, "warmup": 4, "checkpoint_every": 5, "log_every": 3}
# kvbench_long's smoke arm: the key-value transformer with dropout 0.1, a token budget and a
# load schedule (whose state the checkpoint carries)
KV_TASK = {"name": "kvbench", "n": 8, "key_digits": 7, "value_digits": 3, "mutant_j": 7,
           "mutant_mix": 0.5}  # fmt: skip
KV_MODEL = {"family": "kvbench", "variant": "hybrid_square", "d_model": 16, "layers": 2,
            "heads": 2, "kv_heads": 2, "head_dim": 8, "ffn_hidden": 32, "dropout": 0.1}  # fmt: skip
KV_TRAIN = {**TRAIN, "batch": 16, "tokens_per_step": 384, "lr": 6e-3,
            "load": {"values": [2, 4], "threshold": 0.9, "every": 5, "stop": True}}  # fmt: skip
ARMS = {
    "delta_rule": {},
    "kvbench_dropout": {"task": KV_TASK, "model": KV_MODEL, "training": KV_TRAIN},
}


def _run(run_dir: Path, task=TASK, model=MODEL, training=TRAIN, seed=7, **kw) -> dict:
    adapter = build_task(task)
    mc = families.model_config(model, adapter.vocab_size)
    cfg = TrainConfig.from_dict(training)
    return train(adapter, mc, cfg, seed, run_dir, threads=1, task_settings=task, **kw)


def _same_files(a: Path, b: Path) -> None:
    for name in ("model.pt", "metrics.jsonl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


@pytest.mark.parametrize("arm", ARMS)
def test_same_seed_same_scores_bitwise(tmp_path: Path, arm: str) -> None:
    a = _run(tmp_path / "a", **ARMS[arm])
    with torch.random.fork_rng(devices=[]):  # torch's global RNG elsewhere than for ``a``
        torch.manual_seed(12345)
        b = _run(tmp_path / "b", **ARMS[arm])
    assert a["scores"] == b["scores"]
    wa = load_model_file(tmp_path / "a" / "model.pt")["weights"]
    wb = load_model_file(tmp_path / "b" / "model.pt")["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "model.pt").read_bytes()
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == (
        tmp_path / "b" / "metrics.jsonl"
    ).read_text()
    assert not (tmp_path / "a" / "checkpoint.pt").exists()  # finished runs leave weights only
    for key in ("versions", "threads", "wall_time_s", "n_parameters", "state_size_per_layer"):
        assert key in a


# a training process: the arm's run in a folder, SIGKILLed when it logs step {kill} (never: 0)
PROCESS = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from test_loop import ARMS, _run
from pathlib import Path
def progress(msg):
    if {kill} and msg.startswith("step {kill}/"):
        os.kill(os.getpid(), signal.SIGKILL)  # a hard kill between checkpoints
_run(Path({run_dir!r}), progress=progress, **ARMS[{arm!r}])
"""


def _process(run_dir: Path, arm: str, kill: int = 0) -> subprocess.CompletedProcess:
    tests = str(Path(__file__).parent)
    code = PROCESS.format(tests=tests, run_dir=str(run_dir), arm=arm, kill=kill)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=300)


@pytest.mark.parametrize("arm", ARMS)
def test_two_processes_of_one_seed_train_the_same_bytes(tmp_path: Path, arm: str) -> None:
    """Separate processes (each with torch's global RNG seeded at random at start-up) write
    the same model.pt and metrics.jsonl as this one."""
    _run(tmp_path / "here", **ARMS[arm])
    for name in ("one", "two"):
        proc = _process(tmp_path / name, arm)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        _same_files(tmp_path / name, tmp_path / "here")


@pytest.mark.parametrize("arm", ARMS)
def test_killed_run_resumes_to_identical_result(tmp_path: Path, arm: str) -> None:
    reference = _run(tmp_path / "ref", **ARMS[arm])
    victim = tmp_path / "victim"
    proc = _process(victim, arm, kill=12)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    ck = torch.load(victim / "checkpoint.pt", weights_only=True)
    assert ck["step"] == 10  # last checkpoint before the kill at step 12
    stale = victim / ".checkpoint.pt.0123456789ab.tmp"  # a write the kill cut short
    stale.write_bytes(b"partial")
    messages: list[str] = []
    resumed = _run(victim, progress=messages.append, **ARMS[arm])
    assert not stale.exists() and any("left by a process killed" in m for m in messages)
    assert resumed["resumed_from_step"] == 10
    assert any("resumed from checkpoint at step 10" in m for m in messages)
    assert resumed["scores"] == reference["scores"]
    lines = [json.loads(x) for x in (victim / "metrics.jsonl").read_text().splitlines()]
    ref = [json.loads(x) for x in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    assert lines == ref
    _same_files(victim, tmp_path / "ref")


# each edit a restarted job could bring: the run it asks for is another run
CHANGES = {
    "lr": {"training": {**TRAIN, "lr": 1e-3}},
    "fewer steps": {"training": {**TRAIN, "steps": 16}},
    "model": {"model": {**MODEL, "cell_options": {"conv": False}}},
    "task": {"task": {**TASK, "pairs": 3}},
    "seed": {"seed": 8},
}


@pytest.mark.parametrize("change", CHANGES, ids=list(CHANGES))
def test_a_checkpoint_of_other_settings_is_not_resumed(tmp_path: Path, change: str) -> None:
    _run(tmp_path / "run", stop_after=12)  # "killed" at step 12: checkpoint at step 10
    assert torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)["step"] == 10
    messages: list[str] = []
    restarted = _run(tmp_path / "run", progress=messages.append, **CHANGES[change])
    fresh = _run(tmp_path / "fresh", **CHANGES[change])
    assert restarted["resumed_from_step"] == 0
    notice = next(m for m in messages if "other run settings" in m)
    assert "starting afresh" in notice and "checkpoint.pt (step 10)" in notice
    key = {"lr": "train.lr", "fewer steps": "train.steps", "model": "model.cell_options.conv"}
    key |= {"task": "task.pairs", "seed": "seed"}
    assert f"{key[change]}: " in notice
    assert restarted["scores"] == fresh["scores"]
    for name in ("model.pt", "metrics.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "fresh" / name).read_bytes()


def test_a_change_of_checkpoint_interval_still_resumes(tmp_path: Path) -> None:
    reference = _run(tmp_path / "ref")
    _run(tmp_path / "run", stop_after=12)
    resumed = _run(tmp_path / "run", training={**TRAIN, "checkpoint_every": 4})
    assert resumed["resumed_from_step"] == 10 and resumed["scores"] == reference["scores"]
    assert resumed["fingerprint"] == reference["fingerprint"]


def test_a_checkpoint_without_settings_is_not_resumed(tmp_path: Path) -> None:
    _run(tmp_path / "run", stop_after=12)
    ck_path = tmp_path / "run" / "checkpoint.pt"
    ck = torch.load(ck_path, weights_only=True)
    del ck["fingerprint"], ck["settings"]  # what an older arbench wrote
    torch.save(ck, ck_path)
    messages: list[str] = []
    assert _run(tmp_path / "run", progress=messages.append)["resumed_from_step"] == 0
    assert any("no settings record" in m and "starting afresh" in m for m in messages)


def test_a_model_file_loads_only_against_its_own_settings(tmp_path: Path) -> None:
    final = _run(tmp_path / "run")
    adapter = build_task(TASK)
    mc = ModelConfig(vocab_size=adapter.vocab_size, **MODEL)
    ours = run_settings(final["model"], final["train"], TASK, 7)
    load_trained(tmp_path / "run", mc, ours)  # its own settings: fine
    other = run_settings(final["model"], {**final["train"], "lr": 1e-3}, TASK, 7)
    with pytest.raises(SettingsMismatch, match=r"run/model.pt was trained .*train.lr: 0.003 vs"):
        load_trained(tmp_path / "run", mc, other, expected_from="the record")
    bare = load_model_file(tmp_path / "run" / "model.pt")["weights"]
    torch.save(bare, tmp_path / "run" / "model.pt")  # a plain state dict: nothing to check
    with pytest.raises(SettingsMismatch, match="not an arbench-model/1 file"):
        load_trained(tmp_path / "run", mc)


def test_one_process_trains_a_run_folder_at_a_time(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = os.open(run_dir, os.O_RDONLY)  # another job (a killed workflow's orphan) trains
    fcntl.flock(holder, fcntl.LOCK_EX)
    messages: list[str] = []
    job = threading.Thread(target=_run, args=(run_dir,), kwargs={"progress": messages.append})
    job.start()
    deadline = time.monotonic() + 30
    while not any("waiting for it" in m for m in messages) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)
    assert any("another process is training" in m for m in messages)
    assert not (run_dir / "metrics.jsonl").exists()  # it waits before touching the folder
    os.close(holder)
    job.join(timeout=120)
    assert (run_dir / "model.pt").exists() and not (run_dir / "checkpoint.pt").exists()


def _truncated(ck: Path) -> None:
    ck.write_bytes(ck.read_bytes()[: ck.stat().st_size // 2])


def _without_optimizer(ck: Path) -> None:
    state = torch.load(ck, weights_only=True)
    del state["optim"]  # these settings' fingerprint, but not a whole checkpoint
    torch.save(state, ck)


# what a disk, a copy or a stray write can leave as checkpoint.pt
DAMAGE = {
    "empty": lambda ck: ck.write_bytes(b""),
    "garbage": lambda ck: ck.write_bytes(b"\x00" * 64 + b"not a torch file"),
    "truncated": _truncated,
    "a tensor": lambda ck: torch.save(torch.zeros(3), ck),
    "no optimizer state": _without_optimizer,
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_corrupt_checkpoint_is_set_aside_and_training_restarts(
    tmp_path: Path, damage: str
) -> None:
    """A checkpoint that cannot be read or resumed never wedges the job (a rerun, a
    scheduler's retry, would meet it again): it is renamed checkpoint.pt.corrupt with one
    warning naming it, and the run trains from step 0 to the uninterrupted run's bytes."""
    _run(tmp_path / "ref")
    run_dir = tmp_path / "run"
    _run(run_dir, stop_after=12)
    DAMAGE[damage](run_dir / "checkpoint.pt")
    messages: list[str] = []
    restarted = _run(run_dir, progress=messages.append)
    assert restarted["resumed_from_step"] == 0
    (warning,) = [m for m in messages if m.startswith("warning:")]
    assert (
        str(run_dir / "checkpoint.pt") in warning
        and "set aside as checkpoint.pt.corrupt" in warning
    )
    assert "\n" not in warning and (run_dir / "checkpoint.pt.corrupt").exists()
    assert not (run_dir / "checkpoint.pt").exists()
    _same_files(run_dir, tmp_path / "ref")


@pytest.mark.parametrize("damage", ["empty", "garbage", "truncated"])
def test_a_corrupt_model_file_is_one_line_naming_it_and_what_to_do(
    tmp_path: Path, damage: str
) -> None:
    _run(tmp_path / "run")
    path = tmp_path / "run" / "model.pt"
    DAMAGE[damage](path)
    with pytest.raises(UnreadableFile) as caught:
        load_model_file(path)
    said = str(caught.value)
    assert said.startswith(f"{path}: unreadable (") and "delete it and rerun" in said
    assert "\n" not in said and caught.value.__cause__ is None


def test_running_out_of_memory_while_loading_keeps_the_checkpoint(
    tmp_path: Path, monkeypatch
) -> None:
    """Out of memory says nothing about the file: the error is the job's, the checkpoint stays."""
    _run(tmp_path / "run", stop_after=12)

    def no_memory(*_a, **_k):
        raise torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(torch, "load", no_memory)
    with pytest.raises(torch.OutOfMemoryError):
        _run(tmp_path / "run")
    assert (tmp_path / "run" / "checkpoint.pt").exists()
    assert not (tmp_path / "run" / "checkpoint.pt.corrupt").exists()
