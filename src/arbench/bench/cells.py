"""Speed benchmarks: cell training throughput (chunked vs recurrent) and long-stream evaluation.

Throughput is forward+backward tokens/s of each registered cell at the factorial width
(d_model 32, shaped to the factorial's 1,024-element state), median over repeats after warmup,
the two forms timed in turns. Each recurrent cell is timed whole (scope "cell") and by its
recurrence kernel alone on the inputs the cell feeds it (scope "kernel"). Streaming runs the
factorial's 2-layer model over 10^5..10^7 tokens, each count in a fresh subprocess so peak RSS
is per measurement.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import arbench
from arbench.cells import CELLS, build_cell
from arbench.cells.base import SequenceMixer
from arbench.cpu_memory import retain_freed_memory, retaining_freed_memory
from arbench.models.budget import fit
from arbench.train.loop import versions

D_MODEL = 32
STREAM_VOCAB = 130  # the factorial's MQAR vocabulary
STREAM_MODEL = {
    "d_model": D_MODEL,
    "layers": 2,
    "cell": "delta_rule",
    "cell_options": {"conv": True},
}
SINGLE_FORM = {"attention"}  # cells whose "recurrent" form is not a state recurrence
STATE_BUDGET = 1024  # per layer: the factorial's matched state


def bench_cells() -> list[str]:
    """Registered cells to benchmark, in registration order."""
    return list(CELLS)


def cell_options(name: str) -> dict[str, Any]:
    """Constructor options of `name` at the factorial width and its 1,024-element state."""
    return fit(name, STREAM_VOCAB, state_per_layer=STATE_BUDGET, d_model=D_MODEL).options


def cell_step(
    cell: torch.nn.Module, x: torch.Tensor, proj: torch.Tensor, form: str
) -> Callable[[], None]:
    """One forward+backward of the whole cell on the loss sum(y * proj).

    A dense random `proj` (shaped like y) gives a realistic, contiguous output gradient.
    """

    def step() -> None:
        cell.zero_grad(set_to_none=True)
        y, _ = cell(x.detach().requires_grad_(True), form=form)
        (y * proj).sum().backward()

    return step


def has_kernel(cell: SequenceMixer) -> bool:
    """Whether the cell runs a recurrence kernel of its own (prepare -> kernel -> finish)."""
    return type(cell).prepare is not SequenceMixer.prepare


def kernel_inputs(cell: SequenceMixer, x: torch.Tensor) -> tuple[Any, ...]:
    """The exact arguments (values, strides) the cell passes its kernel for input x."""
    with torch.no_grad():
        args, _ = cell.prepare(x, None)
    return args


def kernel_step(
    cell: SequenceMixer, args: tuple[Any, ...], form: str, seed: int = 0
) -> Callable[[], None]:
    """One forward+backward of the cell's kernel alone on `args` (from `kernel_inputs`).

    Gradients flow to every tensor argument, as they do inside the cell; the loss is
    sum(o * proj) with a dense random proj shaped like the kernel's output.
    """
    kernel = cell.kernel(form)
    leaves = [a.detach().requires_grad_(True) if torch.is_tensor(a) else a for a in args]
    # every kernel takes (q, k, v, ...) and returns outputs shaped like v
    proj = torch.randn(args[2].shape, generator=torch.Generator().manual_seed(seed))

    def step() -> None:
        for a in leaves:
            if torch.is_tensor(a):
                a.grad = None
        o, _ = kernel(*leaves)
        (o * proj).sum().backward()

    return step


class _PassThrough(torch.autograd.Function):
    """A stand-in kernel: outputs v and a zero state; its backward gives v the output gradient
    and every other tensor input zeros.

    Every kernel input thus receives the dense gradient a real kernel would write, so the whole
    shared backward (projections, convs, norms, gates) runs, while the stand-in itself costs
    only a copy and a few memsets.
    """

    @staticmethod
    def forward(ctx: Any, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        q, v = args[0], args[2]
        ctx.is_tensor = [torch.is_tensor(a) for a in args]
        ctx.save_for_backward(*(a for a in args if torch.is_tensor(a)))
        return v.clone(), v.new_zeros(*v.shape[:2], q.shape[-1], v.shape[-1])

    @staticmethod
    def backward(ctx: Any, d_o: torch.Tensor, d_s: torch.Tensor) -> tuple[Any, ...]:
        saved = iter(ctx.saved_tensors)
        grads: list[Any] = []
        for i, is_tensor in enumerate(ctx.is_tensor):
            a = next(saved) if is_tensor else None
            needed = a is not None and ctx.needs_input_grad[i]
            grads.append((d_o if i == 2 else torch.zeros_like(a)) if needed else None)
        return tuple(grads)


def pass_through(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A nearly free kernel with a kernel's signature and gradients (see `_PassThrough`)."""
    return _PassThrough.apply(*args)


def shared_step(cell: SequenceMixer, x: torch.Tensor, proj: torch.Tensor) -> Callable[[], None]:
    """`cell_step` with the recurrence replaced by `pass_through`: the work both forms share.

    Recurrent-cell time over this time is the best whole-cell speed-up any chunked kernel
    could reach (Amdahl), which tells a slow kernel from a cell dominated by its projections.
    """

    def step() -> None:
        cell.zero_grad(set_to_none=True)
        args, ctx = cell.prepare(x.detach().requires_grad_(True), None)
        y, _ = cell.finish(*pass_through(*args), ctx)
        (y * proj).sum().backward()

    return step


def time_interleaved(
    steps: dict[str, Callable[[], None]], warmup: int, repeats: int
) -> dict[str, list[float]]:
    """Seconds of each timed call per step, the steps taking turns (after `warmup` rounds).

    Alternating the forms spreads any slow spell of a shared machine over both, so their
    ratio is steadier than timing one form's repeats after the other's.
    """
    times: dict[str, list[float]] = {name: [] for name in steps}
    for i in range(warmup + repeats):
        for name, step in steps.items():
            t0 = time.perf_counter()
            step()
            if i >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def throughput(
    cells: list[str],
    lengths: list[int],
    batch: int,
    repeats: int = 3,
    warmup: int = 1,
    max_recurrent_seconds: float = 120.0,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Training tokens/s per (cell, scope, form, T); returns (measurements, skipped runs,
    shared work).

    Scope "cell" times the whole cell (projections, convs, norms and the recurrence); scope
    "kernel" times the recurrence alone on the inputs the cell feeds it, which isolates what
    the chunked form accelerates. The two forms are timed in turns; `tokens_per_s` comes from
    the median time. The recurrent form is skipped where its time, extrapolated linearly in T
    from the previous length, would exceed `max_recurrent_seconds` for warmup + repeats steps.
    Cells with a kernel also have their shared work (`shared_step`) timed in the same turns
    as the whole-cell forms; its rows carry `recurrent_over_shared`, the whole-cell cap.
    """
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    shared: list[dict[str, Any]] = []
    gen = torch.Generator().manual_seed(seed)
    for name in cells:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            cell = build_cell(name, D_MODEL, **cell_options(name))
        forms = ["chunked"] if name in SINGLE_FORM else ["chunked", "recurrent"]
        scopes = ["cell", "kernel"] if has_kernel(cell) else ["cell"]
        per_token: dict[str, float] = {}  # recurrent seconds per token of the last length
        for t in sorted(lengths):
            x = torch.randn(batch, t, D_MODEL, generator=gen)
            proj = torch.randn(batch, t, D_MODEL, generator=gen)
            args = kernel_inputs(cell, x) if "kernel" in scopes else ()
            for scope in scopes:
                key = {"cell": name, "scope": scope, "T": t, "B": batch}
                steps = {}
                for form in forms:
                    if form == "recurrent" and scope in per_token:
                        predicted = per_token[scope] * batch * t * (warmup + repeats)
                        if predicted > max_recurrent_seconds:
                            skipped.append({**key, "form": form, "predicted_seconds": predicted})
                            if log:
                                log(f"{name} {scope} {form} T={t}: skipped (~{predicted:.0f}s)")
                            continue
                    if scope == "cell":
                        steps[form] = cell_step(cell, x, proj, form)
                    else:
                        steps[form] = kernel_step(cell, args, form, seed)
                if scope == "cell" and "kernel" in scopes:
                    steps["shared"] = shared_step(cell, x, proj)
                timed = time_interleaved(steps, warmup, repeats)
                if "shared" in timed:
                    shared.append(_shared_row(key, timed.pop("shared"), timed.get("recurrent")))
                    if log:
                        log(f"{name} shared work T={t} B={batch}: {shared[-1]['seconds']:.4f} s")
                for form, times in timed.items():
                    rows.append({**key, "form": form, **_timing(times, batch * t)})
                    if form == "recurrent":
                        per_token[scope] = rows[-1]["seconds"] / (batch * t)
                    if log:
                        tps = rows[-1]["tokens_per_s"]
                        log(f"{name} {scope} {form} T={t} B={batch}: {tps:,.0f} tokens/s")
    return rows, skipped, shared


def _timing(times: list[float], tokens: int) -> dict[str, Any]:
    """The fields every timing row carries: median seconds, tokens/s from it, and all times."""
    median = statistics.median(times)
    return {"tokens_per_s": tokens / median, "seconds": median, "times": times}


def _shared_row(
    key: dict[str, Any], times: list[float], recurrent: list[float] | None
) -> dict[str, Any]:
    """A shared-work measurement; with the recurrent cell's times, the cap they imply."""
    row = {k: key[k] for k in ("cell", "T", "B")} | _timing(times, key["B"] * key["T"])
    if recurrent:
        row["recurrent_over_shared"] = statistics.median(recurrent) / row["seconds"]
    return row


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


def stream_once(n_tokens: int, seed: int = 0, piece: int = 8192, threads: int = 1) -> dict:
    """Stream `n_tokens` random tokens through the factorial's 2-layer model (in this process)."""
    from arbench.evaluate.streaming import stream_tokens
    from arbench.models import ModelConfig, build_model

    torch.set_num_threads(threads)
    model = build_model(ModelConfig(vocab_size=STREAM_VOCAB, **STREAM_MODEL), seed)
    rss_before = peak_rss_mb()
    out = stream_tokens(model, n_tokens, STREAM_VOCAB, np.random.default_rng(seed), piece=piece)
    return {
        "tokens": out["tokens"],
        "seconds": out["seconds"],
        "tokens_per_s": out["tokens_per_s"],
        "peak_rss_mb": peak_rss_mb(),
        "rss_before_stream_mb": rss_before,
        "piece": piece,
    }


def streaming(
    token_counts: list[int],
    seed: int = 0,
    piece: int = 8192,
    threads: int = 1,
    log: Callable[[str], None] | None = None,
) -> list[dict[str, Any]]:
    """`stream_once` per token count, each in a fresh interpreter so peak RSS is its own."""
    src = str(Path(arbench.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    rows = []
    for n in token_counts:
        args = [str(n), str(seed), str(piece), str(threads)]
        cmd = [sys.executable, "-m", "arbench.bench.cells", "stream", *args]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"streaming {n} tokens failed:\n{done.stderr[-4000:]}")
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if log:
            r = rows[-1]
            log(f"streamed {n} tokens: {r['seconds']:.1f}s, peak RSS {r['peak_rss_mb']:.0f} MiB")
    return rows


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


def run_bench(
    lengths: list[int],
    batch: int,
    stream_tokens: list[int],
    repeats: int = 3,
    threads: int = 1,
    cells: list[str] | None = None,
    max_recurrent_seconds: float = 120.0,
    piece: int = 8192,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The whole benchmark as one JSON-ready dict: throughput, streaming and machine."""
    torch.set_num_threads(threads)
    rows, skipped, shared = throughput(
        cells if cells is not None else bench_cells(),
        lengths,
        batch,
        repeats=repeats,
        max_recurrent_seconds=max_recurrent_seconds,
        seed=seed,
        log=log,
    )
    return {
        "throughput": rows,
        "skipped": skipped,
        "shared_work": shared,
        "streaming": streaming(stream_tokens, seed=seed, piece=piece, threads=threads, log=log),
        "machine": machine_info(),
        "settings": {
            "T": list(lengths),
            "B": batch,
            "repeats": repeats,
            "d_model": D_MODEL,
            "cell_options": {c: cell_options(c) for c in {r["cell"] for r in rows}},
            "stream_model": STREAM_MODEL,
            "piece": piece,
            "max_recurrent_seconds": max_recurrent_seconds,
        },
    }


def shared_caps(result: dict[str, Any]) -> dict[str, dict[int, float]]:
    """Recurrent cell / shared work per cell and T: the best whole-cell speed-up possible."""
    out: dict[str, dict[int, float]] = {}
    for r in result.get("shared_work", []):
        if "recurrent_over_shared" in r:
            out.setdefault(r["cell"], {})[r["T"]] = r["recurrent_over_shared"]
    return out


def ratios(result: dict[str, Any], scope: str = "cell") -> dict[str, dict[int, float]]:
    """chunked / recurrent tokens/s per cell and T (where both forms were measured)."""
    tps = {
        (r["cell"], r["form"], r["T"]): r["tokens_per_s"]
        for r in result["throughput"]
        if r.get("scope", "cell") == scope
    }
    out: dict[str, dict[int, float]] = {}
    for (cell, form, t), v in tps.items():
        if form == "chunked" and (cell, "recurrent", t) in tps:
            out.setdefault(cell, {})[t] = v / tps[(cell, "recurrent", t)]
    return out


if __name__ == "__main__" and len(sys.argv) == 6 and sys.argv[1] == "stream":
    n, s, p, th = (int(a) for a in sys.argv[2:])
    retain_freed_memory()  # as in the Snakemake jobs (arbench.glue.setup)
    print(json.dumps(stream_once(n, seed=s, piece=p, threads=th)))
