"""The score-variance figure: attention-output variance against context length for raw,
squared and cubed scores, independent scores and shared-query scores side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from arbench.report.figures import save_figure  # noqa: E402

COLORS = {"raw": "#4C72B0", "squared": "#55A868", "cubed": "#C44E52"}


def figure(result: dict[str, Any], scale: str, outputs: list[str | Path]) -> None:
    """Two log-log panels: Var(o_j) against n for each score map, with 1/n (and 1/d on the
    shared-query panel) drawn for reference."""
    ns = np.asarray(result["n"], dtype=float)
    d = result["d"]
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6), sharey=True)
    titles = {
        "independent": "independent normal scores and values",
        "dependent": f"one query, keys as values (d = {d})",
    }
    for ax, setting in zip(axes, ("independent", "dependent"), strict=True):
        for name, points in result[setting].items():
            mean = np.array([m for m, _ in points])
            se = np.array([s for _, s in points])
            ax.errorbar(ns, mean, yerr=se, marker="o", ms=3, lw=1.2, color=COLORS[name], label=name)
        ax.plot(ns, 1 / ns, "k:", lw=0.9, label="1/n")
        if setting == "dependent":
            ax.axhline(1 / d, color="grey", ls="--", lw=0.9, label=f"1/d = {1 / d:.3f}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context length n (keys attended)")
        ax.set_title(titles[setting], fontsize=9)
        ax.legend(fontsize=7, loc="lower left")
    axes[0].set_ylabel("variance of an output component")
    fig.suptitle(
        "Attention-output variance vs context: softmax of raw, squared and cubed scores "
        f"(mean ± SE, scale={scale})",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, outputs)
