"""Matplotlib figures of the experiments, a builder per report layout (which layout draws
with which builder is declared once, in `arbench.report.layouts`), and `save_figure`."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import ScalarFormatter  # noqa: E402

from arbench.report.kvbench import mean_curve  # noqa: E402

# a grid key in words, for an axis: per task where the same key means another quantity
GRID_WORDS: dict[str, str] = {
    "task.pairs": "key-value pairs K",
    "task.overwrite": "fraction of stored keys overwritten",
    "task.depth": "composition depth (group elements per sequence)",
    "task.seq_len": "sequence length (tokens)",
    "task.n_keys": "distinct keys",
    "train.lr": "learning rate",
    "train.steps": "training steps",
}
TASK_GRID_WORDS: dict[tuple[str, str], str] = {
    ("lattice_recall", "task.pairs"): "stored key-value pairs P",
    ("realtext", "task.pairs"): "key-value pairs mined from the text P",
}


# the accuracy axis of a grid figure, by the queries its "accuracy" counts (eval.headline)
HEADLINE_WORDS: dict[str, str] = {
    "all": "held-out accuracy",
    "updated": "held-out accuracy, updated keys (latest value)",
    "untouched": "held-out accuracy, untouched keys",
}


def grid_task_values(stats: dict[str, Any], leaf: str) -> list[Any]:
    """A task setting at each grid value: the grid's own value where the grid sweeps
    ``task.<leaf>``, else the task block's (0 when it has none)."""
    g = stats["grid"]
    if g["key"] == f"task.{leaf}":
        return list(g["values"])
    return [(stats.get("task") or {}).get(leaf, 0)] * len(g["values"])


def grid_axis_label(key: str, task: str | None = None) -> str:
    """The words an axis gives a grid key (`GRID_WORDS`, `TASK_GRID_WORDS`), never the config
    path; a key without an entry reads as its leaf with spaces for underscores."""
    found = TASK_GRID_WORDS.get((task or "", key)) or GRID_WORDS.get(key)
    return found or key.split(".")[-1].replace("_", " ")


def bars_with_seeds(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """Draw an experiment's per-arm accuracies and save to every path in ``outputs``; an arm
    on its own task setting is labelled with it (``K=8``)."""
    arms = stats.get("arm_order") or list(stats["arms"])
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(arms) + 1.5), 3.4))
    x = np.arange(len(arms))
    means = [stats["arms"][a]["mean"] for a in arms]
    sds = [stats["arms"][a]["sd"] for a in arms]
    colors = ["#4C72B0" if stats["arms"][a]["spec"].get("conv") else "#DD8452" for a in arms]
    ax.bar(x, means, yerr=sds, color=colors, alpha=0.55, capsize=3, width=0.7)
    jitter = np.random.default_rng(0)  # dot placement only, not data
    for i, a in enumerate(arms):
        s = stats["arms"][a]["scores"]
        ax.scatter(i + jitter.uniform(-0.18, 0.18, len(s)), s, s=14, color="black", zorder=3)
    # the source's own seeds, where the experiment names a reference set: open diamonds right
    # of each bar and a bar-wide tick at their mean
    ref = [
        (i, stats["arms"][a]["reference"])
        for i, a in enumerate(arms)
        if "reference" in stats["arms"][a]
    ]
    for j, (i, r) in enumerate(ref):
        xs = i + 0.3 + jitter.uniform(-0.05, 0.05, r["n"])
        label = f"paper's seeds ({stats['reference']['name']})" if j == 0 else None
        ax.scatter(
            xs,
            r["scores"],
            s=12,
            marker="D",
            facecolors="none",
            edgecolors="#C44E52",
            linewidths=0.7,
            zorder=3,
            label=label,
        )
        ax.hlines(
            r["mean"],
            i - 0.35,
            i + 0.35,
            color="#C44E52",
            linewidth=1.2,
            zorder=4,
            label="paper's mean" if j == 0 else None,
        )
    floors = stats["floors"]
    for key, label, style in (  # the floors the task provides (value_marginal always)
        ("value_marginal", "value-marginal floor", ":"),
        ("uniform_pair_no_binding", "uniform-pair no-binding", "-."),
        ("best_no_binding", "best no-binding", "--"),
    ):
        if key in floors:
            ax.axhline(floors[key], color="grey", linestyle=style, linewidth=0.9, label=label)
    own_k = {a: stats["arms"][a]["spec"].get("task", {}).get("pairs") for a in arms}
    labels = [a.replace("_", "\n") + (f"\n(K={own_k[a]})" if own_k[a] else "") for a in arms]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("held-out accuracy")
    n = max(v["n"] for v in stats["arms"].values())
    ax.set_title(
        f"{stats['title']}\nscale={stats['scale']}, K={stats['task'].get('pairs')}, n≤{n} seeds",
        fontsize=8,
    )
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))  # clear of the bars
    fig.tight_layout()
    save_figure(fig, outputs)


def sweep_by_type(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """Accuracy vs eval length, one panel per answer type, one line per arm."""
    sweep = stats["sweep"]
    types = sweep["types"]
    fig, axes = plt.subplots(1, len(types), figsize=(2.6 * len(types), 2.8), sharey=True)
    for ax, t in zip(np.atleast_1d(axes), types, strict=True):
        for arm in sweep["arms"]:
            pts = [
                (int(c.lstrip("n")), sweep["table"][arm][c][t]["mean"])
                for c in sweep["configs"]
                if c in sweep["table"][arm] and t in sweep["table"][arm][c]
            ]
            if pts:
                xs, ys = zip(*pts, strict=True)
                ax.plot(xs, ys, marker="o", markersize=3, label=arm)
        ax.set_xscale("log", base=2)
        ax.set_title(t, fontsize=8)
        ax.set_xlabel("writes N", fontsize=7)
        ax.set_ylim(-0.02, 1.02)
        ax.tick_params(labelsize=6)
    np.atleast_1d(axes)[0].set_ylabel("accuracy")
    np.atleast_1d(axes)[-1].legend(fontsize=6)
    fig.suptitle(f"{stats['title']} (scale={stats['scale']})", fontsize=8)
    fig.tight_layout()
    save_figure(fig, outputs)


def grid_lines(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """Accuracy vs the grid value: one line per arm (means) with a dot per seed, at the values
    it runs at, the rebinding control dashed where measured, the source's own seeds as open
    diamonds where a reference set has them, the floors at every value, and for a tuned grid
    each arm's best value starred and the shared default marked."""
    g = stats["grid"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    xs_all = np.asarray(g["values"], dtype=float)
    log = g["scale"] == "log"
    spread = np.exp if log else (lambda v: v)
    width = float(np.ptp(np.log(xs_all) if log else xs_all)) or 1.0
    jitter = np.random.default_rng(0)  # dot placement only, not data
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    referenced = False
    for i, arm in enumerate(g["arms"]):
        color = colors[i % len(colors)]
        mine = [j for j, label in enumerate(g["labels"]) if label in g["table"][arm]]
        xs = xs_all[mine]
        cells = [stats["arms"][g["table"][arm][g["labels"][j]]] for j in mine]
        ax.plot(xs, [c["mean"] for c in cells], marker="o", ms=4, color=color, label=arm)
        for x, c in zip(xs, cells, strict=True):
            base = np.log(x) if log else x
            at = spread(base + jitter.uniform(-0.015, 0.015, len(c["scores"])) * width)
            ax.scatter(at, c["scores"], s=8, color=color, alpha=0.5, zorder=3)
            r = c.get("reference")
            if r is not None:  # the source's seeds beside ours
                at = spread(base + (0.03 + jitter.uniform(-0.008, 0.008, r["n"])) * width)
                ax.scatter(
                    at,
                    r["scores"],
                    s=12,
                    marker="D",
                    facecolors="none",
                    edgecolors=color,
                    linewidths=0.7,
                    zorder=3,
                    label=None if referenced else "paper's seeds (open)",
                )
                referenced = True
        if stats.get("rebinding") and all("rebinding" in c for c in cells):
            ax.plot(
                xs,
                [c["rebinding"]["mean"] for c in cells],
                ls="--",
                marker="x",
                ms=4,
                color=color,
                alpha=0.8,
                label=f"{arm} (rebound)",
            )
        if arm in g.get("tuned", {}).get("best_labels", {}):  # (none: not every rate ran)
            best = g["tuned"]["best_labels"][arm]
            ax.scatter(
                [float(best)],
                [stats["arms"][g["table"][arm][best]]["mean"]],
                marker="*",
                s=90,
                color=color,
                edgecolor="black",
                zorder=4,
            )
    headline = stats.get("headline", "all")
    for key, label, style in (
        ("value_marginal", "value floor", ":"),
        ("best_no_binding", "best no-binding", "--"),
        ("rebinding_control", "rebinding floor", "-."),
    ):
        if key == "rebinding_control" and not stats.get("rebinding"):
            continue
        if key == "best_no_binding" and headline != "all":
            continue  # the task's floor over all queries: not the floor of the headline's kind
        if key not in g["floors"][g["labels"][0]]:
            continue  # a task without this floor (S5 has only the value floor)
        ys = [g["floors"][label_][key] for label_ in g["labels"]]
        ax.plot(xs_all, ys, color="grey", ls=style, lw=0.9, label=label)
    if headline == "updated":  # the updated keys' own floor, as the lattice figure draws it
        from arbench.report.lattice_floors import FLOOR_STYLES, updated_floors

        pairs, overwrites = grid_task_values(stats, "pairs"), grid_task_values(stats, "overwrite")
        ys = [np.nan if f is None else f for f in updated_floors(pairs, overwrites)]
        style, words = FLOOR_STYLES["updated"]
        ax.plot(xs_all, ys, color="grey", ls=style, lw=0.9, label=words)
    if "tuned" in g:
        ax.axvline(float(g["tuned"]["default"]), color="black", lw=0.6, ls=":", label="default")
    if log:  # base 2 when every value is a power of two (loads), else 10 (rates)
        powers_of_two = all(float(v).is_integer() and int(v) & (int(v) - 1) == 0 for v in xs_all)
        ax.set_xscale("log", base=2 if powers_of_two else 10)
    ax.set_xticks(xs_all, g["labels"], fontsize=7)
    ax.minorticks_off()
    ax.set_ylim(-0.02, 1.02)  # a floor at 0 stays visible above the axis
    ax.set_xlabel(grid_axis_label(g["key"], (stats.get("task") or {}).get("name")))
    ax.set_ylabel(HEADLINE_WORDS.get(headline, f"held-out accuracy ({headline} queries)"))
    n = max(a["n"] for a in stats["arms"].values())
    skipped = ", ".join(stats.get("skipped", {}).get("arms", {}))
    note = f"; not run here: {skipped}" if skipped else ""
    head = f"scale={stats['scale']}, n≤{n} seeds per point{note}"
    lines = [ln for part in (stats["title"], head) for ln in _wrap(part)]
    ax.set_title("\n".join(lines), fontsize=8)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    save_figure(fig, outputs)


def _wrap(text: str, width: int = 84) -> list[str]:
    """A title's lines at ``width`` characters, never broken inside a run arm's name."""
    return textwrap.wrap(text, width, break_on_hyphens=False, break_long_words=False)


def lockin_curves(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """Training curves, one panel per arm and one line per seed, so the lock-in lottery shows:
    training accuracy (at each batch's own gap) against step, the curriculum's maximum gap in
    grey where there is one, and each seed's held-out accuracy at the full gap as a dot at the
    right edge, coloured like its line."""
    arms = stats.get("arm_order") or list(stats["arms"])
    cols = min(3, len(arms))
    rows = -(-len(arms) // cols)
    fig, axes = plt.subplots(
        rows, cols, figsize=(3.0 * cols + 0.6, 2.4 * rows + 0.7), sharey=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, name in zip(axes.flat, arms, strict=False):
        a = stats["arms"][name]
        end = 1
        for j, (seed, score) in enumerate(zip(a["seeds"], a["scores"], strict=True)):
            curve = a.get("curves", {}).get(str(seed), [])
            color = colors[j % len(colors)]
            if curve:
                steps = [c["step"] for c in curve]
                end = max(end, steps[-1])
                ax.plot(steps, [c["acc"] for c in curve], lw=0.8, color=color, alpha=0.85)
                if "gap" in curve[0] and j == 0:
                    ax.plot(
                        steps,
                        [c["gap"] for c in curve],
                        lw=1.2,
                        color="grey",
                        ls="--",
                        label="max gap (fraction)",
                    )
            ax.scatter([end * 1.03], [score], s=12, color=color, zorder=3, clip_on=False)
        ax.axhline(stats["lock_in_threshold"], color="black", lw=0.6, ls=":", label="lock-in")
        ax.axhline(
            a["floors"]["value_marginal"], color="grey", lw=0.8, ls="-.", label="value floor"
        )
        ax.set_title(f"{name}: {a['lock_in']}/{a['n']} lock in", fontsize=7)
        ax.set_ylim(-0.02, 1.05)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("step", fontsize=7)
    for ax in axes.flat[len(arms) :]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("training accuracy", fontsize=7)
    legend: dict[str, Any] = {}  # every panel's labelled lines, once each
    for ax in axes.flat:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    fig.legend(list(legend.values()), list(legend), fontsize=6, loc="lower right", ncol=3)
    fig.suptitle(
        f"{stats['title']} (scale={stats['scale']}); dots: held-out accuracy at the full gap",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    save_figure(fig, outputs)


def frontier_panels(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """The recall-memory frontier: one panel per load K, accuracy against state per layer
    (log2 x), one line per cell (means, a dot per seed); the attention control at its KV
    cache per layer, drawn with open markers; the 0.9 and 0.99 targets dotted."""
    fr = stats["frontier"]
    loads = fr["loads"]
    fig, axes = plt.subplots(
        1, len(loads), figsize=(2.9 * len(loads) + 1.6, 3.3), sharey=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    jitter = np.random.default_rng(0)  # dot placement only, not data
    for ax, load in zip(axes[0], loads, strict=True):
        for i, cell in enumerate(fr["cells"]):
            curve = fr["curves"].get(f"{cell}|{load}")
            if not curve:
                continue
            color = colors[i % len(colors)]
            xs = np.array([p["state"] for p in curve], dtype=float)
            kv = curve[0]["kind"] == "kv_cache"
            ax.plot(
                xs,
                [p["mean"] for p in curve],
                marker="s" if kv else "o",
                ms=4,
                mfc="white" if kv else color,
                ls="--" if kv else "-",
                color=color,
                label=f"{cell} (KV cache)" if kv else cell,
            )
            for x, p in zip(xs, curve, strict=True):
                at = x * 2.0 ** jitter.uniform(-0.08, 0.08, len(p["scores"]))
                ax.scatter(at, p["scores"], s=6, color=color, alpha=0.5, zorder=3)
        for t in fr["targets"]:
            ax.axhline(t, color="grey", lw=0.7, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_ylim(-0.02, 1.03)
        ax.set_title(f"K = {load}", fontsize=8)
        ax.set_xlabel("state per layer (elements; attention: KV cache)", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0][0].set_ylabel("held-out accuracy", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes[0][1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            if lab not in labels:
                handles.append(h)
                labels.append(lab)
    fig.legend(handles, labels, fontsize=6, loc="center right")
    n = max(a["n"] for a in stats["arms"].values())
    configs = sorted({r["config"] for r in fr["rows"]})
    fig.suptitle(
        f"{stats['title']} (scale={stats['scale']}, n≤{n} seeds per point; dotted: 0.9, 0.99)"
        f"\nMQAR configs (vocab, L, K, power_a): {', '.join(configs)}",
        fontsize=7,
    )
    fig.tight_layout(rect=(0, 0, 0.85, 1))
    save_figure(fig, outputs)


def kvbench_panels(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """The key-value benchmark: exact match against context length (tokens per sequence,
    log2 x, the training length marked), the per-index cross-entropy of second occurrences
    on a fixed sequence (first occurrences dashed: unpredictable), and the evaluator's peak
    memory against length (on log axes where it spans 4x or more, so linear memory is a
    slope-1 line)."""
    kv = stats["kvbench"]
    # the per-index panel only where the evaluation measured it (``eval.index_entries`` > 0)
    indexed = bool(kv["per_index"])
    panels = 3 if indexed else 2
    fig, axes = plt.subplots(1, panels, figsize=(3.1 * panels + 0.3, 3.3 + 0.3 * indexed))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    acc, mem = axes[0], axes[-1]
    ce = axes[1] if indexed else None
    for i, arm in enumerate(kv["arms"]):
        color = colors[i % len(colors)]
        rows = [(c, kv["table"][arm][c]) for c in kv["configs"] if c in kv["table"][arm]]
        if rows:
            xs = [kv["rates"][arm][c]["length"] for c, _ in rows]
            acc.plot(xs, [r["mean"] for _, r in rows], marker="o", ms=3, color=color, label=arm)
            # a mutant-cluster sweep: each kind of sequence apart, beside the pooled line
            for kind, style in (("mutant", "--"), ("plain", ":")):
                scored = [
                    (kv["rates"][arm][c]["length"], kv["kinds"][arm][c][kind]["mean"])
                    for c, _ in rows
                    if kind in kv.get("kinds", {}).get(arm, {}).get(c, {})
                ]
                if scored:
                    acc.plot(*zip(*scored, strict=True), ls=style, lw=0.9, color=color,
                             label=f"{arm} ({kind})")  # fmt: skip
        curve = kv["per_index"].get(arm)
        if curve:  # a curve means ``indexed``, so the panel exists
            idx = np.arange(curve["entries"])
            second = np.array([np.nan if v is None else v for v in curve["second"]])
            ce.plot(idx, second, lw=0.9, color=color, label=arm)
        sized = [c for c in kv["configs"] if "peak_mib" in kv["rates"].get(arm, {}).get(c, {})]
        if sized:
            r = kv["rates"][arm]
            mem.plot(
                [r[c]["length"] for c in sized],
                [r[c]["peak_mib"] for c in sized],
                marker="o",
                ms=3,
                color=color,
                label=arm,
            )
    acc.axvline(kv["train_length"], color="grey", lw=0.8, ls="--")
    acc.text(kv["train_length"], 0.02, " trained", fontsize=7, color="grey")
    acc.set_xscale("log", base=2)
    acc.set_ylim(-0.02, 1.02)
    acc.set_xlabel("context (tokens per sequence)", fontsize=8)
    acc.set_ylabel("exact match (second occurrences)", fontsize=8)
    acc.set_title("accuracy vs context length", fontsize=9)
    first = [c["first"] for c in kv["per_index"].values()]
    if first:
        mean_first = [np.nan if v is None else v for v in mean_curve(first)]
        ce.plot(
            np.arange(len(mean_first)),
            mean_first,
            color="black",
            lw=0.8,
            ls="--",
            label="first occurrences (mean)",
        )
    if ce is not None:
        ce.set_xlabel("entry index in the fixed sequence", fontsize=8)
        ce.set_ylabel("value-digit cross-entropy (nats)", fontsize=8)
        ce.set_title("per-index cross-entropy", fontsize=9)
    mem.set_xscale("log", base=2)
    peaks = [y for line in mem.get_lines() for y in line.get_ydata() if y > 0]
    if peaks and max(peaks) >= 4 * min(peaks):  # a log axis only where memory spans 4x
        mem.set_yscale("log", base=2)
        mem.yaxis.set_major_formatter(ScalarFormatter())
        mem.yaxis.set_minor_formatter(ScalarFormatter())
    mem.set_xlabel("context (tokens per sequence)", fontsize=8)
    mem.set_ylabel("peak memory (MiB; CPU: process RSS)", fontsize=8)
    mem.set_title("memory of the evaluation", fontsize=9)
    for ax in axes:
        ax.tick_params(labelsize=7)
    handles, labels = acc.get_legend_handles_labels()
    h2, l2 = ce.get_legend_handles_labels() if ce is not None else ([], [])
    for h, lab in zip(h2, l2, strict=True):
        if lab not in labels:
            handles.append(h)
            labels.append(lab)
    # below the panels, so they keep the page's width
    ncol = min(5, len(labels))
    fig.legend(handles, labels, fontsize=7, loc="lower center", ncol=ncol)
    fig.suptitle(f"{stats['title']} (scale={stats['scale']}, n≤{kv['seeds']} seed(s))", fontsize=9)
    rows = -(-len(labels) // max(ncol, 1))
    fig.tight_layout(rect=(0, 0.045 * rows + 0.03, 1, 1))
    save_figure(fig, outputs)


def save_figure(fig: Any, outputs: list[str | Path]) -> None:
    """Save to every path through a temp file, then close the figure."""
    for path in outputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_name(f".{Path(path).stem}.tmp{Path(path).suffix}")
        fig.savefig(tmp, dpi=150)
        tmp.replace(path)
    plt.close(fig)
