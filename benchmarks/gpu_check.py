"""Check a CUDA machine in one go: cell equivalence, training speed, streaming. One JSON out.

Three parts, each item run under a hard time budget (default 420 s from the start of the
process, so the whole check ends within 8 minutes even with CUDA start-up); an item that would
not fit is skipped, saying so, and an item still running when the budget ends is stopped and
recorded as such, so the JSON is always written:

1. equivalence: every registered cell's chunked form against its recurrent form on CUDA in
   fp32 (TF32 off), from the state a random prefix leaves: outputs, final state, and the
   gradients of input, initial state and every parameter. Each cell reports the max abs and
   relative error of chunked vs recurrent, forward and gradient, and the fp32 rounding of the
   recurrent form itself (against an fp64 run); it passes when every tensor is within the
   tolerance `TOLERANCE` and `SLACK` set (their comment says why).
2. training: steps/s of the factorial experiment's paper-scale training (config.yaml resolved
   at scale=paper by `arbench.config.resolve`: task, model, batch, optimiser) for the first
   arm of each cell family, through the real loop (`arbench.train.loop.train`); the first
   steps (compilation, allocator, cuBLAS heuristics) are excluded from the timing.
3. streaming: 10^7 tokens through the benchmark's stream model (`bench.stream`, `bench.piece`)
   with `arbench.evaluate.streaming.stream_tokens`: tokens/s and `torch.cuda.max_memory_allocated`.

Without CUDA every part is skipped with the reason. `--cpu-smoke` runs each part tiny on the
CPU instead (what `tests/bench/test_gpu_check.py` runs), so every code path is tested without a
GPU. The exit status is 1 when a cell fails or a part errs, else 0 (skips are not failures).

    make gpu-check                                    # CUDA machine; writes results/gpu_check.json
    .venv/bin/python benchmarks/gpu_check.py --out gpu.json
    .venv/bin/python benchmarks/gpu_check.py --cpu-smoke --out smoke.json
"""

from __future__ import annotations

import time

T_START = time.monotonic()  # the budget counts from here, imports included

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arconfig  # noqa: E402
from arbench import experiment  # noqa: E402
from arbench.bench.cells import NOT_TIMED, Shape, cell_options  # noqa: E402
from arbench.bench.machine import machine_info  # noqa: E402
from arbench.bench.streaming import peak_rss_mb  # noqa: E402
from arbench.cells import CELLS, SequenceMixer, build_cell  # noqa: E402
from arbench.evaluate.streaming import stream_tokens  # noqa: E402
from arbench.io import atomic_write_json  # noqa: E402
from arbench.models import ModelConfig, build_model  # noqa: E402
from arbench.tasks import build_task  # noqa: E402
from arbench.train.loop import train  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402

SCHEMA = "arbench.gpu_check/1"
BUDGET_S = 420.0  # 7 min from process start: under 8 min with CUDA start-up and the write
# where each part must end, as a share of the budget, so a slow part cannot starve the next
PART_ENDS = {"equivalence": 0.4, "training": 0.6, "streaming": 1.0}
# A tensor passes when max |chunked - recurrent| <= TOLERANCE * max |exact| + SLACK * max
# |recurrent - exact|, "exact" the recurrent form run in fp64 on the same weights and inputs.
# fp32 rounds at 6e-8 relative; both forms sum the same terms in different orders (per step
# vs per chunk, plus the delta rule's triangular solve), which at these shapes leaves them
# 3e-7 to 2e-6 apart relative to the tensor's largest entry (measured on CPU over the zoo,
# forward and every gradient). Gradients of one-per-head parameters (mamba2's dt_bias,
# A_log, D) sum B * T terms of both signs and lose digits to cancellation: there the forms
# differ by up to 4e-5, the chunked form's log-decay cumsums rounding ~10x more than the
# recurrent form does. TOLERANCE = 1e-4 is the fp32 tolerance the cell tests use; SLACK lets
# a tensor whose fp32 rounding (measured in the same run, on this device) is itself large
# differ by 10x that rounding. Worst case at these shapes on CPU: 0.24 of what is allowed
# (mamba2's dt_bias), under 0.02 for every other tensor; a chunked form wrong by one part in
# 10^3 of a tensor's scale anywhere (one chunk, one gate, one boundary) fails.
TOLERANCE = 1e-4
SLACK = 10.0
STREAM_TOKENS = 10**7
NO_CUDA = "CUDA is not available here (torch.cuda.is_available() is False)"


@dataclass(frozen=True)
class Sizes:
    """How big each part runs: CUDA (the real check) or the CPU smoke run."""

    batch: int  # equivalence input: batch and length (not a multiple of any chunk size)
    length: int
    warmup_steps: int  # training: untimed steps, then timed steps (a multiple of warmup)
    timed_steps: int
    train_batch: int | None  # None: the paper's batch
    stream_tokens: int
    stream_piece: int | None  # None: bench.piece


CUDA_SIZES = Sizes(4, 300, 10, 50, None, STREAM_TOKENS, None)
SMOKE_SIZES = Sizes(2, 45, 1, 2, 2, 4096, 1024)


# ------------------------------------------------------------------------------------ budget
class OutOfTime(Exception):
    """Raised by the budget's alarm inside an item that ran past the end of the budget."""


class Budget:
    """Seconds left until the hard end, and a guard that stops an item at that end."""

    def __init__(self, seconds: float, start: float = T_START, name: str = "time") -> None:
        self.seconds, self.start, self.name = seconds, start, name

    def part(self, name: str, share: float) -> Budget:
        """The budget of one part: the same start, ending at `share` of this one."""
        return Budget(self.seconds * share, self.start, f"{name}")

    def used(self) -> float:
        """Seconds since the process started."""
        return time.monotonic() - self.start

    def left(self) -> float:
        """Seconds until the hard end (negative once past it)."""
        return self.seconds - self.used()

    def reason(self) -> str:
        """Why an item did not run: the budget's state in one line."""
        return f"{self.name} budget: {self.used():.1f} of {self.seconds:.1f} s used"

    @contextlib.contextmanager
    def hard_stop(self) -> Iterator[None]:
        """Raise `OutOfTime` in the guarded block when the budget ends (SIGALRM, main thread)."""
        usable = hasattr(signal, "setitimer") and _main_thread()
        if not usable:
            yield
            return

        def ring(signum: int, frame: Any) -> None:
            raise OutOfTime(self.reason())

        previous = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, max(self.left(), 1e-3))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def run_item(budget: Budget, need_s: float, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`work()` under the hard stop, or skipped when under `need_s` seconds are left; an
    exception becomes status "error" with its one-line message (the other items still run)."""
    if budget.left() < need_s:
        reason = f"{budget.reason()}; needs ~{need_s:.0f} s"
        return {"status": "skipped", "reason": reason, "out_of_time": True}
    t0 = time.perf_counter()
    try:
        with budget.hard_stop():
            out = work()
    except OutOfTime as stop:
        reason = f"stopped at the end of the budget ({stop})"
        out = {"status": "skipped", "reason": reason, "out_of_time": True}
    except Exception as err:  # noqa: BLE001  (recorded, the check goes on)
        out = {"status": "error", "error": f"{type(err).__name__}: {err}".splitlines()[0]}
    out.setdefault("status", "ok")
    out["seconds"] = time.perf_counter() - t0
    return out


def _gist(row: dict[str, Any], key: str) -> Any:
    """What a progress line shows of an item: its `key`, else why it was skipped or erred."""
    return row.get(key, row.get("reason", row.get("error")))


# ------------------------------------------------------------------------------- equivalence
CellFactory = Callable[[], SequenceMixer]


def zoo() -> dict[str, CellFactory | str]:
    """Every registered cell: a seeded factory at the zoo's shape (the reference arm's width
    and state, `arbench.bench.cells.Shape`), or why it cannot be checked here (it cannot be
    built, or has no recurrent form: `arbench.bench.cells.NOT_TIMED`; or it runs one form
    over the whole sequence at once, non-causal and single-form, so no second form exists to
    compare with)."""
    out: dict[str, CellFactory | str] = {}
    for name, klass in CELLS.items():
        reason = klass.unavailable_reason() or NOT_TIMED.get(name)
        if not reason and klass.single_form and not klass.causal:
            reason = "non-causal with one form (full attention): no second form to compare"
        out[name] = reason if reason else _factory(name)
    return out


def _factory(name: str) -> CellFactory:
    # the shape is chosen first: choosing it builds candidate models, and their draws must not
    # decide the checked cell's weights, which are seed 0's alone
    options = cell_options(name)

    def make() -> SequenceMixer:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            return build_cell(name, Shape().d_model, **options)

    return make


def _tensors(tree: Any) -> list[torch.Tensor]:
    """The floating-point tensors of a state (a tensor, or dicts/tuples of them, or None)."""
    if torch.is_tensor(tree):
        return [tree] if tree.is_floating_point() else []
    if isinstance(tree, dict):
        return [t for key in sorted(tree) for t in _tensors(tree[key])]
    if isinstance(tree, list | tuple):
        return [t for item in tree for t in _tensors(item)]
    return []


def _map(tree: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """A copy of a state (a tensor, dicts/tuples of them, None) with `fn` applied to each of
    its floating-point tensors."""
    if torch.is_tensor(tree):
        return fn(tree) if tree.is_floating_point() else tree
    if isinstance(tree, dict):
        return {key: _map(val, fn) for key, val in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_map(item, fn) for item in tree)
    return tree


def _draw(shape: tuple[int, ...], seed: int, device: torch.device) -> torch.Tensor:
    """Standard normal fp32 draws from their own CPU generator, moved to `device` (the same
    numbers on every machine)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(device)


def _forms_run(cell: SequenceMixer, x: torch.Tensor, state: Any, form: str) -> dict[str, Any]:
    """Outputs, final state and gradients (input, initial state, parameters) of one form, on
    the loss sum(y * wy) + sum(state * ws) with fixed random weights."""
    xl = x.detach().clone().requires_grad_(True)
    st = _map(state, lambda t: t.detach().clone().requires_grad_(True))
    y, new = cell(xl, st, form=form)
    finals = _tensors(new)
    loss = (y * _draw(tuple(y.shape), 11, y.device).to(y)).sum()
    for i, s in enumerate(finals):
        loss = loss + (s * _draw(tuple(s.shape), 12 + i, s.device).to(s)).sum()
    params = dict(cell.named_parameters())
    wrt = {"x": xl, **{f"state{i}": t for i, t in enumerate(_tensors(st))}, **params}
    wrt = {k: v for k, v in wrt.items() if v.requires_grad}
    grads = torch.autograd.grad(loss, list(wrt.values()), allow_unused=True)
    out = {"y": y.detach(), **{f"final{i}": s.detach() for i, s in enumerate(finals)}}
    forward = set(out)
    for key, val, g in zip(wrt, wrt.values(), grads, strict=True):
        out[f"d_{key}"] = torch.zeros_like(val) if g is None else g
    return {"tensors": out, "forward": forward}


def forms_agree(make: CellFactory, device: torch.device, sizes: Sizes) -> dict[str, Any]:
    """One cell's chunked vs recurrent comparison on `device` in fp32, against an fp64
    recurrent run of the same weights and inputs: per part (forward: outputs and final state;
    gradient: input, initial state, parameters) the max abs and relative error of chunked vs
    recurrent and the fp32 recurrent form's own rounding error; pass/fail by `allowed`."""
    cell = make().to(device=device, dtype=torch.float32)
    width = Shape().d_model
    with torch.no_grad():  # a nonzero carried state: the one a random prefix leaves
        _, state = cell(_draw((sizes.batch, 7, width), 5, device), form="recurrent")
    x = _draw((sizes.batch, sizes.length, width), 6, device)
    ref = _forms_run(cell, x, state, "recurrent")
    got = _forms_run(cell, x, state, "chunked")
    exact = make().to(device=device, dtype=torch.float64)
    truth = _forms_run(exact, x.double(), _map(state, lambda t: t.double()), "recurrent")
    if not got["tensors"].keys() == ref["tensors"].keys() == truth["tensors"].keys():
        raise RuntimeError(
            f"forms differ in outputs: {sorted(got['tensors'])} vs {sorted(ref['tensors'])}"
        )
    errors: dict[str, dict[str, float]] = {}
    for key, want in truth["tensors"].items():
        r, c = ref["tensors"][key].double(), got["tensors"][key].double()
        diff, rounding = _max_abs(c - r), _max_abs(r - want)
        scale = _max_abs(want)
        errors[key] = {
            "abs": diff,
            "rel": diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf),
            "rounding": rounding / scale if scale > 0 else 0.0,
            "ratio": _ratio(diff, allowed(scale, rounding)),
        }
    part = {"forward": ref["forward"], "gradient": set(errors) - ref["forward"]}
    worst = max(errors, key=lambda k: errors[k]["ratio"])

    def peak(field: str) -> dict[str, float]:
        return {p: max((errors[k][field] for k in keys), default=0.0) for p, keys in part.items()}

    return {
        "status": "pass" if errors[worst]["ratio"] <= 1.0 else "fail",
        "max_abs_err": peak("abs"),
        "max_rel_err": peak("rel"),
        "fp32_rounding": peak("rounding"),
        "worst_tensor": worst,
        "worst_over_allowed": errors[worst]["ratio"],
        "tensors_compared": len(errors),
    }


def _max_abs(t: torch.Tensor) -> float:
    return t.abs().max().item() if t.numel() else 0.0


def _ratio(diff: float, limit: float) -> float:
    """diff / limit: 1 or less passes (a nonzero difference where none is allowed: inf)."""
    if diff == 0:
        return 0.0
    return diff / limit if limit > 0 else math.inf


def allowed(scale: float, rounding: float) -> float:
    """The largest chunked-vs-recurrent difference a tensor may show (see `TOLERANCE`)."""
    return TOLERANCE * scale + SLACK * rounding


@contextlib.contextmanager
def exact_fp32() -> Iterator[None]:
    """TF32 off for matmuls and cuDNN convolutions inside the block (fp32 means fp32 there);
    restored after, so training and streaming run with torch's defaults, as the pipeline does."""
    saved = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[2])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]


def equivalence(
    device: torch.device,
    sizes: Sizes,
    budget: Budget,
    cells: dict[str, CellFactory | str] | None = None,
    log: Callable[[str], None] = lambda s: None,
) -> dict[str, Any]:
    """Part 1: `forms_agree` for every cell of `cells` (default: the whole zoo); a string in
    place of a factory is the reason that cell is skipped."""
    rows: dict[str, Any] = {}
    for name, make in (zoo() if cells is None else cells).items():
        if isinstance(make, str):
            rows[name] = {"status": "skipped", "reason": make}
        else:
            with exact_fp32():
                rows[name] = run_item(budget, 5.0, lambda m=make: forms_agree(m, device, sizes))
        row = rows[name]
        log(f"equivalence {name}: {row['status']} {_gist(row, 'max_rel_err')}")
    statuses = {r["status"] for r in rows.values()}
    status = "failed" if statuses & {"fail", "error"} else "ok"
    return {
        "status": status,
        "device": str(device),
        "dtype": "float32",
        "tf32": False,
        "tolerance": TOLERANCE,
        "slack": SLACK,
        "criterion": "per tensor: max|chunked - recurrent| <= tolerance * max|exact|"
        " + slack * max|recurrent - exact|; exact: the recurrent form in fp64",
        "input": {"batch": sizes.batch, "length": sizes.length, "d_model": Shape().d_model},
        "cells": rows,
    }


# ---------------------------------------------------------------------------------- training
STEP_LINE = re.compile(r"^step (\d+)/")


def paper_config() -> dict[str, Any]:
    """config.yaml resolved at paper scale (`arbench.config.load`, which calls `resolve`)."""
    return arconfig.load(ROOT / "config.yaml", scale="paper")


def family_arms(exp: dict[str, Any]) -> dict[str, str]:
    """The first arm (in config order) of each cell the experiment trains: cell -> arm."""
    out: dict[str, str] = {}
    for arm, spec in exp["arms"].items():
        out.setdefault(spec["cell"], arm)
    return out


def train_speed(
    exp: dict[str, Any], arm: str, device: torch.device, sizes: Sizes
) -> dict[str, Any]:
    """Steps/s of one arm's training through the real loop, the first `warmup_steps` untimed.

    The loop reports every `log_every` steps right after reading the loss (a device sync), so
    with log_every = warmup_steps the reports at steps warmup and warmup + timed bracket
    exactly the timed steps, synced as often as a real run's logging syncs.
    """
    task, model = experiment.run_of(exp, arm).task, experiment.run_of(exp, arm).model
    training = experiment.run_of(exp, arm).train
    total = sizes.warmup_steps + sizes.timed_steps
    overrides = {
        "steps": total,
        "log_every": sizes.warmup_steps,
        "checkpoint_every": total,
        "device": device.type,
        **({"batch": sizes.train_batch} if sizes.train_batch else {}),
    }
    adapter = build_task(task)
    model_cfg = ModelConfig(vocab_size=adapter.vocab_size, **model)
    marks: dict[int, float] = {}

    def progress(line: str) -> None:
        if m := STEP_LINE.match(line):
            marks[int(m.group(1))] = time.perf_counter()

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with tempfile.TemporaryDirectory() as run_dir:
        out = train(
            adapter,
            model_cfg,
            TrainConfig.from_dict({**training, **overrides}),
            0,
            run_dir,
            progress=progress,
        )
    if sizes.warmup_steps not in marks or total not in marks:
        raise RuntimeError(
            f"the loop reported steps {sorted(marks)}, not {sizes.warmup_steps} and {total}"
        )
    seconds = marks[total] - marks[sizes.warmup_steps]
    return {
        "arm": arm,
        "cell": model["cell"],
        "cell_options": model["cell_options"],
        "batch": overrides.get("batch", training["batch"]),
        "seq_len": int(adapter.train_batch(0, 0, 1).tokens.shape[1]),
        "warmup_steps": sizes.warmup_steps,
        "timed_steps": sizes.timed_steps,
        "timed_seconds": seconds,
        "steps_per_s": sizes.timed_steps / seconds,
        "paper_steps": training["steps"],
        "paper_run_minutes": training["steps"] / (sizes.timed_steps / seconds) / 60,
        "device": out["device"],
        "overrides": overrides,
        **_peak_memory(device),
    }


def training(
    device: torch.device, sizes: Sizes, budget: Budget, log: Callable[[str], None] = lambda s: None
) -> dict[str, Any]:
    """Part 2: `train_speed` for each cell family of the paper-scale factorial."""
    exp = paper_config()["experiments"]["factorial"]
    runs: dict[str, Any] = {}
    for cell, arm in family_arms(exp).items():
        runs[cell] = run_item(budget, 10.0, lambda arm=arm: train_speed(exp, arm, device, sizes))
        log(f"training {cell} ({arm}): {runs[cell]['status']} {_gist(runs[cell], 'steps_per_s')}")
    status = "failed" if any(r["status"] == "error" for r in runs.values()) else "ok"
    return {"status": status, "experiment": "factorial", "scale": "paper", "runs": runs}


# --------------------------------------------------------------------------------- streaming
def _peak_memory(device: torch.device) -> dict[str, Any]:
    if device.type == "cuda":
        return {"max_memory_allocated_mib": torch.cuda.max_memory_allocated(device) / 2**20}
    return {"max_memory_allocated_mib": None, "peak_rss_mib": peak_rss_mb()}


def stream_speed(device: torch.device, sizes: Sizes, budget: Budget) -> dict[str, Any]:
    """Stream `sizes.stream_tokens` random tokens through the benchmark's stream model on
    `device`. A probe of two pieces first predicts the time; if the full length would not fit
    in the budget left, a shorter stream that fits runs instead and says so."""
    cfg = paper_config()
    pointer, piece = cfg["bench"]["stream"], sizes.stream_piece or cfg["bench"]["piece"]
    exp = cfg["experiments"][pointer["experiment"]]
    model = experiment.run_of(exp, pointer["arm"]).model
    vocab = build_task(experiment.run_of(exp, pointer["arm"]).task).vocab_size
    net = build_model(ModelConfig(vocab_size=vocab, **model), 0).to(device)
    probe = stream_tokens(net, 2 * piece, vocab, np.random.default_rng(1), piece=piece)
    predicted = sizes.stream_tokens / probe["tokens_per_s"]
    tokens, note = sizes.stream_tokens, None
    room = 0.8 * budget.left()
    if predicted > room:
        tokens = max(piece, int(room * probe["tokens_per_s"]) // piece * piece)
        note = (
            f"{sizes.stream_tokens} tokens predicted at {predicted:.0f} s; {tokens} fit the budget"
        )
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
    out = stream_tokens(net, tokens, vocab, np.random.default_rng(0), piece=piece)
    row = {
        "experiment": pointer["experiment"],
        "arm": pointer["arm"],
        "model": {"vocab_size": vocab, **model},
        "piece": piece,
        "tokens_requested": sizes.stream_tokens,
        "tokens": out["tokens"],
        "seconds": out["seconds"],
        "tokens_per_s": out["tokens_per_s"],
        "predicted_seconds": predicted,
        **_peak_memory(device),
    }
    return {**row, "note": note} if note else row


def streaming(device: torch.device, sizes: Sizes, budget: Budget) -> dict[str, Any]:
    """Part 3: one `stream_speed` item."""
    return run_item(budget, 10.0, lambda: stream_speed(device, sizes, budget))


# -------------------------------------------------------------------------------------- main
def device_info() -> dict[str, Any]:
    """What the numbers were measured with: device, torch, CUDA and cuDNN versions."""
    info: dict[str, Any] = {
        "cuda_available": torch.cuda.is_available(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    if info["cuda_available"]:
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gib=props.total_memory / 2**30,
            devices=torch.cuda.device_count(),
        )
    else:
        info["name"] = machine_info()["cpu"]
    return info


def skipped(reason: str) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason}


def check(
    cpu_smoke: bool,
    budget_s: float = BUDGET_S,
    log: Callable[[str], None] = lambda s: None,
    start: float = T_START,
) -> dict[str, Any]:
    """The whole check as one JSON-ready dict; `cpu_smoke` runs every part tiny on the CPU.
    The budget runs from `start` (default: when this module was imported)."""
    budget = Budget(budget_s, start)
    result: dict[str, Any] = {
        "schema": SCHEMA,
        "mode": "cpu-smoke" if cpu_smoke else "cuda",
        "device": device_info(),
        "machine": machine_info(),
        "budget_s": budget_s,
        "part_ends_s": {name: budget_s * share for name, share in PART_ENDS.items()},
    }
    if cpu_smoke:
        device, sizes = torch.device("cpu"), SMOKE_SIZES
    elif torch.cuda.is_available():
        device, sizes = torch.device("cuda"), CUDA_SIZES
        t0 = time.perf_counter()
        torch.cuda.init()
        torch.zeros(1, device=device).sum().item()  # the context, outside every timed item
        result["cuda_init_s"] = time.perf_counter() - t0
    else:
        for part in ("equivalence", "training", "streaming"):
            result[part] = skipped(f"{NO_CUDA}; --cpu-smoke runs each part tiny on the CPU")
        return _finish(result, budget)
    parts = {name: budget.part(name, share) for name, share in PART_ENDS.items()}
    result["equivalence"] = equivalence(device, sizes, parts["equivalence"], log=log)
    result["training"] = training(device, sizes, parts["training"], log=log)
    result["streaming"] = streaming(device, sizes, parts["streaming"])
    log(f"streaming: {result['streaming']['status']} {_gist(result['streaming'], 'tokens_per_s')}")
    return _finish(result, budget)


def _finish(result: dict[str, Any], budget: Budget) -> dict[str, Any]:
    parts = [result[p]["status"] for p in ("equivalence", "training", "streaming")]
    result["elapsed_s"] = budget.used()
    # every item the budget skipped or stopped, as "part" or "part/item"
    result["out_of_time"] = [
        part + (f"/{item}" if item else "")
        for part in ("equivalence", "training", "streaming")
        for item, row in _items(result[part])
        if row.get("out_of_time")
    ]
    result["passed"] = not any(s in ("failed", "error") for s in parts)
    return result


def _items(part: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A part's items (cells, runs) as (name, row), or the part itself as ("", part)."""
    for key in ("cells", "runs"):
        if key in part:
            return list(part[key].items())
    return [("", part)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--cpu-smoke", action="store_true", help="run every part tiny on the CPU")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=BUDGET_S,
        help=f"hard time budget (default {BUDGET_S:.0f})",
    )
    args = parser.parse_args(argv)
    if not 0 < args.budget_s <= 470:
        parser.error(
            f"--budget-s {args.budget_s}: must be in (0, 470] so the check ends within 8 minutes"
        )
    result = check(
        args.cpu_smoke, args.budget_s, log=lambda s: print(s, file=sys.stderr, flush=True)
    )
    text = json.dumps(result, indent=1, sort_keys=False)
    if args.out:
        atomic_write_json(args.out, result)
    print(text)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
