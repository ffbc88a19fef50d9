"""The lattice-memory report on synthetic statistics: the largest P at the target recall
(including a curve that drops below it and comes back), the forgetting split and its
floors, the time per step, the table (compiled with pdflatex when present) and the
three-panel figure, the config block that names the studies and the reported arm, and the
plan that asks for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arbench import config as arbench_config
from arbench import experiment
from arbench.plan import Plan
from arbench.report.experiment import experiment_stats
from arbench.report.lattice import (
    figure,
    largest_reached,
    lattice_arm,
    lattice_studies,
    render_table,
    summary,
    updated_floor,
)

BLOCK = {
    "experiments": {"realtext": "lt_text", "capacity": "lt_cap", "forgetting": "lt_forget"},
    "arm": "lattice",
}
STUDIES = lattice_studies({"lattice": BLOCK})
ARM = lattice_arm({"lattice": BLOCK})

TRAIN = {"steps": 100, "batch": 8, "lr": 1e-2, "warmup": 10}
LATTICE = {"cell": "lattice", "heads": 2, "d_v": 4, "addr_scale": 2.5}
DELTA = {"cell": "delta_rule", "heads": 1, "d_k": 14, "d_v": 14, "conv": True}


def _experiment(task: dict[str, Any], grid: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "title": f"lattice {task['name']} & co",
        "task": task,
        "model": {"d_model": 16, "layers": 1},
        "train": TRAIN,
        "eval": {"examples": 40},
        "seeds": 2,
        "lock_in_threshold": 0.99,
        "grid": grid,
        "arms": {"lattice": LATTICE, "delta_rule": DELTA},
        "contrasts": [{"knob": "memory", "a": "lattice", "b": "delta_rule"}],
        **extra,
    }


CAPACITY = _experiment(
    {"name": "lattice_recall", "pairs": 4, "n_keys": 64, "n_values": 64},
    {"key": "task.pairs", "values": [4, 8, 16, 32]},
)
FORGETTING = _experiment(
    {"name": "lattice_recall", "pairs": 16, "n_keys": 64, "n_values": 64},
    {"key": "task.overwrite", "values": [0.25, 0.5], "scale": "linear"},
)
REALTEXT = _experiment(
    {"name": "realtext", "corpus": "corpora/synthetic.txt", "pairs": 8, "overwrite": 0.5},
    {"key": "task.pairs", "values": [8, 16]},
)
# per (arm, grid value): two seeds' headline accuracies. The lattice reaches 0.99 at P = 4 and
# 8, drops at 16 and comes back at 32: its capacity at 0.99 is 8, not 32.
CAPACITY_SCORES = {
    ("lattice", 4): [1.0, 0.998],
    ("lattice", 8): [0.995, 0.99],
    ("lattice", 16): [0.97, 0.99],
    ("lattice", 32): [0.999, 0.995],
    ("delta_rule", 4): [0.98, 0.99],
    ("delta_rule", 8): [0.5, 0.4],
    ("delta_rule", 16): [0.1, 0.2],
    ("delta_rule", 32): [0.05, 0.01],
}


def _evals(
    exp: dict[str, Any], scores: dict[tuple[str, Any], list[float]], split: bool = False
) -> list[dict[str, Any]]:
    out = []
    for run_arm, (arm, value) in ((r.name, (r.arm, r.value)) for r in experiment.runs_of("", exp)):
        for seed, acc in enumerate(scores[(arm, value)]):
            s: dict[str, Any] = {"accuracy": acc, "queries": 100}
            if split:  # the forgetting evaluation: headline = updated, untouched beside
                s |= {
                    "accuracy_updated": acc,
                    "accuracy_untouched": min(1.0, acc + 0.1),
                    "accuracy_all": acc + 0.05,
                }
            else:
                s |= {"accuracy_updated": None, "accuracy_untouched": acc}
            out.append(
                {
                    "experiment": "x",
                    "arm": run_arm,
                    "seed": seed,
                    "scores": s,
                    "n_parameters": 5000 + 10 * (arm == "lattice"),
                    "state_size_per_layer": 256,
                    "train_wall_time_s": 2.0 if arm == "lattice" else 5.0,
                }
            )
    return out


@pytest.fixture(scope="module")
def stats() -> dict[str, dict[str, Any]]:
    forgetting = {
        (a, v): [0.8 - v, 0.7 - v] for a in ("lattice", "delta_rule") for v in (0.25, 0.5)
    }
    realtext = {(a, v): [0.9, 0.85] for a in ("lattice", "delta_rule") for v in (8, 16)}
    return {
        "capacity": experiment_stats(
            STUDIES["capacity"], CAPACITY, _evals(CAPACITY, CAPACITY_SCORES), "demo", "grid"
        ),
        "forgetting": experiment_stats(
            STUDIES["forgetting"],
            FORGETTING,
            _evals(FORGETTING, forgetting, split=True),
            "demo",
            "grid",
        ),
        "realtext": experiment_stats(
            STUDIES["realtext"], REALTEXT, _evals(REALTEXT, realtext), "demo", "grid"
        ),
    }


def test_largest_reached_counts_only_an_unbroken_run_from_the_smallest() -> None:
    assert largest_reached([4, 8, 16, 32], [1.0, 0.99, 0.98, 1.0]) == 8
    assert largest_reached([32, 4, 16, 8], [1.0, 1.0, 0.98, 0.99]) == 8  # grid order aside
    assert largest_reached([4, 8], [0.995, 0.999]) == 8
    assert largest_reached([4, 8], [0.9, 1.0]) is None
    assert largest_reached([4, 8], [0.95, 0.9], target=0.9) == 8


def test_capacity_reports_the_largest_p_before_the_drop(stats) -> None:
    r = summary(stats, ARM)
    cap = r["capacity"]
    assert cap["arms"]["lattice"]["largest"] == 8  # 16 falls to 0.98; 32 does not count
    assert cap["arms"]["delta_rule"]["largest"] is None  # 0.985 already at P = 4
    assert r["lattice_arm"] == "lattice" and r["lattice_largest"] == 8
    means = [p["mean"] for p in cap["arms"]["lattice"]["points"]]
    assert means == pytest.approx([0.999, 0.9925, 0.98, 0.997])
    # time per step: each run's wall time over its 100 steps
    assert r["lattice_seconds_per_step"] == pytest.approx(0.02)
    assert cap["arms"]["delta_rule"]["seconds_per_step"] == pytest.approx(0.05)
    assert cap["arms"]["lattice"]["state"] == 256


def test_forgetting_splits_updated_and_untouched_keys(stats) -> None:
    f = summary(stats, ARM)["forgetting"]
    point = f["arms"]["lattice"]["points"][0]  # overwrite 0.25
    assert point["mean"] == pytest.approx(0.5)  # the headline: updated keys
    assert point["splits"]["accuracy_updated"] == pytest.approx(0.5)
    assert point["splits"]["accuracy_untouched"] == pytest.approx(0.6)
    assert point["splits"]["accuracy_all"] == pytest.approx(0.55)
    assert f["updated_floors"] == [pytest.approx(1 / 4), pytest.approx(1 / 8)]  # 1/M of 16
    assert updated_floor({"pairs": 16}, 0.0) is None


def test_a_missing_study_is_named(stats) -> None:
    with pytest.raises(ValueError, match=r"no statistics for \['realtext'\]"):
        summary({k: v for k, v in stats.items() if k != "realtext"}, ARM)


def test_table_renders_every_study(stats) -> None:
    tex = render_table(summary(stats, ARM))
    assert "\\label{tab:lattice}" in tex
    assert "(a) capacity" in tex and "(b) forgetting" in tex and "(c) real text" in tex
    assert "up to $P = 8$ stored pairs" in tex
    assert "0.02 s per training step" in tex
    # forgetting: updated and untouched rows, the updated floor 1/M per fraction
    assert "updated & 0.500 & 0.250" in tex and "untouched & 0.600 & 0.350" in tex
    assert "updated no-binding &  & 0.250 & 0.125" in tex
    assert "synthetic.txt" in tex


def test_table_says_when_the_smallest_load_already_fails(stats) -> None:
    low = {**stats, "capacity": {**stats["capacity"]}}
    arms = {k: dict(v) for k, v in stats["capacity"]["arms"].items()}
    arms["lattice-pairs4"]["mean"] = 0.5
    low["capacity"]["arms"] = arms
    tex = render_table(summary(low, ARM))
    assert "less than 0.99 of its keys already at the smallest load measured, $P = 4$" in tex


def test_table_compiles(stats, tmp_path: Path, compile_tex) -> None:
    compile_tex(render_table(summary(stats, ARM)), tmp_path)


def test_figure_writes_both_files(stats, tmp_path: Path) -> None:
    out = [tmp_path / "lattice.pdf", tmp_path / "lattice.png"]
    figure(summary(stats, ARM), out)
    assert all(p.stat().st_size > 1000 for p in out)


def test_the_config_block_names_the_studies_in_report_order_and_the_arm() -> None:
    assert list(STUDIES.items()) == [
        ("capacity", "lt_cap"),
        ("forgetting", "lt_forget"),
        ("realtext", "lt_text"),
    ]
    assert ARM == "lattice"
    with pytest.raises(ValueError, match=r"missing \['realtext'\], unknown \['speed'\]"):
        lattice_studies(
            {
                "lattice": {
                    **BLOCK,
                    "experiments": {"capacity": "a", "forgetting": "b", "speed": "c"},
                }
            }
        )


def test_the_note_reports_the_arm_the_config_names_by_name_not_prefix(stats) -> None:
    r = summary(stats, "delta_rule")
    assert r["lattice_arm"] == "delta_rule" and r["lattice_largest"] is None
    assert r["lattice_seconds_per_step"] == pytest.approx(0.05)
    none = summary(stats, "lattice_v2")  # no such arm: the note says so
    assert none["lattice_arm"] is None
    assert "No lattice arm in the capacity study." in render_table(none)


def test_the_plan_asks_for_the_report_with_its_three_studies() -> None:
    cfg = arbench_config.load(scale="smoke")
    plan = Plan(cfg)
    root = plan.root
    targets = plan.targets()
    assert {f"{root}/tables/lattice.tex", f"{root}/figures/lattice.png"} <= set(targets)
    studies = lattice_studies(cfg)
    assert set(studies.values()) <= set(cfg["experiments"])
    for name in studies.values():
        assert f"{root}/tables/{name}.tex" in targets
    cfg = {
        **cfg,
        "experiments": {k: v for k, v in cfg["experiments"].items() if k != studies["realtext"]},
    }
    assert f"{root}/tables/lattice.tex" not in Plan(cfg).targets()


# --------------------------------------------------------------------------- the figure


def _realtext_with_updates() -> dict[str, Any]:
    """Real-text statistics whose evaluations report updated keys (P = 8 and 16 at overwrite
    0.5: M = 4 and 8 updated keys), all accuracies above the zoom threshold."""
    scores = {(a, v): [0.9, 0.85] for a in ("lattice", "delta_rule") for v in (8, 16)}
    return experiment_stats(
        STUDIES["realtext"], REALTEXT, _evals(REALTEXT, scores, split=True), "demo", "grid"
    )


@pytest.fixture(scope="module")
def drawn(stats) -> Any:
    import matplotlib.pyplot as plt

    from arbench.report.lattice import draw

    fig = draw(summary({**stats, "realtext": _realtext_with_updates()}, ARM))
    yield fig
    plt.close(fig)


def _labelled(ax: Any) -> dict[str, Any]:
    return {
        line.get_label(): line for line in ax.get_lines() if not line.get_label().startswith("_")
    }


def test_the_target_recall_line_is_labelled(drawn) -> None:
    labels = _labelled(drawn.axes[0])
    assert "target recall 0.99" in labels
    assert set(labels["target recall 0.99"].get_ydata()) == {0.99}


def test_every_floor_the_legend_names_lies_inside_its_axis(drawn) -> None:
    """A zoomed panel (real text: every accuracy above 0.8) still shows its floors."""
    for ax in drawn.axes:
        lo, hi = ax.get_ylim()
        floors = [line for label, line in _labelled(ax).items() if "no-binding" in label]
        assert floors, ax.get_title()
        for line in floors:
            ys = [y for y in line.get_ydata() if np.isfinite(y)]
            assert ys and all(lo <= y <= hi for y in ys), (ax.get_title(), line.get_label())


def test_updated_and_untouched_keys_differ_in_colour_line_and_marker(drawn) -> None:
    for ax in drawn.axes[1:]:
        labels = _labelled(ax)
        updated = labels["lattice: updated keys"]
        other = labels.get("lattice: untouched keys") or labels["lattice: all queries"]
        assert updated.get_color() != other.get_color()
        assert updated.get_marker() != other.get_marker()
        if "untouched" in other.get_label():
            assert updated.get_linestyle() != other.get_linestyle()


def test_the_same_number_of_updated_keys_draws_one_floor_in_every_panel(drawn) -> None:
    """Forgetting at P = 16, overwrite 0.25 and real text at P = 8, overwrite 0.5 both update
    M = 4 keys: both panels draw the updated keys' floor 1/M = 0.25 there."""
    forgetting, realtext = drawn.axes[1], drawn.axes[2]

    def updated_floor_at(ax: Any, x: float) -> float:
        (line,) = [ln for lab, ln in _labelled(ax).items() if "updated keys (1/M)" in lab]
        return float(dict(zip(line.get_xdata(), line.get_ydata(), strict=True))[x])

    assert updated_floor_at(forgetting, 0.25) == updated_floor_at(realtext, 8.0) == 0.25
    assert updated_floor_at(realtext, 16.0) == updated_floor_at(forgetting, 0.5) == 1 / 8


def test_every_axis_is_labelled_in_words(drawn) -> None:
    for ax in drawn.axes:
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert label and "." not in label and "_" not in label and "task" not in label


def test_load_axes_are_ticked_at_the_loads_in_plain_numbers(drawn) -> None:
    """The capacity and real-text panels tick the P measured as numbers (16), not 2^4; the
    forgetting panel ticks its overwrite fractions."""
    for ax in drawn.axes:
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks and not any("^" in t or "$" in t for t in ticks), ticks
        assert [float(t.replace(",", "")) for t in ticks] == list(ax.get_xticks())
