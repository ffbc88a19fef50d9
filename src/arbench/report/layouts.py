"""The report layouts, each declared once: how an experiment's table and figure render.

A `Layout` names its table template (under ``templates/``), its figure builder (the dotted
name of a function, so that reading a template path never imports matplotlib), the stats
sections it reads beyond those every experiment's statistics carry (`experiment_stats`
builds them), and the sentence that captions its figure in the paper. A task declares its
layout by name (`Task.layout`), an experiment may choose its own (``layout:``), and an
experiment with a grid renders as "grid"; `layout_of` fails on any name not registered here.
Their names alone live in the leaf `arbench.layout_names`, which a task's declaration is
checked against when it registers (tasks sit below report); `LAYOUTS` must register exactly
those names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from arbench.layout_names import LAYOUT_NAMES

TEMPLATES = Path(__file__).parent / "templates"
TEMPLATE_DIR = "src/arbench/report/templates"  # the same folder, as rules name it

Figure = Callable[[dict[str, Any], list[str | Path]], None]


@dataclass(frozen=True)
class Layout:
    """One layout: its name, template file, figure builder (a callable or "module:function"),
    the extra stats sections its table and figure read, and its figure's caption sentence."""

    name: str
    template: str
    figure: str | Figure
    caption: str
    sections: tuple[str, ...] = ()

    @property
    def template_file(self) -> Path:
        """The template's absolute path (what `arbench.report.tables.render` reads)."""
        return TEMPLATES / self.template

    def builder(self) -> Figure:
        """The figure builder, imported on first use where given by its dotted name."""
        if callable(self.figure):
            return self.figure
        module, _, attr = self.figure.partition(":")
        return getattr(importlib.import_module(module), attr)


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout(
            "bars",
            "bars.tex.j2",
            "arbench.report.figures:bars_with_seeds",
            "Held-out accuracy per arm, bars at the mean over seeds (with the sd) and a dot per "
            "seed, blue for arms with the short convolution; the task's floors as horizontal "
            "lines.",
        ),
        Layout(
            "sweep",
            "sweep.tex.j2",
            "arbench.report.figures:sweep_by_type",
            "Accuracy against the number of writes N (log scale), a panel per answer type and a "
            "line per arm (mean over seeds).",
            sections=("sweep",),  # per arm, evaluation length and answer type
        ),
        Layout(
            "grid",
            "grid.tex.j2",
            "arbench.report.figures:grid_lines",
            "Held-out accuracy against the grid value, a line per arm through the means and a "
            "dot per seed; the rebinding control dashed where measured, the floors at every "
            "value, and for a tuned grid each arm's best value marked.",
            sections=("grid",),  # per arm and grid value
        ),
        Layout(
            "lockin",
            "lockin.tex.j2",
            "arbench.report.figures:lockin_curves",
            "Training accuracy against step, a panel per arm and a line per seed; the "
            "curriculum's maximum gap in grey where there is one, the lock-in threshold "
            "dotted, and each seed's held-out accuracy at the full gap as a dot at the right "
            "edge.",
        ),
        Layout(
            "frontier",
            "frontier.tex.j2",
            "arbench.report.figures:frontier_panels",
            "A panel per load K, accuracy against recurrent state per layer (log scale), a "
            "line per cell through the means and a dot per seed; the attention control at its "
            "KV cache with open markers, the 0.9 and 0.99 targets dotted.",
            sections=("grid", "frontier"),  # the loads are the grid; crossings per cell
        ),
        Layout(
            "kvbench",
            "kvbench.tex.j2",
            "arbench.report.figures:kvbench_panels",
            "Exact match against context length (tokens per sequence, log scale, the training "
            "length marked), the per-index cross-entropy of second occurrences on a fixed "
            "sequence (first occurrences dashed; a panel only where the evaluation measures "
            "it), and the evaluator's peak memory against length.",
            sections=("kvbench",),  # per arm and length, per-index curves, memory
        ),
    )
}


if tuple(LAYOUTS) != LAYOUT_NAMES:  # the names tasks are checked against (a leaf module)
    raise RuntimeError(f"arbench.layout_names.LAYOUT_NAMES {LAYOUT_NAMES} != {tuple(LAYOUTS)}")


def layout_of(name: str) -> Layout:
    """The registered layout ``name``; ValueError naming it and the known ones otherwise."""
    try:
        return LAYOUTS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown layout {name!r}; known: {', '.join(LAYOUTS)}") from None


def template_path(layout: str) -> str:
    """The repo-relative path of a layout's table template, as a rule's input names it."""
    return f"{TEMPLATE_DIR}/{layout_of(layout).template}"


def caption(layout: str) -> str:
    """The sentence that captions a figure drawn in ``layout``."""
    return layout_of(layout).caption


def draw(stats: dict[str, Any], outputs: Sequence[str | Path]) -> None:
    """Draw an experiment's figure in the layout its statistics name, to every output."""
    layout_of(stats["layout"]).builder()(stats, list(outputs))
