"""The lattice-memory studies as the config declares them: at every scale each arm of a study
holds exactly the lattice arm's state per layer, the paper scale trains the protocol's model
up to P = 8,192 on 16,384 keys, the real-text task reads the corpus the corpus rule writes,
and the frontier shapes the lattice at every state."""

from __future__ import annotations

import pytest

from arbench import config as arbench_config
from arbench import experiment
from arbench.cells import build_cell
from arbench.report.lattice import lattice_studies
from arbench.tasks import build_task

STUDIES = lattice_studies(arbench_config.load_yaml(arbench_config.ROOT / "config.yaml"))


@pytest.fixture(scope="module", params=["paper", "study", "demo", "smoke"])
def cfg(request) -> dict:
    return arbench_config.load(scale=request.param)


def test_every_arm_matches_the_lattice_state(cfg: dict) -> None:
    for name in STUDIES.values():
        exp = cfg["experiments"][name]
        states = {}
        for run_arm in [r.name for r in experiment.runs_of("", exp)]:
            m = experiment.run_of(exp, run_arm).model
            states[run_arm] = build_cell(m["cell"], m["d_model"], **m["cell_options"]).state_size()
        lattice = {s for a, s in states.items() if a.startswith("lattice-")}
        assert len(lattice) == 1, (name, states)
        assert set(states.values()) == lattice, (name, states)


def test_paper_scale_is_the_protocol() -> None:
    cfg = arbench_config.load(scale="paper")
    cap = cfg["experiments"][STUDIES["capacity"]]
    assert max(cap["grid"]["values"]) == 8192
    assert cap["task"]["n_keys"] == cap["task"]["n_values"] == 16384
    m = experiment.run_of(cap, "lattice-pairs8192").model
    assert (m["d_model"], m["layers"]) == (64, 1)
    opts = m["cell_options"]
    assert (opts["heads"], opts["d_v"], opts["addr_scale"], opts["retention_init"]) == (
        2,
        32,
        64,
        9.0,
    )
    assert {"delta_rule", "gated_deltanet", "mamba2"} <= set(cap["arms"])
    forgetting = cfg["experiments"][STUDIES["forgetting"]]
    assert forgetting["eval"]["headline"] == "updated"


def test_the_real_text_task_reads_the_corpus_the_rule_writes(cfg: dict) -> None:
    exp = cfg["experiments"][STUDIES["realtext"]]
    for run_arm in [r.name for r in experiment.runs_of("", exp)]:
        task = build_task(experiment.run_of(exp, run_arm).task)
        assert task.input_files() == [cfg["realtext_corpus"]]


def test_the_frontier_shapes_the_lattice_at_every_state() -> None:
    cfg = arbench_config.load(scale="paper")
    block = cfg["experiments"]["frontier"]
    for state in block["frontier"]["states"]:
        arm = block["arms"][f"lattice_s{state}"]
        width = arm["model"]["d_model"]
        options = {k: v for k, v in arm.items() if k not in ("cell", "model")}
        assert build_cell("lattice", width, **options).state_size() == state
        assert options["d_v"] >= 4 and options["conv"] is True
