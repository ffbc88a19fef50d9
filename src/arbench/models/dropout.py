"""Dropout whose masks come from generators handed in, never from torch's global RNG.

`SeededDropout` is `nn.Dropout` (in training each element is zeroed with probability ``p``
and the others scaled by 1 / (1 - p); the identity in evaluation) except where its masks
come from: row ``b`` of a batch draws its mask from the ``b``-th of the generators set on
the model for one forward pass (`drawing_from`). The training loop hands in one generator
per row, derived from (run seed, step, row) (`row_generators`), so

* a run's masks are a pure function of its seed, as its batches are: two processes training
  one seed write the same bytes, whatever else in them drew from torch's RNG;
* a run resumed from its checkpoint at step s draws step s's masks as the uninterrupted run
  did, with no generator state to checkpoint (none carries from one step to the next);
* splitting a step into micro-batches (``train.micro_batch_tokens``) leaves every row's
  masks as they were: each row draws from its own generator, in the same order of layers.

A model in training mode whose dropout is on and which has no generators set raises,
naming what to do: a forgotten generator never falls back to the global RNG.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

# the stream of dropout's generators, apart from the batches' (`tasks.base.stream_rng`:
# purposes 0-3) and the spread regulariser's (`train.spread.SEED_PURPOSE`, 7)
SEED_PURPOSE = 11


class SeededDropout(nn.Module):
    """`nn.Dropout` drawing row b's mask from the b-th generator `drawing_from` sets."""

    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {p}")
        self.p = float(p)
        self.generators: Sequence[torch.Generator] | None = None

    def extra_repr(self) -> str:
        return f"p={self.p}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        gens = self.generators
        if gens is None:
            raise RuntimeError(
                "dropout in training draws from seeded generators, one per row: wrap the "
                "forward pass in arbench.models.dropout.drawing_from(model, "
                "row_generators(seed, step, range(rows), device)), or call model.eval()"
            )
        if len(gens) != x.shape[0]:
            raise ValueError(f"dropout: {len(gens)} generators for a batch of {x.shape[0]} rows")
        keep = torch.empty(x.shape, dtype=torch.bool, device=x.device)
        for row, gen in enumerate(gens):  # one row at a time: a row's floats at most
            keep[row] = torch.rand(x.shape[1:], generator=gen, device=x.device) >= self.p
        return (x * keep).mul_(1.0 / (1.0 - self.p))  # autograd keeps the 1-byte mask


def row_generators(
    seed: int, step: int, rows: Iterator[int] | range, device: torch.device | str = "cpu"
) -> list[torch.Generator]:
    """One generator per row of batch ``step`` of run ``seed``, on ``device``: a pure
    function of (seed, step, row)."""
    out = []
    for row in rows:
        state = np.random.SeedSequence([SEED_PURPOSE, int(seed), int(step), int(row)])
        hi, lo = (int(v) for v in state.generate_state(2))
        out.append(torch.Generator(device=device).manual_seed(hi << 32 | lo))
    return out


def draws(model: nn.Module) -> bool:
    """Whether ``model`` has a dropout that draws when training (p > 0)."""
    return any(isinstance(m, SeededDropout) and m.p > 0 for m in model.modules())


@contextlib.contextmanager
def drawing_from(model: nn.Module, generators: Sequence[torch.Generator]) -> Iterator[None]:
    """Every `SeededDropout` of ``model`` draws from ``generators`` (one per row of the
    batch) inside the block, and from nothing after it."""
    layers = [m for m in model.modules() if isinstance(m, SeededDropout)]
    for m in layers:
        m.generators = generators
    try:
        yield
    finally:
        for m in layers:
            m.generators = None
