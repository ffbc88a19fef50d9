"""The wall across lengths as the paper ran it (issue 47; Table 4): at paper scale the arms,
lengths, budget, seeds and reference sets of the paper's runs, the armed arm at L = 64 shared
with paper_wall; each smaller scale cuts it to its path. Each expectation is the paper's (its
result files results/long_retrieval/*_2Lw5_seed*.json @561886945 and the App. B command,
docs/PROTOCOL.md "The wall across lengths as the paper ran it"), written out here, not read
back from the config."""

from __future__ import annotations

from pathlib import Path

import pytest

from arbench import config
from arbench.plan import Plan
from arbench.report.reference import load_reference

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "references" / "paper_code_results.yaml"
# the App. B command's --models (long_retrieval_probe.py), --heads 2 reaching attention alone
ARMS = {"armed_gdn", "mamba2_ref", "dg_rank_ref", "attention"}
LENGTHS = (64, 128, 256)


@pytest.fixture(scope="module")
def paper() -> Plan:
    return Plan(config.load(scale="paper"))


def _rows(plan: Plan) -> dict[str, object]:
    return {r.name: r for r in plan.table.of("paper_wall_lengths")}


def test_every_arm_runs_end_only_at_each_length_on_the_files_budget(paper: Plan) -> None:
    exp = paper.experiments["paper_wall_lengths"]
    assert exp["recipe"] == "paper" and set(exp["arms"]) == ARMS
    rows = _rows(paper)
    assert set(rows) == {f"{a}-seq_len{n}" for a in ARMS for n in LENGTHS}
    for row in rows.values():
        task = row.task
        assert (task["name"], task["pairs"], task["seq_len"]) == ("paper_haystack", 4, row.value)
        assert task.get("queries", 1) == 1 and not task.get("collision", False)  # end-only
        assert "curriculum" not in row.train
        # every file: 2 layers, 3000 x 256, lr 1e-3, 2,048 held out, seeds 0-4
        assert (row.train["steps"], row.train["batch"], row.train["lr"]) == (3000, 256, 1e-3)
        assert (row.model["layers"], row.model["d_model"], row.examples) == (2, 32, 2048)
        assert row.seeds == 5
    cells = {a: rows[f"{a}-seq_len64"].model for a in ARMS}
    assert cells["armed_gdn"]["cell_options"] == {"decay": True, "conv": True}
    assert cells["mamba2_ref"]["cell"] == "mamba2_ref" and cells["mamba2_ref"]["merge"] == "average"
    assert cells["dg_rank_ref"]["cell_options"] == {"rank": True}
    assert cells["attention"]["cell_options"] == {"heads": 2}  # "attention (head dim 16)"
    assert (cells["attention"]["direction"], cells["attention"]["block"]) == ("full", "adaln_zero")


def test_the_armed_arm_at_64_is_paper_walls_end_only_run(paper: Plan) -> None:
    assert paper.table.owner("paper_wall_lengths", "armed_gdn-seq_len64", 4) == (
        "paper_wall",
        "end_only",
    )
    for name in ("armed_gdn-seq_len128", "attention-seq_len64", "mamba2_ref-seq_len256"):
        assert paper.table.owner("paper_wall_lengths", name, 0)[0] == "paper_wall_lengths"


def test_each_length_sits_beside_the_papers_own_seeds(paper: Plan) -> None:
    ref = paper.experiments["paper_wall_lengths"]["reference"]
    merged = load_reference(REFERENCE, ref["set"])
    assert set(merged["arms"]) == {f"{a}-seq_len{n}" for a in ARMS for n in LENGTHS}
    assert merged["arms"]["armed_gdn-seq_len256"][0] == 0.0234375  # the widest recurrent trial
    assert merged["arms"]["mamba2_ref-seq_len64"][3] == 0.013671875  # the narrowest
    assert all(v == 1.0 for n in LENGTHS for v in merged["arms"][f"attention-seq_len{n}"].values())
    # the L = 64 armed seeds are paper_wall's end-only seeds (the same files)
    wall = load_reference(REFERENCE, "wall_l64")
    assert merged["arms"]["armed_gdn-seq_len64"] == wall["arms"]["end_only"]
    recurrent = [
        v
        for a in ARMS - {"attention"}
        for n in LENGTHS
        for v in merged["arms"][f"{a}-seq_len{n}"].values()
    ]
    assert len(recurrent) == 45 and 0.0136 < min(recurrent) and max(recurrent) < 0.0235


def test_the_smaller_scales_cut_it_to_its_path() -> None:
    smoke, demo, study = (Plan(config.load(scale=s)) for s in ("smoke", "demo", "study"))
    # smoke: L = 64; the armed arm is paper_wall's end_only run, the attention control the one
    # training of its own
    assert sorted(_rows(smoke)) == ["armed_gdn-seq_len64", "attention-seq_len64"]
    own = [t for t in smoke.table.trainings() if t[0] == "paper_wall_lengths"]
    assert own == [("paper_wall_lengths", "attention-seq_len64", 0)]
    assert smoke.table.owner("paper_wall_lengths", "armed_gdn-seq_len64", 0) == (
        "paper_wall",
        "end_only",
    )
    # demo: its path only, both arms at L = 64, 40 steps of 64, one seed
    rows = _rows(demo)
    assert sorted(rows) == ["armed_gdn-seq_len64", "attention-seq_len64"]
    assert demo.experiments["paper_wall_lengths"]["path_only"]
    assert all((r.train["steps"], r.train["batch"], r.seeds) == (40, 64, 1) for r in rows.values())
    assert set(demo.experiments["paper_wall_lengths"]["skipped"]["arms"]) == {
        "mamba2_ref",
        "dg_rank_ref",
    }
    # the reference sets of the lengths a scale cuts go with them
    for plan in (smoke, demo):
        sets = [s["set"] for s in plan.experiments["paper_wall_lengths"]["reference"]["set"]]
        assert sets == ["wall_lengths_l64"]
    # study: L = 64 and 128, every arm, two seeds
    assert {r.value for r in _rows(study).values()} == {64, 128}
    assert {r.arm for r in _rows(study).values()} == ARMS
    assert all(r.seeds == 2 for r in _rows(study).values())
