"""The claim-by-claim report: each verdict rule on synthetic stats, the claims file's
validation (a bad entry fails in one line naming the claim and the key), the rendered
Markdown and LaTeX, and the real claims.yaml against the config and, where a smoke run's
stats exist under results/smoke, against them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from arbench import config, experiment
from arbench.plan import Plan
from arbench.report import claims as C
from arbench.report.experiment import experiment_stats

ROOT = Path(__file__).resolve().parents[2]
CLAIMS = ROOT / "claims.yaml"
SMOKE_STATS = ROOT / "results" / "smoke" / "stats"


def contrast(a: str, b: str, diff: float, p: float, n: int = 5, value: Any = None) -> dict:
    return {
        "a": a,
        "b": b,
        "value": value,
        "diff": diff,
        "p": p,
        "exact": True,
        "n_a": n,
        "n_b": n,
        "scores_a": [0.5 + diff + 0.01 * i for i in range(n)],
        "scores_b": [0.5 + 0.01 * i for i in range(n)],
        "lock_in": {
            "n_a": n,
            "n_b": n,
            "k_a": round(0.8 * n),
            "k_b": 0,
            "rate_a": 0.8,
            "rate_b": 0.0,
            "p": 0.048,
        },
    }


def arm(mean: float, n: int = 5, chance: bool = False, arm_name: str = "", value: Any = None):
    return {
        "mean": mean,
        "n": n,
        "chance": chance,
        "arm": arm_name,
        "value": value,
        "scores": [mean] * n,
        "lock_in": n if mean >= 0.9 else 0,
    }


STATS: dict[str, Any] = {
    "experiment": "toy",
    "scale": "test",
    "arms": {
        "armed-pairs16": arm(0.99, arm_name="armed", value=16),
        "armed-pairs32": arm(0.95, arm_name="armed", value=32),
        "plain-pairs16": arm(0.30, chance=True, arm_name="plain", value=16),
        "plain-pairs32": arm(0.10, chance=True, arm_name="plain", value=32),
    },
    "contrasts": [
        contrast("armed", "plain", 0.69, 0.008, value=16),
        contrast("armed", "plain", 0.85, 0.008, value=32),
        contrast("plain", "armed", -0.69, 0.6, n=1, value=16),
    ],
    "grid": {"key": "task.pairs", "leaf": "pairs", "values": [16, 32], "labels": ["16", "32"]},
    "floors": {"value_marginal": 0.0385},
    "skipped": {"arms": {"fused": "no CUDA here"}, "contrasts": [{"a": "fused", "b": "armed"}]},
    "sweep": {
        "configs": ["n32", "n64"],
        "table": {"armed": {"n32": {"all": {"mean": 0.9, "n": 5}}}},
    },
    "series": [[0.5, 0.01], [0.25, 0.01]],
}
SOURCE = {"title": "the paper summary", "section": "§4"}


def claim(**over: Any) -> dict[str, Any]:
    base = {
        "id": "toy_claim",
        "claim": "A toy claim.",
        "source": SOURCE,
        "source_value": 0.7,
        "experiment": "toy",
        "statistic": "contrasts[a=armed,b=plain,value=16]/diff",
        "p": "contrasts[a=armed,b=plain,value=16]/p",
        "rule": "same_sign_significant",
    }
    base.update(over)
    if base.get("rule") == "not_significant":
        base.setdefault("delta", 0.15)
    return {k: v for k, v in base.items() if v is not None}


def parse(*entries: dict[str, Any], **top: Any) -> C.ClaimsFile:
    doc = {"sources": ["the paper summary"], "claims": list(entries), **top}
    return C.parse_claims(doc)


def verdict(stats: dict[str, Any] = STATS, **over: Any) -> C.Result:
    (c,) = parse(claim(**over)).claims
    return C.evaluate_claim(c, stats, "test")


# ------------------------------------------------------------------ the rules


def test_same_sign_significant_reads_sign_and_p() -> None:
    r = verdict()
    assert r.verdict == C.REPRODUCED and r.values == [0.69] and r.p == [0.008]
    assert r.n == "5 vs 5"
    assert verdict(source_value=-0.7).verdict == C.NOT_REPRODUCED  # the other way round
    flipped = copy.deepcopy(STATS)
    flipped["contrasts"][0]["diff"] = -0.2
    assert verdict(flipped).verdict == C.NOT_REPRODUCED
    weak = copy.deepcopy(STATS)
    weak["contrasts"][0]["p"] = 0.2
    assert verdict(weak).verdict == C.NOT_REPRODUCED


def test_an_experiment_run_only_for_its_path_tests_no_claim() -> None:
    # a scale that does not measure the experiment (scales.<scale>.measures) says so, even
    # where its numbers would pass the rule
    assert verdict().verdict == C.REPRODUCED
    r = verdict({**STATS, "path_only": True})
    assert r.verdict == C.NOT_RUN and "smallest size" in r.reason and "demo-<study>" in r.reason
    assert verdict({**STATS, "path_only": False}).verdict == C.REPRODUCED


def test_a_test_that_cannot_reach_alpha_is_inconclusive() -> None:
    r = verdict(
        statistic="contrasts[a=plain,b=armed]/diff",
        p="contrasts[a=plain,b=armed]/p",
        rule="not_significant",
    )
    assert r.verdict == C.INCONCLUSIVE and "n = 1 vs 1" in r.reason and r.values == [-0.69]
    shown = verdict(
        statistic="contrasts[a=plain,b=armed]/diff",
        p="contrasts[a=plain,b=armed]/p",
        rule="within",
        source_value=-0.7,
        tolerance=0.05,
    )
    # a p beside a within is shown only; a within on one seed per arm decides nothing
    assert shown.verdict == C.INCONCLUSIVE and shown.p == [0.6] and "1 seed(s)" in shown.reason
    assert C.smallest_p(1, 1) == 1.0 and C.smallest_p(4, 4) == pytest.approx(2 / 70)
    assert C.smallest_p(10, 10) < 1e-4


def test_not_significant() -> None:
    stats = copy.deepcopy(STATS)
    stats["contrasts"][0]["p"] = 0.4
    assert verdict(stats, rule="not_significant").verdict == C.REPRODUCED
    assert verdict(rule="not_significant").verdict == C.NOT_REPRODUCED


def test_a_tie_at_chance_or_a_nan_p_is_inconclusive_for_a_null_claim() -> None:
    """No difference between two arms at the floor, or a p that is not a number, is no
    evidence of no difference: inconclusive, with the reason, never reproduced."""
    stats = copy.deepcopy(STATS)
    stats["contrasts"][0].update(p=0.4, both_chance=True)
    r = verdict(stats, rule="not_significant")
    assert r.verdict == C.INCONCLUSIVE and "both arms at chance" in r.reason
    stats["contrasts"][0].update(both_chance=False)
    assert verdict(stats, rule="not_significant").verdict == C.REPRODUCED
    stats["contrasts"][0].update(p=float("nan"))
    r = verdict(stats, rule="not_significant")
    assert r.verdict == C.INCONCLUSIVE and "not a number" in r.reason


def test_a_null_claim_needs_the_power_to_see_its_delta() -> None:
    """ "No difference" is reproduced only where the exact test's minimum detectable effect at
    this n (80 % power) is at most the claim's delta: noisy seeds, or lock-in counts at 4 vs
    4 (Fisher's power for 0.8 vs 0.2 is 0.17), are inconclusive, and the MDE is printed."""
    quiet = copy.deepcopy(STATS)
    quiet["contrasts"][0].update(p=0.4)
    r = verdict(quiet, rule="not_significant")
    assert r.verdict == C.REPRODUCED and "minimum detectable mean difference" in r.reason
    noisy = copy.deepcopy(quiet)
    rng = np.random.default_rng(0)
    noisy["contrasts"][0].update(
        scores_a=list(rng.uniform(0.1, 0.9, 5)), scores_b=list(rng.uniform(0.1, 0.9, 5))
    )
    r = verdict(noisy, rule="not_significant")
    assert r.verdict == C.INCONCLUSIVE and "against delta 0.15" in r.reason
    assert verdict(noisy, rule="not_significant", delta=0.9).verdict == C.REPRODUCED
    lock = copy.deepcopy(quiet)
    lock["contrasts"][0]["lock_in"].update(n_a=4, n_b=4, k_a=1, k_b=0, p=1.0)
    r = verdict(lock, rule="not_significant", p="contrasts[a=armed,b=plain,value=16]/lock_in/p")
    assert r.verdict == C.INCONCLUSIVE and "lock-in rate difference 0.95 at n = 4 vs 4" in r.reason
    bare = copy.deepcopy(quiet)
    del bare["contrasts"][0]["scores_a"]
    r = verdict(bare, rule="not_significant")
    assert r.verdict == C.INCONCLUSIVE and "no per-seed scores" in r.reason
    with pytest.raises(C.ClaimError, match=r"claim toy_claim: delta: a no-difference claim"):
        parse(claim(rule="not_significant", delta=0))


def test_a_positive_claim_on_an_arm_at_chance_is_inconclusive() -> None:
    stats = copy.deepcopy(STATS)
    stats["contrasts"][0].update(a_chance=True)  # a significant difference of two floor arms
    r = verdict(stats)
    assert r.verdict == C.INCONCLUSIVE and "arm a at chance" in r.reason
    stats["contrasts"][0].update(a_chance=False)
    assert verdict(stats).verdict == C.REPRODUCED


def test_a_per_seed_rule_on_fewer_than_three_seeds_is_inconclusive() -> None:
    mean = {"p": None, "statistic": "arms/armed-pairs32/mean", "rule": "at_least"}
    for n, want in ((1, C.INCONCLUSIVE), (2, C.INCONCLUSIVE), (3, C.REPRODUCED)):
        stats = copy.deepcopy(STATS)
        stats["arms"]["armed-pairs32"]["n"] = n
        r = verdict(stats, **mean, source_value=0.9)
        assert r.verdict == want, (n, r.reason)
        if want == C.INCONCLUSIVE:
            assert f"{n} seed(s) per arm" in r.reason
    floor = {"p": None, "rule": "within", "statistic": "floors/value_marginal"}
    assert verdict(**floor, source_value=0.038, tolerance=0.001).verdict == C.REPRODUCED  # no n


def test_fan_out_must_hold_at_every_value() -> None:
    every = {"statistic": "contrasts[a=armed,b=plain]/diff", "p": "contrasts[a=armed,b=plain]/p"}
    r = verdict(**every, source_value="positive", sign="positive")  # the sign alone
    assert r.verdict == C.REPRODUCED and r.values == [0.69, 0.85] and r.p == [0.008, 0.008]
    stats = copy.deepcopy(STATS)
    stats["contrasts"][1]["p"] = 0.3
    assert verdict(stats, **every, sign="positive").verdict == C.NOT_REPRODUCED


def test_a_positive_claim_prints_its_interval_and_is_sign_only_when_it_excludes_the_source():
    """The difference's 95 % bootstrap interval over seeds is printed; a claim whose sign
    and p hold while the source's value lies outside it is "reproduced (sign only)"."""
    r = verdict()  # +0.69 with a spread of 0.01 per seed: the interval holds 0.7
    assert r.verdict == C.REPRODUCED and "holds the source's 0.7" in r.reason
    r = verdict(source_value=0.6)
    assert r.verdict == C.REPRODUCED_SIGN and "excludes the source's 0.6" in r.reason
    assert "95 % interval [0.6" in r.reason
    wide = copy.deepcopy(STATS)
    wide["contrasts"][0].update(scores_a=[0.3, 0.9, 1.0, 0.9, 1.0], scores_b=[0.1] * 5)
    assert verdict(wide, source_value=0.6).verdict == C.REPRODUCED  # noisy seeds reach 0.6


def test_within_at_least_at_most_and_holds() -> None:
    base = {"p": None, "rule": "within", "statistic": "floors/value_marginal"}
    assert verdict(**base, source_value=0.038, tolerance=0.001).verdict == C.REPRODUCED
    assert verdict(**base, source_value=0.031, tolerance=0.001).verdict == C.NOT_REPRODUCED
    assert verdict(**base, source_value="1/26", target=0.0385, tolerance=0).verdict == C.REPRODUCED
    mean = {"p": None, "statistic": "arms/armed-pairs32/mean"}
    assert verdict(**mean, rule="at_least", source_value=0.9).verdict == C.REPRODUCED
    assert verdict(**mean, rule="at_least", source_value=0.99).verdict == C.NOT_REPRODUCED
    assert verdict(**mean, rule="at_most", source_value="x", threshold=0.96).verdict == C.REPRODUCED
    control = {"statistic": "arms/armed-pairs16/mean", "at_least": 0.9, "what": "armed"}
    chance = {"p": None, "rule": "holds", "source_value": "chance", "control": control}
    assert verdict(**chance, statistic="arms[arm=plain]/chance").verdict == C.REPRODUCED
    assert verdict(**chance, statistic="arms[arm=armed]/chance").verdict == C.NOT_REPRODUCED


def test_reducers() -> None:
    both = ["arms/armed-pairs16/mean", "arms/armed-pairs32/mean"]
    r = verdict(p=None, statistic=both, reduce="min", rule="at_least", source_value=0.95)
    assert r.values == [0.95] and r.verdict == C.REPRODUCED and r.n == "5"
    r = verdict(
        p=None, statistic=both, reduce="diff", rule="within", source_value=0.04, tolerance=0.001
    )
    assert r.values[0] == pytest.approx(0.04) and r.verdict == C.REPRODUCED
    ratio = ["series[-1][0]", "series[0][0]"]
    r = verdict(p=None, statistic=ratio, reduce="ratio", rule="at_most", source_value=0.5)
    assert r.values == [0.5] and r.verdict == C.REPRODUCED
    r = verdict(
        p=None,
        statistic="arms/armed-pairs16/scores[*]",
        reduce="max",
        rule="at_least",
        source_value=0.99,
    )
    assert r.verdict == C.REPRODUCED


def test_ordering() -> None:
    base = {
        "p": None,
        "rule": "ordering",
        "source_value": "armed > plain",
        "statistic": "arms/{arm}/mean",
        "arms": ["armed-pairs16", "armed-pairs32", "plain-pairs16", "plain-pairs32"],
    }
    r = verdict(**base)
    assert r.verdict == C.REPRODUCED and r.labels == base["arms"]
    assert verdict(**{**base, "order": "ascending"}).verdict == C.NOT_REPRODUCED
    swapped = {**base, "arms": ["plain-pairs32", "armed-pairs16"]}
    assert verdict(**swapped).verdict == C.NOT_REPRODUCED  # the statistic goes the other way
    tie = copy.deepcopy(STATS)
    tie["arms"]["armed-pairs32"]["mean"] = 0.99
    assert verdict(tie, **base).verdict == C.NOT_REPRODUCED
    assert verdict(tie, **base, strict=False).verdict == C.REPRODUCED
    flat = copy.deepcopy(STATS)  # every arm at one value (all at chance, or at ceiling)
    for a in flat["arms"].values():
        a["mean"] = 0.02
    r = verdict(flat, **base, strict=False)
    assert r.verdict == C.INCONCLUSIVE and "no order" in r.reason
    few = copy.deepcopy(STATS)
    few["arms"]["plain-pairs16"]["n"] = 1
    r = verdict(few, **base)
    assert r.verdict == C.INCONCLUSIVE and "1 seed(s) per arm" in r.reason
    # an arm this scale's grid lacks: dropped with its reason, or the claim is not run
    wider = {**base, "arms": ["armed-pairs8", *base["arms"]]}
    assert verdict(**wider).verdict == C.NOT_RUN
    r = verdict(**wider, skip_missing=True)
    assert r.verdict == C.REPRODUCED and "pairs = 8 not in this scale's grid" in r.reason
    only_one = {**base, "arms": ["armed-pairs8", "armed-pairs16"], "skip_missing": True}
    assert verdict(**only_one).verdict == C.NOT_RUN


def test_an_ordering_needs_a_noise_margin_and_a_row_that_is_not_flat() -> None:
    """Neighbours closer than two standard errors cannot show a strict order (inconclusive);
    a row all at chance or all at ceiling has no order to read."""
    base = {
        "p": None,
        "rule": "ordering",
        "source_value": "armed > plain",
        "statistic": "arms/{arm}/mean",
        "arms": ["armed-pairs16", "armed-pairs32", "plain-pairs16"],
    }
    noisy = copy.deepcopy(STATS)
    for a in noisy["arms"].values():
        a["sd"] = 0.01
    assert verdict(noisy, **base).verdict == C.REPRODUCED  # 0.99 > 0.95 > 0.30, tight seeds
    noisy["arms"]["armed-pairs32"]["sd"] = 0.3  # 0.04 apart, margin 2 sqrt(0.01^2/5 + 0.3^2/5)
    r = verdict(noisy, **base)
    assert r.verdict == C.INCONCLUSIVE and "inside the noise margin 0.268" in r.reason
    assert verdict(noisy, **base, strict=False).verdict == C.REPRODUCED
    noisy["arms"]["armed-pairs32"]["mean"] = 1.0  # the wrong way, but within the noise
    assert verdict(noisy, **base).verdict == C.INCONCLUSIVE
    for a in noisy["arms"].values():
        a["sd"] = 0.001  # the wrong way beyond the noise
    assert verdict(noisy, **base).verdict == C.NOT_REPRODUCED
    chance = copy.deepcopy(STATS)
    for i, a in enumerate(chance["arms"].values()):
        a.update(chance=True, mean=0.05 - 0.01 * i)
    r = verdict(chance, **base)
    assert r.verdict == C.INCONCLUSIVE and "every arm at chance" in r.reason
    ceiling = copy.deepcopy(STATS)
    for i, a in enumerate(ceiling["arms"].values()):
        a.update(mean=1.0 - 0.001 * i)
    r = verdict(ceiling, **base)
    assert r.verdict == C.INCONCLUSIVE and "every arm at ceiling" in r.reason


def test_a_chance_claim_reads_the_arms_chance_test_or_the_papers_tenfold_rule() -> None:
    """'At chance' reads each arm's chance test (the stats' flag); a claim quoting the
    paper's rule (tenfold) reads every mean within 10x of its floor; on fewer than three
    seeds it is inconclusive."""
    base = {
        "p": None,
        "rule": "at_chance",
        "source_value": "0.017-0.019",
        "statistic": "arms/plain-pairs32/mean",
        "floor": "floors/value_marginal",
        "control": {"statistic": "arms/armed-pairs16/mean", "at_least": 0.9, "what": "armed"},
    }
    r = verdict(**base)  # the arm's flag: chance
    assert r.verdict == C.REPRODUCED and "mean 0.100 against the source's 0.017-0.019" in r.reason
    off = copy.deepcopy(STATS)
    off["arms"]["plain-pairs32"]["chance"] = False
    assert verdict(off, **base).verdict == C.NOT_REPRODUCED
    r = verdict(off, **base, tenfold=True)  # 0.10 against a floor of 0.0385 (10x: 0.385)
    assert r.verdict == C.REPRODUCED
    assert "mean 0.100 against the source's 0.017-0.019; floor 0.038" in r.reason
    high = copy.deepcopy(STATS)
    high["arms"]["plain-pairs32"]["mean"] = 0.5
    assert verdict(high, **base, tenfold=True).verdict == C.NOT_REPRODUCED
    few = copy.deepcopy(STATS)
    few["arms"]["plain-pairs32"]["n"] = 1
    assert verdict(few, **base).verdict == C.INCONCLUSIVE
    with pytest.raises(C.ClaimError, match=r"claim toy_claim: floor: an at_chance claim"):
        parse(claim(**{**base, "floor": None}))
    with pytest.raises(C.ClaimError, match=r"claim toy_claim: floor: only an at_chance"):
        parse(claim(floor="floors/value_marginal"))


def test_rank_correlation() -> None:
    """The arms' statistics against the source's values: agreeing ranks reproduce, reversed
    ones do not, and too few arms at this scale is not run."""
    base = {
        "p": None,
        "rule": "rank_correlation",
        "source_value": "the table's column",
        "statistic": "arms/{arm}/mean",
        "threshold": 0.7,
        "source_values": {"armed-pairs16": 99.0, "armed-pairs32": 90.0, "plain-pairs16": 40.0,
                          "plain-pairs32": 1.0},
    }  # fmt: skip
    r = verdict(**base)
    assert r.verdict == C.REPRODUCED and r.rho == pytest.approx(1.0)
    assert "rho = 1.00 over 4 arms" in C.row(r)["ours"]
    flipped = {**base, "source_values": {k: -v for k, v in base["source_values"].items()}}
    r = verdict(**flipped)
    assert r.verdict == C.NOT_REPRODUCED and r.rho == pytest.approx(-1.0)
    missing = {**base, "source_values": {"armed-pairs8": 1.0, "armed-pairs16": 2.0,
                                         "plain-pairs16": 3.0}, "skip_missing": True}  # fmt: skip
    assert verdict(**missing).verdict == C.NOT_RUN  # two arms left: no rho
    with pytest.raises(C.ClaimError, match="toy_claim: threshold"):
        verdict(**{**base, "threshold": None})
    with pytest.raises(C.ClaimError, match="toy_claim: source_values"):
        verdict(**{**base, "source_values": {"a": 1.0, "b": 2.0}})


# ------------------------------------------------------------------ not run at this scale


def test_what_this_scale_does_not_run_is_not_run() -> None:
    cases = {
        "contrasts[a=armed,b=plain,value=64]/diff": "pairs = 64 not in this scale's grid",
        "arms/armed-pairs64/mean": "pairs = 64 not in this scale's grid",
        "arms/fused-pairs16/mean": "arm fused not run: no CUDA here",
        "contrasts[a=fused,b=armed]/diff": "arm fused not run",
        "sweep/table/armed/n4096/all/mean": "n4096 not evaluated at this scale",
        "sweep/table/armed/n64/all/mean": "n64 not evaluated for this arm",
    }
    for path, why in cases.items():
        r = verdict(p=None, statistic=path, rule="at_least", source_value=0.5)
        assert r.verdict == C.NOT_RUN and why in r.reason, (path, r.reason)


def test_a_grid_run_arm_resolves_through_its_arm_and_value_fields(
    tuned_experiment, tuned_evals
) -> None:
    """A grid's run arms are read by the ``arm`` and ``value`` fields the stats give each
    (selectors, and the grid value a missing run arm's name carries), not by a pattern."""
    stats = experiment_stats("t", tuned_experiment, tuned_evals, "demo", "grid")
    at = {"p": None, "rule": "at_least", "source_value": 0.5}
    r = verdict(stats, statistic="arms[arm=plain,value=0.004]/mean", **at)
    assert r.values == [pytest.approx(stats["arms"]["plain-lr0.004"]["mean"])]
    r = verdict(stats, statistic="arms/plain-lr0.008/mean", **at)
    assert r.verdict == C.NOT_RUN
    assert "lr = 0.008 not in this scale's grid (0.001, 0.002, 0.004)" in r.reason
    bare = copy.deepcopy(stats)  # without the fields nothing names the value
    for entry in bare["arms"].values():
        del entry["arm"], entry["value"]
    with pytest.raises(C.ClaimError, match="statistic path"):
        verdict(bare, statistic="arms/plain-lr0.008/mean", **at)


def test_a_wrong_path_is_an_error_naming_the_claim() -> None:
    for path in ("arms/armd-pairs16/mean", "contrasts[a=armed,b=nobody]/diff", "floors/nope"):
        with pytest.raises(C.ClaimError, match="claim toy_claim: statistic path"):
            verdict(p=None, statistic=path, rule="at_least", source_value=0.5)
    with pytest.raises(C.ClaimError, match="expected a number"):
        verdict(p=None, statistic="arms/armed-pairs16", rule="at_least", source_value=0.5)


def test_a_missing_experiment_or_stats_file_is_not_run(tmp_path: Path) -> None:
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "toy.json").write_text(json.dumps(STATS))
    cf = parse(
        claim(),
        claim(id="elsewhere", experiment="kv"),
        claim(id="absent", experiment="gone"),
        pending_experiments={"kv": "not in the config yet"},
    )
    planned = {"toy_claim": "stats/toy.json", "elsewhere": None, "absent": "stats/gone.json"}
    got = {r.claim.id: r for r in C.evaluate(cf, tmp_path, "test", planned)}
    assert got["toy_claim"].verdict == C.REPRODUCED
    assert got["toy_claim"].refs == ["tables/toy.tex", "figures/toy.png"]
    assert got["elsewhere"].verdict == C.NOT_RUN
    assert "experiment kv is not in the config (not in the config yet)" in got["elsewhere"].reason
    assert got["absent"].verdict == C.NOT_RUN and "no stats/gone.json" in got["absent"].reason
    # an experiment no scale plans reads "not planned", at any scale
    cf2 = parse(claim(id="never", experiment="kv"), not_planned={"kv": "needs a GPU farm"})
    (r,) = C.evaluate(cf2, tmp_path, "test", {"never": None})
    assert r.verdict == C.NOT_PLANNED and r.reason == "needs a GPU farm"
    with pytest.raises(C.ClaimError, match=r"not_planned: kv is also in pending_experiments"):
        parse(claim(), not_planned={"kv": "x"}, pending_experiments={"kv": "y"})
    # without a plan every claim's own file is read where it exists
    unplanned = {r.claim.id: r.verdict for r in C.evaluate(cf, tmp_path, "test")}
    assert unplanned == {"toy_claim": C.REPRODUCED, "elsewhere": C.NOT_RUN, "absent": C.NOT_RUN}


def test_claims_the_sources_cannot_all_satisfy_are_source_inconsistent(tmp_path: Path) -> None:
    """A claim that names the claims its source's numbers contradict, or a source error, is
    "source inconsistent" whatever our data say (our verdict kept in the reason), and
    counted apart from reproduced and not reproduced."""
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "toy.json").write_text(json.dumps(STATS))
    cf = parse(
        claim(id="a", conflicts_with=["b"]),
        claim(id="b", conflicts_with=["a"], source_value=-0.7),
        claim(id="c", source_error="1/K is out of reach with 26 values"),
        claim(id="d"),
    )
    got = {r.claim.id: r for r in C.evaluate(cf, tmp_path, "test")}
    assert got["a"].verdict == C.SOURCE_INCONSISTENT
    assert "cannot hold together with b" in got["a"].reason
    assert "our data: reproduced" in got["a"].reason
    assert "our data: not reproduced" in got["b"].reason
    assert got["c"].verdict == C.SOURCE_INCONSISTENT and "source error: 1/K" in got["c"].reason
    assert got["d"].verdict == C.REPRODUCED
    counts = C.counts(list(got.values()))
    assert counts[C.SOURCE_INCONSISTENT] == 3 and counts[C.REPRODUCED] == 1
    assert counts[C.NOT_REPRODUCED] == 0


def test_a_conflict_must_name_a_claim_that_names_it_back() -> None:
    with pytest.raises(C.ClaimError, match=r"claim a: conflicts_with: b does not name a back"):
        parse(claim(id="a", conflicts_with=["b"]), claim(id="b"))
    with pytest.raises(C.ClaimError, match=r"claim a: conflicts_with: no claim zz"):
        parse(claim(id="a", conflicts_with=["zz"]))
    with pytest.raises(C.ClaimError, match=r"conflicts_with"):
        parse(claim(id="a", conflicts_with="b"))


# ------------------------------------------------------------------ validation


BAD = [
    ({"rule": "roughly"}, "rule", "unknown rule 'roughly'"),
    ({"statistic": None}, "statistic", "missing"),
    ({"statistic": "arms/[x"}, "statistic", "malformed"),
    ({"statistic": "contrasts[a]/diff"}, "statistic", "expected k=v"),
    ({"p": None}, "p", "needs the path of the p-value"),
    ({"rule": "within", "p": None}, "tolerance", "needs a tolerance"),
    ({"rule": "at_least", "p": None, "source_value": "lots"}, "threshold", "give threshold"),
    ({"source_value": "bigger"}, "sign", "give sign"),
    ({"colour": "red"}, "colour", "unknown key"),
    ({"source": {"title": "a blog", "section": "1"}}, "source", "not one of the sources"),
    ({"rule": "ordering", "p": None, "arms": ["a", "b"]}, "statistic", "names {arm}"),
    (
        {"rule": "ordering", "p": None, "statistic": "arms/{arm}/mean", "arms": ["a"]},
        "arms",
        "at least two",
    ),
    ({"statistic": "arms/{arm}/mean"}, "statistic", "{arm} only in an ordering"),
    ({"reduce": "median"}, "reduce", "unknown reducer"),
    ({"reduce": "diff"}, "reduce", "exactly two paths"),
    ({"release": "passkey_swar"}, "experiment", "exactly one of experiment or release"),
]


@pytest.mark.parametrize("over, key, problem", BAD, ids=[b[1] + ":" + b[2] for b in BAD])
def test_a_bad_entry_fails_in_one_line_naming_id_and_key(over, key, problem) -> None:
    with pytest.raises(C.ClaimError) as err:
        parse(claim(**over))
    msg = str(err.value)
    assert "\n" not in msg
    assert f"claim toy_claim: {key}:" in msg and problem in msg


def test_ids_are_unique_and_named() -> None:
    with pytest.raises(C.ClaimError, match="claim toy_claim: id: declared twice"):
        parse(claim(), claim())
    with pytest.raises(C.ClaimError, match=r"claim #1: id"):
        parse(claim(id="Bad Id"))


def test_a_broken_yaml_file_fails_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n  - id: x\n    claim: a: b: c\n")
    with pytest.raises(C.ClaimError) as err:
        C.load_claims(path)
    message = str(err.value)
    assert "\n" not in message and "<unicode string>" not in message
    assert message.startswith("claims.yaml line 3, column 13: not valid YAML")


def test_a_key_given_twice_fails_naming_its_line(tmp_path: Path) -> None:
    # PyYAML kept the later source_value, and the claim was tested against it silently
    entry = yaml.safe_dump({"sources": ["the paper summary"], "claims": [claim()]})
    assert entry.count("  source_value: 0.7\n") == 1
    path = tmp_path / "claims.yaml"
    path.write_text(
        entry.replace("  source_value: 0.7\n", "  source_value: 0.7\n  source_value: 0.9\n")
    )
    line = entry[: entry.index("  source_value: 0.7")].count("\n") + 2
    with pytest.raises(C.ClaimError) as err:
        C.load_claims(path)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"claims.yaml line {line}: key claims[0].source_value is set twice")


# ------------------------------------------------------------------ rendering


def _results() -> list[C.Result]:
    cf = parse(
        claim(claim="Convolution & decay: 50% of the_gain > noise", source_value=0.7),
        claim(
            id="grid_miss",
            statistic="arms/armed-pairs64/mean",
            p=None,
            rule="at_least",
            source_value=0.9,
            note="a caveat | with a pipe",
        ),
        claim(id="pending", experiment="kv"),
    )
    planned = {"toy_claim": "stats/toy.json", "grid_miss": "stats/toy.json", "pending": None}
    out = []
    for c in cf.claims:
        if planned[c.id] is None:
            out.append(
                C.Result(c, C.NOT_RUN, scale="test", reason="experiment kv is not in the config")
            )
        else:
            r = C.evaluate_claim(c, STATS, "test")
            r.refs = C.default_refs(c)
            out.append(r)
    return out


def test_markdown_lists_every_claim_with_its_verdict_and_links() -> None:
    md = C.render_markdown(_results(), "test")
    assert (
        "All claims: 1 reproduced, 0 reproduced (sign only), 0 not reproduced, "
        "0 inconclusive, 0 source inconsistent, 2 not run at this scale, 0 not planned.\n" in md
    )
    assert "* **3 claims about trained models**: 1 reproduced, 2 not run at this scale." in md
    row = next(line for line in md.splitlines() if line.startswith("| `toy_claim`"))
    cells = [c.strip() for c in row.strip("|").split(" | ")]
    assert (
        cells[3] == "0.7"
        and cells[4] == "+0.690 (n=5 vs 5, test, at K = 16)"
        and cells[5] == "0.008"
    )
    assert "**reproduced**" in row and "[toy.tex](tables/toy.tex)" in row
    assert "[toy.png](figures/toy.png)" in row
    miss = next(line for line in md.splitlines() if line.startswith("| `grid_miss`"))
    assert "**not run at this scale**: pairs = 64 not in this scale's grid" in miss
    assert r"a caveat \| with a pipe" in miss  # a pipe would split the Markdown cell
    assert "| `pending` |" in md and "experiment kv is not in the config" in md


def test_statements_that_are_not_claims_are_listed_and_validated() -> None:
    """A design parameter or an untestable statement is listed after the claims, so the
    report accounts for every statement of the sources; a bad entry names its key."""
    design = {
        "statement": "K in {8, 16, 32}",
        "source": SOURCE,
        "kind": "design",
        "where": "experiments.capacity.grid",
    }
    cf = parse(claim(), not_claims=[design])
    assert cf.not_claims[0].source == "the paper summary, §4" and cf.not_claims[0].kind == "design"
    md = C.render_markdown(_results(), "test", claims=cf)
    assert "## Statements of the sources that are not claims" in md
    assert "| K in {8, 16, 32} | the paper summary, §4 | design | experiments.capacity.grid |" in md
    assert "Sources: the paper summary." in md
    with pytest.raises(C.ClaimError, match=r"not_claims #1: kind: one of"):
        parse(claim(), not_claims=[{**design, "kind": "maybe"}])
    with pytest.raises(C.ClaimError, match=r"not_claims #1: source"):
        parse(claim(), not_claims=[{**design, "source": {"title": "a blog"}}])
    with pytest.raises(C.ClaimError, match=r"not_claims #1: expected exactly"):
        parse(claim(), not_claims=[{"statement": "x"}])


def test_latex_escapes_and_references() -> None:
    tex = C.render_tex(_results(), "test")
    assert r"Convolution \& decay: 50\% of the\_\allowbreak{}gain $>$ noise" in tex
    assert r"\providecommand{\claimref}[3]{\texttt{#3}}" in tex
    assert r"\claimref{Table}{tab:toy}{tables/\allowbreak{}toy.tex}" in tex
    assert r"\claimref{Figure}{fig:toy}{figures/\allowbreak{}toy.png}" in tex
    assert tex.count(r"\begin{table}") == 1 and r"\label{tab:claims}" in tex
    assert r"\toprule" in tex and r"\bottomrule" in tex and "p{0.35\\linewidth}" in tex
    assert (
        "Of 3 claims, 1 are reproduced, 0 reproduced in sign only (the source's value outside "
        "our interval), 0 not reproduced, 0 inconclusive, "
        "0 source inconsistent, 2 not run at this scale and 0 not planned" in tex
    )
    assert r"\S{}4" in tex and "§" not in tex


def test_a_long_list_splits_into_floats_per_source() -> None:
    many = [C.Result(_results()[0].claim, C.REPRODUCED, values=[1.0]) for _ in range(30)]
    tex = C.render_tex(many, "test", rows_per_table=14)
    assert tex.count(r"\begin{table}") == 3 and "(part 3 of 3)" in tex
    assert tex.count(r"\label{tab:claims}") == 1


# ------------------------------------------------------------------ the real claims file


def _plan(scale: str) -> Plan:
    return Plan(config.resolve(config.read_config([ROOT / "config.yaml"], {"scale": scale})))


def test_the_claims_file_loads_and_names_what_the_config_runs() -> None:
    cf = C.load_claims(CLAIMS)
    assert len(cf.claims) >= 40
    plan = _plan("paper")
    planned = C.planned_stats(cf, plan)
    for c in cf.claims:
        assert c.rule in C.RULES
        if c.release:
            assert c.release in plan.releases, c.id
            assert planned[c.id] is not None, f"{c.id}: {c.file} is not a file the release writes"
        elif c.experiment in cf.not_planned:
            assert planned[c.id] is None, f"{c.id}: {c.experiment} is planned after all"
        elif c.experiment not in cf.pending:
            assert planned[c.id] is not None, (
                f"{c.id}: {c.experiment} is neither in the config nor pending"
            )
    titles = {c.source_title for c in cf.claims}
    assert titles == set(cf.sources)  # every source has claims


def _names(path: str) -> tuple[list[str], list[tuple[str, Any]]]:
    """The arm-like keys and the selector fields of a statistic path."""
    keys, fields = [], []
    steps = C.parse_path(path)
    for prev, step in zip([None, *steps], steps, strict=False):
        if (
            step.kind == "key"
            and prev is not None
            and prev.kind == "key"
            and prev.key in ("arms", "table")
        ):
            keys.append(step.key)
        fields += list(step.fields)
    return keys, fields


def test_every_arm_and_grid_value_a_claim_names_is_in_the_paper_config() -> None:
    """So that "not run at this scale" never hides a typo: every arm a claim names is an arm
    (or run arm) of its experiment at paper scale or at the study scale (a study grid may
    measure loads the paper's does not, as the lattice capacity study's past the small fixed
    state's capacity), and every grid value one of those grids'."""
    cf = C.load_claims(CLAIMS)
    scales = [_plan(scale).experiments for scale in ("paper", "study")]
    exps = scales[0]
    for c in cf.claims:
        if c.experiment not in exps:
            continue
        arms: set[str] = set()
        values: list[Any] = []
        for planned in scales:
            exp = planned.get(c.experiment)
            if exp is None:
                continue
            # an arm this machine cannot build is in the resolved config's skipped arms
            arms |= (
                set(exp["arms"])
                | set([r.name for r in experiment.runs_of("", exp)])
                | set(exp.get("skipped", {}).get("arms", {}))
            )
            values += exp.get("grid", {}).get("values", [])
        for path in [*c.statistic, *c.p]:
            for arm_name in c.arms or [None]:
                keys, fields = _names(path.replace("{arm}", arm_name) if arm_name else path)
                for key in keys:
                    assert key in arms, f"{c.id}: {key!r} is not an arm of {c.experiment}"
                for k, v in fields:
                    if k in ("a", "b", "arm"):
                        assert v in arms, f"{c.id}: {v!r} is not an arm of {c.experiment}"
                    if k == "value":
                        assert v in values, f"{c.id}: {k}={v} is not in the paper grid"


def test_every_claim_resolves_on_a_smoke_run_when_there_is_one() -> None:
    if not SMOKE_STATS.is_dir() or not any(SMOKE_STATS.glob("*.json")):
        pytest.skip("no smoke run under results/smoke/stats (snakemake --config scale=smoke)")
    cf = C.load_claims(CLAIMS)
    plan = _plan("smoke")
    results = C.evaluate(cf, ROOT / plan.root, "smoke", C.planned_stats(cf, plan))  # no error
    read = [r for r in results if r.values]
    assert read, "no claim read a value from the smoke stats"
    for r in results:
        assert r.verdict in C.VERDICTS
        if r.verdict == C.NOT_RUN:
            assert r.reason, r.claim.id


# the claims on the official Mamba-2 arm of the paper's runs (mamba_ssm, CUDA only)
OFFICIAL_MAMBA2 = {
    "paper_hardened": ("mamba2_ds16", ["mamba2_ties_k16", "mamba2_beats_k32"]),
    "paper_mamba2_session": (
        "mamba2",
        ["lr_tuned_fused_mamba2", "lr_best_rank1_vs_fused", "lr_default_rank1_vs_fused"],
    ),
}


def test_the_official_mamba2_claims_read_not_run_with_the_skip_reason(tmp_path: Path) -> None:
    """Where mamba_ssm does not import, the official Mamba-2 arm is skipped: the claims that
    read it say "not run" with that reason (never dropped), and their causal column is read."""
    (tmp_path / "stats").mkdir()
    why = "mamba_ssm does not import here"
    exps = _plan("paper").experiments
    for name, (official, _) in OFFICIAL_MAMBA2.items():
        exp = exps[name]
        assert official in exp["arms"] or official in exp.get("skipped", {}).get("arms", {})
        other = [a for a in exp["arms"] if a != official]
        grid = exp["grid"]
        arms = {
            f"{a}-{grid['key'].split('.')[-1]}{experiment.value_label(v)}": arm(
                0.9, arm_name=a, value=v
            )
            for a in other
            for v in grid["values"]
        }
        kept = [c for c in exp["contrasts"] if official not in (c["a"], c["b"])]
        gone = [c for c in exp["contrasts"] if official in (c["a"], c["b"])]
        stats = {
            "experiment": name,
            "arms": arms,
            "contrasts": [
                contrast(c["a"], c["b"], 0.1, 0.01, value=v) for c in kept for v in grid["values"]
            ],
            "grid": {
                "key": grid["key"],
                "leaf": grid["key"].split(".")[-1],
                "values": grid["values"],
                "labels": [experiment.value_label(v) for v in grid["values"]],
                "tuned": {"contrasts_best": [contrast(c["a"], c["b"], 0.1, 0.01) for c in kept]},
            },
            "skipped": {
                "arms": {official: why},
                "contrasts": [{"a": c["a"], "b": c["b"]} for c in gone],
            },
        }
        (tmp_path / "stats" / f"{name}.json").write_text(json.dumps(stats))
    got = {r.claim.id: r for r in C.evaluate(C.load_claims(CLAIMS), tmp_path, "test")}
    for name, (official, ids) in OFFICIAL_MAMBA2.items():
        for cid in ids:
            r = got[cid]
            assert r.claim.experiment == name and r.claim.causal is not None, cid
            assert r.verdict == C.NOT_RUN and f"arm {official} not run: {why}" in r.reason, (
                cid,
                r.verdict,
                r.reason,
            )


def test_the_config_schema_and_claims_agree_on_the_release_files() -> None:
    doc = yaml.safe_load(CLAIMS.read_text())
    files = {c["file"] for c in doc["claims"] if "release" in c}
    plan = _plan("demo")
    written = {
        str(Path(p).relative_to(plan.release_dir("passkey_swar")))
        for p in [*plan.release_sidecars("passkey_swar"), *plan.release_index_files("passkey_swar")]
    } | {"oracle_report.json"}
    assert files <= written


# ------------------------------------------------------------------ the causal-recipe reading


def test_a_causal_reading_is_evaluated_beside_the_claim_and_rendered(tmp_path: Path) -> None:
    """A claim's ``causal`` block reads the same rule off another experiment; its verdict is
    the report's "holds under the causal recipe" and never changes the claim's own."""
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats" / "toy.json").write_text(json.dumps(STATS))
    causal = {
        **STATS,
        "experiment": "causal_toy",
        "contrasts": [contrast("armed", "plain", -0.2, 0.3)],
    }
    (tmp_path / "stats" / "causal_toy.json").write_text(json.dumps(causal))
    reading = {
        "experiment": "causal_toy",
        "statistic": "contrasts[a=armed,b=plain]/diff",
        "p": "contrasts[a=armed,b=plain]/p",
    }
    cf = parse(claim(causal=reading), claim(id="bare"))
    (c, bare) = cf.claims
    assert c.causal is not None and c.causal.experiment == "causal_toy" and c.causal.id == c.id
    assert c.causal.rule == c.rule and c.causal.sign == c.sign and bare.causal is None
    plan = type("P", (), {"experiments": {"toy": {}, "causal_toy": {}}, "cfg": {}})()
    planned = C.planned_stats(cf, plan)
    assert planned["toy_claim/causal"] == "stats/causal_toy.json"
    got = {r.claim.id: r for r in C.evaluate(cf, tmp_path, "test", planned)}
    assert got["toy_claim"].verdict == C.REPRODUCED
    assert got["toy_claim"].causal.verdict == C.NOT_REPRODUCED  # the wrong sign there
    assert got["bare"].causal is None
    md = C.render_markdown(list(got.values()), "test")
    row = next(line for line in md.splitlines() if line.startswith("| `toy_claim`"))
    assert "**not reproduced**: -0.200 (n=5 vs 5, at K = 16, 32), p 0.300 in `causal_toy`" in row
    assert "`causal_toy`; 95 % interval [-0.225, -0.175] excludes the source's 0.700" in row
    bare_row = next(line for line in md.splitlines() if line.startswith("| `bare`"))
    assert bare_row.rstrip().split(" | ")[-2] == "--"
    tex = C.render_tex(list(got.values()), "test")
    assert "causal recipe" in tex and "causal" in tex


@pytest.mark.parametrize(
    "block, key, problem",
    [
        ({"statistic": "arms/armed-pairs16/mean"}, "causal", "expected {experiment, statistic"),
        ({"experiment": "x", "statistic": "a/b", "rule": "within"}, "causal.rule", "unknown key"),
    ],
)
def test_a_bad_causal_block_fails_naming_the_key(block, key, problem) -> None:
    with pytest.raises(C.ClaimError, match=rf"claim toy_claim: {re.escape(key)}: {problem}"):
        parse(claim(causal=block))


def test_a_collapse_claim_needs_its_positive_control_to_have_learned() -> None:
    """A "collapses" claim on an arm at the floor says nothing when nothing learned at that
    budget: it names a control that must reach its threshold, else inconclusive."""
    low = {
        "p": None,
        "rule": "at_most",
        "statistic": "arms/plain-pairs32/mean",
        "source_value": 0.2,
        "control": {"statistic": "arms/armed-pairs32/mean", "at_least": 0.9, "what": "armed"},
    }
    assert verdict(**low).verdict == C.REPRODUCED  # the control learned (0.95)
    r = verdict(**{**low, "control": {**low["control"], "at_least": 0.99}})
    assert r.verdict == C.INCONCLUSIVE and "positive control (armed) did not learn" in r.reason
    with pytest.raises(C.ClaimError, match="toy_claim: control: expected"):
        verdict(**{**low, "control": {"statistic": "arms/x/mean"}})


# ------------------------------------------------------------------ a study's own report


def test_a_studys_report_keeps_its_claims_and_reads_no_other_experiment(tmp_path: Path) -> None:
    """`make demo-<study>`'s claims.md: the claims read off the study's experiments (main or
    causal reading), a reading off another experiment "not run" without reading its file,
    links leading back to the results root."""
    other = {"title": "the lattice protocol module", "section": "§1"}
    cf = parse(
        claim(id="in_study"),
        claim(
            id="causal_only",
            experiment="elsewhere",
            causal={
                "experiment": "toy",
                "statistic": "contrasts[a=armed,b=plain,value=16]/diff",
                "p": "contrasts[a=armed,b=plain,value=16]/p",
            },
        ),
        claim(id="outside", experiment="elsewhere", source=other),
        sources=["the paper summary", "the lattice protocol module"],
        not_claims=[
            {"statement": "A design number.", "source": other, "kind": "design", "where": "config"},
            {"statement": "A toy setting.", "source": SOURCE, "kind": "design", "where": "config"},
        ],
    )
    kept = C.in_study(cf, ["toy"])
    assert [c.id for c in kept.claims] == ["in_study", "causal_only"]
    assert kept.sources == ("the paper summary",)
    assert [n.statement for n in kept.not_claims] == ["A toy setting."]
    (tmp_path / "stats").mkdir()
    (tmp_path / "stats/toy.json").write_text(json.dumps(STATS))
    # a stats file of the other experiment that must not be read: it would decide the claim
    (tmp_path / "stats/elsewhere.json").write_text(json.dumps(STATS))
    got = {r.claim.id: r for r in C.evaluate(kept, tmp_path, "test", study=["toy"])}
    assert got["in_study"].verdict == C.REPRODUCED
    assert got["causal_only"].verdict == C.NOT_RUN
    assert "not one of this study's" in got["causal_only"].reason
    assert got["causal_only"].causal.verdict == C.REPRODUCED
    claims_yaml = tmp_path / "claims.yaml"
    claims_yaml.write_text(
        yaml.safe_dump(
            {
                "sources": ["the paper summary", "the lattice protocol module"],
                "claims": [
                    claim(id="in_study"),
                    claim(id="outside", experiment="elsewhere", source=other),
                ],
            }
        )
    )
    md_out = tmp_path / "studies/toy/claims.md"
    md_out.parent.mkdir(parents=True)
    results = C.write_report(
        claims_yaml,
        tmp_path,
        "test",
        md_out,
        tmp_path / "studies/toy/claims.tex",
        study=("toy", ["toy"]),
    )
    assert [r.claim.id for r in results] == ["in_study"]
    md = md_out.read_text()
    assert md.startswith("# Claim-by-claim reproduction of study `toy` (scale `test`)")
    assert "](../../tables/toy.tex)" in md and "outside" not in md
    whole = C.write_report(
        claims_yaml, tmp_path, "test", tmp_path / "claims.md", tmp_path / "c.tex"
    )
    assert {r.claim.id for r in whole} == {"in_study", "outside"}
    assert "](tables/toy.tex)" in (tmp_path / "claims.md").read_text()


def test_a_studys_planned_stats_name_only_its_experiments() -> None:
    cf = C.load_claims(CLAIMS)
    plan = _plan("study")
    names = plan.studies["kvbench"]
    planned = C.planned_for(CLAIMS, plan, names)
    assert planned, "the kvbench study decides no claim"
    assert set(planned) <= {k for c in cf.claims for k in (c.id, C.causal_key(c))}
    files = {p for p in planned.values() if p}
    assert files and files <= {f"stats/{e}.json" for e in names}
    assert C.stats_inputs(CLAIMS, plan, names) == sorted(f"{plan.root}/{p}" for p in files)


def test_an_ordering_needs_its_positive_control_to_have_learned() -> None:
    """An ordering with a control (the matched arm recalling at a load it can hold) is
    inconclusive when the control did not learn: an arm above another that never learned
    the task shows no capacity; a control that learned leaves the order's verdict as it was."""
    base = {
        "p": None,
        "rule": "ordering",
        "source_value": "armed > plain",
        "statistic": "arms/{arm}/mean",
        "arms": ["armed-pairs32", "plain-pairs32"],
        "control": {"statistic": "arms/armed-pairs16/mean", "at_least": 0.9, "what": "armed"},
    }
    assert verdict(**base).verdict == C.REPRODUCED
    r = verdict(**{**base, "control": {**base["control"], "at_least": 0.999}})
    assert r.verdict == C.INCONCLUSIVE and "positive control (armed) did not learn" in r.reason
    assert "positive control" not in verdict(**base).reason
