"""Streaming evaluation speed and memory: one model read over a long random token stream.

One measurement per process (the workflow runs one job per length), so the peak resident
set it reports is that length's own.
"""

from __future__ import annotations

import resource
import sys
from typing import Any

import numpy as np
import torch

from arbench.evaluate.streaming import stream_tokens
from arbench.models import ModelConfig, build_model


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB.

    Linux: VmHWM of /proc/self/status, which exec resets (ru_maxrss survives exec, so a child
    of a large benchmark process would report its parent's peak). Elsewhere: ru_maxrss.
    """
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


def stream_once(
    model: dict[str, Any],
    vocab_size: int,
    n_tokens: int,
    seed: int = 0,
    piece: int = 8192,
    threads: int = 1,
) -> dict[str, Any]:
    """Stream ``n_tokens`` random tokens through a seeded model of the given settings
    (`arbench.experiment.Run.model` of an arm) in this process; time and peak memory."""
    torch.set_num_threads(threads)
    net = build_model(ModelConfig(vocab_size=vocab_size, **model), seed)
    rss_before = peak_rss_mb()
    out = stream_tokens(net, n_tokens, vocab_size, np.random.default_rng(seed), piece=piece)
    return {
        "tokens": out["tokens"],
        "seconds": out["seconds"],
        "tokens_per_s": out["tokens_per_s"],
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_stream_mb": rss_before,
        "piece": piece,
        "threads": torch.get_num_threads(),
        "model": {"vocab_size": vocab_size, **model},
    }
