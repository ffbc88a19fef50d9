"""The frontier pilots of docs/PROTOCOL.md ("The frontier"): one seed of one cell on one
Zoology MQAR setting, 1,000 steps of 64 (2,000 where named), trained with the run layer's
`train` and scored on 500 held-out sequences. Prints one JSON line per pilot.

    .venv/bin/python benchmarks/frontier_pilots.py                  # list the pilots
    .venv/bin/python benchmarks/frontier_pilots.py delta_s256_V512 delta_s256_V128

Each pilot takes 10-80 s on one core; run two at a time on two cores at most.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from _pilot import train_and_score  # puts src/ on sys.path

from arbench.models import ModelConfig
from arbench.tasks import build_task
from arbench.train.settings import TrainConfig


def _delta(d_model: int, side: int) -> dict[str, Any]:
    return {
        "cell": "delta_rule",
        "d_model": d_model,
        "cell_options": {"d_k": side, "d_v": side, "conv": True},
    }


def _attention(d_model: int, heads: int) -> dict[str, Any]:
    return {
        "cell": "attention",
        "d_model": d_model,
        "cell_options": {"heads": heads, "positions": "rotary"},
    }


MAMBA2 = {
    "cell": "mamba2",
    "d_model": 16,
    "cell_options": {"heads": 1, "d_state": 16, "head_dim": 16},
}

# name -> (vocabulary, K, model, lr, steps): the rows of the PROTOCOL table
PILOTS: dict[str, tuple[int, int, dict[str, Any], float, int]] = {
    "delta_s256_V512": (512, 8, _delta(16, 16), 3e-3, 1000),
    "attention_d32_V512_K16": (512, 16, _attention(32, 1), 3e-3, 1000),
    "delta_s256_V128": (128, 8, _delta(16, 16), 3e-3, 1000),
    "delta_s256_V128_lr1e-2": (128, 8, _delta(16, 16), 1e-2, 1000),
    "delta_s64": (128, 8, _delta(16, 8), 1e-2, 1000),
    "delta_s1024": (128, 8, _delta(32, 32), 1e-2, 1000),
    "mamba2_s256": (128, 8, MAMBA2, 1e-2, 1000),
    "attention_d16": (128, 8, _attention(16, 1), 1e-2, 1000),
    "attention_d32": (128, 8, _attention(32, 1), 1e-2, 1000),
    "attention_d32_4heads_lr3e-3": (128, 8, _attention(32, 4), 3e-3, 1000),
    "attention_d32_2heads_2000": (128, 8, _attention(32, 2), 1e-2, 2000),
}


def pilot(name: str, seed: int = 0) -> dict[str, Any]:
    """Train and score one pilot; its accuracy and wall time."""
    vocab, pairs, model, lr, steps = PILOTS[name]
    task = build_task({"name": "zoology_mqar", "vocab": vocab, "seq_len": 0, "pairs": pairs})
    model_cfg = ModelConfig(vocab_size=vocab, layers=2, mlp_ratio=4, **model)
    cfg = TrainConfig.from_dict(
        {
            "steps": steps,
            "batch": 64,
            "lr": lr,
            "warmup": steps // 20,
            "weight_decay": 0.1,
            "min_lr_ratio": 0.1,
            "grad_clip": 1.0,
            "checkpoint_every": 10**6,
            "log_every": 50,
        }
    )
    score, wall, _ = train_and_score(task, model_cfg, cfg, seed)
    return {"pilot": name, "config": task.cfg.label, "accuracy": score, "wall_s": round(wall, 1)}


if __name__ == "__main__":
    names = sys.argv[1:]
    if not names:
        print("pilots:", ", ".join(PILOTS))
    for name in names:
        print(json.dumps(pilot(name)), flush=True)
