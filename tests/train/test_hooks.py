"""The training hooks: the loop builds one per active feature, in `HOOKS` order, and calls
every hook at the documented points of a step; a stateful hook's state rides the checkpoint
so a resumed run continues it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import torch

from arbench.models import ModelConfig, build_model
from arbench.tasks import build_task
from arbench.tasks.base import Signal
from arbench.train import hooks as train_hooks
from arbench.train import loop
from arbench.train.curriculum import CurriculumHook
from arbench.train.hooks import DenseHook, TrainHook
from arbench.train.load_schedule import LoadHook
from arbench.train.loop import HOOKS, train
from arbench.train.settings import TrainConfig
from arbench.train.spread import SpreadHook

TASK = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
MODEL = {"d_model": 16, "layers": 1, "cell": "delta_rule", "cell_options": {"conv": True}}
TRAIN = {"steps": 6, "batch": 4, "warmup": 1, "checkpoint_every": 2, "log_every": 3}
LATTICE = {"d_model": 16, "layers": 1, "cell": "lattice", "cell_options": {"addr_scale": 1.5}}


def _model(settings: dict = MODEL):
    return build_model(ModelConfig(vocab_size=build_task(TASK).vocab_size, **settings), 0)


def _run_of(model: Any, steps: int = 6, seed: int = 0) -> train_hooks.HookRun:
    return train_hooks.HookRun(steps=steps, model=model, seed=seed)


def test_only_the_features_asked_for_get_a_hook_in_hooks_order() -> None:
    assert train_hooks.build(HOOKS, TrainConfig(), _run_of(_model())) == []
    cfg = TrainConfig.from_dict(
        {
            "curriculum": {"ramp": "linear"},
            "load": {"values": [2, 4], "until": [0.5]},
            "dense": True,
            "spread": {"weight": 0.1},
        }
    )
    built = train_hooks.build(HOOKS, cfg, _run_of(_model(LATTICE)))
    assert [type(h) for h in built] == [CurriculumHook, LoadHook, DenseHook, SpreadHook]
    assert [h.state_key for h in built] == ["curriculum", "load", None, None]
    assert [h.finished for h in built] == [False] * 4  # declared by every hook


def test_each_hook_is_built_from_its_own_section_alone() -> None:
    """`build` hands a hook its train-block section and the run, never the whole block."""
    got: list[Any] = []

    class Probe(TrainHook):
        section = "curriculum"

        @classmethod
        def from_settings(cls, settings: Any, run: train_hooks.HookRun) -> None:
            got.append((settings, run.steps, run.seed))

    cfg = TrainConfig.from_dict({"steps": 9, "curriculum": {"ramp": "linear"}})
    assert train_hooks.build([Probe], cfg, _run_of(None, steps=9, seed=3)) == []
    assert got == [(cfg.curriculum, 9, 3)]
    assert {k.section for k in HOOKS} <= set(vars(cfg))  # every hook's section is a train key


def test_spread_on_a_model_without_a_lattice_layer_fails_naming_it() -> None:
    cfg = TrainConfig.from_dict({"spread": {"weight": 0.1}})
    with pytest.raises(ValueError, match=r"^train\.spread: the model has no lattice layer$"):
        train_hooks.build(HOOKS, cfg, _run_of(_model()))


def test_the_signal_merges_the_hooks_fields_and_is_none_without_any() -> None:
    cfg = TrainConfig.from_dict({"steps": 10, "curriculum": {"ramp": "linear", "until": 1.0}})
    curriculum = CurriculumHook.from_settings(cfg.curriculum, _run_of(_model(), steps=cfg.steps))
    assert train_hooks.signal_of([], 3) is None
    assert train_hooks.signal_of([TrainHook()], 3) is None  # the base hook sets nothing
    assert train_hooks.signal_of([curriculum, DenseHook()], 5) == Signal(gap=0.5, dense=True)
    assert curriculum.metrics() == {"gap": 0.5}  # the gap of the batch last drawn


class Recorder(TrainHook):
    """A stateful test hook: records each call, counts observed steps, logs the count."""

    section = "steps"  # any train key: it reads none of it
    state_key = "recorder"
    calls: list[tuple[str, int]] = []

    def __init__(self) -> None:
        self.seen = 0

    @classmethod
    def from_settings(cls, settings: Any, run: train_hooks.HookRun) -> Recorder:
        return cls()

    @contextlib.contextmanager
    def around_forward(self, step: int, batch: Any, device: torch.device):
        self.calls.append(("enter", step))
        yield
        self.calls.append(("exit", step))

    def extra_loss(self, step: int) -> torch.Tensor:
        self.calls.append(("extra_loss", step))
        return torch.zeros(())

    def observe(self, step: int, accuracy: torch.Tensor) -> None:
        self.calls.append(("observe", step))
        self.seen += 1

    def metrics(self) -> dict[str, Any]:
        return {"seen": self.seen}

    def state(self) -> dict[str, int]:
        return {"seen": self.seen}

    def load_state(self, state: dict[str, int]) -> None:
        self.seen = int(state["seen"])


def _run(run_dir: Path, **kw: Any) -> dict:
    task = build_task(TASK)
    mc = ModelConfig(vocab_size=task.vocab_size, **MODEL)
    return train(task, mc, TrainConfig.from_dict(TRAIN), 0, run_dir, task_settings=TASK, **kw)


def test_the_loop_calls_each_hook_at_its_points_and_resumes_its_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(loop, "HOOKS", (*HOOKS, Recorder))
    Recorder.calls = []
    assert _run(tmp_path / "run", stop_after=5) == {"stopped_at": 5}  # checkpoint at step 4
    per_step = ["enter", "exit", "extra_loss", "observe"]
    assert Recorder.calls == [(c, s) for s in range(5) for c in per_step]
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=True)
    assert saved["recorder"] == {"seen": 4}
    Recorder.calls = []
    _run(tmp_path / "run")
    assert Recorder.calls == [(c, s) for s in (4, 5) for c in per_step]
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert ['"seen": 3' in ln for ln in lines] == [True, False]
    assert '"seen": 6' in lines[1]  # 4 restored from the checkpoint, then steps 4 and 5
