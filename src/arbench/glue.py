"""Helpers shared by the thin Snakemake scripts: logging and thread setup."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from arbench.cpu_memory import retain_freed_memory


def setup(log_path: str | None, threads: int = 1, name: str = "arbench") -> Callable[[str], None]:
    """Pin torch threads to the rule's `threads:`, keep freed tensor memory in the process
    (see `arbench.cpu_memory`), and log to the rule's log file and stderr."""
    torch.set_num_threads(max(1, int(threads)))
    retain_freed_memory()
    logger = logging.getLogger(name)
    logger.setLevel(logging.INFO)
    logger.handlers.clear()
    fmt = logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    for h in handlers:
        h.setFormatter(fmt)
        logger.addHandler(h)
    return logger.info
