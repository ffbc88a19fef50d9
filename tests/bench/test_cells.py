"""The throughput benchmark runs at tiny sizes and, with the streaming rows, gives the
documented JSON shape and figure."""

from __future__ import annotations

import json

import torch

from arbench.bench.cells import (
    NOT_TIMED,
    Shape,
    bench_cells,
    cell_options,
    cell_step,
    combine,
    pass_through,
    ratios,
    reference_shape,
    run_throughput,
    shared_caps,
    shared_step,
    throughput,
)
from arbench.bench.streaming import stream_once
from arbench.cells import CELLS, build_cell
from arbench.report.bench_figure import bench_figure

STREAM_MODEL = {"d_model": 16, "layers": 2, "mlp_ratio": 4, "cell": "delta_rule"}


def test_throughput_and_streams_combine_into_the_documented_shape(tmp_path) -> None:
    cells = run_throughput(
        lengths=[16, 32], batch=2, repeats=1, cells=["delta_rule", "attention", "bidirectional"]
    )
    model = {**STREAM_MODEL, "cell_options": {"conv": True}}
    streams = [stream_once(model, 40, n, piece=128) for n in (600, 300)]
    result = json.loads(json.dumps(combine(cells, streams)))  # JSON-serialisable
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
    assert [r["tokens"] for r in result["streaming"]] == [300, 600]  # in token order
    assert result["settings"]["stream_model"]["cell_options"] == {"conv": True}
    for row in result["streaming"]:
        assert row["seconds"] > 0 and row["peak_rss_mb"] > 0
    assert result["machine"]["torch_threads"] >= 1 and result["machine"]["torch"]
    assert set(ratios(result)) == {"delta_rule", "bidirectional"}
    # the recurrence alone is timed too, for cells that have one (not the wrapper, not attention)
    assert set(ratios(result, "kernel")) == {"delta_rule"}
    assert {r["scope"] for r in result["throughput"]} == {"cell", "kernel"}
    # shared work (the cell around a pass-through kernel) for cells with a kernel only
    assert {(r["cell"], r["T"]) for r in result["shared_work"]} == {
        ("delta_rule", 16),
        ("delta_rule", 32),
    }
    assert all(r["seconds"] > 0 and r["recurrent_over_shared"] > 0 for r in result["shared_work"])
    assert set(shared_caps(result)) == {"delta_rule"}
    outputs = [tmp_path / "cells.png", tmp_path / "cells.pdf"]
    bench_figure(result, outputs)
    assert all(p.stat().st_size > 0 for p in outputs)


def test_recurrent_skipped_over_budget_and_recorded() -> None:
    rows, skipped, shared = throughput(
        ["additive"], [8, 64], 2, repeats=1, max_recurrent_seconds=0.0
    )
    forms = {(r["form"], r["T"]) for r in rows}
    assert forms == {("chunked", 8), ("recurrent", 8), ("chunked", 64)}
    got = [(s["cell"], s["scope"], s["form"], s["T"]) for s in skipped]
    assert got == [("additive", scope, "recurrent", 64) for scope in ("cell", "kernel")]
    # shared work is timed at both lengths; its cap needs the recurrent time of the same T
    assert [(r["T"], "recurrent_over_shared" in r) for r in shared] == [(8, True), (64, False)]


def test_the_reference_arm_sets_the_shape() -> None:
    task = {"name": "mqar", "pairs": 32, "n_keys": 64, "n_values": 64}
    model = {**STREAM_MODEL, "d_model": 32, "cell_options": {"heads": 2}}
    assert reference_shape(task, model) == Shape(vocab=130, d_model=32, state_per_layer=512)
    assert reference_shape(task, {**model, "cell_options": {}}) == Shape()  # the defaults


def test_every_registered_cell_is_benchmarked_at_the_factorial_state() -> None:
    for name in bench_cells():
        cell = build_cell(name, 32, **cell_options(name))
        # the attention cells hold keys and values per token, no fixed state
        expected = 0 if name in ("attention", "full_attention") else 1024
        assert cell.state_size() == expected, name


def test_shared_step_runs_the_whole_backward_but_no_kernel() -> None:
    """Every parameter the real cell trains gets a gradient from the shared step too, and the
    shared output is the cell's `finish` applied to v (the pass-through)."""
    torch.manual_seed(0)
    cell = build_cell("kda", 32, **cell_options("kda"))
    x, proj = torch.randn(2, 24, 32), torch.randn(2, 24, 32)
    cell_step(cell, x, proj, "chunked")()
    trained = {n for n, p in cell.named_parameters() if p.grad is not None}
    shared_step(cell, x, proj)()
    assert trained and {n for n, p in cell.named_parameters() if p.grad is not None} == trained
    args, ctx = cell.prepare(x, None)
    o, s = pass_through(*args)
    assert torch.equal(o, args[2]) and not s.any()
    leaves = [a.detach().requires_grad_(True) for a in args[:5]]
    o, _ = pass_through(*leaves, None)
    o.sum().backward()
    assert torch.equal(leaves[2].grad, torch.ones_like(o))
    assert all(not a.grad.any() for i, a in enumerate(leaves) if i != 2)


def test_what_is_timed_comes_from_the_cells_own_declarations() -> None:
    """A cell that declares `not_timed` is left out (with its reason in `NOT_TIMED`), one that
    declares `single_form` is timed in the chunked form alone."""
    assert NOT_TIMED == {n: k.not_timed for n, k in CELLS.items() if k.not_timed}
    assert "mamba2_fused" in NOT_TIMED and "mamba2_fused" not in bench_cells()
    assert not any(CELLS[name].not_timed for name in bench_cells())
    rows, _, _ = throughput(["attention"], lengths=[8], batch=1, repeats=1, warmup=0)
    assert {r["form"] for r in rows} == {"chunked"}
