"""The lattice crossover pilots of docs/NOTEBOOK.md ("Lattice memory", the crossover pilots):
one seed of one arm of `lattice_capacity` (or `lattice_forgetting`) at the `study` scale's
settings, with the stored pairs P (and the overwrite fraction) changed, warm-started from the
study's own `lattice_base` run of that arm and seed exactly as the pipeline's training job is,
and scored on the study's held-out set size. Prints one JSON line per pilot: settings, seed,
accuracy (all queries, and updated and untouched keys where the task rewrites some) and the
training's wall seconds.

    PYTHONPATH=src .venv/bin/python benchmarks/lattice_pilots.py lattice 128
    PYTHONPATH=src .venv/bin/python benchmarks/lattice_pilots.py delta_rule 128 --steps 400
    PYTHONPATH=src .venv/bin/python benchmarks/lattice_pilots.py lattice 128 --overwrite 0.5

The base run must exist first (`snakemake results/study/runs/lattice_base/<arm>/seed<seed>/
model.pt --config scale=study --cores 1`). One pilot is one CPU-heavy job: run one at a time
on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.plan import Plan  # noqa: E402
from arbench.run import evaluate_run, train_run, write_eval_set  # noqa: E402
from arbench.tasks.base import EVAL_FILE  # noqa: E402


def settings(
    arm: str, pairs: int, overwrite: float | None, steps: int | None
) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], int]:
    """The study scale's (experiment, task, model, train block, held-out examples) of ``arm``
    at ``pairs`` stored pairs: the capacity study's run arm, or the forgetting study's when
    an overwrite fraction is given; ``steps`` replaces the train block's step count."""
    cfg = arbench_config.load(scale="study")
    plan = Plan(cfg)
    experiment = "lattice_capacity" if overwrite is None else "lattice_forgetting"
    block = cfg["experiments"][experiment]
    first = block["grid"]["values"][0]
    label = f"pairs{first}" if overwrite is None else f"overwrite{first}"
    run_arm = f"{arm}-{label}"
    task = {**plan.task_settings(experiment, run_arm), "pairs": int(pairs)}
    if overwrite is not None:
        task["overwrite"] = float(overwrite)
    train = dict(plan.train_settings(experiment, run_arm))
    if steps is not None:
        train["steps"] = int(steps)
    examples = int(block.get("eval", {}).get("examples", 256))
    return experiment, task, plan.model(experiment, run_arm), train, examples


def pilot(
    arm: str,
    pairs: int,
    seed: int,
    overwrite: float | None = None,
    steps: int | None = None,
    results: Path = ROOT / "results" / "study",
) -> dict[str, Any]:
    """Train and score one pilot; the record printed as its JSON line."""
    experiment, task, model, train, examples = settings(arm, pairs, overwrite, steps)
    base = results / "runs" / "lattice_base" / arm / f"seed{seed}" / "model.pt"
    if not base.exists():
        raise SystemExit(f"no base run {base}: build it first (see the module docstring)")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        final = train_run(task, model, train, seed, tmp, warm_start=base, threads=1)
        wall = time.perf_counter() - start
        data = Path(tmp) / "data"  # the held-out set, as the workflow's eval_set rule writes it
        data.mkdir()
        write_eval_set(task, examples, data / EVAL_FILE)
        scores = evaluate_run(tmp, task, data_dir=data, examples=examples)["scores"]
    keep = ("accuracy", "accuracy_all", "accuracy_updated", "accuracy_untouched")
    return {
        "experiment": experiment,
        "arm": arm,
        "pairs": pairs,
        "overwrite": overwrite,
        "seed": seed,
        "steps": train["steps"],
        "batch": train["batch"],
        "lr": train["lr"],
        "examples": examples,
        "state_per_layer": final["state_size_per_layer"],
        **{k: round(float(scores[k]), 4) for k in keep if scores.get(k) is not None},
        "train_seconds": round(wall, 1),
        "seconds_per_step": round(wall / train["steps"], 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the pilot the command line names and print its JSON line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("arm", choices=["lattice", "delta_rule"])
    ap.add_argument("pairs", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--overwrite", type=float, default=None)
    ap.add_argument("--steps", type=int, default=None)
    args = ap.parse_args(argv)
    print(json.dumps(pilot(args.arm, args.pairs, args.seed, args.overwrite, args.steps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
