"""The lattice-memory report: one table and one three-panel figure over its three studies.

The studies are ordinary grid experiments, which the config names (`lattice_studies`):
capacity (recall against the number of stored pairs P, the lattice beside the zoo's
fixed-state cells at the same state per layer), forgetting (accuracy of the re-written keys
and of the untouched ones against the overwrite fraction) and real text (recall of pairs
mined from a corpus, inside its text, against P). `summary` reads their statistics
(`arbench.report.experiment.experiment_stats`, the stats JSONs) and derives, never types in,
what the table and figure show:

* per study, arm and grid value: the mean, sd and per-seed accuracies, over all queries
  and split into updated and untouched queries where the evaluation reports them (the stats'
  ``score_breakdown``);
* capacity: per arm (and for the config's lattice arm, `lattice_arm`, in the closing note),
  the largest P up to which every P of the grid reaches ``target`` (0.99) mean recall (None
  when the smallest P already falls short), and the state and parameters of the arm;
* the time per training step of every arm (its runs' mean wall time over its steps);
* the floors of each grid value (the task's own calculator, as the stats carry them), and
  for forgetting the no-binding floor of an updated query, 1/M with M keys updated.

`figure` draws the three panels; `render` fills ``templates/lattice.tex.j2``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from arbench.report.lattice_floors import (  # noqa: F401  (read here by the tests)
    FLOOR_STYLES,
    updated_floor,
    updated_floors,
)
from arbench.report.tables import TEMPLATES, render

KINDS = ("capacity", "forgetting", "realtext")  # the report's three studies, a panel each
TARGET = 0.99  # the recall a capacity counts
ZOOM_ABOVE = 0.8  # a panel whose every accuracy is above this shows only their range
SPLITS = ("accuracy_updated", "accuracy_untouched")


def _block(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config's ``lattice`` block ({} where it has none: no lattice report)."""
    return cfg.get("lattice") or {}


def lattice_studies(cfg: dict[str, Any]) -> dict[str, str]:
    """Study kind -> the experiment the config names for it (``lattice.experiments``), in
    `KINDS` order ({} without a ``lattice`` block); ValueError naming a kind the report does
    not draw or one it lacks."""
    block = _block(cfg)
    if not block:
        return {}
    named = dict(block["experiments"])
    unknown, missing = sorted(set(named) - set(KINDS)), [k for k in KINDS if k not in named]
    if unknown or missing:
        raise ValueError(
            f"lattice.experiments: needs exactly {', '.join(KINDS)} "
            f"(missing {missing}, unknown {unknown})"
        )
    return {kind: named[kind] for kind in KINDS}


def lattice_arm(cfg: dict[str, Any]) -> str:
    """The capacity study's arm whose largest P and time per step the report's note gives
    (``lattice.arm``); KeyError without a ``lattice`` block."""
    return str(_block(cfg)["arm"])


def _mean(values: list[float | None]) -> float | None:
    """Mean of the values that exist (None when none does)."""
    kept = [float(v) for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _steps(stats: dict[str, Any], arm: dict[str, Any]) -> int:
    """Training steps of a run arm: its own train block's, else the experiment's."""
    return int(arm["spec"].get("train", {}).get("steps", stats["train"]["steps"]))


def _point(stats: dict[str, Any], run_arm: str) -> dict[str, Any]:
    """One (arm, grid value): accuracy mean/sd/n and seeds, the split accuracies, cost."""
    a = stats["arms"][run_arm]
    breakdown = a.get("score_breakdown", {})
    return {
        "run_arm": run_arm,
        "mean": a["mean"],
        "sd": a["sd"],
        "n": a["n"],
        "scores": a["scores"],
        "chance": a.get("chance", False),
        "splits": {k: _mean(breakdown.get(k, [])) for k in (*SPLITS, "accuracy_all")},
        "split_scores": {k: breakdown.get(k, []) for k in SPLITS},
        "seconds_per_step": a["train_wall_time_s"] / max(1, _steps(stats, a)),
        "state": a["state_size_per_layer"],
        "parameters": a["n_parameters"],
    }


def largest_reached(values: list[Any], means: list[float], target: float = TARGET) -> Any:
    """The largest grid value up to which every value (in increasing order) reaches
    ``target`` mean accuracy: the capacity at that recall. None when the smallest does not."""
    best = None
    for value, mean in sorted(zip(values, means, strict=True), key=lambda p: p[0]):
        if mean < target:
            break
        best = value
    return best


def study(stats: dict[str, Any]) -> dict[str, Any]:
    """One study's view: its grid values and labels, per arm the points in grid order and
    the mean seconds per step, the floors per value, and what the stats say of the run."""
    grid = stats["grid"]
    arms = {}
    for arm in grid["arms"]:
        points = [_point(stats, grid["table"][arm][label]) for label in grid["labels"]]
        arms[arm] = {
            "points": points,
            "largest": largest_reached(grid["values"], [p["mean"] for p in points]),
            "seconds_per_step": float(np.mean([p["seconds_per_step"] for p in points])),
            "state": points[0]["state"],
            "parameters": sorted({p["parameters"] for p in points}),
            "settings": stats["arms"][grid["table"][arm][grid["labels"][0]]]["settings"],
        }
    return {
        "experiment": stats["experiment"],
        "title": stats["title"],
        "key": grid["key"],
        "leaf": grid["leaf"],
        "values": grid["values"],
        "labels": grid["labels"],
        "arms": arms,
        "arm_order": list(grid["arms"]),
        "floors": [grid["floors"][label] for label in grid["labels"]],
        "task": stats["task"],
        "settings": _settings(stats["task"]),
        "train": stats["train"],
        "eval_examples": stats["eval_examples"],
        "seeds": max(p["n"] for a in arms.values() for p in a["points"]),
        "skipped": stats.get("skipped", {}).get("arms", {}),
    }


def _settings(task: dict[str, Any]) -> dict[str, Any]:
    """A task block with every default filled in (its settings dataclass), for the caption."""
    from arbench.tasks import build_task

    cfg = getattr(build_task(task), "cfg", None)
    return {**task, **(dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {})}


def summary(stats: dict[str, dict[str, Any]], arm: str, target: float = TARGET) -> dict[str, Any]:
    """The report of the three studies, keyed by `KINDS`, from their stats JSONs; ``arm`` is
    the capacity study's arm the closing note reports (None there when it has no such arm)."""
    missing = sorted(set(KINDS) - set(stats))
    if missing:
        raise ValueError(f"lattice report: no statistics for {missing}")
    for kind, s in stats.items():
        if "grid" not in s:
            raise ValueError(f"lattice report: {kind} ({s.get('experiment')}) has no grid")
    out = {kind: study(stats[kind]) for kind in KINDS}
    forgetting = out["forgetting"]
    forgetting["updated_floors"] = [
        updated_floor(forgetting["task"], float(v)) for v in forgetting["values"]
    ]
    capacity = out["capacity"]
    lattice = arm if arm in capacity["arms"] else None
    scales = {s["scale"] for s in stats.values()}
    return {
        **out,
        "target": target,
        "scale": scales.pop() if len(scales) == 1 else "/".join(sorted(scales)),
        "lattice_arm": lattice,
        "lattice_largest": None if lattice is None else capacity["arms"][lattice]["largest"],
        "lattice_seconds_per_step": None
        if lattice is None
        else capacity["arms"][lattice]["seconds_per_step"],
        "sources": {kind: s["experiment"] for kind, s in stats.items()},
    }


def render_table(report: dict[str, Any], template: str | Path | None = None, **extra: Any) -> str:
    """``templates/lattice.tex.j2`` filled with the report."""
    return render(template or TEMPLATES / "lattice.tex.j2", r=report, **extra)


def _span(values: list[float | None]) -> str:
    """A floor's values for a legend: one value, or its range over the grid."""
    kept = [v for v in values if v is not None and np.isfinite(v)]
    if not kept:
        return "--"
    lo, hi = min(kept), max(kept)
    return f"{lo:.3g}" if np.isclose(lo, hi) else f"{lo:.3g}-{hi:.3g}"


# the look of each kind of line, one per kind in every panel: all queries, updated keys and
# untouched keys differ in colour shade, line style and marker, so the legend tells them apart
# in print and in grey
QUERY_STYLES = {
    "all": {"ls": "-", "marker": "o", "shade": 1.0, "words": "all queries"},
    "updated": {"ls": "-", "marker": "s", "shade": 0.55, "words": "updated keys"},
    "untouched": {"ls": "--", "marker": "^", "shade": 1.0, "words": "untouched keys"},
}
# the floors: grey, one line style per kind of floor (`lattice_floors.FLOOR_STYLES`)


def _shade(color: str, shade: float) -> tuple[float, float, float]:
    """``color`` mixed with white: shade 1 is the colour itself, lower is lighter."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(color)
    return (1 - shade + shade * r, 1 - shade + shade * g, 1 - shade + shade * b)


def _curve(ax: Any, xs: Any, ys: list[float | None], color: str, arm: str, kind: str) -> None:
    """One arm's accuracy on one kind of query (`QUERY_STYLES`), None drawn as a gap."""
    st = QUERY_STYLES[kind]
    tint = color if kind != "updated" else _shade(color, st["shade"])
    if kind == "updated":  # a darker edge keeps the lighter line's markers visible
        extra = {"markeredgecolor": color, "markerfacecolor": tint}
    else:
        extra = {}
    ax.plot(
        xs,
        [np.nan if y is None else y for y in ys],
        ls=st["ls"],
        marker=st["marker"],
        ms=3.5,
        color=tint,
        label=f"{arm}: {st['words']}",
        **extra,
    )


def _floor_line(ax: Any, xs: Any, floors: list[float | None], which: str) -> None:
    """A grey no-binding floor across a panel (None where a point has none), its kind's line
    style (`FLOOR_STYLES`) and its values in the legend."""
    ys = [np.nan if f is None else f for f in floors]
    style, words = FLOOR_STYLES[which]
    ax.plot(xs, ys, color="grey", linewidth=0.9, linestyle=style, label=f"{words}: {_span(ys)}")


def _limits(ax: Any, values: list[float | None], floors: list[float | None] = ()) -> None:
    """Accuracy axis: 0..1, or zoomed onto the data when every value and every floor the panel
    draws lies above `ZOOM_ABOVE` (curves near 1 are otherwise one line). A floor is always
    inside the window, so every line the legend names is on the axis."""
    kept = [v for v in [*values, *floors] if v is not None and np.isfinite(v)]
    lo = min(kept, default=0.0)
    if kept and lo > ZOOM_ABOVE:
        ax.set_ylim(np.floor((lo - 0.005) * 100) / 100, 1.002)
        ax.set_title(f"{ax.get_title()} (accuracy axis zoomed)", fontsize=9)
    else:
        ax.set_ylim(-0.02, 1.02)


def _load_ticks(ax: Any, values: list[Any]) -> None:
    """A load axis (P): log scale, ticked at the loads measured and labelled with the numbers
    themselves (16, 128), not powers of two (2^4)."""
    ax.set_xscale("log", base=2)
    ax.set_xticks([float(v) for v in values], [f"{int(v):,}" for v in values])
    ax.minorticks_off()


def draw(report: dict[str, Any]) -> Any:
    """The three panels as a matplotlib figure: capacity (recall vs P, log scale, a line per
    arm, a dot per seed, the target recall dotted and labelled), forgetting (updated and
    untouched keys vs the overwrite fraction, each its own shade, line and marker, with the
    updated keys' no-binding floor) and real text (recall vs P, all queries and updated keys
    apart, each with its own floor; the updated floor is the forgetting panel's function of
    M, so the same number of updated keys draws the same floor). Axes are labelled in words."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11.0, 3.6))
    seen: list[list[float | None]] = [[], [], []]  # the accuracies each panel draws
    floors_seen: list[list[float | None]] = [[], [], []]  # and the floors
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    jitter = np.random.default_rng(0)  # dot placement only, not data

    def color(i: int) -> str:
        return colors[i % len(colors)]

    ax = axes[0]
    cap = report["capacity"]
    for i, arm in enumerate(cap["arm_order"]):
        pts = cap["arms"][arm]["points"]
        xs = np.asarray(cap["values"], dtype=float)
        ax.plot(xs, [p["mean"] for p in pts], marker="o", ms=3, color=color(i), label=arm)
        for x, p in zip(xs, pts, strict=True):
            spread = x * np.exp2(jitter.uniform(-0.06, 0.06, len(p["scores"])))
            ax.scatter(spread, p["scores"], s=8, color=color(i), alpha=0.6, zorder=3)
            seen[0] += p["scores"]
    target = report["target"]
    ax.axhline(
        target, color="black", linestyle=":", linewidth=0.9, label=f"target recall {target:g}"
    )
    best = [f.get("best_no_binding") for f in cap["floors"]]
    _floor_line(ax, cap["values"], best, "best")
    floors_seen[0] += best
    _load_ticks(ax, cap["values"])
    ax.set_xlabel("stored key-value pairs P")
    ax.set_ylabel("held-out recall")
    ax.set_title("capacity", fontsize=9)

    ax = axes[1]
    fg = report["forgetting"]
    xs = [float(v) for v in fg["values"]]
    for i, arm in enumerate(fg["arm_order"]):
        pts = fg["arms"][arm]["points"]
        for key, kind in (("accuracy_updated", "updated"), ("accuracy_untouched", "untouched")):
            ys = [p["splits"][key] for p in pts]
            seen[1] += ys
            if any(y is not None for y in ys):
                _curve(ax, xs, ys, color(i), arm, kind)
    pairs = fg["task"]["pairs"]
    up = updated_floors([pairs] * len(xs), xs)
    _floor_line(ax, xs, up, "updated")
    floors_seen[1] += up
    ax.set_xticks(xs, [f"{v:g}" for v in xs])
    ax.set_xlabel("fraction of stored keys overwritten")
    ax.set_ylabel("held-out recall")
    ax.set_title(f"forgetting ({pairs} stored pairs)", fontsize=9)

    ax = axes[2]
    rt = report["realtext"]
    xs = np.asarray(rt["values"], dtype=float)
    any_updated = False
    for i, arm in enumerate(rt["arm_order"]):
        pts = rt["arms"][arm]["points"]
        _curve(ax, xs, [p["mean"] for p in pts], color(i), arm, "all")
        ups = [p["splits"]["accuracy_updated"] for p in pts]
        seen[2] += [p["mean"] for p in pts] + ups
        if any(u is not None for u in ups):
            any_updated = True
            _curve(ax, xs, ups, color(i), arm, "updated")
    best = [f.get("best_no_binding") for f in rt["floors"]]
    _floor_line(ax, xs, best, "best")
    floors_seen[2] += best
    if any_updated:
        overwrite = float(rt["settings"].get("overwrite", rt["task"].get("overwrite", 0.0)))
        up = updated_floors([int(v) for v in rt["values"]], [overwrite] * len(xs))
        _floor_line(ax, xs, up, "updated")
        floors_seen[2] += up
    _load_ticks(ax, rt["values"])
    ax.set_xlabel("key-value pairs mined from the text P")
    ax.set_ylabel("held-out recall")
    ax.set_title("real text", fontsize=9)

    for ax, values, floors in zip(axes, seen, floors_seen, strict=True):
        _limits(ax, values, floors)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="best")
    fig.suptitle(f"Lattice memory: capacity, forgetting, real text (scale={report['scale']})")
    fig.tight_layout()
    return fig


def figure(report: dict[str, Any], outputs: list[str | Path]) -> None:
    """`draw`, saved to every path in ``outputs``."""
    from arbench.report.figures import save_figure

    save_figure(draw(report), outputs)
