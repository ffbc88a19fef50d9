"""How steady is a cell's recurrent-form time? Medians per fresh process, per thread count.

Each process builds the cell at the benchmark's shape and times `--steps` recurrent and
chunked forward+backward steps in turns (after one warm-up pair); the parent prints each
process's medians. A spread between processes that the chunked form does not share points
at the recurrent form's many tiny parallel regions (see docs/ARCHITECTURE.md); compare
`--threads 1`, and `--env OMP_WAIT_POLICY=PASSIVE` for workers that sleep instead of spin.

    .venv/bin/python benchmarks/recurrent_spread.py --cell mamba2 --processes 4 --threads 2,1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def child(cell_name: str, t: int, batch: int, steps: int) -> dict[str, list[float]]:
    """Times of `steps` recurrent and chunked cell steps, in turns, in this process."""
    sys.path.insert(0, str(SRC))
    import torch

    from arbench.bench.cells import Shape, cell_options, cell_step, time_interleaved
    from arbench.cells import build_cell
    from arbench.cpu_memory import retain_freed_memory

    D_MODEL = Shape().d_model  # the zoo's width (config.yaml: zoo.reference)

    retain_freed_memory()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(batch, t, D_MODEL, generator=gen)
    proj = torch.randn(batch, t, D_MODEL, generator=gen)
    torch.manual_seed(0)
    cell = build_cell(cell_name, D_MODEL, **cell_options(cell_name))
    forms = {form: cell_step(cell, x, proj, form) for form in ("recurrent", "chunked")}
    return time_interleaved(forms, warmup=1, repeats=steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cell", default="mamba2")
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--threads", default="2,1", help="comma-separated torch thread counts")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for children")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        torch.set_num_threads(int(args.threads))
        print(json.dumps(child(args.cell, args.T, args.B, args.steps)))
        return
    env = {**os.environ, **dict(e.split("=", 1) for e in args.env)}
    print(f"{args.cell} B={args.B} T={args.T}; medians of {args.steps} steps per process (ms)")
    for _ in range(args.processes):
        for threads in args.threads.split(","):
            cmd = [sys.executable, __file__, "--child", "--cell", args.cell, "--T", str(args.T)]
            cmd += ["--B", str(args.B), "--steps", str(args.steps), "--threads", threads]
            out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
            times = json.loads(out.stdout)
            rec, chunk = (statistics.median(times[f]) * 1e3 for f in ("recurrent", "chunked"))
            print(
                f"threads={threads}: recurrent {rec:6.1f}  chunked {chunk:5.1f}  "
                f"ratio {rec / chunk:4.1f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
