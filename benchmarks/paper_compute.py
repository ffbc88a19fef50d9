"""The paper-scale compute estimate of docs/PROTOCOL.md, from measured per-step times.

Resolves the config at a scale (paper by default), takes every distinct training the DAG
plans (shared runs counted once, `arbench.plan.Plan`), times a few optimiser steps of each
distinct (task, model, batch) shape on this machine with one thread, and prints per
experiment the trainings, steps and estimated single-core hours, then the total:

    .venv/bin/python benchmarks/paper_compute.py [--scale paper] [--steps 5] [--out F.json]
        [--experiments frontier ...]

Evaluation (a few seconds per run) and the arms that cannot run here (named with their
reason) are not included.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench.config import load  # noqa: E402
from arbench.models import ModelConfig  # noqa: E402
from arbench.models.lm import build_model  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.tasks import build_task  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402
from arbench.train.step import make_optimizer, train_step  # noqa: E402


def seconds_per_step(
    task: dict[str, Any], model: dict[str, Any], train: dict, steps: int, data_dir: str
) -> float:
    """Median wall seconds of one training step (forward, backward, AdamW) after a warm-up."""
    adapter = build_task(task, data_dir)
    net = build_model(ModelConfig(vocab_size=adapter.vocab_size, **model), 0)
    cfg = TrainConfig.from_dict(train)
    opt = make_optimizer(net, cfg)
    drawn = adapter.train_batch(0, 0, train["batch"])
    excluded = adapter.never_predicted()
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        train_step(net, opt, drawn, [], i, torch.device("cpu"), excluded, cfg, seed=0)
        if i:
            times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="paper")
    parser.add_argument("--steps", type=int, default=5, help="timed steps per shape")
    parser.add_argument("--out", help="also write the estimate as JSON here")
    parser.add_argument("--experiments", nargs="*", help="only these experiments (default: all)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    plan = Plan(load(ROOT / "config.yaml", scale=args.scale))
    owners = plan.trainings()
    timed: dict[str, float] = {}
    untimed: dict[str, str] = {}
    per_exp: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for experiment, run_arm, _ in owners:
        if args.experiments and experiment not in args.experiments:
            continue
        task = plan.task_settings(experiment, run_arm)
        model = plan.model(experiment, run_arm)
        train = plan.train_settings(experiment, run_arm)
        shape = json.dumps([task, model, train["batch"]], sort_keys=True)
        if shape not in timed:
            try:
                data = plan.data_dir(experiment, run_arm)
                timed[shape] = seconds_per_step(task, model, train, args.steps, data)
            except (OSError, ValueError) as err:  # a release not written at this scale yet
                untimed[f"{experiment}/{run_arm}"] = f"{type(err).__name__}: {err}"
                continue
            print(f"{experiment}/{run_arm}: {1000 * timed[shape]:.1f} ms/step", flush=True)
        if shape not in timed:
            untimed.setdefault(f"{experiment}/{run_arm}", "its shape could not be timed")
            continue
        row = per_exp[experiment]
        row["trainings"] += 1
        row["steps"] += train["steps"]
        row["hours"] += train["steps"] * timed[shape] / 3600
    skipped = {
        f"{name}/{arm}": why
        for name, exp in plan.experiments.items()
        for arm, why in exp.get("skipped", {}).get("arms", {}).items()
    }
    total = {k: sum(r[k] for r in per_exp.values()) for k in ("trainings", "steps", "hours")}
    print(f"\n{'experiment':<20}{'trainings':>10}{'steps':>12}{'core-hours':>12}")
    for name, row in per_exp.items():
        print(f"{name:<20}{int(row['trainings']):>10}{int(row['steps']):>12,}{row['hours']:>12.1f}")
    print(
        f"{'total':<20}{int(total['trainings']):>10}{int(total['steps']):>12,}{total['hours']:>12.1f}"
    )
    for arm, why in {**skipped, **untimed}.items():
        print(f"not timed: {arm} ({why})")
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "scale": args.scale,
                    "experiments": per_exp,
                    "total": total,
                    "skipped": skipped,
                    "torch": torch.__version__,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
