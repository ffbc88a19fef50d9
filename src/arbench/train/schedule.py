"""Learning-rate schedule: linear warmup then cosine decay to a floor."""

from __future__ import annotations

import math


def lr_at(step: int, *, lr: float, warmup: int, total: int, min_ratio: float = 0.1) -> float:
    """Learning rate for optimizer step ``step`` (0-based) of ``total``."""
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return lr * (min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress)))
