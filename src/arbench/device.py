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


def job_device(gpus: int) -> str:
    """The device name a workflow job with ``gpus`` GPUs asked of its scheduler runs on:
    "auto" where it was given one (CUDA where the job sees it, else the CPU), "cpu" where it
    was given none (so a CPU job on a machine with a GPU stays on the CPU)."""
    return "auto" if int(gpus or 0) > 0 else "cpu"
