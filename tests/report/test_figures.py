"""Figures: each layout's drawer writes readable PNG and PDF files (every layout has one:
tests/report/test_layouts.py)."""

from __future__ import annotations

import re
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


def test_a_grid_on_updated_keys_names_them_and_draws_their_floor(
    grid_experiment, grid_evals, monkeypatch
) -> None:
    """A forgetting grid (eval.headline: updated) says on its accuracy axis that it counts
    the updated keys and draws their floor 1/M, the lattice figure's, not the task's floor
    over all queries beside a number that is not over all queries."""
    from arbench.report.figures import HEADLINE_WORDS, grid_lines
    from arbench.report.lattice import updated_floors

    exp = {**grid_experiment, "eval": {**grid_experiment["eval"], "headline": "updated"}}
    stats = experiment_stats("x", exp, grid_evals, "demo", "grid")
    assert stats["headline"] == "updated"
    stats["task"] = {**stats["task"], "overwrite": 0.5}  # the fixture's task rewrites none
    ax = _drawn(monkeypatch, grid_lines, stats).axes[0]
    assert ax.get_ylabel() == HEADLINE_WORDS["updated"]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert "best no-binding" not in lines
    (floor,) = [ln for label, ln in lines.items() if "updated keys (1/M)" in label]
    want = updated_floors(list(exp["grid"]["values"]), [0.5] * len(exp["grid"]["values"]))
    assert list(floor.get_ydata()) == want  # P = 2, 4 at overwrite 0.5: M = 1, 2
    plain = experiment_stats("x", grid_experiment, grid_evals, "demo", "grid")
    ax = _drawn(monkeypatch, grid_lines, plain).axes[0]
    assert ax.get_ylabel() == "held-out accuracy"
    assert "best no-binding" in {ln.get_label() for ln in ax.get_lines()}


CONFIG_KEY = re.compile(r"\b(task|train|model|eval|grid|arms?)\.[a-z_]+")


def _texts(fig) -> list[str]:  # noqa: ANN001
    """Every label, title and tick label a reader sees on the figure's axes."""
    out = [fig._suptitle.get_text()] if fig._suptitle is not None else []
    for ax in fig.axes:
        out += [ax.get_xlabel(), ax.get_ylabel(), ax.get_title()]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
    return out


@pytest.mark.parametrize("layout", ["bars", "sweep", "grid", "tuned", "lockin"])
def test_no_config_key_reaches_an_axis(layout, request, monkeypatch) -> None:
    """Whatever a figure's grid sweeps, its axes speak words: no label, title or tick of any
    layout's figure reads like a config key (task.pairs, train.lr)."""
    from arbench.report import figures
    from arbench.report.layouts import draw

    exp = request.getfixturevalue(f"{layout}_experiment")
    evals = request.getfixturevalue(f"{layout}_evals")
    extra = [request.getfixturevalue("lockin_curves")] if layout == "lockin" else []
    stats = experiment_stats(
        "x", exp, evals, "demo", "grid" if layout == "tuned" else layout, *extra
    )
    kept = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, outputs: kept.append(fig))
    draw(stats, [])
    texts = _texts(kept[0])
    assert any(texts)
    assert not [t for t in texts if CONFIG_KEY.search(t)], texts


def test_a_grid_key_without_words_still_reads_in_words() -> None:
    """A key no table names yet falls back to its leaf in words, never the dotted path."""
    from arbench.report.figures import grid_axis_label

    label = grid_axis_label("task.some_new_knob", "a_task")
    assert label == "some new knob" and not CONFIG_KEY.search(label)
