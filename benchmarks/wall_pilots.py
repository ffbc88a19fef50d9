"""The haystack pilots of docs/NOTEBOOK.md ("our harness does not reproduce the wall"): one
seed of one cell on one haystack setting, trained with the run layer's `train` and scored on
500 held-out sequences at the full gap. Prints one JSON line per pilot.

    .venv/bin/python benchmarks/wall_pilots.py                 # list the pilots
    .venv/bin/python benchmarks/wall_pilots.py filler_4000 attention_4000

Each pilot takes 25 s to 4 min on one core; run two at a time on two cores at most.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from _pilot import train_and_score  # puts src/ on sys.path

from arbench.models import ModelConfig
from arbench.tasks import build_task
from arbench.train.settings import TrainConfig

HAYSTACK = {"name": "haystack", "pairs": 4, "n_keys": 64, "n_values": 54, "seq_len": 64}
RANK1 = {"cell": "delta_rule", "cell_options": {"conv": True, "heads": 1, "qk_bias": 1.0}}
ATTENTION = {"cell": "attention", "cell_options": {"heads": 2, "positions": "rotary"}}
CURRICULUM = {"curriculum": {"ramp": "linear", "until": 0.5}}

# name -> (task changes, model, train changes): the rows of the NOTEBOOK table
PILOTS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    "pairs_1000": ({"distractors": "pairs"}, RANK1, {"steps": 1000}),
    "filler_1000": ({}, RANK1, {"steps": 1000}),
    "filler_4000": ({}, RANK1, {"steps": 4000}),
    "mask_2000": ({"answer": "mask"}, RANK1, {"steps": 2000}),
    "no_qk_bias_2000": (
        {},
        {"cell": "delta_rule", "cell_options": {"conv": True, "heads": 1}, "embed_std": None},
        {"steps": 2000},
    ),
    "filler_L256_2000": ({"seq_len": 256}, RANK1, {"steps": 2000}),
    "rwkv7_2000": ({}, {"cell": "rwkv7", "cell_options": {"heads": 1}}, {"steps": 2000}),
    "diagonal_2000": (
        {},
        {
            "cell": "diagonal",
            "cell_options": {"conv": True, "decay": True, "heads": 1, "qk_bias": 1.0},
        },
        {"steps": 2000},
    ),
    "attention_1000": ({}, ATTENTION, {"steps": 1000}),
    "attention_4000": ({}, ATTENTION, {"steps": 4000}),
    "attention_L32_2000": ({"seq_len": 32}, ATTENTION, {"steps": 2000}),
    "curriculum_1000": ({}, RANK1, {"steps": 1000, **CURRICULUM}),
    "attention_curriculum_1000": ({}, ATTENTION, {"steps": 1000, **CURRICULUM}),
}


def pilot(name: str, seed: int = 0) -> dict[str, Any]:
    """Train and score one pilot; its accuracy, wall time and training curve."""
    task_change, model, train_change = PILOTS[name]
    task = build_task({**HAYSTACK, **task_change})
    backbone = {"d_model": 32, "layers": 2, "embed_std": 1.0, **model}
    model_cfg = ModelConfig(vocab_size=task.vocab_size, **backbone)
    settings = {"batch": 64, "lr": 3e-3, "warmup": 50, "checkpoint_every": 10**6, "log_every": 50}
    cfg = TrainConfig.from_dict({**settings, **train_change})
    score, wall, lines = train_and_score(task, model_cfg, cfg, seed)
    curve = [(ln["step"], round(ln["acc"], 2)) for ln in lines[::4]]
    return {"pilot": name, "accuracy": score, "wall_s": round(wall, 1), "curve": curve}


if __name__ == "__main__":
    names = sys.argv[1:]
    if not names:
        print("pilots:", ", ".join(PILOTS))
    for name in names:
        print(json.dumps(pilot(name)), flush=True)
