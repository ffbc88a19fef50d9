"""Tasks: each module holds a generator, an independent oracle and a floor calculator."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from arbench.tasks import mqar


@dataclass
class MQARTask:
    """Training/evaluation adapter for MQAR: batches are pure functions of (seed, step)."""

    cfg: mqar.MQARConfig

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    def train_batch(self, seed: int, step: int, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        b = mqar.generate(self.cfg, batch, mqar.stream_rng(seed, step))
        return torch.from_numpy(b.tokens), torch.from_numpy(b.targets)

    def eval_set(self, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        b = mqar.heldout(self.cfg, n, seed)
        return b.tokens, b.targets

    def oracle(self, tokens: np.ndarray, targets: np.ndarray) -> list[str]:
        return mqar.oracle_check(tokens, targets, self.cfg)

    def floors(self) -> dict[str, float]:
        return mqar.floors(self.cfg)


def make_task(task: dict[str, Any]) -> MQARTask:
    """Build the task named by ``task["name"]`` from its config block."""
    name = task.get("name")
    if name == "mqar":
        return MQARTask(mqar.MQARConfig.from_dict(task))
    raise KeyError(f"unknown task {name!r}; known: ['mqar']")
