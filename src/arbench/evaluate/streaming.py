"""Streaming evaluation: carry each layer's state across pieces of a long sequence.

Memory stays flat in the length (only one piece's activations and the fixed
recurrent state are alive), so a fixed-state model can read 10^7 tokens.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from arbench.batch import IGNORE
from arbench.models import LanguageModel


def pieces(length: int, piece: int) -> Iterator[tuple[int, int]]:
    """(start, stop) bounds covering [0, length) in steps of ``piece``."""
    for start in range(0, length, piece):
        yield start, min(length, start + piece)


@torch.no_grad()
def stream_predictions(
    model: LanguageModel,
    tokens: np.ndarray,
    targets: np.ndarray,
    piece: int = 4096,
    batch: int = 16,
) -> tuple[np.ndarray, float]:
    """Per-position correctness (bool, same shape as targets) read piece by piece.

    Sequences are processed ``batch`` at a time, each read in pieces of ``piece``
    tokens with the recurrent state carried, so memory does not grow with length.
    """
    model.eval()
    hits = np.zeros(targets.shape, dtype=bool)
    t0 = time.perf_counter()
    for r in range(0, len(tokens), batch):
        rows = slice(r, r + batch)
        sup_cols = np.flatnonzero((targets[rows] != IGNORE).any(0))
        last = int(sup_cols.max()) + 1 if len(sup_cols) else 0
        state = None
        for a, b in pieces(last, piece):
            tok = torch.from_numpy(np.ascontiguousarray(tokens[rows, a:b], dtype=np.int64))
            tgt = torch.from_numpy(np.ascontiguousarray(targets[rows, a:b], dtype=np.int64))
            h, state = model.hidden(tok, state)
            sel = tgt != IGNORE
            if sel.any():
                ok = torch.zeros_like(sel)
                ok[sel] = model.logits(h[sel]).argmax(-1) == tgt[sel]
                hits[rows, a:b] |= ok.numpy()
    return hits, time.perf_counter() - t0


@torch.no_grad()
def stream_tokens(
    model: LanguageModel,
    n_tokens: int,
    vocab_size: int,
    rng: np.random.Generator,
    piece: int = 8192,
    batch: int = 1,
) -> dict[str, Any]:
    """Read ``n_tokens`` (split over ``batch`` parallel streams) and time it.

    Tokens are drawn piece by piece so the input itself never occupies memory
    proportional to the length; the read-out runs on the last position only. Tokens go to
    the model's device, so a model moved to CUDA streams there.
    """
    model.eval()
    device = next(model.parameters()).device
    per_stream = -(-n_tokens // batch)
    state = None
    t0 = time.perf_counter()
    checksum = 0.0
    for a, b in pieces(per_stream, piece):
        tok = torch.from_numpy(rng.integers(0, vocab_size, size=(batch, b - a))).to(device)
        h, state = model.hidden(tok, state)
        checksum += float(model.logits(h[:, -1]).sum())
    seconds = time.perf_counter() - t0
    total = per_stream * batch
    return {
        "tokens": total,
        "seconds": seconds,
        "tokens_per_s": total / seconds,
        "checksum": checksum,
    }
