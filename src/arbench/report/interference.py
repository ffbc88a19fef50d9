"""The interference study's products: the static figure (error vs pairs stored, and vs age)
and a self-contained interactive page that re-runs the simulation in the reader's browser."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from arbench.analysis.interference import Curves, additive_error, study  # noqa: E402
from arbench.io import atomic_write_text  # noqa: E402
from arbench.report.figures import save_figure  # noqa: E402
from arbench.report.tables import TEMPLATES  # noqa: E402

SETTINGS = ("d_k", "d_v", "n", "betas", "age_n", "trials", "seed")


def run_study(settings: dict[str, Any]) -> list[Curves]:
    """The study at the config's settings (`SETTINGS`; unknown keys are an error)."""
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise ValueError(f"interference: unknown key {unknown[0]!r}; allowed: {list(SETTINGS)}")
    s = settings
    return study(
        int(s["d_k"]), int(s["d_v"]), [int(n) for n in s["n"]], [float(b) for b in s["betas"]],
        int(s["age_n"]), int(s["trials"]), int(s["seed"]),
    )  # fmt: skip


def figure(
    results: list[Curves], settings: dict[str, Any], scale: str, outputs: list[str | Path]
) -> None:
    """Two panels: mean retrieval error vs pairs stored (log x; the additive closed form
    dashed), and each pair's error by age once ``age_n`` pairs are stored."""
    d_k, d_v = int(settings["d_k"]), int(settings["d_v"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    colors = ["#DD8452", "#4C72B0", "#55A868", "#C44E52", "#8172B2"]
    ns = results[0].n
    left.plot(ns, additive_error(ns, d_k), "k--", lw=1, label="additive, closed form (n−1)/d_k")
    for c, color in zip(results, colors, strict=False):
        left.errorbar(
            c.n,
            c.error_vs_n,
            yerr=c.se_vs_n,
            color=color,
            marker="o",
            ms=3,
            lw=1.2,
            label=c.rule.label,
        )
        right.plot(c.age, c.error_vs_age, color=color, lw=1.2, label=c.rule.label)
        right.fill_between(
            c.age,
            c.error_vs_age - c.se_vs_age,
            c.error_vs_age + c.se_vs_age,
            color=color,
            alpha=0.2,
            lw=0,
        )
    age_n = int(settings["age_n"])
    right.axhline(
        float(additive_error(age_n, d_k)), color="k", ls="--", lw=1, label="additive, closed form"
    )
    left.axvline(d_k, color="grey", ls=":", lw=0.9)
    left.text(d_k, left.get_ylim()[1] * 0.95, " n = d_k", fontsize=7, color="grey", va="top")
    left.set_xscale("log", base=2)
    left.set_xticks(ns, [str(int(n)) for n in ns])
    left.set_xlabel("pairs stored n")
    left.set_ylabel("mean retrieval error ‖S k − v‖²")
    left.set_title(f"all stored pairs, d_k = {d_k}, d_v = {d_v}", fontsize=9)
    right.set_xlabel("age of the pair (writes after it)")
    right.set_ylabel("retrieval error ‖S k − v‖²")
    right.set_title(f"by age, after n = {age_n} writes", fontsize=9)
    left.legend(fontsize=7, loc="upper left")
    right.legend(fontsize=7, loc="upper left")
    fig.suptitle(
        f"Interference without training: {int(settings['trials'])} trials per point, "
        f"mean ± SE, scale={scale}",
        fontsize=9,
    )
    fig.tight_layout()
    save_figure(fig, outputs)


def reference(results: list[Curves], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The pipeline's curves in the page's terms (it compares its live simulation to these)."""
    return [
        {
            "label": c.rule.label,
            "d": int(settings["d_k"]),
            "beta": c.rule.beta,
            "n": [int(x) for x in c.n],
            "error_vs_n": [round(float(x), 6) for x in c.error_vs_n],
        }
        for c in results
    ]


def page(results: list[Curves], settings: dict[str, Any], scale: str, output: str | Path) -> None:
    """Render the interactive page: one HTML file, no server, no network (inline JS/SVG)."""
    import jinja2

    if int(settings["d_k"]) != int(settings["d_v"]):
        raise ValueError("interference: the page draws a square state; set d_k == d_v")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    html = env.get_template("interference.html.j2").render(
        reference_json=jinja2.utils.markupsafe.Markup(json.dumps(reference(results, settings))),
        d=int(settings["d_k"]),
        betas=[float(b) for b in settings["betas"]],
        age_n=int(settings["age_n"]),
        trials=int(settings["trials"]),
        seed=int(settings["seed"]),
        scale=scale,
    )
    atomic_write_text(output, html)
