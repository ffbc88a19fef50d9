"""Held-out accuracy at supervised positions."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from arbench.models import LanguageModel
from arbench.tasks.base import IGNORE


@torch.no_grad()
def predict(
    model: LanguageModel,
    tokens: np.ndarray,
    targets: np.ndarray,
    batch: int = 256,
    **hidden_options: Any,
) -> np.ndarray:
    """The model's argmax token at every supervised position (-1 elsewhere), in batches on
    the model's device, reading out only the supervised positions; ``hidden_options`` go
    to the model's ``hidden`` (e.g. the kvbench transformer's attention ``tile``)."""
    model.eval()
    device = (
        next(iter(model.parameters()), torch.empty(0)).device
        if hasattr(model, "parameters")
        else torch.device("cpu")
    )
    pred = np.full(np.shape(targets), -1, dtype=np.int64)
    for i in range(0, len(tokens), batch):
        tok = torch.from_numpy(np.asarray(tokens[i : i + batch], dtype=np.int64)).to(device)
        sel = torch.from_numpy(np.asarray(targets[i : i + batch]) != IGNORE).to(device)
        h, _ = model.hidden(tok, **hidden_options)
        out = torch.full(sel.shape, -1, dtype=torch.int64, device=device)
        out[sel] = model.logits(h[sel]).argmax(-1)
        pred[i : i + batch] = out.cpu().numpy()
    return pred


def accuracy(
    model: LanguageModel, tokens: np.ndarray, targets: np.ndarray, batch: int = 256
) -> dict[str, Any]:
    """Fraction of supervised positions predicted exactly, plus per-sequence accuracies."""
    targets = np.asarray(targets, dtype=np.int64)
    sel = targets != IGNORE
    hit = (predict(model, tokens, targets, batch) == targets) & sel
    correct, total = int(hit.sum()), int(sel.sum())
    per_seq = (hit.sum(1) / np.maximum(sel.sum(1), 1)).tolist()
    return {
        "accuracy": correct / max(1, total),
        "correct": correct,
        "supervised": total,
        "sequences": len(per_seq),
        "sequence_exact": float(np.mean([p == 1.0 for p in per_seq])) if per_seq else 0.0,
    }
