"""The runtime every job shares: torch threads, memory retention, logging, failure tracebacks."""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

import torch

from arbench.cpu_memory import retain_freed_memory

Log = Callable[[str], None]


def setup(log_path: str | None, threads: int = 1, name: str = "arbench") -> Log:
    """Pin torch threads to the rule's `threads:`, keep freed tensor memory in the process
    (see `arbench.cpu_memory`), and log to the rule's log file and stderr.

    An exception that ends the job is written to the log file with its traceback, so a
    failed job's log says why it failed.
    """
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
    previous = sys.excepthook

    def log_failure(
        kind: type[BaseException], err: BaseException, tb: TracebackType | None
    ) -> None:
        logger.error("job failed:\n%s", "".join(traceback.format_exception(kind, err, tb)))
        if previous is not sys.__excepthook__:
            previous(kind, err, tb)

    sys.excepthook = log_failure
    return logger.info
