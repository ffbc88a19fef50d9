"""Figure of the speed benchmark: cell throughput vs length, and streaming time and memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from arbench.report.figures import _save, plt


def bench_figure(result: dict[str, Any], outputs: list[str | Path]) -> None:
    """Left: training tokens/s per cell (solid chunked, dashed recurrent) vs T; right: streaming."""
    fig, (ax, ax_s) = plt.subplots(1, 2, figsize=(9.0, 3.6))
    cells = sorted({r["cell"] for r in result["throughput"]})
    colors = plt.get_cmap("tab10")
    for i, cell in enumerate(cells):
        for form, style in (("chunked", "-"), ("recurrent", "--")):
            pts = sorted(
                (r["T"], r["tokens_per_s"])
                for r in result["throughput"]
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
    ax.legend(fontsize=6, ncol=2)
    stream = sorted(result["streaming"], key=lambda r: r["tokens"])
    if stream:
        xs = [r["tokens"] for r in stream]
        ax_s.plot(xs, [r["seconds"] for r in stream], "o-", color="C0", label="seconds")
        ax_s.set_xscale("log")
        ax_s.set_yscale("log")
        ax_s.set_xlabel("tokens streamed")
        ax_s.set_ylabel("seconds", color="C0")
        ax_r = ax_s.twinx()
        ax_r.plot(xs, [r["peak_rss_mb"] for r in stream], "s--", color="C3")
        ax_r.set_ylabel("peak RSS (MiB)", color="C3")
        ax_r.set_ylim(0, 1.2 * max(r["peak_rss_mb"] for r in stream))
    machine = result.get("machine", {})
    ax_s.set_title(
        f"2-layer delta_rule+conv streaming; {machine.get('torch_threads', '?')} torch threads",
        fontsize=8,
    )
    fig.tight_layout()
    _save(fig, outputs)
