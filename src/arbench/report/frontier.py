"""The recall-memory frontier: accuracy against state size per cell, one curve per load K,
and the summary a reader wants from it, the smallest state that reaches a target accuracy.

Inputs are an experiment's per-run-arm summaries (`arbench.report.experiment`), each
carrying its cell, its state and its K. A fixed-state cell's state is its recurrent state per
layer; the attention control has none, so it is placed at its KV cache per layer after the
sequence (2 x d_model x L), the memory it actually reads.

The threshold state is read off the curve on the log2-state axis: the first measured state
whose accuracy reaches the target, linearly interpolated in log2(state) from the point below
it. When the smallest state already reaches it the answer is "at most" that state; when no
state does, "more than" the largest. Each seed's own curve gives its own crossing, and their
spread (min to max) goes beside the mean curve's.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from arbench.experiment import Run

TARGETS = (0.9, 0.99)


def crossing(states: list[float], accuracy: list[float], target: float) -> dict[str, Any]:
    """Smallest state at which ``accuracy`` (ordered by increasing ``states``) reaches
    ``target``: {"state": s, "bound": "=" | "<=" | ">"}."""
    if len(states) != len(accuracy) or not states:
        raise ValueError("crossing: states and accuracy must be non-empty and equally long")
    if any(b <= a for a, b in zip(states, states[1:], strict=False)):
        raise ValueError(f"crossing: states must increase, got {states}")
    for i, (s, acc) in enumerate(zip(states, accuracy, strict=True)):
        if acc >= target:
            if i == 0:
                return {"state": float(s), "bound": "<="}
            x0, x1 = math.log2(states[i - 1]), math.log2(s)
            y0, y1 = accuracy[i - 1], acc
            x = x0 + (target - y0) / (y1 - y0) * (x1 - x0)
            return {"state": float(2.0**x), "bound": "="}
    return {"state": float(states[-1]), "bound": ">"}


def annotate(
    runs: dict[str, Run], arms: dict[str, dict[str, Any]], self_tests: dict[str, dict[str, Any]]
) -> None:
    """Give every run arm's summary its frontier coordinates: cell, state (the recurrent
    state per layer, or the KV cache per layer for a cell without one), and the task's
    configuration (its label, K and, where its oracle report counted them (``self_tests``,
    by run arm), the held-out set's unlabelled repeats of stored keys per sequence), which
    every row reports. ``runs``: the experiment's rows (`arbench.experiment.runs_of`)."""
    from arbench.tasks import build_task

    for run_arm, a in arms.items():
        settings = runs[run_arm].task
        task = build_task(settings)
        config = {"label": task.summary(), "pairs": int(settings["pairs"])}
        label = getattr(getattr(task, "cfg", None), "label", None)
        if label:
            config["label"] = label
        repeats = self_tests.get(run_arm, {}).get("filler_repeats")
        if repeats is not None:
            config["repeats_per_sequence"] = repeats["per_sequence"]
        state = int(a["state_size_per_layer"])
        kind = "state"
        if not state:  # attention: its KV cache after the whole sequence
            d_model = int(runs[run_arm].model["d_model"])
            state, kind = 2 * d_model * int(task.eval_set(1).tokens.shape[1]), "kv_cache"
        a["frontier"] = {"cell": a["spec"]["cell"], "state": state, "kind": kind, "config": config}


def points(stats: dict[str, Any]) -> dict[str, Any]:
    """Per (cell, K): the arms' states with mean, sd and per-seed scores, by state.

    Every run arm's summary must carry ``frontier`` = {cell, state, kind}, where ``kind`` is
    "state" (a fixed recurrent state) or "kv_cache" (the attention control)."""
    by: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for run_arm in stats["arm_order"]:
        a = stats["arms"][run_arm]
        f = a["frontier"]
        by.setdefault((f["cell"], a["value"]), []).append(
            {
                "run_arm": run_arm,
                "state": int(f["state"]),
                "kind": f["kind"],
                "mean": a["mean"],
                "sd": a["sd"],
                "seeds": a["seeds"],
                "scores": a["scores"],
                "config": f["config"],
            }
        )
    cells = list(dict.fromkeys(c for c, _ in by))
    loads = list(dict.fromkeys(k for _, k in by))
    curves = {f"{c}|{k}": sorted(by[(c, k)], key=lambda p: p["state"]) for c, k in by}
    return {"cells": cells, "loads": loads, "curves": curves}


def thresholds(
    curve: list[dict[str, Any]], load: int, targets: tuple[float, ...] = TARGETS
) -> dict[str, Any]:
    """The crossing of the mean curve and of each seed's curve at every target, with the
    state per binding (state / K) at the mean crossing."""
    states = [p["state"] for p in curve]
    out: dict[str, Any] = {}
    seeds = sorted(set.intersection(*(set(p["seeds"]) for p in curve)))
    for t in targets:
        mean = crossing(states, [p["mean"] for p in curve], t)
        per_seed = []
        for s in seeds:
            acc = [p["scores"][p["seeds"].index(s)] for p in curve]
            per_seed.append(crossing(states, acc, t))
        exact = [c["state"] for c in per_seed if c["bound"] == "="]
        out[f"{t:g}"] = {
            **mean,
            "per_binding": mean["state"] / load,
            "seeds": per_seed,
            "seed_min": min(exact) if exact else None,
            "seed_max": max(exact) if exact else None,
            "seeds_reached": sum(c["bound"] != ">" for c in per_seed),
            "n_seeds": len(per_seed),
        }
    return out


def summary(stats: dict[str, Any]) -> dict[str, Any]:
    """The frontier view the stats JSON carries: points per (cell, K) and their thresholds."""
    pts = points(stats)
    rows = []
    for key, curve in pts["curves"].items():
        cell, _ = key.split("|")
        load = int(curve[0]["config"]["pairs"])
        rows.append(
            {
                "cell": cell,
                "K": load,
                "kind": curve[0]["kind"],
                "config": curve[0]["config"]["label"],
                "repeats_per_sequence": curve[0]["config"].get("repeats_per_sequence"),
                "thresholds": thresholds(curve, load),
            }
        )
    width = max(len(c) for c in pts["curves"].values())
    return {**pts, "targets": list(TARGETS), "rows": rows, "steps": width}
