"""The paper recipe's arms land on the paper's parameter counts (its result files'
``params``, JIBSIL/dualgoose @824f4b73 results/mqar_probe/*_k32_d32l1_*): d_model 32, one
bidirectional layer, its MQAR vocabulary (64 ids) and 72 positions (K = 32), built from
`experiments.paper_mqar` exactly as its training jobs build them."""

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
