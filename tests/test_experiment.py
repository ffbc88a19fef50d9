"""The experiment grammar's expansion (arbench.experiment): run arms, their settings, their
datasets and the owners of shared runs, against hand-written expectations."""

from __future__ import annotations

import pytest

from arbench.experiment import RunTable, grid_settings, grid_values, restrict_grid, run_of, runs_of

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


# ------------------------------------------------------------------ per-value settings, subsets

KSWEEP = {
    **BASE,
    "grid": {"key": "task.pairs", "values": [4, 8], "with": {"train.steps": [30, 40]}},
}


def test_a_grid_with_list_sets_another_setting_per_value_over_the_arm_and_block() -> None:
    rows = {r.name: r for r in runs_of("k", KSWEEP)}
    assert (rows["delta-pairs4"].train["steps"], rows["delta-pairs8"].train["steps"]) == (30, 40)
    assert rows["delta-pairs8"].task["pairs"] == 8 and rows["delta-pairs8"].train["lr"] == 1e-3
    # an arm's own setting of the key is overridden, as the grid key's would be
    own = {**KSWEEP, "arms": {"a": {"cell": "delta_rule", "train": {"steps": 99}}}}
    assert [r.train["steps"] for r in runs_of("k", own)] == [30, 40]
    assert BASE["train"]["steps"] == 10  # the block itself is never edited
    # different steps are different runs: none is shared with the block without a grid
    table = RunTable({"a": BASE, "k": KSWEEP}, stream={"a", "k"})
    assert table.owner("k", "delta-pairs4", 0) == ("k", "delta-pairs4")
    same = {**KSWEEP, "grid": {**KSWEEP["grid"], "with": {"train.steps": [10, 40]}}}
    table = RunTable({"a": BASE, "k": same}, stream={"a", "k"})
    assert table.owner("k", "delta-pairs4", 0) == ("a", "delta")


def test_a_grid_arms_subset_runs_those_arms_at_those_values_only() -> None:
    exp = {
        **BASE,
        "grid": {"key": "train.lr", "values": [1e-4, 1e-3, 1e-2], "arms": {"long": [1e-2, 1e-3]}},
    }
    names = [r.name for r in runs_of("s", exp)]
    assert names == [
        "delta-lr0.0001",
        "delta-lr0.001",
        "delta-lr0.01",
        "delta_conv-lr0.0001",
        "delta_conv-lr0.001",
        "delta_conv-lr0.01",
        "long-lr0.001",  # the grid's order, not the subset's
        "long-lr0.01",
    ]
    assert (
        grid_values(exp, "long") == [1e-3, 1e-2]
        and grid_values(exp, "delta") == exp["grid"]["values"]
    )
    assert grid_values(BASE) == [None]
    with pytest.raises(KeyError, match="not a run arm"):
        run_of(exp, "long-lr0.0001")


def test_restricting_a_grid_cuts_its_with_lists_and_arm_subsets_alike() -> None:
    grid = {
        "key": "task.pairs",
        "values": [4, 8, 16],
        "with": {"train.steps": [1, 2, 3]},
        "arms": {"long": [8, 16], "delta": [4]},
    }
    cut = restrict_grid(grid, lambda v: v != 8)
    assert cut == {
        "key": "task.pairs",
        "values": [4, 16],
        "with": {"train.steps": [1, 3]},
        "arms": {"long": [16], "delta": [4]},
    }
    assert grid["values"] == [4, 8, 16]  # a copy
    assert grid_settings(grid, 16) == [("task.pairs", 16), ("train.steps", 3)]
