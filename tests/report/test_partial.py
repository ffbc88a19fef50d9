"""Paper-scale statistics and claims from the evaluations present: arms without one are
skipped with their seeds present of those planned (their claims read "not run" with that
reason), claims on the arms present are decided, and each evaluation is read from the
results folder before the release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from arbench.experiment import RunTable
from arbench.paper_release import build_record, identity_hash
from arbench.plan import Plan
from arbench.report import claims as C
from arbench.report import partial

SCORES = {"armed": [0.95, 0.97, 0.99, 0.96, 0.92], "plain": [0.10, 0.12, 0.11, 0.15, 0.13]}
CLAIMS = """
alpha: 0.05
sources: [the test source]
claims:
  - id: conv_helps
    claim: The convolution helps.
    source: {title: the test source, section: §1}
    source_value: 0.8
    experiment: x
    statistic: "contrasts[a=armed,b=plain]/diff"
    p: "contrasts[a=armed,b=plain]/p"
    rule: same_sign_significant
  - id: conv_beats_missing
    claim: The convolution beats the arm that never ran.
    source: {title: the test source, section: §2}
    source_value: 0.5
    experiment: x
    statistic: "contrasts[a=armed,b=missing]/diff"
    p: "contrasts[a=armed,b=missing]/p"
    rule: same_sign_significant
"""


@pytest.fixture
def exp(bars_experiment: dict[str, Any]) -> dict[str, Any]:
    """The bars experiment with a third arm that has no evaluation, and a contrast on it."""
    missing = {"cell": "delta_rule", "conv": False, "model": {"layers": 1}}  # a run of its own
    arms = {**bars_experiment["arms"], "missing": missing}
    contrasts = [*bars_experiment["contrasts"], {"knob": "x", "a": "armed", "b": "missing"}]
    return {**bars_experiment, "arms": arms, "contrasts": contrasts}


def _ev(arm: str, seed: int) -> dict[str, Any]:
    return {
        "experiment": "x",
        "arm": arm,
        "seed": seed,
        "scores": {"accuracy": SCORES[arm.split("-")[0]][seed]},
        "n_parameters": 1000,
        "state_size_per_layer": 256,
        "train_wall_time_s": 1.0,
    }


def _evals(plain_seeds: int = 5, source: str = partial.RESULTS) -> list[partial.Evaluation]:
    pairs = [("armed", s) for s in range(5)] + [("plain", s) for s in range(plain_seeds)]
    return [partial.Evaluation("x", a, s, source, Path(f"{a}/{s}"), _ev(a, s)) for a, s in pairs]


def test_arms_without_evaluations_are_skipped_with_their_seed_counts(exp) -> None:
    stats, arms = partial.partial_stats("x", exp, _evals(plain_seeds=3), "bars")
    assert stats["arm_order"] == ["armed", "plain"]
    assert stats["skipped"]["arms"] == {"missing": "0 of 5 planned seeds present"}
    assert [(c["a"], c["b"]) for c in stats["skipped"]["contrasts"]] == [("armed", "missing")]
    assert [(c["a"], c["b"]) for c in stats["contrasts"]] == [("armed", "plain")]
    plain = stats["arms"]["plain"]
    assert (plain["n"], plain["seeds_present"], plain["seeds_planned"]) == (3, 3, 5)
    assert plain["seed_sources"] == {"0": "results", "1": "results", "2": "results"}
    assert [a.present for a in arms] == [5, 3, 0]
    assert stats["partial"] == {
        "seeds_present": 8,
        "seeds_planned": 15,
        "from_results": 8,
        "from_release": 0,
    }
    assert partial.partial_stats("x", exp, [], "bars")[0] is None


def test_a_grid_value_no_arm_has_is_dropped_and_an_incomplete_arm_kept_where_it_ran(
    grid_experiment,
) -> None:
    evals = [
        partial.Evaluation("x", run_arm, s, partial.RELEASE, Path("."), _ev(run_arm, s))
        for run_arm in ("armed-pairs2", "plain-pairs2", "armed-pairs4")
        for s in range(5)
    ]
    exp = {**grid_experiment, "grid": {"key": "task.pairs", "values": [2, 4, 8]}}
    block, _ = partial.partial_block("x", exp, evals)
    assert block["grid"]["values"] == [2, 4] and list(block["arms"]) == ["armed", "plain"]
    assert block["grid"]["arms"] == {"plain": [2]}
    assert block["skipped"]["arms"] == {"plain-pairs4": "0 of 5 planned seeds present"}
    stats, _ = partial.partial_stats("x", exp, evals, "grid")
    assert stats["arms"]["plain-pairs2"]["n"] == 5 and "plain-pairs4" not in stats["arms"]
    assert [c["value"] for c in stats["contrasts"]] == [2]
    lost = [c for c in stats["skipped"]["contrasts"] if c.get("value") == 4]
    assert [(c["a"], c["b"]) for c in lost] == [("armed", "plain")]
    assert "plain-pairs4" in lost[0]["why"]


def test_a_tuned_best_over_the_rates_that_happen_to_have_run_is_not_reported(
    tuned_experiment, tuned_evals
) -> None:
    """ "plain" lacks its best rate (4e-3): a best over 1e-3 and 2e-3 would be no tuned best,
    so its best and the best-rate contrast go, skipped with the run arm it lacks."""
    evals = [
        partial.Evaluation("x", e["arm"], e["seed"], partial.RELEASE, Path("."), e)
        for e in tuned_evals
        if e["arm"] != "plain-lr0.004"
    ]
    stats, _ = partial.partial_stats("x", tuned_experiment, evals, "grid")
    tuned = stats["grid"]["tuned"]
    assert list(tuned["best"]) == ["armed"] and tuned["contrasts_best"] == []
    skipped = [c for c in stats["skipped"]["contrasts"] if c.get("tuned")]
    assert [(c["a"], c["b"]) for c in skipped] == [("armed", "plain")]
    assert "plain-lr0.004" in skipped[0]["why"]
    complete, _ = partial.partial_stats(
        "x",
        tuned_experiment,
        [
            partial.Evaluation("x", e["arm"], e["seed"], partial.RELEASE, Path("."), e)
            for e in tuned_evals
        ],
        "grid",
    )
    assert complete["grid"]["tuned"]["best"]["plain"] == 4e-3


def test_claims_on_missing_arms_read_not_run_and_on_present_arms_decide(
    exp, tmp_path: Path
) -> None:
    stats, _ = partial.partial_stats("x", exp, _evals(), "bars")
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "x.json").write_text(json.dumps(stats))
    (tmp_path / "claims.yaml").write_text(CLAIMS)
    results = {
        r.claim.id: r
        for r in C.evaluate(C.load_claims(tmp_path / "claims.yaml"), tmp_path, "paper")
    }
    decided = results["conv_helps"]
    assert decided.verdict in partial.DECIDED and decided.verdict != "not reproduced"
    assert partial.min_seeds(decided.n) == 5
    missing = results["conv_beats_missing"]
    assert missing.verdict == partial.NOT_RUN
    assert "missing" in missing.reason and "0 of 5 planned seeds present" in missing.reason


def test_gather_reads_results_first_then_the_release_and_leaves_stale_records_out(
    exp, tmp_path: Path
) -> None:
    table = RunTable({"x": exp}, set())
    path = tmp_path / "results" / "evals" / "x" / "armed" / "seed0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_ev("armed", 0)))
    final = {"fingerprint": "f" * 16, "threads": 1, "wall_time_s": 2.0, "train": {"steps": 4}}
    final |= {"n_parameters": 1000, "state_size_per_layer": 256}

    def record(arm: str, seed: int, accuracy: float, identity: str) -> dict[str, Any]:
        ev = {**_ev(arm, seed), "scores": {"accuracy": accuracy}}
        stamp = dict(commit="a" * 40, dirty=False, host={}, provenance="")
        return build_record(ev, final, "0" * 64, identity=identity, trained_as=("x", arm), **stamp)

    ident = {a: identity_hash(table, table.row("x", a)) for a in ("armed", "plain")}
    release = {
        ("x", "armed", 0): record("armed", 0, 0.5, ident["armed"]),  # results/ wins, differs
        ("x", "armed", 1): record("armed", 1, 0.97, ident["armed"]),
        ("x", "plain", 0): record("plain", 0, 0.1, ident["armed"]),  # another row's identity
    }
    got = partial.gather(table, tmp_path / "results", release, "rel")
    assert [(e.arm, e.seed, e.source) for e in got.evals["x"]] == [
        ("armed", 0, "results"),
        ("armed", 1, "release"),
    ]
    assert got.evals["x"][1].eval["train_wall_time_s"] == 2.0
    assert [str(p) for p, _ in got.stale] == ["rel/x/plain/seed0.json"]
    assert [(a.name, b.name) for a, b in got.disagree] == [("seed0.json", "seed0.json")]


def test_a_shared_run_reads_its_owners_evaluation_only_where_it_scores_alike(
    exp, tmp_path: Path
) -> None:
    """Experiment y trains nothing of its own: its arms are x's runs. Where y scores a run as
    x does (same task block, count and options) it reads x's evaluation; where its
    evaluation differs (another held-out count) it reads nothing."""
    same = {**exp, "title": "y"}
    other_count = {**exp, "eval": {**exp.get("eval", {}), "examples": 7}}
    table = RunTable({"x": exp, "y": same, "z": other_count}, set())
    assert table.owner("y", "armed", 0) == ("x", "armed") == table.owner("z", "armed", 0)
    root = tmp_path / "results"
    for e in _evals(plain_seeds=2):
        path = root / "evals" / "x" / e.arm / f"seed{e.seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**e.eval, "train_wall_time_s": 1.0}))
    (root / "evals" / "y" / "plain").mkdir(parents=True)  # y's own seed 4 of plain wins
    (root / "evals" / "y" / "plain" / "seed4.json").write_text(
        json.dumps({**_ev("plain", 4), "experiment": "y"})
    )
    got = partial.gather(table, root, {}, "rel")
    ys = {(e.arm, e.seed): e for e in got.evals["y"]}
    assert sorted(ys) == [("armed", s) for s in range(5)] + [
        ("plain", 0),
        ("plain", 1),
        ("plain", 4),
    ]
    assert ys[("armed", 3)].eval["experiment"] == "y" and ys[("armed", 3)].eval["arm"] == "armed"
    assert ys[("armed", 3)].eval["scores"] == _ev("armed", 3)["scores"]
    assert ("y", "plain", 4) not in got.shared and got.shared[("y", "armed", 0)] == ("x", "armed")
    assert got.evals["z"] == []  # scored on another held-out count: not the same evaluation
    # x trains 5 + 5 runs: 7 evaluated in x, plain seed 4 in y alone; shared ones count once
    assert partial.trainings_present(table, got)[0] == 8


def test_build_writes_the_report_with_its_header(exp, tmp_path: Path) -> None:
    root = tmp_path / "results"
    for e in _evals(plain_seeds=3):
        path = root / "evals" / "x" / e.arm / f"seed{e.seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(e.eval))
    (tmp_path / "claims.yaml").write_text(CLAIMS)
    plan = Plan({"scale": "paper", "experiments": {"x": exp}})
    out = tmp_path / "report"
    report = partial.build(
        plan, root, {}, out, claims_path=tmp_path / "claims.yaml", release_dir="rel", figures=False
    )
    assert report.trainings == (8, 15) and report.evaluations == (8, 15)
    md = (out / "claims.md").read_text()
    assert "**8 of 15 trainings of the paper DAG present**" in md
    assert "8 evaluations from the results folder" in md and "0 from the release" in md
    assert "| `x` | `missing` | 0 / 5 |" in md and "| `x` | `plain` | 3 / 5 | s0, s1, s2 |" in md
    assert report.counts()["trained"] == {"reproduced (sign only)": 1, partial.NOT_RUN: 1} or (
        report.counts()["trained"] == {"reproduced": 1, partial.NOT_RUN: 1}
    )
    assert (out / "tables" / "x.tex").exists() and (out / "tables" / "claims.tex").exists()
    runs = json.loads((out / "runs.json").read_text())
    assert runs["experiments"]["x"]["plain"]["sources"] == {
        "0": "results",
        "1": "results",
        "2": "results",
    }


def test_claim_kinds_and_seed_counts() -> None:
    claims = C.parse_claims(
        {
            "sources": ["s"],
            "claims": [
                {
                    "id": "floor",
                    "claim": "a floor",
                    "source": {"title": "s", "section": "1"},
                    "source_value": 0.05,
                    "experiment": "x",
                    "statistic": "floors/value_marginal",
                    "rule": "within",
                    "tolerance": 0.01,
                }
            ],
        }
    )
    (floor,) = claims.claims
    assert partial.claim_kind(floor, {"x": {}}) == "setup"
    assert partial.min_seeds("5 vs 3") == 3 and partial.min_seeds(None) is None
