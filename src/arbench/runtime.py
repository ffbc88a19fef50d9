"""The runtime every job shares: torch threads, memory retention, logging, failure tracebacks.

`setup` is the first thing every script in `scripts/` calls, before it imports the library,
and it opens the log before anything imports torch: an exception raised by any later line (an
import included) ends up, with its traceback, in the rule's log file. It never imports torch
itself, so the jobs that do not need it (data, stats, tables, figures) skip that import. A
SIGTERM (a scheduler's time limit, a cancelled job) is turned into an exception, so it is
logged too; a SIGKILL cannot be.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType

from arbench.cpu_memory import retain_freed_memory

Log = Callable[[str], None]
# what torch (its OpenMP and MKL runtimes) reads for its thread count when it loads
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


class Terminated(Exception):
    """The job received SIGTERM (raised where it was, so the log shows what it was doing)."""


def setup(log_path: str | None, threads: int = 1, name: str = "arbench") -> Log:
    """Log to the rule's log file and stderr, write any exception that ends the job to that
    log with its traceback, pin torch threads to the rule's `threads:` (whether torch loads
    before or after) and keep freed tensor memory in the process (`arbench.cpu_memory`).
    Returns the log function."""
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
    _raise_on_sigterm()
    _pin_threads(max(1, int(threads)))
    retain_freed_memory()
    return logger.info


def _pin_threads(n: int) -> None:
    """Pin torch's intra-op threads to ``n`` without importing torch: the OpenMP and MKL
    variables it reads when it loads (a job that never needs torch, a data or report job,
    saves its 2-3 s import), or `torch.set_num_threads` when it is loaded already."""
    for var in THREAD_VARS:
        os.environ[var] = str(n)
    if sys.modules.get("torch") is not None:
        sys.modules["torch"].set_num_threads(n)


def _raise_on_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread (elsewhere signals cannot be set)."""

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"received signal {signal.Signals(signum).name}")

    try:
        signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread
        pass
