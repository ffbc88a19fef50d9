"""Page faults and system time per training step of each chunked cell, with and without
`arbench.cpu_memory.retain_freed_memory` (each setting in its own process).

    .venv/bin/python benchmarks/page_faults.py --cells delta_rule,kda,rwkv7 --T 1024

Prints minor page faults, system and user CPU milliseconds and wall milliseconds per
forward+backward step of the chunked cell at B=32, d_model 32 (the benchmark's shape).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def measure(cells: list[str], t: int, batch: int, steps: int, threads: int) -> list[dict]:
    """In this process: per-step faults and times of each cell's chunked training step."""
    import torch

    from arbench.bench.cells import Shape, cell_options, cell_step
    from arbench.cells import build_cell

    D_MODEL = Shape().d_model  # the zoo's width (config.yaml: zoo.reference)

    torch.set_num_threads(threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, t, D_MODEL, generator=gen)
    proj = torch.randn(batch, t, D_MODEL, generator=gen)
    rows = []
    for name in cells:
        torch.manual_seed(0)
        step = cell_step(build_cell(name, D_MODEL, **cell_options(name)), x, proj, "chunked")
        for _ in range(3):  # warm up, let the allocator settle
            step()
        before, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        for _ in range(steps):
            step()
        wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        rows.append(
            {
                "cell": name,
                "minor_faults": (after.ru_minflt - before.ru_minflt) / steps,
                "sys_ms": (after.ru_stime - before.ru_stime) / steps * 1e3,
                "user_ms": (after.ru_utime - before.ru_utime) / steps * 1e3,
                "wall_ms": wall / steps * 1e3,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="delta_rule,kda,rwkv7,mamba2")
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--child", choices=["default", "retain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    cells = args.cells.split(",")
    if args.child:
        sys.path.insert(0, str(SRC))
        if args.child == "retain":
            from arbench.cpu_memory import retain_freed_memory

            if not retain_freed_memory():
                sys.exit("retain_freed_memory() is not available here (not glibc)")
        print(json.dumps(measure(cells, args.T, args.B, args.steps, args.threads)))
        return
    results = {}
    for mode in ("default", "retain"):
        cmd = [sys.executable, __file__, "--child", mode, *sys.argv[1:]]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    head = ("cell", "malloc", "faults/step", "sys ms", "user ms", "wall ms")
    print("{:15s} {:8s} {:>12s} {:>8s} {:>8s} {:>8s}".format(*head))
    for i, name in enumerate(cells):
        for mode, rows in results.items():
            r = rows[i]
            print(
                f"{name:15s} {mode:8s} {r['minor_faults']:12,.0f} {r['sys_ms']:8.1f} "
                f"{r['user_ms']:8.1f} {r['wall_ms']:8.1f}"
            )


if __name__ == "__main__":
    main()
