"""One MQAR training pilot, outside the DAG: the runs behind docs/NOTEBOOK.md's fidelity pilots.

A pilot is a JSON object of overrides on the paper-scale factorial (`config.yaml`):
``task`` (MQAR settings), ``model`` (backbone fields, ``cell`` and ``cell_options``),
``train`` (optimiser settings) and ``seed``. The run trains in a temporary folder with the
library's own loop, evaluates on ``--eval`` held-out sequences and prints one JSON line
(held-out accuracy, the training-accuracy trajectory, seconds), appending it to ``--out``.

    .venv/bin/python benchmarks/fidelity_pilot.py \\
        '{"task": {"pairs": 8}, "model": {"cell": "diagonal", "cell_options": {"qk_bias": 1.0}}}'

Each NOTEBOOK row gives its overrides; a pilot with an empty object is the paper default.
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

from arbench.config import load  # noqa: E402
from arbench.evaluate.recall import accuracy  # noqa: E402
from arbench.experiment import run_of  # noqa: E402
from arbench.models import ModelConfig  # noqa: E402
from arbench.tasks import build_task  # noqa: E402
from arbench.train.loop import train  # noqa: E402
from arbench.train.run_files import load_trained  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402


def pilot(spec: dict[str, Any], eval_examples: int, threads: int) -> dict[str, Any]:
    """Train the factorial's `delta` arm (paper scale) with ``spec``'s overrides (a null
    value restores a library default); held-out accuracy."""
    row = run_of(load(ROOT / "config.yaml")["experiments"]["factorial"], "delta", "factorial")
    task = build_task(row.task | spec.get("task", {}))  # the row's blocks, arm's own included
    model = dict(row.model)
    over = dict(spec.get("model", {}))
    model["cell_options"] = model["cell_options"] | over.pop("cell_options", {})
    model.update(over)
    model_cfg = ModelConfig(vocab_size=task.vocab_size, **model)
    settings = row.train | {"checkpoint_every": 10**9, "log_every": 250, "device": "cpu"}
    train_cfg = TrainConfig.from_dict(settings | spec.get("train", {}))
    seed = int(spec.get("seed", 0))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as run_dir:
        train(task, model_cfg, train_cfg, seed, run_dir, threads=threads)
        lines = [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]
        trained = load_trained(run_dir, model_cfg)
    held_out = task.eval_set(eval_examples)
    acc = accuracy(trained, held_out.tokens, held_out.targets)["accuracy"]
    return {
        "accuracy": round(acc, 4),
        "seconds": round(time.perf_counter() - t0),
        "spec": spec,
        "train_acc": [round(line["acc"], 2) for line in lines],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("spec", help="JSON overrides: task, model, train, seed")
    ap.add_argument("--eval", type=int, default=500, help="held-out sequences (default 500)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, help="append the result line to this JSONL file")
    args = ap.parse_args()
    line = json.dumps(pilot(json.loads(args.spec), args.eval, args.threads))
    print(line, flush=True)
    if args.out:
        with args.out.open("a") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
