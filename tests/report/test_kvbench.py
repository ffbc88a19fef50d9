"""The key-value benchmark's report: per-variant, per-length summary from evaluation JSONs,
ranks at the largest common length, memory growth, the rank correlation, the LaTeX table
(compiled when a TeX engine is present) and the figure."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbench.experiment import runs_of
from arbench.report.experiment import experiment_stats
from arbench.report.kvbench import spearman, summary
from arbench.report.layouts import layout_of
from arbench.report.tables import render

EXP = {
    "title": "kv",
    "task": {"name": "kvbench", "n": 8},
    "model": {"family": "kvbench", "d_model": 16, "layers": 2},
    "train": {
        "steps": 10,
        "batch": 4,
        "lr": 1e-3,
        "warmup": 1,
        "load": {"values": [2, 8], "until": [0.5]},
    },
    "eval": {"examples": 5, "n": [8, 16, 32]},
    "seeds": 2,
    "arms": {
        "a": {"variant": "rope"},
        "b": {"variant": "hybrid"},
        "c": {"variant": "hybrid_square"},
    },
}
# accuracy per arm at n = 8, 16, 32 (arm c is evaluated at n = 8 and 16 only)
ACC = {"a": [1.0, 0.4, 0.1], "b": [1.0, 0.9, 0.8], "c": [1.0, 0.95]}


def _evals() -> list[dict]:
    out = []
    for arm, accs in ACC.items():
        for seed in range(2):
            per = {
                f"n{n}": {
                    "accuracy": a - 0.02 * seed,
                    "length": 16 * n,
                    "tokens": 80 * n,
                    "tokens_per_s": 1000.0,
                    "peak_mib": 100.0 + n,
                    "seconds": 1.0,
                }
                for n, a in zip((8, 16, 32), accs, strict=False)
            }
            out.append(
                {
                    "experiment": "kv",
                    "arm": arm,
                    "seed": seed,
                    "n_parameters": 100,
                    "state_size_per_layer": 0,
                    "train_wall_time_s": 1.0,
                    "scores": {
                        "accuracy": accs[0],
                        "per_config": per,
                        "per_index": {
                            "entries": 4,
                            "first": [2.3, 2.3, None, None],
                            "second": [None, None, 0.1 * seed, 0.2],
                        },
                    },
                }
            )
    return out


def test_summary_averages_seeds_and_ranks_at_the_largest_common_length() -> None:
    kv = summary(
        runs_of("kv", EXP), _evals(), {("a", 0): [{"step": 5, "load": 2}, {"step": 10, "load": 8}]}
    )
    assert kv["configs"] == ["n8", "n16", "n32"]
    assert kv["table"]["b"]["n16"]["mean"] == pytest.approx(0.89)
    assert kv["table"]["b"]["n16"]["n"] == 2
    assert "n32" not in kv["table"]["c"]
    assert kv["ranked_at"] == "n16"  # c never reached n = 32
    assert kv["ranks"] == {"a": 3.0, "b": 2.0, "c": 1.0}
    assert kv["per_index"]["a"]["second"] == [None, None, pytest.approx(0.05), 0.2]
    assert kv["memory_growth"]["a"]["length_ratio"] == 4.0
    assert kv["memory_growth"]["a"]["memory_ratio"] == pytest.approx(132 / 108)
    assert kv["train_n"] == 8 and kv["train_length"] == 128 and kv["seeds"] == 2


def test_ties_share_their_mean_rank() -> None:
    evals = [e for e in _evals() if e["arm"] != "c"]
    for e in evals:
        e["scores"]["per_config"]["n32"]["accuracy"] = 0.5
    kv = summary(runs_of("kv", EXP), evals)
    assert kv["ranked_at"] == "n32" and kv["ranks"] == {"a": 1.5, "b": 1.5}


def test_a_grid_summary_lists_the_run_arms_of_its_rows() -> None:
    """The summary's arms are the rows' run arms (an arm at each grid value), not the
    config's arm names."""
    grid = {**EXP, "grid": {"key": "train.lr", "values": [1e-3, 2e-3]}}
    rows = runs_of("kv", grid)
    evals = []
    for row in rows:
        for ev in _evals():
            if ev["arm"] == row.arm:
                evals.append({**ev, "arm": row.name})
    kv = summary(rows, evals)
    assert kv["arms"] == [r.name for r in rows]
    assert kv["arms"][:2] == ["a-lr0.001", "a-lr0.002"]
    assert kv["table"]["b-lr0.002"]["n16"]["mean"] == pytest.approx(0.89)


def test_spearman_agrees_and_disagrees() -> None:
    ours = {"a": 0.1, "b": 0.5, "c": 0.9, "d": 0.2}
    assert spearman(ours, {"a": 1.0, "b": 50.0, "c": 99.0, "d": 2.0}) == pytest.approx(1.0)
    assert spearman(ours, {"a": 99.0, "b": 50.0, "c": 1.0, "d": 40.0}) == pytest.approx(-0.8)
    assert spearman({"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}) is None
    assert spearman({"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 2, "c": 3}) is None


def _stats() -> dict:
    return experiment_stats("kv", EXP, _evals(), "demo", "kvbench")


def test_table_has_a_row_per_variant_and_a_column_per_length() -> None:
    stats = _stats()
    tex = render(layout_of("kvbench").template_file, source="s.json", **stats)
    assert "\\texttt{a} & 99.0 & 39.0 & 9.0 & 3 \\\\" in tex
    assert "\\texttt{c} & 99.0 & 94.0 & -- & 1 \\\\" in tex
    assert "$n{=}32$" in tex and "load schedule of 2, 8 keys" in tex


def test_table_compiles(compile_tex, tmp_path: Path) -> None:
    compile_tex(render(layout_of("kvbench").template_file, source="s.json", **_stats()), tmp_path)


def test_figure_draws_all_three_panels(tmp_path: Path) -> None:
    out = [tmp_path / "kv.png", tmp_path / "kv.pdf"]
    layout_of("kvbench").builder()(_stats(), out)
    assert all(p.stat().st_size > 10_000 for p in out)


def test_figure_drops_the_per_index_panel_where_nothing_was_measured(monkeypatch) -> None:
    import arbench.report.figures as figures

    drawn: list = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, outputs: drawn.append(fig))
    stats = _stats()
    layout_of("kvbench").builder()(stats, [])
    stats["kvbench"]["per_index"] = {}  # a run with eval.index_entries: 0 (the long run)
    layout_of("kvbench").builder()(stats, [])
    titles = [[ax.get_title() for ax in fig.axes] for fig in drawn]
    assert "per-index cross-entropy" in titles[0] and len(titles[0]) == 3
    assert titles[1] == ["accuracy vs context length", "memory of the evaluation"]
