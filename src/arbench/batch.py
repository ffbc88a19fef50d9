"""What a batch of training or evaluation data is, below every package that makes, trains on
or scores one: the label convention (`IGNORE`), the batch type (`Batch`) and the per-batch
training signal (`Signal`). A leaf module (numpy only; torch on demand), so the tasks that
write batches, the evaluators that score them and the loop that trains on them all import
it, and none of them another for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

IGNORE = -100  # target of every position the loss and the accuracy skip


@dataclass
class Batch:
    """Token ids and aligned targets, both (n, L): ``targets[t]`` is what the model must emit
    at position t (IGNORE where nothing is supervised). ``lengths`` gives each row's true
    length when rows are right-padded. ``key_positions`` (n, P), from a task that marks its
    keys (`Task.marks_keys`), gives the position of each row's P stored keys (the store-pass
    key tokens), where the address-spread regulariser reads the write addresses
    (`arbench.train.spread`); None for every other task."""

    tokens: np.ndarray
    targets: np.ndarray
    lengths: np.ndarray | None = None
    key_positions: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.tokens)

    def tensors(self, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens, targets) as int64 tensors on ``device``."""
        import torch  # here, not at the top: data and report jobs never load torch

        return tuple(  # type: ignore[return-value]
            torch.from_numpy(np.asarray(a, dtype=np.int64)).to(device)
            for a in (self.tokens, self.targets)
        )


@dataclass(frozen=True)
class Signal:
    """The training signal of one batch, set by the training options (`arbench.train`), not
    by the task: ``gap`` is the distance curriculum's current maximum, a fraction of the
    task's full table-to-query gap (each sequence's gap is drawn uniformly from 0 to it;
    None: every sequence at the full gap, the evaluation layout), and ``dense`` supervises
    every query instead of the task's own (end-only) answer; ``load`` is the load schedule's
    current rung (`arbench.train.load_schedule`): how many bindings the batch holds (None:
    the task's own setting). A task honours the fields it names in `Task.signals`; the
    config rejects a training option its task does not."""

    gap: float | None = None
    dense: bool = False
    load: int | None = None
