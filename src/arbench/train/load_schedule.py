"""The load schedule: how many bindings each training batch holds (``train.load``).

Some tasks are learned only when training starts small: the key-value benchmark trains at
n = 2 keys, then 4, 6 and finally 8 (started at 8, the models that see positions everywhere
settle on a positional shortcut). A schedule lists the loads in order (``values``) and when
each rung ends, in one of two ways:

* time-based: ``until`` gives, per rung but the last, the fraction of the training steps at
  which it ends (so a scale that shortens training shortens every rung with it);
* accuracy-gated: with ``threshold`` instead, a rung ends after the first window of ``every``
  steps whose mean training accuracy reached it (the long-context run's rungs), and the
  last rung holds to the end.

A gated schedule may also end training early (``stop``): at the end of the first window on
the last rung whose mean training accuracy reaches ``threshold``, the same test that ends
every other rung. This is our reading of the long-context run's "early stopped at step 2800"
with a rung accuracy of 1.0: the source states neither its rule nor a patience, so we take
the one rule its rung gate already implies (docs/PROTOCOL.md: key-value benchmark).

The task reads the load from the batch's `arbench.tasks.base.Signal` (its ``load`` field);
the gated schedule depends on training history, so its state goes into the checkpoint.
`LoadHook` is how the training loop runs it (`arbench.train.hooks`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from arbench.settings import settings_block
from arbench.train.hooks import HookRun, ScheduleHook


@dataclass(frozen=True)
class LoadConfig:
    """Settings of one load schedule (``train.load``); see the module docstring."""

    values: list[int] = field(default_factory=list)
    until: list[float] | None = None
    threshold: float | None = None
    every: int = 50
    stop: bool = False  # gated only: end training once the last rung passes its gate

    def __post_init__(self) -> None:
        if not self.values or any(not isinstance(v, int) or v < 1 for v in self.values):
            raise ValueError(f"train.load.values must be integers >= 1, got {self.values}")
        if (self.until is None) == (self.threshold is None):
            raise ValueError("train.load needs exactly one of until (fractions) or threshold")
        if self.until is not None:
            if len(self.until) != len(self.values) - 1:
                raise ValueError(
                    f"train.load.until needs {len(self.values) - 1} fractions (one per rung "
                    f"but the last), got {len(self.until)}"
                )
            bounds = [0.0, *self.until, 1.0]
            if any(not a < b for a, b in zip(bounds, bounds[1:], strict=False)):
                raise ValueError(
                    f"train.load.until must rise strictly inside (0, 1), got {self.until}"
                )
        if self.threshold is not None and not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"train.load.threshold must be in (0, 1], got {self.threshold}")
        if self.every < 1:
            raise ValueError(f"train.load.every must be >= 1, got {self.every}")
        if not isinstance(self.stop, bool):
            raise ValueError(f"train.load.stop must be true or false, got {self.stop!r}")
        if self.stop and self.threshold is None:
            raise ValueError("train.load.stop needs accuracy-gated rungs (threshold), not until")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LoadConfig:
        return settings_block(cls, d, "train.load")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LoadSchedule:
    """The schedule of one run: `load(step)` before each batch, `observe(step, acc)` after."""

    def __init__(self, cfg: LoadConfig, total_steps: int) -> None:
        self.cfg = cfg
        self.total = total_steps
        self.rung = 0  # the gated schedule's current rung
        self._window_sum = 0.0
        self._window_n = 0
        self.finished = False  # ``stop``: the last rung passed its gate; training ends

    def load(self, step: int) -> int:
        """The load of batch ``step`` (0-based)."""
        c = self.cfg
        if c.until is None:
            return c.values[self.rung]
        ends = [round(f * self.total) for f in c.until]
        return c.values[sum(step >= e for e in ends)]

    def observe(self, step: int, accuracy: float) -> None:
        """Record batch ``step``'s training accuracy; a gated rung ends at the end of a window
        whose mean accuracy reached the threshold, and with ``stop`` so does training when
        that rung is the last."""
        c = self.cfg
        last = self.rung == len(c.values) - 1
        if c.threshold is None or self.finished or (last and not c.stop):
            return
        self._window_sum += accuracy
        self._window_n += 1
        if (step + 1) % c.every == 0:
            if self._window_sum / self._window_n >= c.threshold:
                if last:
                    self.finished = True
                else:
                    self.rung += 1
            self._window_sum, self._window_n = 0.0, 0

    def state(self) -> dict[str, float]:
        """What a checkpoint must hold to resume the schedule exactly."""
        return {
            "rung": self.rung,
            "sum": self._window_sum,
            "n": self._window_n,
            "finished": int(self.finished),
        }

    def load_state(self, state: dict[str, float]) -> None:
        self.rung = int(state["rung"])
        self._window_sum = float(state["sum"])
        self._window_n = int(state["n"])
        self.finished = bool(state.get("finished", 0))


class LoadHook(ScheduleHook):
    """``train.load`` in the loop: each batch's ``load`` (bindings) from the schedule."""

    section = state_key = "load"
    field = "load"

    @classmethod
    def from_settings(cls, settings: LoadConfig | None, run: HookRun) -> LoadHook | None:
        return None if settings is None else cls(LoadSchedule(settings, run.steps))

    def value(self, step: int) -> int:
        return self.schedule.load(step)

    @property
    def finished(self) -> bool:
        """Whether the schedule ends training here (``train.load.stop``)."""
        return self.schedule.finished
