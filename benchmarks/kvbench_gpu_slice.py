"""One paper-scale slice of the key-value benchmark's long-context run on CUDA, in one call.

The model, task and sweep lengths come from config.yaml's ``kvbench_long`` experiment at
paper scale (d_model 256, 4 x 64 heads, 16 attention layers, 7-digit mutant keys), so the
slice measures what the pipeline would run. Three parts, all under one time budget (default
540 s from the start of the process, so the call ends within 10 minutes); what would not
fit is skipped, saying so, and the JSON is always written:

1. kernels: on the device, the attention dispatcher with gradients (PyTorch's fused kernel
   for plain global layers, the banded form for windows, the flash-style tiled kernel for
   squared scores) against the plain reference, in fp32 with TF32 off: max abs error of
   outputs and of the q, k, v gradients, pass/fail;
2. training: a few optimiser steps at each rung of the run's load schedule, the batch the
   run's token budget gives (`arbench.train.settings.batch_size`), through the loop's loss,
   optimizer, clipping and the model's training tile: steps/s, tokens/s and peak memory per
   rung beside `arbench.models.kvbench_memory.train_step_bytes`;
3. sweep: the long-context evaluator (`arbench.tasks.kvbench.sweep`: one mutant and one
   plain sequence per length, ascending, layer by layer in the run's ``chunk``) at the run's
   lengths up to 10^7 tokens, each next length started only when the quadratic
   extrapolation of the last one fits the time left: tokens/s, seconds and peak memory per
   length beside `eval_bytes`, and the memory growth (linear in the length, never T^2).

The model is randomly initialised (the slice measures cost, not accuracy), unless
``--model`` names a trained run's model.pt of the same shape.

    make kv-gpu-check            # on a CUDA machine; writes results/kvbench_gpu_slice.json
    .venv/bin/python benchmarks/kvbench_gpu_slice.py --out slice.json [--budget 540]
    .venv/bin/python benchmarks/kvbench_gpu_slice.py --cpu-smoke --out smoke.json
"""

from __future__ import annotations

import time

T_START = time.monotonic()  # the budget counts from here, imports included

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arconfig  # noqa: E402
from arbench.experiment import run_of  # noqa: E402
from arbench.kernels.tiled_attention import attention, attention_plain  # noqa: E402
from arbench.models import families  # noqa: E402
from arbench.models.kvbench import TRAIN_TILE  # noqa: E402
from arbench.models.kvbench_memory import eval_bytes, train_step_bytes  # noqa: E402
from arbench.tasks.base import Signal, config_of  # noqa: E402
from arbench.tasks.kvbench import KVBenchTask, KVConfig, peak_memory_mib, sweep  # noqa: E402
from arbench.train.settings import TrainConfig, batch_size  # noqa: E402
from arbench.train.step import make_optimizer, train_step  # noqa: E402

EXPERIMENT = "kvbench_long"
TOLERANCE = 1e-4  # fp32 attention over <= 2,048 keys: rounding is ~1e-6


def left(budget: float) -> float:
    return budget - (time.monotonic() - T_START)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def kernels(device: torch.device, smoke: bool) -> dict[str, Any]:
    """The dispatcher's paths (with gradients, as training runs them) against the plain
    reference on ``device``, fp32: outputs and the gradients of q, k and v."""
    g = torch.Generator(device="cpu").manual_seed(0)
    T = 96 if smoke else 2048
    tile = 32 if smoke else 512
    out = {}
    for window, square in ((None, False), (None, True), (10, False), (10, True)):
        q, k, v = (
            torch.randn(1, 4, T, 64, generator=g).to(device).requires_grad_() for _ in range(3)
        )
        weight = torch.randn(1, 4, T, 64, generator=g).to(device)
        ref = attention_plain(q, k, v, window=window, square=square)
        got = attention(q, k, v, window=window, square=square, tile=tile)
        g_ref = torch.autograd.grad((ref * weight).sum(), (q, k, v))
        err = float((got - ref).detach().abs().max())
        scale = max(float(a.abs().max()) for a in g_ref)
        grad_err = float("inf")  # a path without gradients fails the check
        if got.requires_grad:
            g_got = torch.autograd.grad((got * weight).sum(), (q, k, v), allow_unused=True)
            if all(a is not None for a in g_got):
                grad_err = max(
                    float((a - b).abs().max()) for a, b in zip(g_got, g_ref, strict=True)
                )
        name = f"window={window},square={square}"
        out[name] = {"max_abs_error": err, "max_grad_error_rel": grad_err / scale,
                     "ok": err <= TOLERANCE and grad_err <= TOLERANCE * scale}  # fmt: skip
    return {"ok": all(r["ok"] for r in out.values()), "cases": out}


def _settings(smoke: bool) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], dict]:
    cfg = arconfig.load(scale="paper")
    exp = cfg["experiments"][EXPERIMENT]
    arm = next(iter(exp["arms"]))
    row = run_of(exp, arm)
    model, task, train = row.model, row.task, row.train
    ev = dict(exp["eval"])
    if smoke:
        model.update(d_model=16, layers=2, heads=2, kv_heads=2, head_dim=8, ffn_hidden=32)
        train["load"] = {**train["load"], "values": train["load"]["values"][:3]}
        ev["lengths"] = [256, 1024]
        ev["tile"] = 256
        ev["chunk"] = 512  # the 1,024-token length runs layer by layer
        train["tokens_per_step"] = 512
    return model, task, train, ev


def training(model: torch.nn.Module, task: KVBenchTask, train: dict, device: torch.device,
             budget: float, steps: int) -> dict[str, Any]:  # fmt: skip
    """A few steps at each rung of the load schedule, as the loop runs them: the batch the
    token budget gives, the loop's loss, optimizer and clipping, the model's training tile;
    peak memory beside the memory model's."""
    cfg = TrainConfig.from_dict({k: v for k, v in train.items() if k != "load"})
    opt = make_optimizer(model, cfg)
    model.train()
    rows, skipped = [], []
    for load in train["load"]["values"]:
        length = task.sequence_length(Signal(load=load))
        batch = batch_size(task, cfg, Signal(load=load))
        if left(budget) < 60:
            skipped.append({"load": load, "why": "time budget"})
            continue
        reset_peak(device)
        times = []
        for step in range(steps + 1):  # the first step (allocator, heuristics) is not timed
            drawn = task.train_batch(0, step, batch, Signal(load=load))
            sync(device)
            t0 = time.perf_counter()
            train_step(model, opt, drawn, [], step, device, (), cfg, seed=0)  # the loop's own step
            sync(device)
            if step:
                times.append(time.perf_counter() - t0)
        per = sum(times) / len(times)
        predicted = train_step_bytes(model.cfg, batch, length, TRAIN_TILE) / 2**20
        rows.append({
            "load": load, "length": length, "batch": batch, "seconds_per_step": per,
            "tokens_per_s": batch * length / per, "peak_mib": peak_memory_mib(device),
            "predicted_mib": predicted,
        })  # fmt: skip
        print(json.dumps({"train": rows[-1]}), flush=True)
    return {"rungs": rows, "skipped": skipped}


def sweeping(model: torch.nn.Module, task_cfg: KVConfig, ev: dict, device: torch.device,
             budget: float) -> dict[str, Any]:  # fmt: skip
    """The evaluator at each length, ascending, while the next one is predicted to fit."""
    task = KVBenchTask(task_cfg)
    rows, skipped, last = [], [], None
    for length in sorted(ev["lengths"]):
        n = task.n_for_length(length)
        if last is not None:  # quadratic in the length (global attention), generous
            predicted = last["seconds"] * (length / last["length"]) ** 2 * 1.2
            if predicted > left(budget) - 20:
                skipped.append({"tokens": length, "why": f"predicted {predicted:.0f}s > time left"})
                continue
        reset_peak(device)
        tile, chunk = ev.get("tile", 4096), ev.get("chunk")
        out = sweep(model, task_cfg, [n], 1, batch_tokens=1, tile=tile, chunk=chunk)
        T = 2 * n * task_cfg.entry_len
        predicted = eval_bytes(model.cfg, T, tile=tile, dtype_bytes=4, chunk=chunk)
        row = {**next(iter(out.values())), "n": n, "predicted_mib": predicted / 2**20}
        rows.append(row)
        last = row
        print(json.dumps({"sweep": row}), flush=True)
    growth = None
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        growth = {"length_ratio": b["length"] / a["length"],
                  "memory_ratio": b["peak_mib"] / a["peak_mib"]}  # fmt: skip
    return {"lengths": rows, "skipped": skipped, "memory_growth": growth}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/kvbench_gpu_slice.json")
    parser.add_argument("--budget", type=float, default=540.0)
    parser.add_argument("--train-steps", type=int, default=5)
    parser.add_argument("--model", help="a trained run's model.pt of the same shape")
    parser.add_argument("--cpu-smoke", action="store_true")
    args = parser.parse_args()
    smoke = args.cpu_smoke
    result: dict[str, Any] = {"experiment": EXPERIMENT, "budget_s": args.budget}
    if not smoke and not torch.cuda.is_available():
        result["skipped"] = "no CUDA device visible (use --cpu-smoke for the CPU code paths)"
        status = 0
    else:
        device = torch.device("cpu" if smoke else "cuda")
        if device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            result["device"] = torch.cuda.get_device_name(device)
        status = 0
        model_s, task_s, train_s, ev = _settings(smoke)
        task_cfg = config_of(KVConfig, task_s)
        cfg = families.model_config(model_s, vocab_size=task_cfg.vocab_size)
        model = families.build(cfg, 0).to(device)
        if args.model:
            blob = torch.load(args.model, map_location=device, weights_only=True)
            model.load_state_dict(blob["weights"])
        result["model"] = {**model_s, "parameters": model.n_parameters()}
        parts = (
            ("kernels", lambda: kernels(device, smoke)),
            ("training", lambda: training(model, KVBenchTask(task_cfg), train_s, device,
                                          args.budget, args.train_steps)),
            ("sweep", lambda: sweeping(model.eval(), task_cfg, ev, device, args.budget)),
        )  # fmt: skip
        for name, part in parts:
            try:
                result[name] = part()
            except Exception as e:  # noqa: BLE001 (recorded, the JSON is always written)
                result[name] = {"error": f"{type(e).__name__}: {e}",
                                "traceback": traceback.format_exc()[-2000:]}  # fmt: skip
                status = 1
        if not result["kernels"].get("ok", False):
            status = 1
    result["wall_s"] = time.monotonic() - T_START
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("training", "sweep")}))
    return status


if __name__ == "__main__":
    sys.exit(main())
