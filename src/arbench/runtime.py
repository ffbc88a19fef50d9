"""The runtime every job shares: torch threads, memory retention, logging, failure tracebacks.

`setup` is the first thing every script in `scripts/` calls, before it imports the library,
and it opens the log before it imports torch: an exception raised by any later line (an import
included) ends up, with its traceback, in the rule's log file. A SIGTERM (a scheduler's time
limit, a cancelled job) is turned into an exception, so it is logged too; a SIGKILL cannot be.
"""

from __future__ import annotations

import logging
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType

Log = Callable[[str], None]


class Terminated(Exception):
    """The job received SIGTERM (raised where it was, so the log shows what it was doing)."""


def setup(log_path: str | None, threads: int = 1, name: str = "arbench") -> Log:
    """Log to the rule's log file and stderr, write any exception that ends the job to that
    log with its traceback, then pin torch threads to the rule's `threads:` and keep freed
    tensor memory in the process (see `arbench.cpu_memory`). Returns the log function."""
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
    # only now what can fail on a broken environment, so its traceback reaches the log
    import torch

    from arbench.cpu_memory import retain_freed_memory

    torch.set_num_threads(max(1, int(threads)))
    retain_freed_memory()
    return logger.info


def _raise_on_sigterm() -> None:
    """Turn SIGTERM into `Terminated` in the main thread (elsewhere signals cannot be set)."""

    def terminated(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"received signal {signal.Signals(signum).name}")

    try:
        signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread
        pass
