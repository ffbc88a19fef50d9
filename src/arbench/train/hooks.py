"""The one interface through which the training loop runs its optional features.

Each feature of the train block (the distance curriculum, the load schedule, dense
supervision, the address-spread regulariser) is a `TrainHook`, living beside the feature
(`arbench.train.curriculum.CurriculumHook`, `arbench.train.load_schedule.LoadHook`,
`DenseHook` here, `arbench.train.spread.SpreadHook`). The loop builds the hooks its train block
asks for (`build`): each hook class names the train block's key it owns (`section`) and is
built from that section's settings alone and the run it joins (`HookRun`: the step count, the
model, the seed), never from the whole train block. The loop calls every hook at the same
points of each step, in the hooks' order:

* `signal(step)`: the `Signal` fields the hook sets for batch ``step`` (`signal_of` merges
  them; no hook sets any: the task is asked for a batch without a signal);
* `around_forward(step, batch, device)`: a context entered around the model's forward pass
  (what the hook must see of it), then `extra_loss(step)`: a term added to the loss;
* `observe(step, accuracy)`: after the optimizer step, the batch's training accuracy;
* `metrics()`: the fields the hook adds to a logged metrics line;
* `state()` / `load_state(state)`: what the checkpoint holds for it under `state_key` (None:
  a stateless hook, absent from the checkpoint), so a resumed run continues bit for bit;
* `finished`: read after every step; True ends training there (the load schedule's ``stop``).

A hook draws nothing from the global RNG, so the hooks never shift a run's random stream.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from arbench.batch import Signal

if TYPE_CHECKING:  # annotations only: the curriculum and load schedule stay torch-free
    import torch
    from torch import nn


@dataclass(frozen=True)
class HookRun:
    """What a hook may know of the run it joins besides its own settings section."""

    steps: int  # the run's training steps (a schedule's length)
    model: nn.Module  # the model it trains (a regulariser's layers)
    seed: int  # the run's seed (a hook's own generator)


class TrainHook:
    """Base class of a training feature: every call point a no-op, overridden as needed."""

    section: ClassVar[str]  # the train block's key whose settings build the hook
    state_key: ClassVar[str | None] = None  # the checkpoint's key for `state`; None: none

    @classmethod
    def from_settings(cls, settings: Any, run: HookRun) -> TrainHook | None:
        """The hook for its section's ``settings`` (None: the feature is off)."""
        raise NotImplementedError

    @property
    def finished(self) -> bool:
        """Whether training ends after the step just taken (most hooks never end it)."""
        return False

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

    section = "dense"

    @classmethod
    def from_settings(cls, settings: bool, run: HookRun) -> DenseHook | None:
        return cls() if settings else None

    def signal(self, step: int) -> dict[str, Any]:
        return {"dense": True}


def build(kinds: Iterable[type[TrainHook]], train: Any, run: HookRun) -> list[TrainHook]:
    """The active hooks of a run, in the order of ``kinds`` (that of the logged fields), each
    built from its own section of ``train`` (the parsed train block: an attribute per key)."""
    hooks = (kind.from_settings(getattr(train, kind.section), run) for kind in kinds)
    return [h for h in hooks if h is not None]


def signal_of(hooks: Iterable[TrainHook], step: int) -> Signal | None:
    """Batch ``step``'s training signal from the hooks' fields; None when no hook sets one."""
    fields: dict[str, Any] = {}
    for h in hooks:
        fields.update(h.signal(step))
    return Signal(**fields) if fields else None
