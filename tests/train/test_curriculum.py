"""The distance curriculum: ramp shapes, the success gate, checkpointed resume, and the
training loop passing each batch its signal."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from arbench.models import ModelConfig
from arbench.tasks import build_task
from arbench.tasks.base import Signal
from arbench.train.curriculum import Curriculum, CurriculumConfig
from arbench.train.loop import train
from arbench.train.settings import TrainConfig, check_signals


def test_linear_ramp_reaches_the_full_gap_at_until() -> None:
    ramp = Curriculum(CurriculumConfig(ramp="linear", start=0.0, until=0.5), total_steps=100)
    assert ramp.gap(0) == 0.0
    assert ramp.gap(25) == pytest.approx(0.5)
    assert ramp.gap(50) == 1.0 and ramp.gap(99) == 1.0


def test_shaped_ramp_lingers_at_short_gaps() -> None:
    linear = Curriculum(CurriculumConfig(ramp="linear", until=1.0), total_steps=100)
    shaped = Curriculum(CurriculumConfig(ramp="shaped", until=1.0, power=2.0), total_steps=100)
    assert shaped.gap(50) == pytest.approx(0.25) and linear.gap(50) == pytest.approx(0.5)
    assert all(shaped.gap(s) <= linear.gap(s) for s in range(100))
    assert shaped.gap(100) == 1.0


def test_gated_ramp_advances_only_on_successful_windows() -> None:
    cfg = CurriculumConfig(ramp="gated", threshold=0.6, every=4, increment=0.25)
    ramp = Curriculum(cfg, total_steps=100)
    for step in range(4):  # a failing window: holds
        ramp.observe(step, 0.5)
    assert ramp.gap(4) == 0.0
    for step in range(4, 8):  # a passing window: one increment
        ramp.observe(step, 0.7)
    assert ramp.gap(8) == 0.25
    for step in range(8, 40):
        ramp.observe(step, 1.0)
    assert ramp.gap(40) == 1.0  # capped at the full gap


def test_gated_state_round_trips() -> None:
    cfg = CurriculumConfig(ramp="gated", every=3, increment=0.1)
    a = Curriculum(cfg, 50)
    for step in range(7):
        a.observe(step, 0.9)
    b = Curriculum(cfg, 50)
    b.load_state(a.state())
    for step in range(7, 12):
        a.observe(step, 0.9)
        b.observe(step, 0.9)
    assert a.state() == b.state()


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"ramp": "cosine"}, "ramp"),
        ({"until": 0.0}, "until"),
        ({"start": 1.5}, "start"),
        ({"every": 0}, "every"),
        ({"steps": 10}, "steps"),
    ],
)
def test_bad_curriculum_names_the_key(bad: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        CurriculumConfig.from_dict(bad)


def test_a_task_without_the_signal_is_rejected() -> None:
    mqar = build_task({"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8})
    with pytest.raises(ValueError, match="train.curriculum"):
        check_signals(mqar, TrainConfig.from_dict({"curriculum": {"ramp": "linear"}}))
    with pytest.raises(ValueError, match="train.dense"):
        check_signals(mqar, TrainConfig.from_dict({"dense": True}))
    check_signals(mqar, TrainConfig.from_dict({}))


HAYSTACK = {"name": "haystack", "pairs": 2, "n_keys": 8, "n_values": 6, "seq_len": 24}
MODEL = {"d_model": 8, "layers": 1, "cell": "delta_rule", "cell_options": {"conv": True}}


def _train(run_dir: Path, curriculum: dict, steps: int = 16, **kw) -> tuple[dict, list]:
    task = build_task(HAYSTACK)
    seen: list[Signal | None] = []
    original = task.train_batch

    def recording(seed, step, batch, signal=None):
        seen.append(signal)
        return original(seed, step, batch, signal)

    task.train_batch = recording  # type: ignore[method-assign]
    cfg = TrainConfig.from_dict(
        {
            "steps": steps,
            "batch": 4,
            "warmup": 2,
            "checkpoint_every": 5,
            "log_every": 4,
            "curriculum": curriculum,
            "dense": True,
        }
    )
    mc = ModelConfig(vocab_size=task.vocab_size, **MODEL)
    return train(task, mc, cfg, 3, run_dir, **kw), seen


def test_loop_passes_each_batch_its_gap_and_logs_it(tmp_path: Path) -> None:
    _, seen = _train(tmp_path / "a", {"ramp": "linear", "until": 0.5})
    assert [s.gap for s in seen] == pytest.approx([min(1.0, i / 8) for i in range(16)])
    assert all(s.dense for s in seen)
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert '"gap": 0.375' in lines[0]  # logged at step 4 with the gap of batch 3


def test_gated_run_resumes_to_the_same_result(tmp_path: Path) -> None:
    gated = {"ramp": "gated", "threshold": 0.0, "every": 2, "increment": 0.125}
    ref, seen_ref = _train(tmp_path / "ref", gated)
    assert seen_ref[-1].gap > seen_ref[0].gap  # threshold 0 always advances
    _train(tmp_path / "cut", gated, stop_after=7)  # checkpoint at step 5 survives
    (tmp_path / "cut" / "model.pt").unlink(missing_ok=True)
    resumed, seen = _train(tmp_path / "cut", gated)
    assert resumed["resumed_from_step"] == 5
    assert [s.gap for s in seen] == [s.gap for s in seen_ref[5:]]
    wa = torch.load(tmp_path / "ref" / "model.pt", weights_only=True)["weights"]
    wb = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
