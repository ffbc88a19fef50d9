"""Does torch.compile speed up the chunked cells on this machine? Eager vs compiled, timed in turns.

For each cell at the benchmark's shape (B=32, d_model 32, 1,024-element state) this times one
forward+backward of the chunked cell three ways: eager, with `prepare`/`finish` compiled (the
kernel stays eager), and with the whole cell compiled. With --train-step it times instead one
AdamW step of the factorial's 2-layer model (an arm's cell, conv and decay) at the paper's
training shape, eager against compiled. It prints compile seconds and the min and median step
times. Not part of the pipeline or the tests; run it by hand:

    .venv/bin/python benchmarks/torch_compile.py --cells additive,mamba2,rwkv7 --threads 2
    .venv/bin/python benchmarks/torch_compile.py --train-step delta_rule,conv --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arbench.bench.cells import Shape, bench_cells, cell_options  # noqa: E402
from arbench.cells import build_cell  # noqa: E402
from arbench.cpu_memory import retain_freed_memory  # noqa: E402

D_MODEL = Shape().d_model  # the zoo's width (config.yaml: zoo.reference)


def _step(module: torch.nn.Module, call, x: torch.Tensor, proj: torch.Tensor):
    def step() -> None:
        module.zero_grad(set_to_none=True)
        y, _ = call(x.detach().requires_grad_(True), form="chunked")
        (y * proj).sum().backward()

    return step


def _timed(steps: dict, repeats: int, label: str) -> None:
    """First call (compiles) then `repeats` rounds in turns; print per-variant timings."""
    first = {}
    for name, step in steps.items():
        t0 = time.perf_counter()
        step()
        first[name] = time.perf_counter() - t0
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    for name, ts in times.items():
        print(
            f"{label:15s} {name:24s} first call {first[name]:6.1f} s   "
            f"step min {min(ts) * 1e3:7.1f} ms  median {statistics.median(ts) * 1e3:7.1f} ms",
            flush=True,
        )


def train_steps(spec: str, batch: int, t: int) -> dict:
    """Eager and compiled AdamW steps of the factorial LM; spec is cell[,conv][,decay]."""
    from arbench.models import ModelConfig, build_model

    cell, *knobs = spec.split(",")
    options = {"heads": 1, "conv": "conv" in knobs, "decay": "decay" in knobs}
    vocab = 130  # the factorial's MQAR vocabulary
    tokens = torch.randint(0, vocab, (batch, t), generator=torch.Generator().manual_seed(0))
    steps = {}
    for name in ("eager", "model compiled"):
        cfg = ModelConfig(vocab_size=vocab, d_model=D_MODEL, cell=cell, cell_options=options)
        model = build_model(cfg, 0)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        call = torch.compile(model) if name != "eager" else model

        def step(call=call, opt=opt) -> None:
            opt.zero_grad(set_to_none=True)
            out = call(tokens)
            logits = out[0] if isinstance(out, tuple) else out
            torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()
            opt.step()

        steps[name] = step
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", default="all", help="comma-separated names, or all")
    parser.add_argument("--T", type=int, default=1024)
    parser.add_argument("--B", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--train-step",
        metavar="CELL[,conv][,decay]",
        help="time a factorial LM training step instead (paper shape: B=64, T=128)",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    retain_freed_memory()
    if args.train_step:
        _timed(train_steps(args.train_step, 64, 128), args.repeats, args.train_step)
        return
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
        _timed(steps, args.repeats, name)


if __name__ == "__main__":
    main()
