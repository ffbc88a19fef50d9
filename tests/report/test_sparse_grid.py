"""A grid whose arms run at some values only (``grid.arms``) and whose other settings change per
value (``grid.with``), with the source's own results placed at each value (several reference
sets, ``set: [{set, at}]``): statistics, the table and the figure (issue 47, the paper's K-sweep
and learning-rate sweep)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.image
import pytest
import yaml

from arbench.experiment import run_of
from arbench.report.experiment import experiment_stats
from arbench.report.layouts import draw
from arbench.report.reference import ReferenceFileError, load_reference
from arbench.report.tables import TEMPLATES, render

from .conftest import BARS, GRID_SCORES, _eval

# "armed" runs at the two larger rates only; "plain" at all three, best at the largest
SPARSE = {
    **BARS,
    "title": "A sparse tuned grid",
    "train": {**BARS["train"], "lr": 2e-3},
    "grid": {
        "key": "train.lr",
        "values": [1e-3, 2e-3, 4e-3],
        "tune": True,
        "arms": {"armed": [2e-3, 4e-3]},
        "with": {"train.steps": [10, 20, 40]},
    },
}
SETS = {
    "low": {"arms": {"plain": {0: 0.1, 1: 0.2}}, "folder": "results/x", "file": "{arm}_low.json"},
    "high": {
        "arms": {"plain": {0: 0.9}, "armed": {0: 1.0, 1: 0.98}},
        "rebind": {"armed": {0: 0.05, 1: 0.04}},
        "folder": "results/x",
        "file": "{arm}_high.json",
    },
}
PLACED = [{"set": "low", "at": "lr0.001"}, {"set": "high", "at": "lr0.004"}]


@pytest.fixture
def reference_file(tmp_path: Path) -> Path:
    path = tmp_path / "ref.yaml"
    path.write_text(yaml.safe_dump({"repository": "o/r", "commit": "c" * 40, "sets": SETS}))
    return path


def _evals() -> list[dict]:
    out = []
    for arm in ("armed", "plain"):
        for i, lr in enumerate(SPARSE["grid"]["values"]):
            if lr not in SPARSE["grid"]["arms"].get(arm, [lr]):
                continue
            for seed, acc in enumerate(GRID_SCORES[(arm, i)]):
                ev = _eval(arm, seed, acc, False)
                ev["arm"] = run_of(SPARSE, f"{arm}-lr{lr:g}").name
                out.append(ev)
    return out


def test_several_sets_placed_at_grid_values_become_those_run_arms(reference_file) -> None:
    ref = load_reference(reference_file, PLACED)
    assert ref["arms"] == {
        "plain-lr0.001": {0: 0.1, 1: 0.2},
        "plain-lr0.004": {0: 0.9},
        "armed-lr0.004": {0: 1.0, 1: 0.98},
    }
    assert ref["rebind"] == {"armed-lr0.004": {0: 0.05, 1: 0.04}}
    assert ref["name"] == "low, high" and ref["commit"] == "c" * 40
    assert ref["file"] == "{arm}_low.json; {arm}_high.json"  # each set's own pattern
    assert load_reference(reference_file, "low")["arms"] == {"plain": {0: 0.1, 1: 0.2}}
    with pytest.raises(
        ReferenceFileError, match="set high gives arms of 'armed-lr0.004', which an earlier set"
    ):
        load_reference(reference_file, [*PLACED, {"set": "high", "at": "lr0.004"}])
    with pytest.raises(KeyError, match="no set 'hi'"):
        load_reference(reference_file, [{"set": "hi"}])


def test_a_sparse_grid_compares_and_tunes_only_where_an_arm_runs(reference_file) -> None:
    stats = experiment_stats(
        "s", SPARSE, _evals(), "demo", "grid", reference=load_reference(reference_file, PLACED)
    )
    g = stats["grid"]
    assert g["table"]["armed"] == {"0.002": "armed-lr0.002", "0.004": "armed-lr0.004"}
    assert g["sparse"] and g["with"] == {"train.steps": [10, 20, 40]}
    assert [c["value"] for c in stats["contrasts"]] == [2e-3, 4e-3]  # not at 1e-3
    assert g["tuned"]["best"] == {"armed": 2e-3, "plain": 4e-3}  # armed's best of its own two
    assert stats["arms"]["armed-lr0.004"]["steps"] == 40  # the run's own steps
    assert stats["arms"]["plain-lr0.001"]["reference"]["mean"] == pytest.approx(0.15)
    assert "reference" not in stats["arms"]["armed-lr0.002"]  # no set there
    assert stats["contrasts"][1]["reference_diff"] == pytest.approx(0.99 - 0.9)
    tex = render(TEMPLATES / "grid.tex.j2", source="s.json", **stats)
    assert r"\texttt{armed} & -- & " in tex  # the value it does not run at
    assert "10/20/40 steps at lr = 0.001/0.002/0.004" in tex
    assert r"\quad paper & 0.150 {\scriptsize [0.100, 0.200] ($n$=2)} & -- & 0.900" in tex
    assert "an arm run at some of the values only" in tex
    assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 2


def test_the_sparse_grid_figure_draws_each_arm_where_it_runs(reference_file, tmp_path) -> None:
    stats = experiment_stats(
        "s", SPARSE, _evals(), "demo", "grid", reference=load_reference(reference_file, PLACED)
    )
    png = tmp_path / "f.png"
    draw(stats, [png])
    image = matplotlib.image.imread(png)
    assert image.shape[1] > 500 and image[..., :3].std() > 0.05
