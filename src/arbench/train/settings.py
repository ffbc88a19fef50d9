"""The train block's settings (`TrainConfig`: the optimisation settings of one run, each
option's meaning beside its field) and the checks that need the task: `check_signals` (a
training-signal option the task does not honour fails before training, naming it) and
`batch_size` (the sequences of one step, under ``train.tokens_per_step`` a pure function of
the step's signal, so a resumed run draws the same batches).

Each optional feature's section (``curriculum``, ``load``, ``spread``) is read into its own
dataclass, beside the feature (`arbench.train.curriculum`, `arbench.train.load_schedule`,
`arbench.train.spread`); the loop builds its hook from that section alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from arbench.settings import whole_number
from arbench.tasks.base import Task
from arbench.train.curriculum import CurriculumConfig
from arbench.train.load_schedule import LoadConfig
from arbench.train.spread import SpreadConfig


@dataclass
class TrainConfig:
    """Optimisation settings of one run."""

    steps: int = 4000
    batch: int = 64
    # a token budget per step: each step draws max(1, min(batch, tokens_per_step // the
    # sequence length at its load)) sequences (the task's `sequence_length`), so ``batch``
    # caps short rungs and a load schedule's long rungs take fewer sequences. None: ``batch``
    # sequences every step
    tokens_per_step: int | None = None
    # rows per forward and backward: the step's rows in parts of this many tokens' worth
    # (at least one row), their gradients accumulated (`forward_backward`), so a step whose
    # activations exceed a device's memory still runs; None: the whole step at once
    micro_batch_tokens: int | None = None
    lr: float = 3e-3
    warmup: int = 200
    weight_decay: float = 0.1
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    checkpoint_every: int = 500
    log_every: int = 50
    device: str = "cpu"  # cpu | cuda | auto (cuda when available); bitwise claims hold on cpu
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW's
    # which parameters AdamW decays: "matrices" (2-D weights but the embeddings) or "all"
    # (every parameter, as torch.optim.AdamW(model.parameters()) does: the paper recipe)
    decay_params: str = "matrices"
    # a constant factor on the cross-entropy: the paper's masked-diffusion 1/t at t = 0.5 is 2
    loss_weight: float = 1.0
    # the recipe (config `recipes:`) these settings were expanded from; recorded so that the
    # fingerprint of a run names its recipe
    recipe: str = "causal"
    # training-signal options (the task must honour them, `Task.signals`): a distance
    # curriculum (`arbench.train.curriculum`), dense supervision of every query, and a load
    # schedule (`arbench.train.load_schedule`: bindings per batch, rung by rung)
    curriculum: CurriculumConfig | None = None
    dense: bool = False
    load: LoadConfig | None = None
    # the address-spread regulariser on a lattice layer's key write addresses
    # (`arbench.train.spread`); None: off
    spread: SpreadConfig | None = None
    # the run another run continues, its vocabulary grown ({experiment, arm, noise, base: the
    # base model's fingerprint}; `arbench.run.warm_start_weights`); None: from scratch
    warm_start: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        if d.get("curriculum") is not None and not isinstance(d["curriculum"], CurriculumConfig):
            d["curriculum"] = CurriculumConfig.from_dict(d["curriculum"])
        if d.get("load") is not None and not isinstance(d["load"], LoadConfig):
            d["load"] = LoadConfig.from_dict(d["load"])
        if d.get("spread") is not None and not isinstance(d["spread"], SpreadConfig):
            d["spread"] = SpreadConfig.from_dict(d["spread"])
        if "betas" in d:
            d["betas"] = tuple(float(b) for b in d["betas"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Checks a schema cannot express; a ValueError naming the key."""
        if self.decay_params not in DECAY_PARAMS:
            raise ValueError(
                f"train.decay_params must be one of {DECAY_PARAMS}, got {self.decay_params!r}"
            )
        if not self.loss_weight > 0:
            raise ValueError(f"train.loss_weight must be > 0, got {self.loss_weight}")
        for key in ("tokens_per_step", "micro_batch_tokens"):  # token budgets: None or >= 1
            value = getattr(self, key)
            if value is not None:
                whole_number(value, f"train.{key}")


DECAY_PARAMS = ("matrices", "all")

# each training-signal option of `TrainConfig` and the `Signal` field it sets
SIGNAL_FIELDS = {"dense": "dense", "curriculum": "gap", "load": "load"}


def check_signals(task: Task, cfg: TrainConfig) -> None:
    """Fail early, naming the option, when the task ignores a training-signal option."""
    for option, field in SIGNAL_FIELDS.items():
        if getattr(cfg, option) and field not in task.signals:
            raise ValueError(
                f"train.{option}: task {task.name!r} has no {field!r} signal "
                f"(it honours {sorted(task.signals) or 'none'})"
            )
    if cfg.tokens_per_step is not None and not hasattr(task, "sequence_length"):
        raise ValueError(
            f"train.tokens_per_step: task {task.name!r} gives no sequence length per batch "
            "(use train.batch)"
        )


def batch_size(task: Task, cfg: TrainConfig, signal: Any) -> int:
    """Sequences in one step: ``train.batch``, or under a token budget
    max(1, min(batch, tokens_per_step // the task's sequence length under this step's
    signal)). The loss stays a mean over the step's supervised tokens whatever the batch. A
    pure function of the signal, so a resumed run (whose schedule state the checkpoint
    holds) draws the same batches."""
    if cfg.tokens_per_step is None:
        return cfg.batch
    return max(1, min(cfg.batch, cfg.tokens_per_step // task.sequence_length(signal)))
