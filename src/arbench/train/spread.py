"""The address-spread regulariser in training (``train.spread: {weight, subsample}``).

A lattice memory (`arbench.cells.lattice`) stores a binding in the cells around the address
its key's token writes at; keys whose addresses crowd into the same cells overwrite one
another, and the addresses move only through the B-spline offsets inside a cell, so a model
that starts with its keys bunched together learns slowly or not at all. The regulariser adds

    loss = cross-entropy + weight * sum over lattice layers of spread_loss(key addresses)

where each layer's term (its `spread_penalty`, `arbench.cells.lattice.LatticeCell`) is the
negative entropy of the histogram of the keys' write addresses, weighted by how much their
kernels overlap (estimated on at most ``subsample`` keys per row). The keys are where the
task says they are: a task that marks its keys (`arbench.tasks.base.Task.marks_keys`) gives
each batch ``key_positions``, the positions of its stored keys, and the addresses are each
lattice layer's write addresses at those positions, read from the layer's own input during
the same forward pass (a forward pre-hook; nothing is run twice but the address projection).
The loop runs it as a `SpreadHook` (`arbench.train.hooks`).

The subsample is drawn from a `torch.Generator` seeded from (seed, step) alone (`generator`),
never from the global RNG, so a run with the regulariser is as reproducible as one without
and resumes from a checkpoint to the same weights bit for bit. Where it cannot apply (a task
without key positions, a model without a lattice layer) the option fails before training,
in one line naming ``train.spread``; the config checks it too (`check_spread`).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from arbench.settings import settings_block, whole_number
from arbench.train.hooks import HookRun, TrainHook

SEED_PURPOSE = 7  # the generator's stream, apart from the batches' (`tasks.base.stream_rng`)


@dataclass(frozen=True)
class SpreadConfig:
    """``train.spread``: the regulariser's ``weight`` (> 0) and the most keys per row its
    overlap estimate looks at (``subsample``, >= 2)."""

    weight: float
    subsample: int = 2048

    def __post_init__(self) -> None:
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w <= 0:
            raise ValueError(f"train.spread.weight must be a number > 0, got {w!r}")
        s = self.subsample
        whole_number(s, "train.spread.subsample", minimum=2)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpreadConfig:
        if not isinstance(d, dict):
            raise ValueError(f"train.spread must be a mapping {{weight, subsample}}, got {d!r}")
        # a key the dataclass has no field for is settings_block's error, named before this one
        if "weight" not in d and set(d) <= {f.name for f in fields(cls)}:
            raise ValueError("train.spread needs a weight")
        return settings_block(cls, d, "train.spread")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def has_addresses(module: Any) -> bool:
    """Whether a mixer (or mixer class) is a lattice layer: one whose write addresses the
    regulariser can spread (it has a `spread_penalty`)."""
    return callable(getattr(module, "spread_penalty", None))


def lattice_layers(model: nn.Module) -> list[nn.Module]:
    """The mixers of ``model``'s blocks that are lattice layers (empty for any other model)."""
    blocks = getattr(model, "blocks", None) or []
    return [b.mixer for b in blocks if has_addresses(getattr(b, "mixer", None))]


def check_spread(task: Any, spread: SpreadConfig | None, cell: str | None) -> None:
    """Fail early, one line naming train.spread, when the regulariser cannot apply: the task
    marks no keys, or the model's cell (None: a model family without cells) has no lattice
    layer. Nothing to check when ``spread`` is None."""
    if spread is None:
        return
    if not getattr(task, "marks_keys", False):
        raise ValueError(
            f"train.spread: task {task.name!r} gives no key positions (its batches carry no "
            "key_positions); the regulariser needs a task that marks its keys"
        )
    from arbench.cells import CELLS

    if cell is None or cell not in CELLS or not has_addresses(CELLS[cell]):
        raise ValueError(
            f"train.spread: the model (cell {cell!r}) has no lattice layer whose write "
            "addresses the regulariser could spread"
        )


def generator(seed: int, step: int) -> torch.Generator:
    """The subsample's generator for batch ``step`` of run ``seed``: a pure function of both."""
    state = np.random.SeedSequence([SEED_PURPOSE, int(seed), int(step)]).generate_state(2)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


class AddressTap:
    """While active (a context manager), records the input of every lattice layer's forward
    call, so the write addresses can be read after the model's forward pass."""

    def __init__(self, layers: list[nn.Module]) -> None:
        self.layers = layers
        self.inputs: list[torch.Tensor | None] = [None] * len(layers)
        self._handles: list[Any] = []

    def __enter__(self) -> AddressTap:
        self.inputs = [None] * len(self.layers)
        for i, layer in enumerate(self.layers):

            def hook(_module: nn.Module, args: tuple, i: int = i) -> None:
                self.inputs[i] = args[0]

            self._handles.append(layer.register_forward_pre_hook(hook))
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def penalty(
        self, positions: torch.Tensor, spread: SpreadConfig, gen: torch.Generator
    ) -> torch.Tensor:
        """Sum over the lattice layers of their `spread_penalty` at ``positions`` (B, P): the
        unweighted regulariser of the recorded forward pass."""
        total = None
        for layer, x in zip(self.layers, self.inputs, strict=True):
            if x is None:
                raise RuntimeError("train.spread: a lattice layer did not run in the forward pass")
            term = layer.spread_penalty(x, positions, spread.subsample, gen)
            total = term if total is None else total + term
        if total is None:
            raise ValueError("train.spread: the model has no lattice layer")
        return total


def positions_of(batch: Any, step: int, device: torch.device | str) -> torch.Tensor:
    """A batch's key positions as an int64 tensor on ``device``; a batch without them is a
    one-line error naming train.spread."""
    if getattr(batch, "key_positions", None) is None:
        raise ValueError(
            f"train.spread: training batch {step} carries no key_positions; the regulariser "
            "needs a task that marks its keys"
        )
    return torch.from_numpy(np.asarray(batch.key_positions, dtype=np.int64)).to(device)


class SpreadHook(TrainHook):
    """``train.spread`` in the loop: records the lattice layers' inputs during the forward
    pass, adds weight * regulariser to the loss and logs the unweighted term (stateless: the
    subsample comes from `generator` (seed, step))."""

    section = "spread"

    def __init__(self, spread: SpreadConfig, layers: list[nn.Module], seed: int) -> None:
        if not layers:
            raise ValueError("train.spread: the model has no lattice layer")
        self.spread, self.layers, self.seed = spread, layers, seed
        self._tap: AddressTap | None = None
        self._positions: torch.Tensor | None = None
        self.last: torch.Tensor | None = None  # the last batch's unweighted term, detached

    @classmethod
    def from_settings(cls, settings: SpreadConfig | None, run: HookRun) -> SpreadHook | None:
        return None if settings is None else cls(settings, lattice_layers(run.model), run.seed)

    @contextlib.contextmanager
    def around_forward(self, step: int, batch: Any, device: torch.device) -> Iterator[None]:
        self._positions = positions_of(batch, step, device)
        with AddressTap(self.layers) as tap:
            yield
        self._tap = tap

    def extra_loss(self, step: int) -> torch.Tensor:
        if self._tap is None or self._positions is None:
            raise RuntimeError("train.spread: extra_loss before a recorded forward pass")
        reg = self._tap.penalty(self._positions, self.spread, generator(self.seed, step))
        self._tap, self._positions, self.last = None, None, reg.detach()
        return self.spread.weight * reg

    def metrics(self) -> dict[str, Any]:
        return {} if self.last is None else {"spread": self.last.item()}


def regularised(
    loss_fn: Any,
    model: nn.Module,
    layers: list[nn.Module],
    batch: Any,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    spread: SpreadConfig,
    seed: int,
    step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(loss_fn's loss + weight * regulariser, its accuracy, the unweighted regulariser) of
    one training batch, as the loop computes it through `SpreadHook`: ``loss_fn(model, tokens,
    targets)`` (the loop's masked loss) runs with the lattice layers' inputs recorded, then the
    regulariser reads their addresses at the batch's key positions, its subsample drawn from
    `generator` (seed, step)."""
    hook = SpreadHook(spread, layers, seed)
    with hook.around_forward(step, batch, tokens.device):
        loss, acc = loss_fn(model, tokens, targets)
    term = hook.extra_loss(step)
    return loss + term, acc, hook.last
