"""What every pilot script shares: train one seed with the run layer's `train` in a scratch
folder and score it on 500 held-out sequences of its task."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench.evaluate.recall import accuracy  # noqa: E402
from arbench.models import ModelConfig  # noqa: E402
from arbench.tasks.base import Task  # noqa: E402
from arbench.train.loop import train  # noqa: E402
from arbench.train.run_files import load_trained  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402

HELD_OUT = 500


def train_and_score(
    task: Task, model_cfg: ModelConfig, cfg: TrainConfig, seed: int = 0
) -> tuple[float, float, list[dict[str, Any]]]:
    """Held-out accuracy, training wall seconds and the run's metric lines."""
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        train(task, model_cfg, cfg, seed, tmp, threads=1)
        wall = time.perf_counter() - start
        trained = load_trained(tmp, model_cfg)
        held_out = task.eval_set(HELD_OUT)
        score = accuracy(trained, held_out.tokens, held_out.targets)["accuracy"]
        lines = [json.loads(ln) for ln in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    return score, wall, lines
