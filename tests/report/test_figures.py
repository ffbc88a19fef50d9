"""Figures: each task layout has a drawer, and each writes readable PNG and PDF files."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest

from arbench.report.experiment import experiment_stats
from arbench.report.figures import FIGURES
from arbench.tasks import TASKS


def test_every_declared_layout_has_a_figure() -> None:
    assert {cls.layout for cls in TASKS.values()} <= set(FIGURES)


@pytest.mark.parametrize("layout", ["bars", "sweep", "grid", "tuned"])
def test_figures_are_written_and_readable(layout, request, tmp_path: Path) -> None:
    exp = request.getfixturevalue(f"{layout}_experiment")
    evals = request.getfixturevalue(f"{layout}_evals")
    layout = "grid" if layout == "tuned" else layout
    stats = experiment_stats("x", exp, evals, "demo", layout)
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    FIGURES[layout](stats, [png, pdf])
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert image[..., :3].std() > 0.05  # not blank
    assert pdf.read_bytes().startswith(b"%PDF")
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
