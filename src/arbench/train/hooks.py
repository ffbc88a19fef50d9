"""The one interface through which the training loop runs its optional features.

Each feature of the train block (the distance curriculum, the load schedule, dense
supervision, the address-spread regulariser) is a `TrainHook`, living beside the feature
(`arbench.train.curriculum.CurriculumHook`, `arbench.train.load_schedule.LoadHook`,
`DenseHook` here, `arbench.train.spread.SpreadHook`). The loop builds the hooks its train block
asks for (`build`) and calls every one at the same points of each step, in the hooks' order:

* `signal(step)`: the `Signal` fields the hook sets for batch ``step`` (`signal_of` merges
  them; no hook sets any: the task is asked for a batch without a signal);
* `around_forward(step, batch, device)`: a context entered around the model's forward pass
  (what the hook must see of it), then `extra_loss(step)`: a term added to the loss;
* `observe(step, accuracy)`: after the optimizer step, the batch's training accuracy;
* `metrics()`: the fields the hook adds to a logged metrics line;
* `state()` / `load_state(state)`: what the checkpoint holds for it under `state_key` (None:
  a stateless hook, absent from the checkpoint), so a resumed run continues bit for bit.

A hook draws nothing from the global RNG, so the hooks never shift a run's random stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

from arbench.tasks.base import Signal

if TYPE_CHECKING:  # annotations only: the curriculum and load schedule stay torch-free
    import torch
    from torch import nn

    from arbench.train.loop import TrainConfig


class TrainHook:
    """Base class of a training feature: every call point a no-op, overridden as needed."""

    state_key: ClassVar[str | None] = None  # the checkpoint's key for `state`; None: none

    @classmethod
    def from_train(cls, cfg: TrainConfig, model: nn.Module, seed: int) -> TrainHook | None:
        """The hook a run with train settings ``cfg`` needs (None: the feature is off)."""
        raise NotImplementedError

    def signal(self, step: int) -> dict[str, Any]:
        """`Signal` fields this hook sets for batch ``step`` (before the batch is drawn)."""
        return {}

    def around_forward(
        self, step: int, batch: Any, device: torch.device
    ) -> contextlib.AbstractContextManager[Any]:
        """A context around the model's forward pass on batch ``step`` (drawn, as `Batch`)."""
        return contextlib.nullcontext()

    def extra_loss(self, step: int) -> torch.Tensor | None:
        """A term added to batch ``step``'s loss after the forward pass (None: nothing)."""
        return None

    def observe(self, step: int, accuracy: torch.Tensor) -> None:
        """Batch ``step``'s training accuracy (a scalar tensor), after the optimizer step."""

    def metrics(self) -> dict[str, Any]:
        """Fields added to the metrics line logged after the last observed step."""
        return {}

    def state(self) -> Any:
        """What the checkpoint holds under `state_key` to resume this hook exactly."""
        return None

    def load_state(self, state: Any) -> None:
        """Restore what `state` returned (from a checkpoint)."""


class ScheduleHook(TrainHook):
    """A schedule that sets one `Signal` field per batch from its own state (`value`),
    observes each batch's accuracy, logs the field and keeps its state in the checkpoint: the
    curriculum's gap, the load schedule's bindings per batch."""

    field: ClassVar[str]  # the Signal field (and metrics key) it sets

    def __init__(self, schedule: Any) -> None:
        self.schedule = schedule  # observe(step, acc), state(), load_state(state)
        self._value: Any = None  # the value of the last batch drawn

    def value(self, step: int) -> Any:
        """The field's value for batch ``step``."""
        raise NotImplementedError

    def signal(self, step: int) -> dict[str, Any]:
        self._value = self.value(step)
        return {self.field: self._value}

    def observe(self, step: int, accuracy: torch.Tensor) -> None:
        self.schedule.observe(step, accuracy.item())

    def metrics(self) -> dict[str, Any]:
        return {self.field: self._value}

    def state(self) -> Any:
        return self.schedule.state()

    def load_state(self, state: Any) -> None:
        self.schedule.load_state(state)


class DenseHook(TrainHook):
    """Dense supervision (``train.dense``): every batch asks the task to supervise every query."""

    @classmethod
    def from_train(cls, cfg: TrainConfig, model: nn.Module, seed: int) -> DenseHook | None:
        return cls() if cfg.dense else None

    def signal(self, step: int) -> dict[str, Any]:
        return {"dense": True}


def build(
    kinds: Iterable[type[TrainHook]], cfg: TrainConfig, model: nn.Module, seed: int
) -> list[TrainHook]:
    """The active hooks of a run, in the order of ``kinds`` (that of the logged fields)."""
    hooks = (kind.from_train(cfg, model, seed) for kind in kinds)
    return [h for h in hooks if h is not None]


def signal_of(hooks: Iterable[TrainHook], step: int) -> Signal | None:
    """Batch ``step``'s training signal from the hooks' fields; None when no hook sets one."""
    fields: dict[str, Any] = {}
    for h in hooks:
        fields.update(h.signal(step))
    return Signal(**fields) if fields else None
