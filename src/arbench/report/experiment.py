"""Assemble an experiment's statistics from its per-run evaluations.

Every number comes from the evaluations passed in, every floor from the task's own
calculator. An arm is marked chance unless a test puts it above its task's strongest
no-binding floor (`arbench.report.chance`: a one-sided binomial over its held-out answers),
and a contrast whose two arms are both at chance is flagged as such: its p says nothing
about binding.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from arbench.experiment import BLOCKS, Run, grid_default, runs_of, value_label
from arbench.report import chance, frontier, kvbench
from arbench.report.chance import CHANCE_FACTOR, NO_BINDING_FACTOR
from arbench.report.layouts import layout_of
from arbench.report.reference import annotate as annotate_reference
from arbench.report.tables import curriculum_label
from arbench.stats import compare_lock_in, contrast, describe
from arbench.tasks import build_task


def with_training(ev: dict[str, Any], final: dict[str, Any]) -> dict[str, Any]:
    """An eval JSON with its run's training wall time (``train_wall_time_s``, the final.json's
    ``wall_time_s``): what `experiment_stats` reads of each run. The eval JSON itself holds
    nothing that differs between an uninterrupted and a resumed training, so it is the same
    bytes after a resume; the time lives in final.json, which may differ."""
    return {**ev, "train_wall_time_s": final["wall_time_s"]}


def chance_threshold(floors: dict[str, float], factor: float = CHANCE_FACTOR) -> float:
    """The fallback's accuracy below which a mean is chance, for evaluations that do not
    count their answers (`arbench.report.chance.threshold`)."""
    return chance.threshold(floors, factor)


def experiment_stats(
    name: str,
    exp: dict[str, Any],
    evals: list[dict[str, Any]],
    scale: str,
    layout: str,
    curves: dict[tuple[str, int], list[dict[str, Any]]] | None = None,
    self_tests: dict[str, dict[str, Any]] | None = None,
    reference: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Per-run-arm summaries, single-knob contrasts (at every grid value) and floors.

    ``evals`` are the runs' eval JSONs, each with its training's wall time (`with_training`).
    The rows are built once here (`runs_of`): each run arm's summary carries its row's
    ``arm`` and grid ``value`` (None without a grid), which the contrasts and the grid view
    read (`run_arms_of`), as the claims do, instead of a run arm's name.

    Run arms keep the config's order. ``layout`` (the task's declaration, "grid" for an
    experiment with a grid, or the experiment's own) says how the table and figure render; a
    "sweep" also gets the per-length table, a "grid" the per-value table. ``curves``, each
    (run arm, seed)'s training metric lines, go with their arm (the "lockin" figure draws
    one line per seed). ``self_tests``, each run arm's data self-test results as its oracle
    report recorded them, give the "frontier" layout the random filler's key repeats.
    ``reference``, a set of the sources' per-seed results (`arbench.report.reference`), puts
    the source's seeds beside each arm and its difference beside each contrast.
    """
    threshold = exp.get("lock_in_threshold", 0.9)
    above = exp.get("lock_in_above")
    factor = exp.get("chance_factor", CHANCE_FACTOR)
    by_arm: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for ev in evals:
        by_arm[ev["arm"]].append(ev)
    floors_of: dict[str, dict[str, float]] = {}
    shared = shared_settings(list(exp["arms"].values()))
    arms = {}
    rows = runs_of(name, exp)
    for i, row in enumerate(rows):
        run_arm, arm, value = row.name, row.arm, row.value
        runs = sorted(by_arm.get(run_arm, []), key=lambda e: e["seed"])
        if not runs:
            raise ValueError(f"{name}: no evaluations for run arm {run_arm!r}")
        task = build_task(row.task)
        floors = task.floors()
        floors_of.setdefault(value_label(value), floors)
        arms[run_arm] = _arm_summary(runs, i, threshold, floors, factor)
        if above is not None:
            arms[run_arm]["lock_in_above"] = int(sum(s > above for s in arms[run_arm]["scores"]))
        arms[run_arm].update(
            arm=arm,
            value=value,
            spec=exp["arms"][arm],
            settings=describe_arm(exp["arms"][arm], shared),
            floors=floors,
            task=task.summary(),
            steps=row.train["steps"],  # the run's own (a grid's ``with`` may set it per value)
        )
        if curves is not None:
            arms[run_arm]["curves"] = {
                str(e["seed"]): _thin(curves.get((run_arm, e["seed"]), [])) for e in runs
            }
    grid = exp.get("grid")
    values = grid["values"] if grid else [None]
    # at every grid value both arms run at (a grid's ``arms`` may run an arm at fewer)
    point = run_arms_of(arms)
    contrasts = [
        _contrast(c, arms, value, value, threshold, 1000 + len(values) * i + j)
        for i, c in enumerate(exp.get("contrasts", []))
        for j, value in enumerate(values)
        if (c["a"], value) in point and (c["b"], value) in point
    ]
    params = [v["n_parameters"] for v in arms.values()]
    states = sorted({v["state_size_per_layer"] for v in arms.values()})
    out = {
        "experiment": name,
        "layout": layout,
        "title": exp.get("title", name),
        "scale": scale,
        # at this scale the experiment only exercises its path (`scales.<scale>.measures`)
        "path_only": bool(exp.get("path_only", False)),
        "task": exp["task"],
        "model": exp["model"],
        "train": exp["train"],
        "eval_examples": exp["eval"]["examples"],
        # which queries the arms' "accuracy" counts (eval.headline: all, or updated keys for a
        # forgetting study), so a figure names it and draws that query kind's floor
        "headline": str(exp["eval"].get("headline", "all")),
        "lock_in_threshold": threshold,
        "lock_in_above": above,
        "chance_factor": factor,
        "no_binding_factor": NO_BINDING_FACTOR,
        "chance_alpha": chance.CHANCE_ALPHA,
        "chance_rule": chance.TEST_RULE,
        "chance_rules": sorted({a["chance_test"]["rule"] for a in arms.values()}),
        "state_sizes_per_layer": states,
        "parameters": {"min": min(params), "max": max(params)},
        "floors": build_task(exp["task"]).floors(),
        "arms": arms,
        "arm_order": list(arms),  # the config's order (the JSON file sorts its keys)
        "shared_settings": ", ".join(_words(shared)) if shared else "",
        "knobs": list(dict.fromkeys(k for spec in exp["arms"].values() for k in spec)),
        "contrasts": contrasts,
        "rebinding": any("rebinding" in a for a in arms.values()),
        "skipped": exp.get("skipped", {"arms": {}, "contrasts": []}),
    }
    if reference is not None:
        annotate_reference(out, reference)
    inputs = SectionInputs(
        exp, evals, curves, rows, arms, floors_of, threshold, self_tests or {}, out
    )
    for section in sections_of(layout, exp):
        out[section] = SECTIONS[section](inputs)
    return out


@dataclass(frozen=True)
class SectionInputs:
    """What a stats section is built from: the experiment block, its evaluations and training
    curves, its run rows, the run arms' summaries, each grid value's floors, the lock-in
    threshold, the oracle self-tests by run arm, and the statistics built so far."""

    exp: dict[str, Any]
    evals: list[dict[str, Any]]
    curves: dict[tuple[str, int], list[dict[str, Any]]] | None
    rows: list[Run]
    arms: dict[str, dict[str, Any]]
    floors_of: dict[str, dict[str, float]]
    threshold: float
    self_tests: dict[str, dict[str, Any]]
    stats: dict[str, Any]


def _frontier_section(s: SectionInputs) -> dict[str, Any]:
    """Each arm's frontier coordinates (`frontier.annotate`), then the frontier view."""
    frontier.annotate({row.name: row for row in s.rows}, s.arms, s.self_tests)
    return frontier.summary(s.stats)


# each stats section a layout may read (`Layout.sections`), by name, and what builds it
SECTIONS: dict[str, Callable[[SectionInputs], Any]] = {
    "grid": lambda s: _grid(s.exp, s.arms, s.floors_of, s.threshold),  # per arm and value
    "sweep": lambda s: _sweep(s.exp, s.evals),  # per arm, evaluation length and answer type
    "kvbench": lambda s: kvbench.summary(s.rows, s.evals, s.curves),  # per arm and length
    "frontier": _frontier_section,  # crossings per cell
}


def sections_of(layout: str, exp: dict[str, Any]) -> tuple[str, ...]:
    """The stats sections an experiment's statistics carry beyond the common ones, in the
    order they are built: a grid's per-value view wherever the experiment has a grid
    (whatever its layout), then the others its layout reads (`Layout.sections`)."""
    own = tuple(s for s in layout_of(layout).sections if s != "grid")
    return (("grid",) if exp.get("grid") else ()) + own


def run_arms_of(arms: dict[str, Any]) -> dict[tuple[str, Any], str]:
    """Each (arm, grid value) of a stats' run-arm summaries (their ``arm`` and ``value``
    fields, from the rows) -> its run arm, so no contrast or grid view re-derives a name."""
    return {(a["arm"], a["value"]): name for name, a in arms.items()}


def shared_settings(specs: list[dict[str, Any]]) -> dict[str, Any]:
    """The top-level arm keys (cell options) every arm sets to the same value."""
    first, *rest = specs
    return {
        k: v
        for k, v in first.items()
        if k not in BLOCKS and all(k in o and o[k] == v for o in rest)
    }


def _words(items: dict[str, Any]) -> list[str]:
    """Options as words: the cell by name, a flag by its key, the rest as key=value."""
    return [
        str(v) if k == "cell" else k if v is True else f"no {k}" if v is False else f"{k}={v}"
        for k, v in items.items()
    ]


def describe_arm(spec: dict[str, Any], shared: dict[str, Any] | None = None) -> str:
    """An arm's settings in a few words for a table cell: its cell and options, then what it
    changes in the task, model and train blocks ("delta_rule, conv; shaped curriculum"),
    leaving out the ``shared`` options every arm has (the caption names those)."""
    shared = shared or {}
    own = {k: v for k, v in spec.items() if k not in (*BLOCKS, *shared)}
    words = _words(own)
    blocks = []
    for block in BLOCKS:
        for key, value in spec.get(block, {}).items():
            if key == "curriculum":
                blocks.append(curriculum_label(value))
            elif key == "dense":
                blocks.append("dense" if value else "end-only")
            elif key == "name":
                blocks.append(f"task {value}")
            else:
                blocks.append(f"{key}={value}")
    text = ", ".join(words)
    if blocks:
        text += ("; " if text else "") + ", ".join(blocks)
    return text or "as every arm"


def _thin(lines: list[dict[str, Any]], keep: int = 200) -> list[dict[str, Any]]:
    """At most ``keep`` evenly spaced metric lines (the last kept) of step, acc and gap."""
    stride = max(1, -(-len(lines) // keep))
    picked = lines[::stride] + ([lines[-1]] if lines and (len(lines) - 1) % stride else [])
    return [{k: ln[k] for k in ("step", "acc", "gap") if k in ln} for ln in picked]


def _arm_summary(
    runs: list[dict[str, Any]],
    index: int,
    threshold: float,
    floors: dict[str, float],
    factor: float = CHANCE_FACTOR,
) -> dict[str, Any]:
    """Mean, sd, CI, lock-in and chance test of one run arm (and of its rebinding control)."""
    scores = [e["scores"]["accuracy"] for e in runs]
    test = chance.off_chance([e["scores"] for e in runs], floors, factor=factor)
    chance_below = chance.threshold(floors, factor)
    summary = {
        **describe(scores, rng=np.random.default_rng(index)),
        "seeds": [e["seed"] for e in runs],
        "scores": scores,
        "lock_in": int(sum(s >= threshold for s in scores)),
        "chance": not test["off_chance"],
        "chance_test": test,
        "chance_below": chance_below,
        "train_wall_time_s": float(np.mean([e["train_wall_time_s"] for e in runs])),
        "n_parameters": runs[0]["n_parameters"],
        "state_size_per_layer": runs[0]["state_size_per_layer"],
    }
    # every other accuracy an evaluation reports (updated / untouched queries, depth strata,
    # the overall one when an eval option made another the headline), per seed (None: none)
    split = sorted({k for e in runs for k in e["scores"] if k.startswith("accuracy_")})
    if split:
        summary["score_breakdown"] = {k: [e["scores"].get(k) for e in runs] for k in split}
    rebound = [e["scores"].get("rebinding_accuracy") for e in runs]
    if all(r is not None for r in rebound):
        summary["rebinding"] = {
            **describe(rebound, rng=np.random.default_rng(500 + index)),
            "scores": rebound,
            **_rebinding_floor_test(runs, rebound, floors, chance_below),
        }
    return summary


def _rebinding_floor_test(
    runs: list[dict[str, Any]], rebound: list[float], floors: dict[str, float], below: float
) -> dict[str, Any]:
    """Whether the rebinding control sits at its floor: where the task names the score of a
    perfect binder on the control (``rebound_binder``: the paper's control, scored against
    the original answer), a one-sided binomial test of the pooled control answers against
    it (`chance.off_chance`; the control scores as many answers as the held-out set);
    elsewhere the threshold rule. ``chance`` true: not above the floor."""
    counted = all(isinstance(e["scores"].get("supervised"), int) for e in runs)
    if "rebound_binder" not in floors or not counted:
        return {"chance": bool(np.mean(rebound) < below)}
    answers = [
        {
            "correct": round(r * e["scores"]["supervised"]),
            "supervised": e["scores"]["supervised"],
        }
        for r, e in zip(rebound, runs, strict=True)
    ]
    test = chance.off_chance(answers, {"best_no_binding": floors["rebound_binder"]})
    return {"chance": not test["off_chance"], "chance_test": test}


def _contrast(
    c: dict[str, Any],
    arms: dict[str, Any],
    value_a: Any,
    value_b: Any,
    threshold: float,
    seed: int,
) -> dict[str, Any]:
    """One contrast a - b, arm a at grid value ``value_a`` and b at ``value_b`` (None without
    a grid); ``value`` is a's."""
    point = run_arms_of(arms)
    a = arms[point[(c["a"], value_a)]]
    b = arms[point[(c["b"], value_b)]]
    return {
        **c,
        "value": value_a,
        "value_a": value_a,
        "value_b": value_b,
        **contrast(a["scores"], b["scores"], rng=np.random.default_rng(seed)),
        "lock_in": compare_lock_in(a["scores"], b["scores"], threshold),
        "mean_a": a["mean"],
        "mean_b": b["mean"],
        "scores_a": a["scores"],
        "scores_b": b["scores"],
        "a_chance": a["chance"],
        "b_chance": b["chance"],
        "both_chance": a["chance"] and b["chance"],
    }


def _grid(
    exp: dict[str, Any],
    arms: dict[str, Any],
    floors_of: dict[str, dict[str, float]],
    threshold: float,
) -> dict[str, Any]:
    """The per-value view: run arm of each (arm, value), floors per value, and for a tuned
    grid each arm's best value with the contrasts at best and at the shared default."""
    grid = exp["grid"]
    values = grid["values"]
    # each arm's run arm at each value it runs at (its rows: a value it skips is absent)
    table: dict[str, dict[str, str]] = {arm: {} for arm in exp["arms"]}
    for name, a in arms.items():
        table[a["arm"]][value_label(a["value"])] = name
    out: dict[str, Any] = {
        "key": grid["key"],
        "leaf": grid["key"].split(".")[-1],
        "values": values,
        "labels": [value_label(v) for v in values],
        "scale": grid.get("scale", "log"),
        "arms": list(exp["arms"]),
        "table": table,
        "floors": floors_of,
        # some arm runs at some of the values only (the grid's ``arms``)
        "sparse": any(len(cells) < len(values) for cells in table.values()),
        # the other settings each value sets (``with``: key -> one setting per value)
        "with": {k: list(v) for k, v in (grid.get("with") or {}).items()},
    }
    if grid.get("tune"):
        default = grid_default(exp)
        point = run_arms_of(arms)
        best = {
            arm: max(
                (v for a, v in point if a == arm),
                key=lambda v, arm=arm: arms[point[(arm, v)]]["mean"],
            )
            for arm in exp["arms"]
        }
        contrasts = [
            _contrast(c, arms, best[c["a"]], best[c["b"]], threshold, 5000 + i)
            for i, c in enumerate(exp.get("contrasts", []))
        ]
        out["tuned"] = {
            "default": default,
            "default_label": value_label(default),
            "best": best,
            "best_labels": {arm: value_label(v) for arm, v in best.items()},
            "contrasts_best": contrasts,
        }
    return out


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
