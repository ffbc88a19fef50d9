"""Figure of the speed benchmark: cell throughput vs length, and streaming time and memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.ticker import LogLocator, ScalarFormatter

from arbench.report.figures import plt, save_figure

GOAL_RATIO = 10.0  # issue 3: chunked >= 10x recurrent at T = 1024


def _speedup_panel(ax: Any, result: dict[str, Any]) -> None:
    """Bars at the largest T measured for both forms: chunked/recurrent of the whole cell and
    of its kernel alone, and the cap recurrent/shared work (the whole-cell best possible)."""
    from arbench.bench.cells import ratios, shared_caps

    series = {
        "whole cell": (ratios(result, "cell"), "C0"),
        "kernel alone": (ratios(result, "kernel"), "C1"),
        "cap: recurrent / shared work": (shared_caps(result), "C7"),
    }
    series = {label: v for label, v in series.items() if v[0]}
    cells = sorted({c for by_cell, _ in series.values() for c in by_cell})
    if not cells:
        return
    common = set.intersection(*(set(v) for by_cell, _ in series.values() for v in by_cell.values()))
    t_show = 1024 if 1024 in common else max(common, default=None)
    width = 0.8 / len(series)
    for j, (label, (by_cell, color)) in enumerate(series.items()):
        vals = [by_cell.get(c, {}).get(t_show, 0.0) for c in cells]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(cells))]
        ax.bar(xs, vals, width, color=color, label=label)
    ax.axhline(GOAL_RATIO, color="k", linestyle=":", linewidth=1)
    ax.set_xticks(range(len(cells)), cells, rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("chunked / recurrent")
    ax.set_title(f"speed-up at T={t_show} (dotted: 10x goal)", fontsize=8)
    ax.legend(fontsize=6)


def _stream_label(result: dict[str, Any]) -> str:
    """'2-layer delta_rule+conv' from the streamed model's settings."""
    model = result.get("settings", {}).get("stream_model")
    if not model:
        return "model"
    on = [k for k, v in model.get("cell_options", {}).items() if v is True]
    return f"{model['layers']}-layer {'+'.join([model['cell'], *on])}"


def bench_figure(result: dict[str, Any], outputs: list[str | Path]) -> None:
    """Cell training tokens/s vs T (solid chunked, dashed recurrent); chunked/recurrent speed-up
    of whole cells and of their kernels alone; streaming time and peak memory."""
    fig, (ax, ax_b, ax_s) = plt.subplots(1, 3, figsize=(13.0, 3.8))
    cell_rows = [r for r in result["throughput"] if r.get("scope", "cell") == "cell"]
    cells = sorted({r["cell"] for r in cell_rows})
    colors = plt.get_cmap("tab10")
    for i, cell in enumerate(cells):
        for form, style in (("chunked", "-"), ("recurrent", "--")):
            pts = sorted(
                (r["T"], r["tokens_per_s"])
                for r in cell_rows
                if r["cell"] == cell and r["form"] == form
            )
            if pts:
                xs, ys = zip(*pts, strict=True)
                label = cell if form == "chunked" else None
                ax.plot(xs, ys, style, marker="o", markersize=3, color=colors(i % 10), label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("train tokens/s (fwd+bwd)")
    batch = result["throughput"][0]["B"] if result["throughput"] else "?"
    ax.set_title(f"cells at d_model 32, B={batch} (solid chunked, dashed recurrent)", fontsize=8)
    # below the panel: inside it, the legend hides the recurrent (dashed) lines
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    _speedup_panel(ax_b, result)
    stream = sorted(result["streaming"], key=lambda r: r["tokens"])
    if stream:
        xs = [r["tokens"] for r in stream]
        ax_s.plot(xs, [r["seconds"] for r in stream], "o-", color="C0", label="seconds")
        ax_s.set_xscale("log")
        ax_s.set_yscale("log")
        ax_s.yaxis.set_major_formatter(ScalarFormatter())
        ax_s.yaxis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))  # 0.2, 0.5, 2, 5, ...
        ax_s.yaxis.set_minor_formatter(ScalarFormatter())
        ax_s.set_xlabel("tokens streamed")
        ax_s.set_ylabel("seconds", color="C0")
        ax_r = ax_s.twinx()
        ax_r.plot(xs, [r["peak_rss_mb"] for r in stream], "s--", color="C3")
        ax_r.set_ylabel("peak RSS (MiB)", color="C3")
        ax_r.set_ylim(0, 1.2 * max(r["peak_rss_mb"] for r in stream))
    machine = result.get("machine", {})
    ax_s.set_title(
        f"{_stream_label(result)} streaming; {machine.get('torch_threads', '?')} torch threads",
        fontsize=8,
    )
    fig.tight_layout()
    save_figure(fig, outputs)
