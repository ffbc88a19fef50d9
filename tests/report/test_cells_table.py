"""The cell-zoo table's context: every registered cell at the reference arm's budget."""

from __future__ import annotations

from arbench.cells import CELLS
from arbench.report.cells_table import zoo_context

TASK = {"name": "mqar", "pairs": 32, "n_keys": 64, "n_values": 64}
MODEL = {"d_model": 32, "layers": 2, "mlp_ratio": 4, "cell": "delta_rule", "cell_options": {}}


def test_every_cell_is_shaped_to_the_reference_state() -> None:
    ctx = zoo_context(TASK, MODEL, "factorial/delta")
    assert ctx["vocab_size"] == 130 and ctx["state_per_layer"] == 1024
    assert ctx["backbone"] == {"d_model": 32, "layers": 2, "mlp_ratio": 4}
    usable = sorted(n for n, k in CELLS.items() if k.unavailable_reason() is None)
    assert [r["cell"] for r in ctx["rows"]] == usable
    assert [u["cell"] for u in ctx["unavailable"]] == sorted(set(CELLS) - set(usable))
    assert all(u["reason"] for u in ctx["unavailable"])
    for row in ctx["rows"]:
        assert row["state_per_layer"] == (0 if row["grows_with_length"] else 1024), row["cell"]
        assert row["model_parameters"] > row["mixer_parameters"] > 0
    smaller = zoo_context(TASK, {**MODEL, "cell_options": {"heads": 2}}, "x")
    assert smaller["state_per_layer"] == 512


def test_the_table_names_each_cell_it_could_not_build_and_why() -> None:
    from arbench.report.tables import TEMPLATES, render

    ctx = zoo_context(TASK, MODEL, "factorial/delta")
    tex = render(TEMPLATES / "cells.tex.j2", **ctx)
    for u in ctx["unavailable"]:
        name = u["cell"].replace("_", "\\_")
        assert rf"\texttt{{{name}}}: " in tex
    assert tex.count(r"\texttt{") == len(ctx["rows"]) + len(ctx["unavailable"])
