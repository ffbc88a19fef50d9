"""Claims checked against the plan before any job: an unknown experiment fails planning at
every scale, a mistyped arm at paper scale (where every arm runs), and a wrong path in a
claim on a path-only experiment fails its report instead of reading "not run"."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.plan import Plan
from arbench.report import claims as C

ROOT = Path(__file__).resolve().parents[2]
DOC = yaml.safe_load((ROOT / "claims.yaml").read_text())


@pytest.fixture(scope="module")
def paper_plan() -> Plan:
    return Plan(config.resolve(config.read_config([ROOT / "config.yaml"], {"scale": "paper"})))


def _with(**change: object) -> C.ClaimsFile:
    doc = copy.deepcopy(DOC)
    entry = next(c for c in doc["claims"] if c["id"] == "conv_rank1_k32")
    entry.update(change)
    return C.parse_claims(doc)


def test_the_claims_file_passes_the_check_at_paper_scale(paper_plan: Plan) -> None:
    C.check_against_plan(C.load_claims(ROOT / "claims.yaml"), paper_plan)


def test_an_unknown_experiment_fails_planning(paper_plan: Plan) -> None:
    with pytest.raises(
        C.ClaimError,
        match=r"claim conv_rank1_k32: experiment: no experiment "
        r"'paper_mqqar' in the config",
    ):
        C.planned_stats(_with(experiment="paper_mqqar"), paper_plan)


@pytest.mark.parametrize(
    "change, key",
    [
        ({"statistic": "contrasts[a=armed_gdnn,b=gated_deltanet]/diff"}, "statistic"),
        ({"p": "contrasts[a=armed_gdn,b=gated_deltanett]/p"}, "p"),
        (
            {"statistic": "arms/mamba2_reff/mean", "rule": "at_least", "threshold": 0.5, "p": None},
            "statistic",
        ),
    ],
)
def test_a_mistyped_arm_fails_planning_at_paper_scale(paper_plan: Plan, change, key) -> None:
    doc = copy.deepcopy(DOC)
    entry = next(c for c in doc["claims"] if c["id"] == "conv_rank1_k32")
    entry.update(change)
    if entry.get("p") is None:
        entry.pop("p")
        entry["rule"] = "at_least"
    with pytest.raises(C.ClaimError, match=rf"claim conv_rank1_k32: {key}: .* names arm"):
        C.check_against_plan(C.parse_claims(doc), paper_plan)


def test_an_ordering_arm_typo_fails_planning(paper_plan: Plan) -> None:
    doc = copy.deepcopy(DOC)
    entry = next(c for c in doc["claims"] if c["id"] == "s5_depth_falls")
    entry["arms"] = ["armed-depth2", "armd-depth4"]
    with pytest.raises(C.ClaimError, match=r"claim s5_depth_falls: statistic: .*'armd-depth4'"):
        C.check_against_plan(C.parse_claims(doc), paper_plan)


def test_a_wrong_path_on_a_path_only_experiment_is_an_error() -> None:
    stats = {"experiment": "toy", "path_only": True, "arms": {"x": {"mean": 0.5, "n": 5}}}
    doc = {
        "sources": ["the paper summary"],
        "claims": [
            {
                "id": "typo",
                "claim": "c",
                "source": {"title": "the paper summary", "section": "1"},
                "source_value": 0.5,
                "experiment": "toy",
                "statistic": "arms/y/mean",
                "rule": "at_least",
            }
        ],
    }
    (c,) = C.parse_claims(doc).claims
    with pytest.raises(C.ClaimError, match=r"claim typo: statistic path 'arms/y/mean'"):
        C.evaluate_claim(c, stats, "demo")
    doc["claims"][0]["statistic"] = "arms/x/mean"
    (c,) = C.parse_claims(doc).claims
    assert C.evaluate_claim(c, stats, "demo").verdict == C.NOT_RUN
