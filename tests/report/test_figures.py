"""Figures: each layout's drawer writes readable PNG and PDF files (every layout has one:
tests/report/test_layouts.py)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest

from arbench.report.experiment import experiment_stats
from arbench.report.layouts import draw


@pytest.mark.parametrize("layout", ["bars", "sweep", "grid", "tuned"])
def test_figures_are_written_and_readable(layout, request, tmp_path: Path) -> None:
    exp = request.getfixturevalue(f"{layout}_experiment")
    evals = request.getfixturevalue(f"{layout}_evals")
    layout = "grid" if layout == "tuned" else layout
    stats = experiment_stats("x", exp, evals, "demo", layout)
    png, pdf = tmp_path / "f.png", tmp_path / "f.pdf"
    draw(stats, [png, pdf])
    image = matplotlib.image.imread(png)
    assert image.shape[0] > 300 and image.shape[1] > 500
    assert image[..., :3].std() > 0.05  # not blank
    assert pdf.read_bytes().startswith(b"%PDF")
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_lockin_figure_draws_a_curve_per_seed(
    lockin_experiment, lockin_evals, lockin_curves, tmp_path: Path
) -> None:
    stats = experiment_stats("x", lockin_experiment, lockin_evals, "demo", "lockin", lockin_curves)
    assert len(stats["arms"]["ramped"]["curves"]["0"]) == 20
    assert stats["arms"]["ramped"]["curves"]["0"][0]["gap"] == 0.05
    png = tmp_path / "f.png"
    draw(stats, [png])
    image = matplotlib.image.imread(png)
    assert image.shape[1] > 500 and image[..., :3].std() > 0.05


def _drawn(monkeypatch, drawer, stats):  # noqa: ANN001, ANN202
    """The matplotlib figure ``drawer`` would save (its axes stay open to read)."""
    from arbench.report import figures

    kept = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, outputs: kept.append(fig))
    drawer(stats, [])
    return kept[0]


@pytest.mark.parametrize("layout", ["grid", "tuned"])
def test_a_grid_axis_is_labelled_in_words_not_by_its_config_key(
    layout, request, monkeypatch
) -> None:
    from arbench.report.figures import GRID_WORDS, grid_lines

    exp = request.getfixturevalue(f"{layout}_experiment")
    stats = experiment_stats("x", exp, request.getfixturevalue(f"{layout}_evals"), "demo", "grid")
    label = _drawn(monkeypatch, grid_lines, stats).axes[0].get_xlabel()
    assert label == GRID_WORDS[exp["grid"]["key"]]
    assert "." not in label and "_" not in label


def test_every_grid_key_of_the_config_has_words() -> None:
    from arbench import config as arbench_config
    from arbench.report.figures import GRID_WORDS, TASK_GRID_WORDS, grid_axis_label

    for scale in ("paper", "study", "demo", "smoke"):
        cfg = arbench_config.load(scale=scale)
        for name, exp in cfg["experiments"].items():
            if "grid" not in exp:
                continue
            key, task = exp["grid"]["key"], exp["task"]["name"]
            assert key in GRID_WORDS or (task, key) in TASK_GRID_WORDS, f"{scale} {name}: {key}"
            assert key not in grid_axis_label(key, task)
