"""Pilot one key-value benchmark arm: train one seed with the plan's own settings at a scale
(optionally with other steps, batch or rate) through the run layer, and score it on the
study's held-out sweep (100 sequences per n, at most 16,384 tokens each).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/kvbench_pilot.py --arm hybrid_square \\
        --scale study --seed 1 [--steps 2400] [--batch 32] [--lr 6e-3] [--warmup 40] \\
        [--until 0.25 0.4 0.5] [--keep DIR]

Prints the final per-digit training accuracy (and about eight points of its trajectory), the
exact match at each n, the training seconds (wall and this process's CPU) and the sweep's
CPU seconds, one JSON line (docs/NOTEBOOK.md: the key-value benchmark's demo pilots, "The bold
row re-run").
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.models import families  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.run import train_run  # noqa: E402
from arbench.tasks import build_task  # noqa: E402
from arbench.tasks.kvbench import sweep  # noqa: E402
from arbench.train.run_files import load_trained  # noqa: E402

NS = (8, 16, 32, 64)


def pilot(args: argparse.Namespace, run_dir: Path) -> dict[str, object]:
    plan = Plan(arbench_config.load(scale=args.scale))
    task = plan.task_settings(args.experiment, args.arm)
    train = dict(plan.train_settings(args.experiment, args.arm))
    for key in ("steps", "batch", "lr", "warmup"):
        if getattr(args, key) is not None:
            train[key] = getattr(args, key)
    if args.until is not None:  # the load rungs' ends, as fractions of the steps
        train["load"] = {**train["load"], "until": args.until}
    start, cpu_start = time.perf_counter(), time.process_time()
    train_run(task, plan.model(args.experiment, args.arm), train, args.seed, run_dir)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    final = json.loads((run_dir / "final.json").read_text())
    model = load_trained(run_dir, families.config_from_record(final["model"]))
    eval_start = time.process_time()
    scored = sweep(model, build_task(task).cfg, list(NS), 100, 1 << 13, 512, None, 16384)
    eval_cpu = time.process_time() - eval_start
    lines = [json.loads(ln) for ln in (run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = [ln for ln in lines if "acc" in ln]
    last = logged[-1]
    every = max(1, len(logged) // 8)  # the training accuracy at about eight points
    trajectory = {int(ln["step"]): round(float(ln["acc"]), 3) for ln in logged[every - 1 :: every]}
    return {
        "arm": args.arm,
        "seed": args.seed,
        "steps": train["steps"],
        "batch": train["batch"],
        "lr": train["lr"],
        "warmup": train["warmup"],
        "load": train.get("load"),
        "train_accuracy": round(float(last["acc"]), 3),
        **{f"n{n}": round(scored[f"n{n}"]["accuracy"], 3) for n in NS},
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu_ms_per_step": round(1000 * cpu / train["steps"], 1),
        "eval_cpu_seconds": round(eval_cpu, 1),
        "train_accuracy_by_step": trajectory,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", default="kvbench")
    parser.add_argument("--arm", default="hybrid_square")
    parser.add_argument("--scale", default="study")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--batch", type=int)
    parser.add_argument("--lr", type=float)
    parser.add_argument("--warmup", type=int)
    parser.add_argument("--until", type=float, nargs="+", help="load rung ends (fractions)")
    parser.add_argument("--keep", type=Path, help="train here (kept) instead of a temp folder")
    args = parser.parse_args()
    if args.keep is not None:
        print(json.dumps(pilot(args, args.keep)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(pilot(args, Path(tmp))))


if __name__ == "__main__":
    main()
