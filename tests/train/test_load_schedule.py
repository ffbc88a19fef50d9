"""The load schedule: time-based rungs end at their fractions of training, gated rungs after a
window at the threshold, its state resumes exactly, and bad settings name the key; the
training loop hands each batch its load and a gated run resumes to identical weights."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arbench.models.kvbench import KVModelConfig
from arbench.tasks.base import Signal
from arbench.tasks.kvbench import KVBenchTask, KVConfig
from arbench.train.load_schedule import LoadConfig, LoadSchedule
from arbench.train.loop import train
from arbench.train.settings import TrainConfig, check_signals


def test_time_based_rungs_end_at_their_fractions() -> None:
    s = LoadSchedule(LoadConfig(values=[2, 4, 6, 8], until=[0.05, 0.1, 0.1667]), 15000)
    assert [s.load(t) for t in (0, 749, 750, 1499, 1500, 2499, 2500, 14999)] == [
        2,
        2,
        4,
        4,
        6,
        6,
        8,
        8,
    ]


def test_gated_rungs_advance_only_after_a_window_at_the_threshold() -> None:
    s = LoadSchedule(LoadConfig(values=[2, 4, 8], threshold=0.9, every=2), 100)
    for step, acc in enumerate([0.95, 0.5]):  # window mean 0.725: holds
        s.observe(step, acc)
    assert s.load(2) == 2
    for step, acc in enumerate([0.9, 0.95], start=2):  # window mean 0.925: advances
        s.observe(step, acc)
    assert s.load(4) == 4
    state = s.state()
    again = LoadSchedule(s.cfg, 100)
    again.load_state(state)
    assert again.load(5) == 4
    for step in range(4, 20):  # the last rung holds to the end
        s.observe(step, 1.0)
    assert s.load(20) == 8


@pytest.mark.parametrize(
    "bad, key",
    [
        ({"values": []}, "train.load.values"),
        ({"values": [2, 4], "until": [0.5], "threshold": 0.9}, "exactly one of"),
        ({"values": [2, 4, 8], "until": [0.5]}, "train.load.until"),
        ({"values": [2, 4, 8], "until": [0.6, 0.5]}, "train.load.until"),
        ({"values": [2, 4], "threshold": 1.5}, "train.load.threshold"),
        ({"values": [2, 4], "threshold": 0.5, "every": 0}, "train.load.every"),
        ({"values": [2], "until": [], "rung": 1}, "train.load: unknown key 'rung'"),
        ({"values": [2, 4], "until": [0.5], "stop": True}, "train.load.stop"),
        ({"values": [2, 4], "threshold": 0.5, "stop": "yes"}, "train.load.stop"),
    ],
)
def test_bad_load_settings_name_the_key(bad: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        LoadConfig.from_dict(bad)


class _Spy(KVBenchTask):
    """kvbench that records the signal of every batch it draws."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.seen: list[Signal | None] = []

    def train_batch(self, seed, step, batch, signal=None):
        self.seen.append(signal)
        return super().train_batch(seed, step, batch, signal)


def _train(run_dir: Path, load: dict, steps: int = 12, train_extra: dict | None = None, **kw):
    task = _Spy(KVConfig(n=4))
    cfg = TrainConfig.from_dict(
        {
            "steps": steps,
            "batch": 4,
            "warmup": 2,
            "lr": 3e-3,
            "checkpoint_every": 5,
            "log_every": 4,
            "betas": [0.9, 0.999],
            "load": load,
            **(train_extra or {}),
        }
    )
    check_signals(task, cfg)
    mc = KVModelConfig(
        vocab_size=12,
        d_model=16,
        layers=2,
        heads=2,
        kv_heads=2,
        head_dim=8,
        ffn_hidden=32,
        variant="hybrid_square",
    )
    return train(task, mc, cfg, 0, run_dir, **kw), task.seen


def test_loop_gives_each_batch_its_load_and_logs_it(tmp_path: Path) -> None:
    _, seen = _train(tmp_path / "a", {"values": [1, 2, 4], "until": [0.25, 0.5]})
    assert [s.load for s in seen] == [1, 1, 1, 2, 2, 2, 4, 4, 4, 4, 4, 4]
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert '"load": 2' in lines[0] and '"load": 4' in lines[-1]  # step 4: batch 3's


def test_gated_load_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    gated = {"values": [1, 2, 3, 4], "threshold": 0.01, "every": 2}
    ref, seen_ref = _train(tmp_path / "ref", gated)
    assert seen_ref[-1].load > seen_ref[0].load
    _train(tmp_path / "cut", gated, stop_after=7)  # the checkpoint at step 5 survives
    resumed, seen = _train(tmp_path / "cut", gated)
    assert resumed["resumed_from_step"] == 5
    assert [s.load for s in seen] == [s.load for s in seen_ref[5:]]
    wa = torch.load(tmp_path / "ref" / "model.pt", weights_only=True)["weights"]
    wb = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_a_task_without_a_load_signal_rejects_a_load_schedule() -> None:
    from arbench.tasks.mqar import MQARConfig, MQARTask

    cfg = TrainConfig.from_dict({"load": {"values": [2, 4], "until": [0.5]}})
    with pytest.raises(ValueError, match="train.load"):
        check_signals(MQARTask(MQARConfig()), cfg)


# ---------------------------------------------------------------- early stop and token budget


def test_stop_ends_training_only_once_the_last_rung_passes_its_gate() -> None:
    """``stop``: the last rung's windows are gated like every other rung's; a window below
    the threshold does not end training, the first at it does, and without ``stop`` none."""
    s = LoadSchedule(LoadConfig(values=[2, 4], threshold=0.9, every=2, stop=True), 100)
    for step, acc in enumerate([1.0, 1.0, 0.9, 0.8, 1.0, 0.95]):
        s.observe(step, acc)
        if step == 1:
            assert s.rung == 1 and not s.finished  # rung 0 passed; the last rung starts
        if step == 3:
            assert not s.finished  # mean 0.85 < 0.9
    assert s.finished  # steps 4-5: mean 0.975
    state = s.state()
    again = LoadSchedule(s.cfg, 100)
    again.load_state(state)
    assert again.finished and again.rung == 1
    plain = LoadSchedule(LoadConfig(values=[2, 4], threshold=0.9, every=2), 100)
    for step in range(20):
        plain.observe(step, 1.0)
    assert not plain.finished


def test_early_stop_ends_the_run_and_resumes_to_the_same_end(tmp_path: Path) -> None:
    gated = {"values": [1, 2], "threshold": 0.01, "every": 2, "stop": True}
    ref, seen = _train(tmp_path / "ref", gated, steps=40)
    end = ref["stopped_early_at"]
    assert end is not None and end < 40 and end % 2 == 0 and len(seen) == end
    assert seen[-1].load == 2  # it ended on the last rung
    last = json.loads((tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["step"] == end and (tmp_path / "ref" / "model.pt").exists()
    every_step = {"checkpoint_every": 1}  # not part of the run's identity
    _train(tmp_path / "cut", gated, steps=40, train_extra=every_step, stop_after=end - 1)
    resumed, _ = _train(tmp_path / "cut", gated, steps=40, train_extra=every_step)
    assert resumed["resumed_from_step"] == end - 1 and resumed["stopped_early_at"] == end
    wa = torch.load(tmp_path / "ref" / "model.pt", weights_only=True)["weights"]
    wb = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    never = {**gated, "threshold": 1.0}  # an unreachable gate: the run goes to the end
    full, _ = _train(tmp_path / "full", never, steps=6)
    assert full["stopped_early_at"] is None


class _Sizes(_Spy):
    def train_batch(self, seed, step, batch, signal=None):
        out = super().train_batch(seed, step, batch, signal)
        self.seen[-1] = (signal.load, out.tokens.shape)
        return out


def test_a_token_budget_sizes_each_rungs_batch(tmp_path: Path) -> None:
    """max(1, tokens_per_step // length): 16, 32 and 64 tokens per sequence at loads 1, 2, 4
    (8 tokens per entry, two entries per key) under a budget of 100 tokens."""
    task = _Sizes(KVConfig(n=4))
    cfg = TrainConfig.from_dict(
        {"steps": 6, "warmup": 1, "log_every": 3, "checkpoint_every": 3,
         "tokens_per_step": 100, "load": {"values": [1, 2, 4], "until": [0.34, 0.67]}}
    )  # fmt: skip
    check_signals(task, cfg)
    mc = KVModelConfig(vocab_size=12, d_model=16, layers=2, heads=2, kv_heads=2, head_dim=8,
                       ffn_hidden=32, variant="hybrid_square")  # fmt: skip
    train(task, mc, cfg, 0, tmp_path / "r")
    assert [shape for _, shape in task.seen] == [(6, 16)] * 2 + [(3, 32)] * 2 + [(1, 64)] * 2


def test_a_token_budget_run_resumes_to_the_same_weights(tmp_path: Path) -> None:
    gated = {"values": [1, 2, 3, 4], "threshold": 0.01, "every": 2}
    extra = {"tokens_per_step": 70}
    _train(tmp_path / "ref", gated, train_extra=extra)
    _train(tmp_path / "cut", gated, train_extra=extra, stop_after=7)
    resumed, _ = _train(tmp_path / "cut", gated, train_extra=extra)
    assert resumed["resumed_from_step"] == 5
    wa = torch.load(tmp_path / "ref" / "model.pt", weights_only=True)["weights"]
    wb = torch.load(tmp_path / "cut" / "model.pt", weights_only=True)["weights"]
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_a_bad_token_budget_names_the_key(bad: object) -> None:
    with pytest.raises(ValueError, match="train.tokens_per_step"):
        TrainConfig.from_dict({"tokens_per_step": bad})


def test_a_task_without_sequence_lengths_rejects_a_token_budget() -> None:
    from arbench.tasks.mqar import MQARConfig, MQARTask

    cfg = TrainConfig.from_dict({"tokens_per_step": 1000})
    with pytest.raises(ValueError, match="train.tokens_per_step"):
        check_signals(MQARTask(MQARConfig()), cfg)


def test_runs_without_a_budget_or_an_early_stop_keep_their_fingerprints() -> None:
    """tokens_per_step (unset) and load.stop (off) are left out of a run's settings, so runs
    recorded before they existed keep their fingerprints; set, they change it."""
    from dataclasses import asdict

    from arbench.train.run_files import fingerprint, run_settings

    load = {"values": [2, 4], "threshold": 0.9, "every": 5}
    cfg = asdict(TrainConfig.from_dict({"load": load}))
    assert cfg["tokens_per_step"] is None and cfg["load"]["stop"] is False
    before = {k: v for k, v in cfg.items() if k != "tokens_per_step"}
    before["load"] = {k: v for k, v in cfg["load"].items() if k != "stop"}
    fp = lambda train: fingerprint(run_settings({}, train, {}, 0))  # noqa: E731
    assert fp(cfg) == fp(before)
    assert fp({**cfg, "tokens_per_step": 512}) != fp(cfg)
    assert fp({**cfg, "load": {**load, "stop": True}}) != fp(cfg)
