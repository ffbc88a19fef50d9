"""Matplotlib figures: one bar per arm (mean) with one dot per seed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def bars_with_seeds(stats: dict[str, Any], outputs: list[str | Path]) -> None:
    """Draw an experiment's per-arm accuracies and save to every path in ``outputs``."""
    arms = list(stats["arms"])
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
    floors = stats["floors"]
    for key, label, style, required in (  # every "bars" task provides the required ones
        ("value_marginal", "value-marginal floor", ":", True),
        ("uniform_pair_no_binding", "uniform-pair no-binding", "-.", False),
        ("best_no_binding", "best no-binding", "--", True),
    ):
        if required or key in floors:
            ax.axhline(floors[key], color="grey", linestyle=style, linewidth=0.9, label=label)
    ax.set_xticks(x, [a.replace("_", "\n") for a in arms], fontsize=7)
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


FIGURES = {"bars": bars_with_seeds, "sweep": sweep_by_type}  # by the task's declared layout


def save_figure(fig: Any, outputs: list[str | Path]) -> None:
    """Save to every path through a temp file, then close the figure."""
    for path in outputs:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(path).with_name(f".{Path(path).stem}.tmp{Path(path).suffix}")
        fig.savefig(tmp, dpi=150)
        tmp.replace(path)
    plt.close(fig)
