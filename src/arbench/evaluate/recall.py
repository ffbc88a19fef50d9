"""Held-out accuracy at supervised positions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from arbench.batch import IGNORE
from arbench.models import LanguageModel


def hidden_at(model: Any, tokens: torch.Tensor, sel: torch.Tensor, **options: Any) -> torch.Tensor:
    """Final hidden states at the positions ``sel`` marks, (n, d): the model's own
    ``hidden_at`` where it has one (the denoiser computes its last layer only where these
    positions need it), else ``hidden(tokens)[0][sel]``."""
    own = getattr(model, "hidden_at", None)
    if own is not None and not options:
        return own(tokens, sel)
    h, _ = model.hidden(tokens, **options)
    return h[sel]


EVAL_BATCH_TOKENS = 1 << 18  # tokens one evaluation batch holds by default
EVAL_ROWS = 256  # and rows at most


def eval_rows(length: int, batch_tokens: int = EVAL_BATCH_TOKENS) -> int:
    """Rows of one evaluation batch of ``length``-token sequences: ``batch_tokens`` tokens'
    worth, at most `EVAL_ROWS`, at least one (what the resource model sizes evaluation by)."""
    return max(1, min(EVAL_ROWS, int(batch_tokens) // int(length)))


@torch.no_grad()
def predict(
    model: LanguageModel,
    tokens: np.ndarray,
    targets: np.ndarray,
    batch: int = 256,
    exclude: Sequence[int] = (),
    **hidden_options: Any,
) -> np.ndarray:
    """The model's argmax token at every supervised position (-1 elsewhere), in batches on
    the model's device, reading out only the supervised positions; ids in ``exclude`` (a
    task's `Task.never_predicted`, e.g. its MASK) have their logits set to -inf first, so
    they are never the prediction; ``hidden_options`` go to the model's ``hidden`` (e.g.
    the kvbench transformer's attention ``tile``)."""
    model.eval()
    device = (
        next(iter(model.parameters()), torch.empty(0)).device
        if hasattr(model, "parameters")
        else torch.device("cpu")
    )
    pred = np.full(np.shape(targets), -1, dtype=np.int64)
    drop = torch.as_tensor(sorted({int(t) for t in exclude}), dtype=torch.int64, device=device)
    for i in range(0, len(tokens), batch):
        tok = torch.from_numpy(np.asarray(tokens[i : i + batch], dtype=np.int64)).to(device)
        sel = torch.from_numpy(np.asarray(targets[i : i + batch]) != IGNORE).to(device)
        out = torch.full(sel.shape, -1, dtype=torch.int64, device=device)
        logits = model.logits(hidden_at(model, tok, sel, **hidden_options))
        if len(drop):
            logits = logits.index_fill(-1, drop.to(logits.device), float("-inf"))
        out[sel] = logits.argmax(-1)
        pred[i : i + batch] = out.cpu().numpy()
    return pred


def accuracy(
    model: LanguageModel,
    tokens: np.ndarray,
    targets: np.ndarray,
    batch: int = 256,
    exclude: Sequence[int] = (),
) -> dict[str, Any]:
    """Fraction of supervised positions predicted exactly, plus per-sequence accuracies;
    ``exclude``: ids never predicted (see `predict`)."""
    targets = np.asarray(targets, dtype=np.int64)
    sel = targets != IGNORE
    hit = (predict(model, tokens, targets, batch, exclude=exclude) == targets) & sel
    correct, total = int(hit.sum()), int(sel.sum())
    per_seq = (hit.sum(1) / np.maximum(sel.sum(1), 1)).tolist()
    return {
        "accuracy": correct / max(1, total),
        "correct": correct,
        "supervised": total,
        "sequences": len(per_seq),
        "sequence_exact": float(np.mean([p == 1.0 for p in per_seq])) if per_seq else 0.0,
    }
