"""Does torch.compile speed up the chunked cells on this machine? Eager vs compiled, timed in turns.

For each cell at the benchmark's shape (B=32, d_model 32, 1,024-element state) this times one
forward+backward of the chunked cell three ways: eager, with `prepare`/`finish` compiled (the
kernel stays eager), and with the whole cell compiled. It prints compile seconds and the min and
median step times. Not part of the pipeline or the tests; run it by hand:

    .venv/bin/python benchmarks/torch_compile.py --cells additive,mamba2,rwkv7 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arbench.cells import build_cell  # noqa: E402
from arbench.cpu_memory import retain_freed_memory  # noqa: E402
from arbench.evaluate.bench import D_MODEL, bench_cells, cell_options  # noqa: E402


def _step(module: torch.nn.Module, call, x: torch.Tensor, proj: torch.Tensor):
    def step() -> None:
        module.zero_grad(set_to_none=True)
        y, _ = call(x.detach().requires_grad_(True), form="chunked")
        (y * proj).sum().backward()

    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="all", help="comma-separated names, or all")
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    names = (
        [c for c in bench_cells() if c != "attention"]
        if args.cells == "all"
        else (args.cells.split(","))
    )
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.B, args.T, D_MODEL, generator=gen)
    proj = torch.randn(args.B, args.T, D_MODEL, generator=gen)
    for name in names:
        cells = []
        for _ in range(3):  # identical weights in each variant
            torch.manual_seed(0)
            cells.append(build_cell(name, D_MODEL, **cell_options(name)))
        eager, parts, whole = cells
        parts.prepare = torch.compile(parts.prepare)
        parts.finish = torch.compile(parts.finish)
        steps = {
            "eager": _step(eager, eager, x, proj),
            "prepare/finish compiled": _step(parts, parts, x, proj),
            "whole cell compiled": _step(whole, torch.compile(whole), x, proj),
        }
        compile_s = {}
        for label, step in steps.items():
            t0 = time.perf_counter()
            step()  # first call compiles
            compile_s[label] = time.perf_counter() - t0
        times: dict[str, list[float]] = {label: [] for label in steps}
        for _ in range(args.repeats):
            for label, step in steps.items():
                t0 = time.perf_counter()
                step()
                times[label].append(time.perf_counter() - t0)
        for label, ts in times.items():
            print(
                f"{name:15s} {label:24s} first call {compile_s[label]:6.1f} s   "
                f"step min {min(ts) * 1e3:7.1f} ms  median {statistics.median(ts) * 1e3:7.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
