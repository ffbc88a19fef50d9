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

    def evaluate(self, model: Any, data: str, **_: Any) -> dict[str, Any]:
        """Held-out accuracy on the stored evaluation set at ``data`` (.npz)."""
        from arbench.evaluate.recall import accuracy

        arrays = np.load(data)
        return accuracy(model, arrays["tokens"], arrays["targets"])


TASKS = ("mqar", "passkey_swar")


def make_task(task: dict[str, Any]) -> Any:
    """Build the task named by ``task["name"]`` from its config block."""
    name = task.get("name")
    if name == "mqar":
        return MQARTask(mqar.MQARConfig.from_dict(task))
    if name == "passkey_swar":
        from arbench.tasks.passkey_swar import Params
        from arbench.tasks.passkey_swar_study import PasskeySwarTask

        opts = {k: v for k, v in task.items() if k not in ("name", "params")}
        return PasskeySwarTask(**opts, params=Params.from_dict(task.get("params", {})))
    raise KeyError(f"unknown task {name!r}; known: {list(TASKS)}")
