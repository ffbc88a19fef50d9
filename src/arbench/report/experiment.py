"""Assemble an experiment's statistics from its per-run evaluations."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from arbench.stats import compare_lock_in, contrast, describe
from arbench.tasks import build_task


def experiment_stats(
    name: str, exp: dict[str, Any], evals: list[dict[str, Any]], scale: str, layout: str
) -> dict[str, Any]:
    """Per-arm summaries, single-knob contrasts and floors, JSON-ready.

    Arms keep the config's order; every number comes from the evaluations passed
    in, and the floors from the task's own calculator. ``layout`` (the task's declaration)
    says how the table and figure render; a "sweep" also gets the per-length table.
    """
    threshold = exp.get("lock_in_threshold", 0.9)
    by_arm: dict[str, list[tuple[int, float]]] = defaultdict(list)
    meta: dict[str, dict[str, Any]] = {}
    for ev in evals:
        by_arm[ev["arm"]].append((ev["seed"], ev["scores"]["accuracy"]))
        meta[ev["arm"]] = {
            "n_parameters": ev["n_parameters"],
            "state_size_per_layer": ev["state_size_per_layer"],
        }
    arms = {}
    for i, arm in enumerate(exp["arms"]):
        runs = sorted(by_arm.get(arm, []))
        if not runs:
            raise ValueError(f"{name}: no evaluations for arm {arm!r}")
        scores = [s for _, s in runs]
        arms[arm] = {
            **describe(scores, rng=np.random.default_rng(i)),
            "seeds": [seed for seed, _ in runs],
            "scores": scores,
            "lock_in": int(sum(s >= threshold for s in scores)),
            "spec": exp["arms"][arm],
            "train_wall_time_s": float(
                np.mean([e["train_wall_time_s"] for e in evals if e["arm"] == arm])
            ),
            **meta[arm],
        }
    contrasts = []
    for i, c in enumerate(exp.get("contrasts", [])):
        a, b = arms[c["a"]]["scores"], arms[c["b"]]["scores"]
        contrasts.append(
            {
                **c,
                **contrast(a, b, rng=np.random.default_rng(1000 + i)),
                "lock_in": compare_lock_in(a, b, threshold),
            }
        )
    sweep = _sweep(exp, evals) if layout == "sweep" else None
    params = [v["n_parameters"] for v in arms.values()]
    states = sorted({v["state_size_per_layer"] for v in arms.values()})
    return {
        "experiment": name,
        "layout": layout,
        "title": exp.get("title", name),
        "scale": scale,
        "task": exp["task"],
        "model": exp["model"],
        "train": exp["train"],
        "eval_examples": exp["eval"]["examples"],
        "lock_in_threshold": threshold,
        "state_sizes_per_layer": states,
        "parameters": {"min": min(params), "max": max(params)},
        "floors": build_task(exp["task"]).floors(),
        "arms": arms,
        "knobs": list(dict.fromkeys(k for spec in exp["arms"].values() for k in spec)),
        "contrasts": contrasts,
        **({"sweep": sweep} if sweep else {}),
    }


def _sweep(exp: dict[str, Any], evals: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and sd over seeds of each arm's accuracy per eval config and answer type."""
    configs: list[str] = []
    types: list[str] = []
    cells: dict[str, dict[str, dict[str, list[float]]]] = {}
    for ev in evals:
        for config, row in ev["scores"]["per_config"].items():
            if config not in configs:
                configs.append(config)
            for key, value in row.items():
                if key in ("examples", "seconds") or key.endswith("_n") or value is None:
                    continue
                if key not in types:
                    types.append(key)
                arm = cells.setdefault(ev["arm"], {}).setdefault(config, {})
                arm.setdefault(key, []).append(float(value))
    configs.sort(key=lambda c: int(c.lstrip("n")))
    order = ["ar_valid", "ar_expired_never", "ar_expired_stale", "passkey", "all"]
    types.sort(key=lambda t: (order.index(t) if t in order else len(order), t))
    table = {
        arm: {
            config: {
                t: {"mean": float(np.mean(v)), "sd": float(np.std(v)), "n": len(v)}
                for t, v in by_type.items()
            }
            for config, by_type in by_config.items()
        }
        for arm, by_config in cells.items()
    }
    return {
        "configs": configs,
        "types": types,
        "arms": [a for a in exp["arms"] if a in table],
        "table": table,
    }
