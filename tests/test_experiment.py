"""The experiment grammar's expansion (arbench.experiment): run arms, their settings, their
datasets and the owners of shared runs, against hand-written expectations."""

from __future__ import annotations

import pytest

from arbench.experiment import RunTable, run_of, runs_of

ARMS = {
    "delta": {"cell": "delta_rule", "conv": False},
    "delta_conv": {"cell": "delta_rule", "conv": True, "eval_rebinding": True},
    "long": {"cell": "delta_rule", "conv": True, "task": {"seq_len": 64}},
}
BASE = {
    "task": {"name": "mqar", "pairs": 4, "seq_len": 0},
    "model": {"d_model": 16, "layers": 2, "cell_options": {"heads": 1}},
    "train": {"steps": 10, "batch": 4, "lr": 1e-3, "warmup": 1},
    "eval": {"examples": 8},
    "seeds": 2,
    "arms": ARMS,
}
GRID = {**BASE, "grid": {"key": "task.pairs", "values": [4, 8]}}


def test_a_grid_makes_one_row_per_arm_and_value_arm_major() -> None:
    names = [r.name for r in runs_of("g", GRID)]
    assert names == [
        "delta-pairs4",
        "delta-pairs8",
        "delta_conv-pairs4",
        "delta_conv-pairs8",
        "long-pairs4",
        "long-pairs8",
    ]
    row = run_of(GRID, "long-pairs8")
    assert (row.arm, row.value, row.task["pairs"], row.task["seq_len"]) == ("long", 8, 8, 64)
    assert row.model["cell_options"] == {"heads": 1, "conv": True}
    assert run_of(GRID, "delta_conv-pairs4").eval_options == {"rebinding": True}
    assert BASE["task"]["pairs"] == 4  # the block itself is never edited
    with pytest.raises(KeyError, match="known"):
        run_of(GRID, "delta-pairs16")


def test_datasets_are_one_per_task_block_and_runs_are_owned_by_the_first_identical() -> None:
    table = RunTable({"a": BASE, "g": GRID}, stream={"a", "g"})
    assert table.dataset("a", "delta") == table.dataset("a", "delta_conv") == "a"
    assert table.dataset("a", "long") == "a-long"
    assert table.dataset("g", "delta-pairs8") == "g-pairs8"
    assert table.dataset("g", "long-pairs4") == "g-long-pairs4"
    assert set(table.datasets) == {
        "a",
        "a-long",
        "g-pairs4",
        "g-pairs8",
        "g-long-pairs4",
        "g-long-pairs8",
    }
    # g's K = 4 rows train what a's rows train: a owns them, seed by seed
    assert table.owner("g", "delta-pairs4", 1) == ("a", "delta")
    assert table.owner("g", "delta-pairs8", 0) == ("g", "delta-pairs8")
    assert len(table.trainings()) == 2 * (3 + 3)  # a's 3 arms, g's 3 at K = 8, 2 seeds each


def test_a_release_experiment_has_no_stream_dataset() -> None:
    table = RunTable({"a": BASE}, stream=set())
    assert table.datasets == {} and table.dataset("a", "delta") == "a"


def test_seeds_may_differ_per_arm_and_a_number_sets_every_arm() -> None:
    exp = {**BASE, "seeds": {"default": 3, "long": 5}}
    assert {r.name: r.seeds for r in runs_of("a", exp)} == {"delta": 3, "delta_conv": 3, "long": 5}
    table = RunTable({"a": exp}, stream={"a"})
    assert len(table.trainings()) == 3 + 3 + 5
    # the held-out set of the dataset two arms share is checked for the larger count
    shared = {**BASE, "seeds": {"default": 1, "delta_conv": 4}}
    assert RunTable({"a": shared}, stream={"a"}).datasets["a"]["seeds"] == 4
