"""Held-out accuracy at supervised positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from arbench.models import LanguageModel
from arbench.tasks.base import IGNORE


@torch.no_grad()
def accuracy(
    model: LanguageModel, tokens: np.ndarray, targets: np.ndarray, batch: int = 256
) -> dict[str, Any]:
    """Fraction of supervised positions predicted exactly, plus per-sequence accuracies."""
    model.eval()
    correct = total = 0
    per_seq: list[float] = []
    for i in range(0, len(tokens), batch):
        tok = torch.from_numpy(np.asarray(tokens[i : i + batch], dtype=np.int64))
        tgt = torch.from_numpy(np.asarray(targets[i : i + batch], dtype=np.int64))
        h, _ = model.hidden(tok)
        sel = tgt != IGNORE
        pred = torch.full_like(tgt, -1)
        pred[sel] = model.logits(h[sel]).argmax(-1)
        hit = (pred == tgt) & sel
        correct += int(hit.sum())
        total += int(sel.sum())
        per_seq.extend((hit.sum(1).double() / sel.sum(1).clamp_min(1)).tolist())
    return {
        "accuracy": correct / max(1, total),
        "correct": correct,
        "supervised": total,
        "sequences": len(per_seq),
        "sequence_exact": float(np.mean([p == 1.0 for p in per_seq])) if per_seq else 0.0,
    }
