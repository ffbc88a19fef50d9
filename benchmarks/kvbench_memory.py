"""Measure the key-value benchmark's memory on the CPU against its memory model.

Each measurement runs in a fresh Python process (one thread): it warms up torch's kernels on
a tiny model, takes the process's peak resident set as the baseline, then runs the measured
work and reports the peak resident set above that baseline (``ru_maxrss``: every byte the
work touched at its peak, allocator slack included), beside
`arbench.models.kvbench_memory`'s prediction for the same shape:

* ``train``: one training step of the long-context run (`kvbench_long`'s hybrid_square
  layout, reduced width) at one rung of its load schedule: the batch its token budget gives
  at that length, the loop's own step (`arbench.train.step.train_step`: loss, backward,
  gradient clipping, the loop's AdamW), against `train_step_bytes`;
* ``eval``: one sequence through the pipeline's evaluator (`arbench.evaluate.recall.predict`
  with the sweep's ``tile`` and ``chunk``), against `eval_bytes`, with the bytes per token
  measured and the model's bytes per token at the paper's width and 10^7 tokens.

    .venv/bin/python benchmarks/kvbench_memory.py                  # the default set (~5 min)
    .venv/bin/python benchmarks/kvbench_memory.py --only train --seq-len 196608
    .venv/bin/python benchmarks/kvbench_memory.py --only eval --seq-len 100000

Prints one JSON object (and writes it with ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

# the reduced width the CPU measures at (the paper's: d_model 256, 16 layers, 4 x 64 heads)
REDUCED = {"d_model": 32, "layers": 2, "heads": 1, "kv_heads": 1, "head_dim": 16, "ffn_hidden": 128}
PAPER = {
    "d_model": 256,
    "layers": 16,
    "heads": 4,
    "kv_heads": 4,
    "head_dim": 64,
    "ffn_hidden": 1024,
}


def _unpooled_malloc() -> None:
    """Make glibc serve every block of 64 KiB or more by its own mmap, returned on free
    (a fixed M_MMAP_THRESHOLD; by default the threshold rises after the first large free and
    later tensors reuse a heap that never shrinks), so the peak resident set is the peak of
    live tensors rather than of the heap's high-water mark. A no-op off glibc."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(-3, 64 * 1024)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _rss() -> int:
    """The process's peak resident set so far, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _long_run() -> dict[str, Any]:
    """The kvbench_long experiment at paper scale (model, task, train, eval blocks)."""
    from arbench import config as arconfig
    from arbench.experiment import run_of

    exp = arconfig.load(scale="paper")["experiments"]["kvbench_long"]
    row = run_of(exp, next(iter(exp["arms"])))
    return {"model": row.model, "task": row.task, "train": row.train, "eval": dict(exp["eval"])}


def _model_cfg(model: dict[str, Any], width: dict[str, int]) -> Any:
    from arbench.models import families

    return families.model_config({**model, **width}, vocab_size=12)


def _warm_up() -> int:
    """Run a tiny step and a tiny chunked evaluation (loading every kernel's code), then
    return the baseline peak resident set."""
    import torch

    from arbench.models.dropout import drawing_from, row_generators
    from arbench.models.kvbench import KVModelConfig, KVTransformer

    tiny = KVModelConfig(variant="hybrid_square", d_model=8, layers=2, heads=1, kv_heads=1,
                         head_dim=8, ffn_hidden=8, dropout=0.1)  # fmt: skip
    model = KVTransformer(tiny)
    tok = torch.randint(0, 12, (1, 64))
    with drawing_from(model, row_generators(0, 0, range(1))):
        model(tok, tile=16).sum().backward()
    with torch.no_grad():
        model.eval().hidden(tok, tile=16, chunk=16)
    return _rss()


def measure_train(seq_len: int, width: dict[str, int]) -> dict[str, Any]:
    """One training step at ``seq_len`` tokens per sequence in this process (attention
    tiled at the training tile, `arbench.models.kvbench.TRAIN_TILE`)."""
    import torch

    from arbench.models import families
    from arbench.models.kvbench import TRAIN_TILE
    from arbench.models.kvbench_memory import step_flops, train_step_bytes
    from arbench.tasks.base import Signal, config_of
    from arbench.tasks.kvbench import KVBenchTask, KVConfig
    from arbench.train.settings import TrainConfig, batch_size
    from arbench.train.step import make_optimizer, train_step

    torch.set_num_threads(1)
    run = _long_run()
    task = KVBenchTask(config_of(KVConfig, run["task"]))
    load = seq_len // (2 * task.cfg.entry_len)
    train = TrainConfig.from_dict({k: v for k, v in run["train"].items() if k != "load"})
    batch = batch_size(task, train, Signal(load=load))
    cfg = _model_cfg(run["model"], width)
    base = _warm_up()
    model = families.build(cfg, 0)
    model.train()
    opt = make_optimizer(model, train)
    drawn = task.train_batch(0, 0, batch, Signal(load=load))
    t0 = time.perf_counter()
    train_step(model, opt, drawn, [], 0, torch.device("cpu"), (), train, seed=0)
    seconds = time.perf_counter() - t0
    measured = _rss() - base
    tile = TRAIN_TILE
    predicted = train_step_bytes(cfg, batch, drawn.tokens.shape[1], tile)
    return {
        "what": "train_step", "seq_len": int(drawn.tokens.shape[1]), "load": load, "batch": batch,
        "tokens_per_step": train.tokens_per_step, "tile": tile, "width": width,
        "measured_bytes": measured, "predicted_bytes": predicted,
        "error_pct": 100.0 * (predicted - measured) / measured, "seconds": seconds,
        "step_flops": step_flops(cfg, batch, int(drawn.tokens.shape[1])),
    }  # fmt: skip


def measure_eval(seq_len: int, width: dict[str, int], tile: int, chunk: int) -> dict[str, Any]:
    """One sweep sequence of about ``seq_len`` tokens through the evaluator in this process."""
    import torch

    from arbench.evaluate.recall import predict
    from arbench.models import families
    from arbench.models.kvbench_memory import eval_bytes
    from arbench.tasks.base import config_of
    from arbench.tasks.kvbench import KVBenchTask, KVConfig, sweep_set

    torch.set_num_threads(1)
    run = _long_run()
    task = KVBenchTask(config_of(KVConfig, run["task"]))
    n = task.n_for_length(seq_len)
    _, held = sweep_set(task.cfg, n, 1, "mutant")
    cfg = _model_cfg(run["model"], width)
    base = _warm_up()
    model = families.build(cfg, 0).eval()
    t0 = time.perf_counter()
    predict(model, held.tokens, held.targets, batch=1, tile=tile, chunk=chunk)
    seconds = time.perf_counter() - t0
    measured = _rss() - base
    T = int(held.drawn.tokens.shape[1])
    predicted = eval_bytes(cfg, T, tile=tile, dtype_bytes=4, chunk=chunk)
    paper = replace(cfg, **PAPER)
    at_1e7 = eval_bytes(paper, 10**7, tile=tile, dtype_bytes=4, chunk=chunk)
    return {
        "what": "eval", "seq_len": T, "tile": tile, "chunk": chunk, "width": width,
        "measured_bytes": measured, "predicted_bytes": predicted,
        "error_pct": 100.0 * (predicted - measured) / measured, "seconds": seconds,
        "measured_bytes_per_token": measured / T, "predicted_bytes_per_token": predicted / T,
        "paper_width_1e7": {"bytes": at_1e7, "bytes_per_token": at_1e7 / 1e7,
                            "gib": at_1e7 / 2**30, "model": asdict(paper)},
    }  # fmt: skip


def _child(args: list[str]) -> dict[str, Any]:
    """Run one measurement in a fresh process (its own peak resident set)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, __file__, "--one", *args], capture_output=True, text=True, env=env
    )
    if proc.returncode:
        return {"error": proc.stderr[-2000:], "args": args}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["train", "eval"], help="one kind of measurement")
    parser.add_argument("--seq-len", type=int, action="append", help="lengths (repeatable)")
    parser.add_argument("--tile", type=int, default=None, help="default: the config's eval tile")
    parser.add_argument("--chunk", type=int, default=None, help="default: the config's chunk")
    parser.add_argument("--width", default=json.dumps(REDUCED), help="model width (JSON)")
    parser.add_argument("--out")
    parser.add_argument("--one", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    width = json.loads(args.width)
    if args.one is not None:  # a child: one measurement, one JSON line
        _unpooled_malloc()
        kind, seq_len, tile, chunk = args.one[0], int(args.one[1]), int(args.one[2]), args.one[3]
        if kind == "train":
            row = measure_train(seq_len, width)
        else:
            row = measure_eval(seq_len, width, tile, int(chunk))
        print(json.dumps(row))
        return 0
    ev = _long_run()["eval"]
    tile = args.tile or int(ev.get("tile", 4096))
    chunk = args.chunk or int(ev.get("chunk") or 16384)
    plan = []
    if args.only in (None, "train"):
        plan += [("train", t) for t in args.seq_len or [12288, 49152, 196608]]
    if args.only in (None, "eval"):
        plan += [("eval", t) for t in args.seq_len or [100000]]
    rows = []
    for kind, seq_len in plan:
        rows.append(_child(
            [kind, str(seq_len), str(tile), str(chunk), "--width", json.dumps(width)]
        ))  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    result = {"host": os.uname().nodename, "threads": 1, "measurements": rows}
    text = json.dumps(result, indent=2)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
