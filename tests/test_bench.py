"""The speed benchmark runs at tiny sizes and writes the documented JSON shape and figure."""

from __future__ import annotations

import json

from arbench.cells import build_cell
from arbench.evaluate.bench import bench_cells, cell_options, ratios, run_bench, throughput
from arbench.report.bench_figure import bench_figure


def test_run_bench_shape_and_positive_numbers(tmp_path) -> None:
    result = run_bench(
        lengths=[16, 32],
        batch=2,
        stream_tokens=[300, 600],
        repeats=1,
        cells=["delta_rule", "attention", "bidirectional"],
        piece=128,
    )
    result = json.loads(json.dumps(result))  # JSON-serialisable
    assert {"throughput", "streaming", "machine"} <= result.keys()
    keys = {"cell", "form", "T", "B", "tokens_per_s"}
    for row in result["throughput"]:
        assert keys <= row.keys()
        assert row["form"] in ("chunked", "recurrent")
        assert row["tokens_per_s"] > 0 and row["B"] == 2
    got = {(r["cell"], r["form"], r["T"]) for r in result["throughput"]}
    assert ("attention", "recurrent", 16) not in got  # single form
    assert {("delta_rule", f, t) for f in ("chunked", "recurrent") for t in (16, 32)} <= got
    assert ("bidirectional", "recurrent", 32) in got
    assert [r["tokens"] for r in result["streaming"]] == [300, 600]
    for row in result["streaming"]:
        assert row["seconds"] > 0 and row["peak_rss_mb"] > 0
    assert result["machine"]["torch_threads"] >= 1 and result["machine"]["torch"]
    assert set(ratios(result)) == {"delta_rule", "bidirectional"}
    # the recurrence alone is timed too, for cells that have one (not the wrapper, not attention)
    assert set(ratios(result, "kernel")) == {"delta_rule"}
    assert {r["scope"] for r in result["throughput"]} == {"cell", "kernel"}
    outputs = [tmp_path / "cells.png", tmp_path / "cells.pdf"]
    bench_figure(result, outputs)
    assert all(p.stat().st_size > 0 for p in outputs)


def test_recurrent_skipped_over_budget_and_recorded() -> None:
    rows, skipped = throughput(["additive"], [8, 64], 2, repeats=1, max_recurrent_seconds=0.0)
    forms = {(r["form"], r["T"]) for r in rows}
    assert forms == {("chunked", 8), ("recurrent", 8), ("chunked", 64)}
    got = [(s["cell"], s["scope"], s["form"], s["T"]) for s in skipped]
    assert got == [("additive", scope, "recurrent", 64) for scope in ("cell", "kernel")]


def test_every_registered_cell_is_benchmarked_at_the_factorial_state() -> None:
    for name in bench_cells():
        cell = build_cell(name, 32, **cell_options(name))
        expected = 0 if name == "attention" else 1024  # attention keeps a growing KV cache
        assert cell.state_size() == expected, name
