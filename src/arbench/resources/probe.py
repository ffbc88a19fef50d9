"""Measure what one training step of a model costs, on the CPU, at a few small shapes.

The resource model (`arbench.resources`) predicts a paper-scale job's peak memory and time
from these measurements: it never guesses a per-cell activation formula. A **probe** builds
the run's model (its exact cell, widths and vocabulary), feeds it one synthetic row of
``length`` tokens with ``supervised`` answer positions (spread evenly, as a task's answers
are), and takes two training steps as the loop does (forward, masked loss, backward,
AdamW); on the second step it records

* ``peak_bytes``: the peak of every live tensor (weights, gradients, AdamW moments,
  activations and kernel temporaries), from `torch.distributed._tools.mem_tracker.MemTracker`,
  which counts tensor storages, not the allocator's pool, so the figure is the same on any
  device that runs the same kernels in the same precision;
* ``eval_peak_bytes``: the same for one no-grad forward (what evaluation holds per row);
* ``flops``: matrix-product FLOPs of the step (`torch.utils.flop_counter.FlopCounterMode`);
* ``ops``: the operators the step dispatches (forward and backward; a GPU launches at least
  one kernel per operator, which bounds a small model's step time from below).

Rows cost the same each, so a step of B rows is the one-row figure's per-row part times B
(`arbench.resources.model` fits that part from a one-row and a two-row probe).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from arbench.batch import IGNORE


class _OpCounter(TorchDispatchMode):
    """Counts the aten operators dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.count += 1
        return func(*args, **(kwargs or {}))


def _row(
    vocab: int, length: int, supervised: int, rows: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random tokens and ``supervised`` evenly spaced answer targets per row."""
    tokens = torch.randint(0, vocab, (rows, length), generator=gen)
    targets = torch.full((rows, length), IGNORE, dtype=torch.long)
    at = np.unique(np.linspace(length - 1, 0, max(1, supervised)).round().astype(int))
    targets[:, torch.from_numpy(at)] = torch.randint(0, vocab, (rows, len(at)), generator=gen)
    return tokens, targets


def measure(
    model: dict[str, Any],
    vocab: int,
    positions: int | None,
    length: int,
    supervised: int,
    rows: int = 1,
) -> dict[str, float]:
    """One probe (module docstring) of a run's model block ``model`` at ``rows`` x ``length``."""
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.utils.flop_counter import FlopCounterMode

    from arbench.models import families
    from arbench.models.dropout import drawing_from, row_generators
    from arbench.train.step import masked_loss

    cfg = families.model_config(model, vocab, positions=positions)
    net = families.build(cfg, 0)
    net.train()
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4, foreach=False)
    tokens, targets = _row(vocab, length, supervised, rows, torch.Generator().manual_seed(0))

    gens = row_generators(0, 0, range(rows))  # a dropout's masks, if the model has one
    opt.zero_grad(set_to_none=True)
    with drawing_from(net, gens):
        masked_loss(net, tokens, targets)[0].backward()
    opt.step()  # the first step allocates AdamW's moments
    tracker, counter = MemTracker(), _OpCounter()
    tracker.track_external(net, opt)
    with tracker, FlopCounterMode(display=False) as flops:
        with counter:  # the forward and backward (a GPU optimiser step is a few fused kernels)
            opt.zero_grad(set_to_none=True)
            with drawing_from(net, gens):
                loss, _ = masked_loss(net, tokens, targets)
            loss.backward()
        opt.step()
    peak = _total(tracker.get_tracker_snapshot("peak"))
    net.eval()
    tracker = MemTracker()
    tracker.track_external(net)
    with tracker, torch.no_grad():
        net.logits(net.hidden(tokens)[0][targets != IGNORE])
    eval_peak = _total(tracker.get_tracker_snapshot("peak"))
    return {
        "peak_bytes": float(peak),
        "eval_peak_bytes": float(eval_peak),
        "flops": float(flops.get_total_flops()),
        "ops": float(counter.count),
        "parameters": float(sum(p.numel() for p in net.parameters())),
    }


def _total(snapshot: dict[Any, dict[str, int]]) -> int:
    """Bytes of every tracked category on every device, at the snapshot."""
    return sum(int(cats.get("Total", 0)) for cats in snapshot.values())
