"""The paper recipe's arms land on the paper's parameter counts (its result files'
``params``, JIBSIL/dualgoose @824f4b73 results/mqar_probe/*_k32_d32l1_*): d_model 32, one
bidirectional layer, its MQAR vocabulary (64 ids) and 72 positions (K = 32), built from
`experiments.paper_mqar` exactly as its training jobs build them; and so do the wall across
lengths (`experiments.paper_wall_lengths`, two layers) and the K-sweep's attention control."""

from __future__ import annotations

import pytest

from arbench import config
from arbench.cells import count_parameters
from arbench.experiment import runs_of
from arbench.models import families
from arbench.tasks.base import build_task

PAPER_PARAMS = {
    "deltanet": 24_546,
    "gated_deltanet": 26_658,
    "armed_gdn": 27_618,
    "dg_rank_ref": 30_816,
    "dg_diag_ref": 30_816,
    "dg_rank_conv_ref": 31_776,
    "dg_diag_conv": 31_776,
    "mamba2_ref": 30_208,
    "mamba2_ref_noconv": 29_632,
}


@pytest.fixture(scope="module")
def runs() -> dict:
    cfg = config.load(scale="paper")
    return {run.arm: run for run in runs_of("paper_mqar", cfg["experiments"]["paper_mqar"])}


@pytest.mark.parametrize("arm", sorted(PAPER_PARAMS))
def test_each_arm_has_the_papers_parameter_count(runs: dict, arm: str) -> None:
    run = runs[arm]
    task = build_task(run.task)
    assert task.vocab_size == 64 and task.positions() == 72
    model = families.build(
        families.model_config(run.model, task.vocab_size, positions=task.positions()), 0
    )
    assert count_parameters(model) == PAPER_PARAMS[arm]
    assert model.state_size_per_layer() == 2 * 1024  # 1,024 per direction


def test_every_arm_of_the_experiment_is_pinned(runs: dict) -> None:
    assert set(runs) == set(PAPER_PARAMS)


# the wall across lengths (results/long_retrieval/*_L{64,128,256}p4_d32_2Lw5_seed0.json @561886945,
# field params): two layers, the 64-id haystack vocabulary, the length's positions
WALL_PARAMS = {
    "armed_gdn": {64: 49_508, 128: 51_556, 256: 55_652},
    "mamba2_ref": {64: 54_688, 128: 56_736, 256: 60_832},
    "dg_rank_ref": {64: 55_904, 128: 57_952, 256: 62_048},
    "attention": {64: 43_040, 128: 45_088, 256: 49_184},
}
# the K-sweep's one-layer attention control (results/mqar_probe/attention_k{8,16,32}_d32l1_
# armed_p1070_seed0.json @824f4b73): 8 heads at d 32, L = 2K + 8
KSWEEP_ATTENTION_PARAMS = {8: 22_848, 16: 23_360, 32: 24_384}


def _built(run) -> tuple:
    task = build_task(run.task)
    cfg = families.model_config(run.model, task.vocab_size, positions=task.positions())
    return task, families.build(cfg, 0)


def test_the_wall_across_lengths_has_the_papers_parameter_counts() -> None:
    cfg = config.load(scale="paper")
    runs = runs_of("paper_wall_lengths", cfg["experiments"]["paper_wall_lengths"])
    got = {}
    for run in runs:
        task, model = _built(run)
        assert task.vocab_size == 64 and task.positions() == run.value
        got.setdefault(run.arm, {})[run.value] = count_parameters(model)
        state = 0 if run.arm == "attention" else 2 * 1024  # both directions; no fixed state
        assert model.state_size_per_layer() == state
    assert got == WALL_PARAMS


def test_the_k_sweeps_attention_control_has_the_papers_parameter_counts() -> None:
    cfg = config.load(scale="paper")
    runs = runs_of("paper_ksweep", cfg["experiments"]["paper_ksweep"])
    got = {r.value: count_parameters(_built(r)[1]) for r in runs if r.arm == "attention"}
    assert got == KSWEEP_ATTENTION_PARAMS
