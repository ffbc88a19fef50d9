"""What a benchmark was measured on: CPU, cores, torch threads, versions, memory setting."""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from arbench.cpu_memory import retaining_freed_memory
from arbench.train.run_files import versions


def machine_info() -> dict[str, Any]:
    """CPU model, core counts, torch threads and versions: what the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "usable_cores": len(affinity) if affinity is not None else os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        **versions(),
        "platform": platform.platform(),
        "malloc_retains_freed_memory": retaining_freed_memory(),
    }
