"""The distance curriculum: how far each training batch may put the queries from the table.

A curriculum sets, per batch, the maximum table-to-query gap as a fraction of the task's full
gap; the task draws each sequence's gap uniformly from 0 to it (`arbench.tasks.base.Signal`),
and evaluation always uses the full gap. Three ramps:

* ``linear`` (the uniform ramp): the fraction grows at a constant rate from ``start`` to 1,
  reaching it at ``until`` (a fraction of the training steps, so a scale that shortens
  training shortens the ramp with it);
* ``shaped``: the same clock, but the fraction is ``start + (1 - start) u^power`` for the
  elapsed share u of the ramp: with power > 1 it lingers at short gaps, where the binding
  is learned, and covers the long ones late;
* ``gated`` (success-gated): the fraction advances by ``increment`` after each window of
  ``every`` steps whose mean training accuracy (at the batches' own gaps) is at least
  ``threshold``, and holds otherwise, so the ramp never outruns the model.

The gated ramp depends on training history, so its state is part of the checkpoint
(`Curriculum.state` / `load_state`); the time-based ramps are pure functions of the step.
`CurriculumHook` is how the training loop runs it (`arbench.train.hooks`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from arbench.settings import settings_block
from arbench.train.hooks import HookRun, ScheduleHook

RAMPS = ("linear", "shaped", "gated")


@dataclass(frozen=True)
class CurriculumConfig:
    """Settings of one curriculum (``train.curriculum``); see the module docstring."""

    ramp: str = "linear"
    start: float = 0.0
    until: float = 0.75
    power: float = 2.0
    threshold: float = 0.6
    every: int = 25
    increment: float = 0.05

    def __post_init__(self) -> None:
        if self.ramp not in RAMPS:
            raise ValueError(f"train.curriculum.ramp must be one of {RAMPS}, got {self.ramp!r}")
        if not 0.0 <= self.start <= 1.0:
            raise ValueError(f"train.curriculum.start must be in [0, 1], got {self.start}")
        if not 0.0 < self.until <= 1.0:
            raise ValueError(f"train.curriculum.until must be in (0, 1], got {self.until}")
        if self.power <= 0:
            raise ValueError(f"train.curriculum.power must be > 0, got {self.power}")
        if self.every < 1:
            raise ValueError(f"train.curriculum.every must be >= 1, got {self.every}")
        if not 0.0 < self.increment <= 1.0:
            raise ValueError(f"train.curriculum.increment must be in (0, 1], got {self.increment}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CurriculumConfig:
        return settings_block(cls, d, "train.curriculum")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Curriculum:
    """The ramp of one run: `gap(step)` before each batch, `observe(step, acc)` after it."""

    def __init__(self, cfg: CurriculumConfig, total_steps: int) -> None:
        self.cfg = cfg
        self.total = total_steps
        self.fraction = cfg.start  # the gated ramp's current level
        self._window_sum = 0.0
        self._window_n = 0

    def gap(self, step: int) -> float:
        """The maximum gap fraction of batch ``step`` (0-based)."""
        c = self.cfg
        if c.ramp == "gated":
            return self.fraction
        span = max(1.0, c.until * self.total)
        u = min(1.0, step / span)
        if c.ramp == "shaped":
            u = u**c.power
        return c.start + (1.0 - c.start) * u

    def observe(self, step: int, accuracy: float) -> None:
        """Record batch ``step``'s training accuracy; the gated ramp advances at the end of a
        window whose mean accuracy reached the threshold."""
        if self.cfg.ramp != "gated":
            return
        self._window_sum += accuracy
        self._window_n += 1
        if (step + 1) % self.cfg.every == 0:
            if self._window_sum / self._window_n >= self.cfg.threshold:
                self.fraction = min(1.0, self.fraction + self.cfg.increment)
            self._window_sum, self._window_n = 0.0, 0

    def state(self) -> dict[str, float]:
        """What a checkpoint must hold to resume the ramp exactly."""
        return {"fraction": self.fraction, "sum": self._window_sum, "n": self._window_n}

    def load_state(self, state: dict[str, float]) -> None:
        self.fraction = float(state["fraction"])
        self._window_sum = float(state["sum"])
        self._window_n = int(state["n"])


class CurriculumHook(ScheduleHook):
    """``train.curriculum`` in the loop: each batch's ``gap`` from the ramp."""

    section = state_key = "curriculum"
    field = "gap"

    @classmethod
    def from_settings(
        cls, settings: CurriculumConfig | None, run: HookRun
    ) -> CurriculumHook | None:
        return None if settings is None else cls(Curriculum(settings, run.steps))

    def value(self, step: int) -> float:
        return self.schedule.gap(step)
