"""Which torch device a run uses: a low-level helper that training and evaluation share."""

from __future__ import annotations

import torch


def resolve_device(name: str) -> torch.device:
    """'auto' picks CUDA when present; an explicit 'cuda' without a GPU is an error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device is 'cuda' but no CUDA device is visible")
    return torch.device(name)
