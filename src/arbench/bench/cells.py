"""Cell training throughput: each registered cell's chunked vs recurrent form.

Throughput is forward+backward tokens/s of each registered cell at the zoo's shapes (the
reference arm's width and recurrent state per layer; `Shape`), median over repeats after
warmup, the two forms timed in turns. Each recurrent cell is timed whole (scope "cell") and by
its recurrence kernel alone on the inputs the cell feeds it (scope "kernel"), and with its
kernel replaced by a free pass-through (the shared work, which caps the whole-cell ratio).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from arbench.cells import CELLS, build_cell
from arbench.cells.base import SequenceMixer
from arbench.models.budget import fit

# the cells this benchmark cannot time even where they build (it runs both forms on CPU), with
# why: derived from each cell's own `SequenceMixer.not_timed`, for `benchmarks/gpu_check.py`
NOT_TIMED = {name: klass.not_timed for name, klass in CELLS.items() if klass.not_timed}


@dataclass(frozen=True)
class Shape:
    """Where every cell is timed: the reference arm's vocabulary, width and state per layer
    (the defaults are the factorial's: `zoo.reference` in config.yaml)."""

    vocab: int = 130
    d_model: int = 32
    state_per_layer: int = 1024


def reference_shape(task: dict[str, Any], model: dict[str, Any]) -> Shape:
    """The shape of a reference arm (its task settings and model settings)."""
    from arbench.tasks import build_task

    cell = build_cell(model["cell"], model["d_model"], **model["cell_options"])
    return Shape(build_task(task).vocab_size, model["d_model"], cell.state_size())


def bench_cells() -> list[str]:
    """Registered cells to benchmark, in registration order; not those that cannot be built
    here (`SequenceMixer.unavailable_reason`) nor those it cannot time (`not_timed`)."""
    return [
        name
        for name, klass in CELLS.items()
        if klass.unavailable_reason() is None and klass.not_timed is None
    ]


def cell_options(name: str, shape: Shape = Shape()) -> dict[str, Any]:
    """Constructor options of `name` at the shape's width and recurrent state."""
    return fit(
        name, shape.vocab, state_per_layer=shape.state_per_layer, d_model=shape.d_model
    ).options


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
    """Whether the cell runs a recurrence kernel of its own (prepare -> kernel -> finish)
    through the shared forward (a cell overriding `forward` may not split that way)."""
    klass = type(cell)
    return klass.prepare is not SequenceMixer.prepare and klass.forward is SequenceMixer.forward


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
    shape: Shape = Shape(),
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
            cell = build_cell(name, shape.d_model, **cell_options(name, shape))
        forms = ["chunked"] if cell.single_form else ["chunked", "recurrent"]
        scopes = ["cell", "kernel"] if has_kernel(cell) else ["cell"]
        per_token: dict[str, float] = {}  # recurrent seconds per token of the last length
        for t in sorted(lengths):
            x = torch.randn(batch, t, shape.d_model, generator=gen)
            proj = torch.randn(batch, t, shape.d_model, generator=gen)
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


def run_throughput(
    lengths: list[int],
    batch: int,
    repeats: int = 3,
    threads: int = 1,
    cells: list[str] | None = None,
    max_recurrent_seconds: float = 120.0,
    seed: int = 0,
    shape: Shape = Shape(),
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The throughput half of the benchmark as one JSON-ready dict (`combine` adds the
    streaming rows): throughput, skipped, shared_work, settings and the machine."""
    from arbench.bench.machine import machine_info

    torch.set_num_threads(threads)
    rows, skipped, shared = throughput(
        cells if cells is not None else bench_cells(),
        lengths,
        batch,
        repeats=repeats,
        max_recurrent_seconds=max_recurrent_seconds,
        seed=seed,
        shape=shape,
        log=log,
    )
    return {
        "throughput": rows,
        "skipped": skipped,
        "shared_work": shared,
        "settings": {
            "T": list(lengths),
            "B": batch,
            "repeats": repeats,
            "d_model": shape.d_model,
            "shape": asdict(shape),
            "cell_options": {c: cell_options(c, shape) for c in {r["cell"] for r in rows}},
            "max_recurrent_seconds": max_recurrent_seconds,
        },
        "machine": machine_info(),
    }


def combine(cells: dict[str, Any], streams: list[dict[str, Any]]) -> dict[str, Any]:
    """cells.json: the throughput result (with the machine it ran on) and the streaming rows,
    in token order, each measured in a process of its own."""
    rows = sorted(streams, key=lambda r: r["tokens"])
    settings = dict(cells["settings"])
    if rows:
        settings.update(stream_model=rows[0]["model"], piece=rows[0]["piece"])
    return {**cells, "streaming": rows, "settings": settings}


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
