"""The paper's satellite runs as experiments on the paper recipe (issue 47): each plans, at paper
scale, the arms, budget, seeds and reference sets of the paper's own run, and each smaller scale
cuts it as its comment says. Each expectation is the paper's (its scripts and result files,
docs/PROTOCOL.md "The satellites as the paper ran them"), written out here, not read back from
the config."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.config.scales import apply_scale
from arbench.plan import Plan
from arbench.report.reference import load_reference

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())
REFERENCE = ROOT / "references" / "paper_code_results.yaml"

# Table 2's arms (scripts/mqar_probe.py --models ..., the App. B command), and its eighth, the
# attention control the table leaves out (its result files are in the K-sweep's sets)
RECURRENT_KSWEEP_ARMS = {
    "armed_gdn",
    "gated_deltanet",
    "deltanet",
    "dg_rank_ref",
    "dg_diag_ref",
    "mamba2_ref",
    "mamba2_ref_noconv",
}
KSWEEP_ARMS = RECURRENT_KSWEEP_ARMS | {"attention"}


@pytest.fixture(scope="module")
def paper() -> Plan:
    return Plan(config.load(scale="paper"))


def _rows(plan: Plan, experiment: str) -> dict[str, object]:
    return {r.name: r for r in plan.table.of(experiment)}


def test_the_k_sweep_plans_table_2s_budget_at_each_k(paper: Plan) -> None:
    exp = paper.experiments["paper_ksweep"]
    assert exp["recipe"] == "paper" and set(exp["arms"]) == KSWEEP_ARMS
    # the eighth arm, the adaLN-Zero attention denoiser at the script's default 8 heads
    attention = exp["arms"]["attention"]
    assert (attention["cell"], attention["heads"]) == ("full_attention", 8)
    assert attention["model"] == {"direction": "full", "block": "adaln_zero"}
    rows = _rows(paper, "paper_ksweep")
    steps = {8: 3000, 16: 4000, 32: 6000}  # 2000 + 125 K (mqar_probe.py main)
    for arm in KSWEEP_ARMS:
        for k, n in steps.items():
            row = rows[f"{arm}-pairs{k}"]
            assert (row.task["name"], row.task["pairs"]) == ("paper_mqar", k)
            assert (row.train["steps"], row.train["batch"], row.train["lr"]) == (n, 256, 1e-3)
            assert row.seeds == 3  # seeds 0-2 (_armed_p1070)
            direction = "full" if arm == "attention" else "bidirectional"
            assert row.model["layers"] == 1 and row.model["direction"] == direction
        # K = 32 at 6,000 steps is Table 1's run: trained once, by paper_mqar (attention is
        # no Table 1 arm: the K-sweep trains it at every K)
        owner = "paper_ksweep" if arm == "attention" else "paper_mqar"
        assert paper.table.owner("paper_ksweep", f"{arm}-pairs32", 2)[0] == owner
        assert paper.table.owner("paper_ksweep", f"{arm}-pairs8", 0)[0] == "paper_ksweep"


def test_the_learning_rate_sweep_runs_each_arm_at_the_papers_rates(paper: Plan) -> None:
    rows = _rows(paper, "paper_lr_sweep")
    rates = {
        "gated_deltanet": [3e-4, 1e-3, 3e-3],  # _lr3e4, Table 1, _lr3e3
        "deltanet": [3e-4, 1e-3, 3e-3],
        "mamba2_ref_noconv": [3e-4, 1e-3, 3e-3],
        "armed_gdn": [1e-3, 3e-3],  # Table 1, _armedlr3e3
        "dg_rank_conv_ref": [1e-3, 3e-3],
        "dg_diag_conv": [1e-3, 3e-3],
        "mamba2_ref": [1e-3],  # Table 1 only: the partner of the tuned unarmed arm
    }
    planned = {}
    for row in rows.values():
        planned.setdefault(row.arm, []).append(row.train["lr"])
        assert (row.train["steps"], row.train["batch"], row.task["pairs"]) == (6000, 256, 32)
        assert row.seeds == 5
    assert planned == rates
    for arm in rates:  # the 1e-3 point is Table 1's runs, seeds 0-4
        assert paper.table.owner("paper_lr_sweep", f"{arm}-lr0.001", 4) == ("paper_mqar", arm)
    assert paper.experiments["paper_lr_sweep"]["grid"]["tune"] is True


def test_each_run_arm_sits_beside_the_papers_own_seeds_at_its_value(paper: Plan) -> None:
    # the reference sets named per grid value reach the run arms they belong to
    ref = paper.experiments["paper_ksweep"]["reference"]
    merged = load_reference(REFERENCE, ref["set"])
    assert merged["arms"]["mamba2_ref_noconv-pairs8"][2] == 0.52587890625  # ksweep_k8, seed 2
    assert merged["arms"]["gated_deltanet-pairs16"][0] == 0.90966796875  # ksweep_k16
    assert merged["arms"]["attention-pairs32"][0] == 0.126953125  # ksweep_k32 (8 heads)
    assert set(merged["arms"]) >= {f"{a}-pairs{k}" for a in KSWEEP_ARMS for k in (8, 16, 32)}
    lr = load_reference(REFERENCE, paper.experiments["paper_lr_sweep"]["reference"]["set"])
    assert lr["arms"]["armed_gdn-lr0.003"][4] == 0.998046875  # armedlr3e3
    assert lr["arms"]["gated_deltanet-lr0.003"][1] == 0.70263671875  # lr3e3
    assert lr["arms"]["gated_deltanet-lr0.001"][19] == 0.7470703125  # table1_k32 (n = 20)
    assert lr["rebind"]["mamba2_ref_noconv-lr0.0003"][3] == 0.0458984375  # lr3e4
    assert "armed_gdn-lr0.0003" not in lr["arms"]  # the paper never ran it


def test_the_smaller_scales_cut_the_satellites_to_their_paths() -> None:
    smoke, demo = (Plan(config.load(scale=s)) for s in ("smoke", "demo"))
    # smoke: the K-sweep at K = 32 and the rate sweep's armed arm at 1e-3 are Table 1's
    # runs; the unarmed arm at 3e-3 is the only training of their own
    own = [t for t in smoke.table.trainings() if t[0] in ("paper_ksweep", "paper_lr_sweep")]
    assert own == [("paper_lr_sweep", "gated_deltanet-lr0.003", 0)]
    assert sorted(_rows(smoke, "paper_lr_sweep")) == [
        "armed_gdn-lr0.001",
        "gated_deltanet-lr0.001",
        "gated_deltanet-lr0.003",
    ]
    # demo: each experiment's path only, 40 steps of 64, its claims not measured
    for name, runs in (
        ("paper_ksweep", ["armed_gdn-pairs8"]),
        ("paper_lr_sweep", ["gated_deltanet-lr0.001", "armed_gdn-lr0.003"]),
    ):
        rows = _rows(demo, name)
        assert list(rows) == runs and demo.experiments[name]["path_only"]
        assert all(
            (r.train["steps"], r.train["batch"], r.seeds) == (40, 64, 1) for r in rows.values()
        )
    # the reference sets of the values a scale cuts go with them (those of the values kept stay)
    placed = {
        (plan.scale, name): [s["set"] for s in plan.experiments[name]["reference"]["set"]]
        for plan in (smoke, demo)
        for name in ("paper_ksweep", "paper_lr_sweep")
    }
    assert placed == {
        ("smoke", "paper_ksweep"): ["ksweep_k32"],
        ("smoke", "paper_lr_sweep"): ["table1_k32", "lr3e3", "armedlr3e3"],
        ("demo", "paper_ksweep"): ["ksweep_k8"],
        ("demo", "paper_lr_sweep"): ["table1_k32", "lr3e3", "armedlr3e3"],
    }


# ------------------------------------------------------------------ scale rules and the grid


def _scaled(rules: dict, grid: dict) -> dict:
    cfg = {
        "scale": "s",
        "scales": {"s": rules},
        "experiments": {
            "e": {
                "train": {"steps": 6000, "lr": 1e-3},
                "arms": {"a": {}, "b": {}},
                "grid": copy.deepcopy(grid),
            }
        },
    }
    return apply_scale(cfg)["experiments"]["e"]


GRID = {
    "key": "task.pairs",
    "values": [8, 16, 32],
    "with": {"train.steps": [3000, 4000, 6000]},
    "arms": {"b": [16, 32]},
}


def test_a_scale_rule_on_a_setting_reaches_its_per_value_list() -> None:
    e = _scaled({"multiply": {"experiments.*.train.steps": 0.1}}, GRID)
    assert (e["train"]["steps"], e["grid"]["with"]["train.steps"]) == (600, [300, 400, 600])
    e = _scaled({"set": {"experiments.*.train.steps": 40}}, GRID)
    assert e["grid"]["with"]["train.steps"] == [40, 40, 40]
    e = _scaled({"set": {"experiments.e.train": {"steps": 7, "lr": 1.0}}}, GRID)
    assert e["grid"]["with"]["train.steps"] == [7, 7, 7]
    e = _scaled({"set": {"experiments.e.train.lr": 2.0}}, GRID)  # another setting: untouched
    assert e["grid"]["with"]["train.steps"] == [3000, 4000, 6000]


def test_a_scale_that_cuts_the_grid_values_cuts_their_lists_and_subsets() -> None:
    e = _scaled({"set": {"experiments.e.grid.values": [32, 8]}}, GRID)
    assert e["grid"] == {
        "key": "task.pairs",
        "values": [32, 8],
        "with": {"train.steps": [6000, 3000]},
        "arms": {"b": [32]},
    }
    # values outside the grid's own are set as they are; the lists must then be set too
    e = _scaled({"set": {"experiments.e.grid.values": [4, 8]}}, GRID)
    assert e["grid"]["values"] == [4, 8] and e["grid"]["with"]["train.steps"] == [3000, 4000, 6000]


def _error(edit) -> str:
    cfg = copy.deepcopy(RAW)
    edit(cfg)
    with pytest.raises(config.ConfigError) as err:
        config.resolve(cfg)
    return str(err.value)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda g: g["with"].update({"train.steps": [3000, 4000]}),
            "experiments.paper_ksweep.grid.with.train.steps: 2 settings for 3 grid values "
            "[8, 16, 32]",
        ),
        (
            lambda g: g["with"].update({"train.stepz": [1, 2, 3]}),
            "experiments.paper_ksweep.grid.with.train.stepz: names no train setting",
        ),
        (
            lambda g: g["with"].update({"task.pairs": [1, 2, 3]}),
            "experiments.paper_ksweep.grid.with.task.pairs: is the grid key itself",
        ),
        (
            lambda g: g["with"].update({"train.steps": [3000, "4000", 6000]}),
            "experiments.paper_ksweep.grid.with.train.steps: '4000' for train.steps (run arm "
            "armed_gdn-pairs16): '4000' is not of type 'integer'",
        ),
        (
            lambda g: g.update(arms={"armed_gdnn": [8]}),
            "experiments.paper_ksweep.grid.arms.armed_gdnn: not an arm of the experiment",
        ),
        (
            lambda g: g.update(arms={"armed_gdn": [8, 64]}),
            "experiments.paper_ksweep.grid.arms.armed_gdn: [64] not among the grid's values",
        ),
    ],
)
def test_a_bad_per_value_setting_or_subset_fails_naming_the_key(edit, message: str) -> None:
    got = _error(lambda c: edit(c["experiments"]["paper_ksweep"]["grid"]))
    assert re.match(re.escape(message), got), got


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            [{"set": "ksweep_k8", "at": "pairs9"}],
            "experiments.paper_ksweep.reference.set[0].at: 'pairs9' is no grid value's label "
            "(the grid's: ['pairs8', 'pairs16', 'pairs32'])",
        ),
        (
            [{"set": "ksweep_k8", "at": "pairs8"}, {"set": "ksweep_k8", "at": "pairs8"}],
            "experiments.paper_ksweep.reference.file: ",
        ),
        (
            [{"set": "ksweep_k9", "at": "pairs8"}],
            "experiments.paper_ksweep.reference.set: ",
        ),
    ],
)
def test_a_bad_placed_reference_set_fails_naming_the_key(sets, message: str) -> None:
    got = _error(lambda c: c["experiments"]["paper_ksweep"]["reference"].update(set=sets))
    assert re.match(re.escape(message), got) and "\n" not in got, got


# ------------------------------------------------------- the hardened ablation and the session

# dg_c9_harden.py's ARMS, and mqar_probe.py's mamba2 at --mamba2-d-state 16 (the paired session)
OFFICIAL = {"cell": "mamba2_fused", "heads": 8, "d_state": 16, "head_dim": 8, "chunk_size": 64}


def _official_skipped(exp: dict, arm: str) -> None:
    """The official Mamba-2 arm: declared, and skipped here with mamba_ssm's reason (or
    planned where it imports)."""
    from arbench.cells.mamba2_fused import FusedMamba2Cell

    reason = FusedMamba2Cell.unavailable_reason()
    if reason is None:
        assert {k: exp["arms"][arm][k] for k in OFFICIAL} == OFFICIAL
    else:
        assert arm not in exp["arms"] and "mamba_ssm" in exp["skipped"]["arms"][arm]


def test_the_hardened_ablation_plans_the_scripts_arms_ks_and_ten_seeds(paper: Plan) -> None:
    exp = paper.experiments["paper_hardened"]
    raw = RAW["experiments"]["paper_hardened"]
    assert exp["recipe"] == "paper" and "reference" not in exp  # script only
    assert {k: raw["arms"]["mamba2_ds16"][k] for k in OFFICIAL} == OFFICIAL
    assert raw["arms"]["mamba2_ds16"]["model"] == {"merge": "average"}  # 0.5 (fwd + bwd)
    _official_skipped(exp, "mamba2_ds16")
    rows = _rows(paper, "paper_hardened")
    for arm in ("dg_rank_ref", "dg_diag_ref", "deltanet"):
        for k, steps in ((16, 4000), (32, 6000)):  # 2000 + 125 K
            row = rows[f"{arm}-pairs{k}"]
            assert (row.task["pairs"], row.train["steps"], row.train["batch"]) == (k, steps, 256)
            assert (row.seeds, row.train["lr"], row.examples) == (10, 1e-3, 2048)
            assert row.eval_options["rebinding"] is True
        # K = 16 seeds 0-2 are the K-sweep's runs; seeds 3-9 and K = 32 as owned
        assert paper.table.owner("paper_hardened", f"{arm}-pairs16", 2)[0] == "paper_ksweep"
        assert paper.table.owner("paper_hardened", f"{arm}-pairs16", 3)[0] == "paper_hardened"
        assert paper.table.owner("paper_hardened", f"{arm}-pairs32", 9) == ("paper_mqar", arm)
    assert exp["lock_in_threshold"] == 0.9


def test_the_paired_session_plans_three_rates_beside_the_sessions_sets(paper: Plan) -> None:
    exp = paper.experiments["paper_mamba2_session"]
    _official_skipped(exp, "mamba2")
    rows = _rows(paper, "paper_mamba2_session")
    assert sorted(rows) == ["armed_gdn-lr0.001", "armed_gdn-lr0.003", "armed_gdn-lr0.01"]
    assert all(
        (r.train["steps"], r.train["batch"], r.task["pairs"], r.seeds) == (6000, 256, 32, 5)
        for r in rows.values()
    )
    assert paper.table.owner("paper_mamba2_session", "armed_gdn-lr0.001", 4)[0] == "paper_mqar"
    assert paper.table.owner("paper_mamba2_session", "armed_gdn-lr0.003", 4)[0] == (
        "paper_lr_sweep"
    )
    assert paper.table.owner("paper_mamba2_session", "armed_gdn-lr0.01", 0)[0] == (
        "paper_mamba2_session"
    )
    ref = load_reference(REFERENCE, exp["reference"]["set"])
    assert ref["arms"]["mamba2-lr0.01"][0] == 0.06396484375  # ampT_lr1e2, a collapsed seed
    assert ref["arms"]["armed_gdn-lr0.001"][3] == 0.86474609375  # ampT_lr1e3
    if "mamba2" not in exp["arms"]:  # its contrast is recorded as not run, never dropped
        assert [c["b"] for c in exp["skipped"]["contrasts"]] == ["mamba2"]


def test_the_smaller_scales_cut_the_hardened_ablation_and_the_session() -> None:
    smoke, demo = (Plan(config.load(scale=s)) for s in ("smoke", "demo"))
    # demo: one training of the hardened path (K = 16, 40 x 64); the session's one run is the
    # rate sweep's armed run at 3e-3 (its default moved there), beside the 3e-3 set only
    assert [t for t in demo.table.trainings() if t[0] == "paper_hardened"] == [
        ("paper_hardened", "dg_diag_ref-pairs16", 0)
    ]
    assert demo.table.owner("paper_mamba2_session", "armed_gdn-lr0.003", 0) == (
        "paper_lr_sweep",
        "armed_gdn-lr0.003",
    )
    assert [s["set"] for s in demo.experiments["paper_mamba2_session"]["reference"]["set"]] == [
        "ampT_lr3e3"
    ]
    # smoke: both are paper_mqar's runs
    assert not [
        t for t in smoke.table.trainings() if t[0] in ("paper_hardened", "paper_mamba2_session")
    ]
