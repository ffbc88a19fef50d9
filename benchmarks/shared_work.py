"""How much of a cell's training step is not its recurrence kernel? (the whole-cell speed-up cap)

Times each recurrent cell's forward+backward at the benchmark's shape three ways, in turns:
the chunked cell, the recurrent cell, and the cell with its kernel replaced by a pass-through
(outputs = v, every kernel input kept in the graph), which leaves only the projections,
convolutions, norms and gates that both forms share. Recurrent / shared is then the best
whole-cell ratio any chunked kernel could reach (Amdahl). `results/bench/cells.json` records
the same measurement (`shared_work`) for every T; this is the quick one-length version.

    .venv/bin/python benchmarks/shared_work.py --cells additive,delta_rule,mamba2 --threads 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arbench.bench.cells import (  # noqa: E402
    Shape,
    bench_cells,
    cell_options,
    cell_step,
    has_kernel,
    shared_step,
)
from arbench.cells import build_cell  # noqa: E402
from arbench.cpu_memory import retain_freed_memory  # noqa: E402

D_MODEL = Shape().d_model  # the zoo's width (config.yaml: zoo.reference)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="all", help="comma-separated names, or all")
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(args.B, args.T, D_MODEL, generator=gen)
    proj = torch.randn(args.B, args.T, D_MODEL, generator=gen)
    names = bench_cells() if args.cells == "all" else args.cells.split(",")
    print(f"{'cell':15s} {'chunked':>9s} {'recurrent':>10s} {'shared':>8s} {'cap':>6s}  (ms/step)")
    for name in names:
        torch.manual_seed(0)
        cell = build_cell(name, D_MODEL, **cell_options(name))
        if not has_kernel(cell):
            continue
        steps = {
            "chunked": cell_step(cell, x, proj, "chunked"),
            "recurrent": cell_step(cell, x, proj, "recurrent"),
            "shared": shared_step(cell, x, proj),
        }
        times: dict[str, list[float]] = {label: [] for label in steps}
        for i in range(args.repeats + 1):  # the first round warms up
            for label, step in steps.items():
                t0 = time.perf_counter()
                step()
                if i:
                    times[label].append(time.perf_counter() - t0)
        ms = {label: statistics.median(ts) * 1e3 for label, ts in times.items()}
        print(
            f"{name:15s} {ms['chunked']:9.1f} {ms['recurrent']:10.1f} {ms['shared']:8.1f} "
            f"{ms['recurrent'] / ms['shared']:5.1f}x",
            flush=True,
        )


if __name__ == "__main__":
    main()
