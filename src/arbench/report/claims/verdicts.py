"""The verdict rules: one claim's verdict on its loaded stats JSON.

A verdict is never a pass the data do not support. Before a rule is applied the data must be
able to decide it: a NaN anywhere, a p no test at this n can bring below alpha, a tie of two
arms at chance or at ceiling, arms without spread, a lock-in comparison where no seed (or
every seed) locks in, a "better" whose learned arm never left chance, a per-seed rule on
fewer than `MIN_SEEDS` seeds, a dataset estimate whose standard error spans its tolerance,
or a positive control that did not learn: each reads "inconclusive" with its reason.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arbench.report.claims.paths import (
    Found,
    Missing,
    flag,
    n_of,
    parse_path,
    resolve,
    scale_reason,
    seeds_of,
    tested_node,
)
from arbench.report.claims.schema import AT_KEYS, NEEDS_P, Claim, ClaimError, claim_kind
from arbench.report.claims.values import fmt
from arbench.stats.intervals import diff_interval, rate_diff_interval
from arbench.stats.power import fisher_mde, permutation_mde

REPRODUCED = "reproduced"
# a positive claim whose sign and significance hold while the source's value lies outside
# our interval of the difference
REPRODUCED_SIGN = "reproduced (sign only)"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run at this scale"
# a claim on an experiment no scale plans (``not_planned``: name -> why), at any scale
NOT_PLANNED = "not planned"
# a verdict the data cannot give (the reason says why: see the module docstring)
INCONCLUSIVE = "inconclusive"
# claims whose source numbers cannot all hold (conflicts_with), or that no data can meet
# (source_error): counted apart, our data's own verdict in the reason
SOURCE_INCONSISTENT = "source inconsistent"
VERDICTS = (
    REPRODUCED,
    REPRODUCED_SIGN,
    NOT_REPRODUCED,
    INCONCLUSIVE,
    SOURCE_INCONSISTENT,
    NOT_RUN,
    NOT_PLANNED,
)
CHANCE_FACTOR = 10  # the paper's rule: a number within 10x of its floor is "chance"
MIN_SEEDS = 3  # per arm, for every rule on per-seed statistics but the exact tests
CEILING = 0.99  # two arms both at or above it tie at the top: no difference to test
POWER = 0.8  # the power at which a no-difference claim's minimum detectable effect is read
SE_MARGIN = 2.0  # a dataset estimate decides only this many standard errors from its bound


@dataclass
class Result:
    """A claim's verdict, with our values as read from the stats."""

    claim: Claim
    verdict: str
    values: list[Any] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)  # an ordering's arms, beside values
    p: list[float] = field(default_factory=list)
    n: str | None = None
    scale: str = ""
    reason: str = ""
    refs: list[str] = field(default_factory=list)
    stats_path: str = ""
    rho: float | None = None  # a rank correlation's Spearman rho
    causal: Result | None = None  # the verdict of the claim's causal-recipe reading
    decided_at: str = ""  # the settings the arms ran at: "K = 8, L = 64, 1,500 steps"

    @property
    def kind(self) -> str:
        """ "model" (a claim about trained models) or "setup" (setup, data, floors)."""
        return claim_kind(self.claim)


class _NotRun(Exception):
    pass


class _Undecided(Exception):
    """The data cannot decide the claim: the message is the reason."""


class _PathMissing(ClaimError):
    """A statistic path that finds nothing, for no reason of this scale's plan."""


def _reduce(how: str | None, values: list[Any], cid: str) -> list[Any]:
    if how is None:
        return values
    nums = [_as_number(v, cid) for v in values]
    if how == "min":
        return [min(nums)]
    if how == "max":
        return [max(nums)]
    if how == "mean":
        return [sum(nums) / len(nums)]
    if len(nums) != 2:
        raise ClaimError(f"claim {cid}: reduce: {how} needs exactly two values, got {len(nums)}")
    if how == "diff":
        return [nums[0] - nums[1]]
    return [nums[0] / nums[1] if nums[1] else math.nan]


def _as_number(value: Any, cid: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClaimError(f"claim {cid}: statistic: expected a number, found {value!r:.60}")
    return float(value)


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _read(stats: Any, paths: Iterable[str], cid: str) -> list[Found]:
    """Every value of ``paths``; `_NotRun` with the reason when one is absent for a reason
    of this scale's plan, `_PathMissing` (a `ClaimError`) when a path is simply wrong."""
    found: list[Found] = []
    for path in paths:
        try:
            got, _ = resolve(stats, path)
        except Missing as miss:
            why = scale_reason(stats, miss)
            if why is None:
                raise _PathMissing(
                    f"claim {cid}: statistic path {path!r}: {miss.step.text!r} not found"
                ) from None
            raise _NotRun(why) from None
        found += got
    return found


def _ns(found: Iterable[Found]) -> str | None:
    ns = list(dict.fromkeys(n for n in (n_of(f) for f in found) if n))
    return ", ".join(ns) if ns else None


def evaluate_claim(claim: Claim, stats: Any, scale: str) -> Result:
    """One claim's verdict on its loaded stats JSON."""
    res = Result(claim=claim, verdict=NOT_REPRODUCED, scale=scale)
    if isinstance(stats, Mapping) and stats.get("path_only"):
        _evaluate(claim, {**stats, "path_only": False}, res)  # a wrong path fails even here
        res = Result(claim=claim, verdict=NOT_RUN, scale=scale, decided_at=res.decided_at)
        res.reason = (
            f"at scale {scale} {stats.get('experiment', 'this experiment')} runs at its "
            "smallest size, to exercise its path, not to measure (make demo-<study> runs it "
            "at the study scale)"
        )
        return res
    return _evaluate(claim, stats, res)


def _evaluate(claim: Claim, stats: Any, res: Result) -> Result:
    try:
        if claim.rule in ("ordering", "rank_correlation"):
            res = _ordering(claim, stats, res)
        else:
            res = _one_rule(claim, stats, res)
    except _NotRun as why:
        res.verdict, res.reason = NOT_RUN, str(why)
    except _Undecided as why:
        res.verdict = INCONCLUSIVE
        res.reason = "; ".join(x for x in (str(why), res.reason) if x)
    return res


def _one_rule(claim: Claim, stats: Any, res: Result) -> Result:
    """Every rule but an ordering or a rank correlation."""
    found = _read(stats, claim.statistic, claim.id)
    res.values = _reduce(claim.reduce, [f.value for f in found], claim.id)
    res.n = _n_explicit(claim, stats) or _ns(found)
    p_found = _read(stats, claim.p, claim.id) if claim.p else []
    res.p = [_as_number(f.value, claim.id) for f in p_found]
    control = _read(stats, claim.control, claim.id) if claim.control else []
    floor = (
        _as_number(_read(stats, [claim.floor], claim.id)[0].value, claim.id)
        if claim.floor
        else None
    )
    _decided_at(claim, stats, found + p_found, res)
    if claim.rule in NEEDS_P:
        weak = [m for m in (_underpowered(f, claim.alpha) for f in p_found) if m]
        if weak:  # elsewhere a p is shown, not tested
            raise _Undecided(weak[0])
    why = _inconclusive(claim, found, p_found, res)
    if why:
        raise _Undecided(why)
    _control_learned(claim, control)
    if claim.release and claim.n:
        _estimate_check(claim, stats, found, res)
    if claim.rule == "not_significant":
        _null_power(claim, p_found, res)
    if claim.rule == "at_chance":
        return _at_chance(claim, found, res, floor)
    res.verdict = REPRODUCED if _holds(claim, res.values, res.p) else NOT_REPRODUCED
    if claim.rule == "same_sign_significant":
        _interval(claim, found, res)
    return res


def _control_learned(claim: Claim, control: list[Found]) -> None:
    """`_Undecided` when the claim's positive control (its ``control`` statistics, read into
    ``control``) did not reach ``control.at_least``: nothing learned at this budget, so neither
    a collapse nor an order of the arms says anything about the claim."""
    learned = [f.value for f in control]
    if any(not isinstance(v, int | float) or not v >= claim.control_at_least for v in learned):
        raise _Undecided(
            f"the positive control ({claim.control_what}) did not learn at this budget: "
            f"{', '.join(fmt(v) for v in learned)} against {fmt(claim.control_at_least)}"
        )


def _add(res: Result, line: str) -> None:
    res.reason = "; ".join(x for x in (res.reason, line) if x)


# ------------------------------------------------------------------ can the data decide


def _inconclusive(claim: Claim, found: list[Found], p_found: list[Found], res: Result) -> str:
    """Why the data cannot decide the claim either way ("" when they can)."""
    rule = claim.rule
    if any(_nan(f.value) for f in p_found):
        return "p is not a number"
    if any(_nan(f.value) for f in found) or any(_nan(v) for v in res.values):
        return "our value is not a number"
    if rule == "not_significant":
        for f in found + p_found:
            if flag(f, "both_chance") is True:
                return "both arms at chance: a tie at the floor tests no difference"
        for f in p_found:
            node = tested_node(f)
            why = _null_vacuous(node) if node is not None else ""
            if why:
                return why
    if rule == "same_sign_significant":
        learned = "b" if (claim.sign or 1) < 0 else "a"
        if any(flag(f, f"{learned}_chance") is True for f in found):
            return f"arm {learned} at chance: no effect of a learned arm to read"
    if rule in ("within", "at_least", "at_most", "at_chance", "holds"):
        few = _too_few_seeds(rule, found)
        if few:
            return few
    if rule == "within" and _on_chance_arms(claim, found):
        return "every arm behind the value at chance: a difference of floors tests nothing"
    return ""


def _null_vacuous(node: Mapping[str, Any]) -> str:
    """Why a no-difference test of this contrast (or its lock-in block) is vacuous."""
    if "k_a" in node:
        if node["k_a"] == 0 and node["k_b"] == 0:
            return "no seed locks in in either arm: a tie at 0 tests no difference of rates"
        if node["k_a"] == node["n_a"] and node["k_b"] == node["n_b"]:
            return "every seed locks in in both arms: a tie at 1 tests no difference of rates"
        return ""
    a, b = node.get("scores_a"), node.get("scores_b")
    if a is None or b is None:
        return ""
    if min(a) >= CEILING and min(b) >= CEILING:
        return f"both arms at ceiling (every seed >= {CEILING}): a tie at the top tests nothing"
    if np.ptp(a) == 0 and np.ptp(b) == 0:
        return "no spread in either arm (every seed scores alike): no power can be sized"
    return ""


def _on_chance_arms(claim: Claim, found: list[Found]) -> bool:
    """A value that is a difference of arms all at chance (a contrast's, or a reduce)."""
    if any(flag(f, "both_chance") is True for f in found):
        return True
    if claim.reduce == "diff":
        chances = [flag(f, "chance") for f in found]
        return bool(chances) and all(c is True for c in chances)
    return False


def _too_few_seeds(rule: str, found: Iterable[Found]) -> str:
    ns = [n for n in (seeds_of(f) for f in found) if n is not None]
    if ns and min(ns) < MIN_SEEDS:
        return f"{min(ns)} seed(s) per arm: a {rule} rule needs at least {MIN_SEEDS}"
    return ""


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact test of n_a against n_b samples can reach (the
    permutation test of means and Fisher's test of lock-in counts alike): the most extreme
    split of the pooled samples, and its mirror when the two sizes are equal."""
    ways = math.comb(n_a + n_b, n_a)
    return min(1.0, (2.0 if n_a == n_b else 1.0) / ways)


def _underpowered(found: Found, alpha: float) -> str | None:
    """Why a p-value cannot test the claim at this n: its exact test (a Monte-Carlo one,
    ``exact: false``, is never flagged) could not reach p < alpha whatever the data."""
    node = tested_node(found)
    if node is None or node.get("exact", True) is False:
        return None
    floor = smallest_p(node["n_a"], node["n_b"])
    if floor >= alpha:
        return f"too few seeds: at n = {node['n_a']} vs {node['n_b']} no p is below {floor:.3g}"
    return None


def _estimate_check(claim: Claim, stats: Any, found: list[Found], res: Result) -> None:
    """A dataset estimate (a float over ``n`` examples; a count is exact) decides a bound
    only where it lies `SE_MARGIN` standard errors from it: the file's ``standard_errors``."""
    errors = stats.get("standard_errors") if isinstance(stats, Mapping) else None
    for path, f in zip(claim.statistic, found, strict=False):
        if isinstance(f.value, int) and not isinstance(f.value, bool):
            continue
        key = parse_path(path)[-1].key
        se = errors.get(key) if isinstance(errors, Mapping) else None
        if not isinstance(se, int | float):
            raise _Undecided(
                f"no standard error of {key} at n = {res.n}: the estimate's noise is unknown"
            )
        value = float(f.value)
        if claim.rule == "within":
            gap = abs(abs(value - claim.target) - claim.tolerance)
            bound = f"the band {fmt(claim.target)} +/- {fmt(claim.tolerance)}"
        else:
            gap, bound = abs(value - claim.threshold), f"the threshold {fmt(claim.threshold)}"
        if se > 0 and gap < SE_MARGIN * se:
            raise _Undecided(
                f"{key} {fmt(value)} has standard error {fmt(float(se))} at n = {res.n}: it "
                f"lies {fmt(gap)} from {bound}, inside {SE_MARGIN:g} standard errors"
            )


def _n_explicit(claim: Claim, stats: Any) -> str | None:
    if not claim.n:
        return None
    found = _read(stats, [claim.n], claim.id)
    return ", ".join(dict.fromkeys(fmt(f.value) for f in found))


# ------------------------------------------------------------------ the settings decided at


def _decided_at(claim: Claim, stats: Any, found: list[Found], res: Result) -> None:
    """The task settings and steps of the arms behind the values ("K = 8, 1,500 steps"),
    and, where the claim names the settings it is about (``at``), any that differ."""
    if not isinstance(stats, Mapping) or not isinstance(stats.get("arms"), Mapping):
        return
    arms = _arms_behind(stats, found)
    if not arms:
        return
    task, train = stats.get("task") or {}, stats.get("train") or {}
    grid = stats.get("grid") or {}
    settings: dict[str, list[Any]] = {}
    for node in arms:
        spec = node.get("spec") or {}
        mine = {**task, **(spec.get("task") or {})}
        key = str(grid.get("key", ""))
        if key.startswith("task.") and node.get("value") is not None:
            mine[key.split(".", 1)[1]] = node["value"]
        for k in AT_KEYS:
            if k in mine:
                settings.setdefault(k, []).append(mine[k])
        steps = node.get("steps", (spec.get("train") or {}).get("steps", train.get("steps")))
        if steps is not None:
            settings.setdefault("steps", []).append(steps)
    parts = []
    for k, values in settings.items():
        vals = ", ".join(fmt(v) for v in dict.fromkeys(values))
        parts.append(f"{vals} steps" if k == "steps" else f"{AT_KEYS[k]} = {vals}")
    res.decided_at = ", ".join(parts)
    wrong = [
        f"{AT_KEYS[k]} = {', '.join(fmt(v) for v in dict.fromkeys(settings[k]))}, not the "
        f"claim's {AT_KEYS[k]} = {fmt(want)}"
        for k, want in claim.at
        if k in settings and any(v != want for v in settings[k])
    ]
    if wrong:
        _add(res, "decided at " + "; ".join(wrong))


def _arms_behind(stats: Mapping[str, Any], found: list[Found]) -> list[Mapping[str, Any]]:
    """The arm summaries a set of values was read from: an arm on the path, or a
    contrast's two arms (matched by arm name and grid value)."""
    arms = stats["arms"]
    out: list[Mapping[str, Any]] = []
    for f in found:
        for node in f.trail:
            if any(node is a for a in arms.values()):
                out.append(node)
            elif "a" in node and "b" in node and "n_a" in node:
                for side in ("a", "b"):
                    value = node.get(f"value_{side}", node.get("value"))
                    out += [
                        a
                        for name, a in arms.items()
                        if isinstance(a, Mapping)
                        and a.get("arm", name) == node[side]
                        and (value is None or a.get("value") == value)
                    ]
                break
    unique: list[Mapping[str, Any]] = []
    for a in out:
        if not any(a is u for u in unique):
            unique.append(a)
    return unique


# ------------------------------------------------------------------ the rules


def _at_chance(claim: Claim, found: list[Found], res: Result, floor: float | None) -> Result:
    """A "chance" claim: every arm at chance by the stats' own test (not above its task's
    strongest no-binding floor, `arbench.report.chance`); ``tenfold`` claims quote the
    paper's rule instead, every mean within CHANCE_FACTOR times the claim's floor."""
    assert floor is not None
    nums = [_as_number(v, claim.id) for v in res.values]
    means = ", ".join(fmt(v) for v in nums)
    if claim.tenfold:
        bound = CHANCE_FACTOR * floor
        ok = all(v <= bound for v in nums)
        line = (
            f"mean {means} against the source's {claim.source_value}; floor {fmt(floor)}, "
            f"chance up to {CHANCE_FACTOR}x it ({fmt(bound)}, the paper's rule)"
        )
    else:
        tests = [flag(f, "chance_test") for f in found]
        flags = [flag(f, "chance") for f in found]
        if any(c is None for c in flags):
            raise ClaimError(f"claim {claim.id}: statistic: no chance flag beside the value")
        ok = all(c is True for c in flags)
        ps = [t.get("p") for t in tests if isinstance(t, Mapping) and t.get("p") is not None]
        strongest = [t["floor"] for t in tests if isinstance(t, Mapping) and "floor" in t]
        test = (
            f"one-sided binomial p {', '.join(fmt(p) for p in ps)} against the no-binding "
            f"floor {', '.join(fmt(x) for x in dict.fromkeys(strongest))}"
            if ps
            else "the threshold rule (no answer counts)"
        )
        line = f"mean {means} against the source's {claim.source_value}; {test}"
    res.verdict = REPRODUCED if ok else NOT_REPRODUCED
    _add(res, line)
    return res


def _holds(claim: Claim, values: list[Any], p: list[float]) -> bool:
    rule, alpha = claim.rule, claim.alpha
    if rule == "holds":
        if not all(isinstance(v, bool) for v in values):
            raise ClaimError(f"claim {claim.id}: statistic: rule holds needs true/false values")
        return all(values)
    nums = [_as_number(v, claim.id) for v in values]
    if rule in NEEDS_P:
        if len(p) not in (1, len(nums)):
            raise ClaimError(
                f"claim {claim.id}: p: {len(p)} p-values for {len(nums)} statistic values"
            )
        ps = p * len(nums) if len(p) == 1 else p
        if rule == "not_significant":
            return all(q >= alpha for q in ps)
        return all(v * claim.sign > 0 and q < alpha for v, q in zip(nums, ps, strict=True))
    if rule == "within":
        return all(abs(v - claim.target) <= claim.tolerance + 1e-12 for v in nums)
    if rule == "at_least":
        return all(v >= claim.threshold for v in nums)
    if rule == "at_most":
        return all(v <= claim.threshold for v in nums)
    raise AssertionError(rule)


def _interval(claim: Claim, found: list[Found], res: Result) -> None:
    """A positive claim's 95 % interval of the difference (the inverted permutation test
    over each arm's seeds; Newcombe's for a difference of lock-in rates) and whether the
    source's effect lies in it: "reproduced (sign only)" where it does not."""
    target = claim.effect()
    texts, outside = [], False
    for low, high in _intervals(claim, found):
        inside = target is None or low - 1e-12 <= target <= high + 1e-12
        outside |= not inside
        where = "" if target is None else (" holds" if inside else " excludes")
        texts.append(f"95 % interval [{fmt(low)}, {fmt(high)}]{where}")
    if not texts:
        return
    what = " (the source gives no number)" if target is None else f" the source's {fmt(target)}"
    _add(res, "; ".join(t + what for t in texts))
    if res.verdict == REPRODUCED and outside:
        res.verdict = REPRODUCED_SIGN


def _intervals(claim: Claim, found: list[Found]) -> list[tuple[float, float]]:
    out = []
    rates = [f for f in found if parse_path(claim.statistic[0])[-1].key in ("rate_a", "rate_b")]
    if claim.reduce == "diff" and len(rates) == 2:
        node = next((t for t in reversed(rates[0].trail) if "k_a" in t), None)
        if node is not None:
            out.append(rate_diff_interval(node["k_a"], node["n_a"], node["k_b"], node["n_b"]))
        return out
    seed = zlib.crc32(claim.id.encode())
    for f in found:
        node = next((t for t in reversed(f.trail) if "scores_a" in t and "scores_b" in t), None)
        if node is None or f.value != node.get("diff"):
            continue  # not a contrast's own difference (a mean)
        out.append(
            diff_interval(node["scores_a"], node["scores_b"], rng=np.random.default_rng(seed))
        )
    return out


def minimum_detectable_effect(
    node: Mapping[str, Any], alpha: float, seed: int, n: int | None = None
) -> float | None:
    """The MDE of the exact test behind a contrast's p (80 % power, two-sided ``alpha``):
    Fisher's on a lock-in block (rates centred on the pooled rate), else the permutation
    test of means on the contrast's per-seed scores. ``n``: at that many seeds per arm (the
    noise resampled from ours). None: nothing is detectable."""
    if "k_a" in node:
        pooled = (node["k_a"] + node["k_b"]) / (node["n_a"] + node["n_b"])
        n_a, n_b = (n, n) if n else (node["n_a"], node["n_b"])
        return fisher_mde(n_a, n_b, pooled, alpha, POWER)
    a, b = node["scores_a"], node["scores_b"]
    if n:
        rng = np.random.default_rng(seed + 1)
        a, b = list(rng.choice(a, n)), list(rng.choice(b, n))
    return permutation_mde(a, b, alpha, POWER, rng=np.random.default_rng(seed))


def _null_power(claim: Claim, p_found: list[Found], res: Result) -> None:
    """A "no difference" is evidence only where the test could have seen the claim's delta:
    `_Undecided` otherwise, with the MDE at this n (and at the source's, where given)."""
    seed = zlib.crc32(claim.id.encode())
    worst: tuple[float, str, Mapping[str, Any]] | None = None
    for f in p_found:
        node = tested_node(f)
        if node is None or not ("k_a" in node or "scores_a" in node):
            raise _Undecided("no per-seed scores to size the test by (rerun the stats rule)")
        n = f"n = {node['n_a']} vs {node['n_b']}"
        mde = minimum_detectable_effect(node, claim.alpha, seed)
        if mde is None:
            raise _Undecided(f"no difference is detectable at {n} (80 % power, two-sided)")
        if worst is None or mde > worst[0]:
            worst = (mde, n, node)
    if worst is None:
        return
    mde, n, node = worst
    what = "lock-in rate" if "lock_in" in claim.p[0] else "mean"
    line = (
        f"minimum detectable {what} difference {mde:.3g} at {n} (80 % power, "
        f"two-sided alpha {claim.alpha:g}), against delta {claim.delta:g}"
    )
    if claim.source_n:
        at_source = minimum_detectable_effect(node, claim.alpha, seed, claim.source_n)
        shown = "none" if at_source is None else f"{at_source:.3g}"
        if at_source is None or at_source > claim.delta:
            line += (
                f"; undecidable even at the source's n = {claim.source_n} per arm "
                f"(minimum detectable {shown} with our seeds' noise)"
            )
        else:
            line += f"; at the source's n = {claim.source_n} per arm it would be {shown}"
    if mde > claim.delta:
        raise _Undecided(line)
    _add(res, line)


# ------------------------------------------------------------------ orderings


def _ordering(claim: Claim, stats: Any, res: Result) -> Result:
    labels, values, ns, dropped = [], [], [], []
    every: list[Found] = []
    noise: list[tuple[float | None, int | None]] = []  # each arm's (sd, seeds), for margins
    chances: list[bool | None] = []
    for arm in claim.arms:
        try:
            found = _read(stats, claim.paths(arm), claim.id)
        except _NotRun as why:
            if not claim.skip_missing:
                raise
            dropped.append(f"{arm} ({why})")
            continue
        except _PathMissing:
            # an arm this scale does not generate (a frontier's largest states); a typo in
            # an arm's name fails planning at paper scale (`plan_check`), where every arm runs
            if not claim.skip_missing:
                raise
            dropped.append(f"{arm} (not in this scale's stats)")
            continue
        value = _reduce(claim.reduce, [f.value for f in found], claim.id)
        if len(value) != 1:
            raise ClaimError(f"claim {claim.id}: statistic: one value per arm, got {len(value)}")
        labels.append(arm)
        values.append(_as_number(value[0], claim.id))
        ns.append(_ns(found))
        every += found
        sds = [flag(f, "sd") for f in found]
        counts_ = [seeds_of(f) for f in found]
        one = len(found) == 1 and isinstance(sds[0], int | float)
        noise.append((float(sds[0]), counts_[0]) if one and counts_[0] else (None, None))
        chances.append(flag(found[0], "chance") if len(found) == 1 else None)
    res.labels, res.values = labels, values
    res.n = ", ".join(dict.fromkeys(n for n in ns if n)) or None
    _decided_at(claim, stats, every, res)
    if dropped:
        _add(res, "left out: " + "; ".join(dropped))
    nan = [a for a, v in zip(labels, values, strict=True) if math.isnan(v)]
    if nan:
        raise _Undecided(f"{', '.join(nan)}: our value is not a number")
    if claim.rule == "rank_correlation":
        return _rank(claim, labels, values, every, res)
    if len(values) < 2:
        res.verdict = NOT_RUN
        res.reason = res.reason or "fewer than two arms at this scale"
        return res
    few = _too_few_seeds(claim.rule, every)
    if few:
        raise _Undecided(few)
    _control_learned(claim, _read(stats, claim.control, claim.id) if claim.control else [])
    if max(values) - min(values) < 1e-9:  # all at chance, or all at ceiling
        raise _Undecided("every arm at one value: no order to read")
    flat = _flat_row(values, chances)
    if flat:
        raise _Undecided(flat)
    sign = 1 if claim.order == "ascending" else -1
    steps = [sign * (b - a) for a, b in zip(values, values[1:], strict=False)]
    margins = [
        2 * math.sqrt(sa**2 / na + sb**2 / nb) if None not in (sa, sb, na, nb) else 0.0
        for (sa, na), (sb, nb) in zip(noise, noise[1:], strict=False)
    ]
    # a neighbour the wrong way beyond its noise margin (or at all, with no noise known)
    # fails the order; a strict step inside the margin cannot tell the order either way
    wrong = any(
        d < -m or (m == 0 and (d <= 0 if claim.strict else d < 0))
        for d, m in zip(steps, margins, strict=True)
    )
    close = [
        i
        for i, (d, m) in enumerate(zip(steps, margins, strict=True))
        if claim.strict and m > 0 and abs(d) <= m
    ]
    if wrong:
        res.verdict = NOT_REPRODUCED
    elif close:
        i = close[0]
        raise _Undecided(
            f"{labels[i]} and {labels[i + 1]} differ by {fmt(abs(values[i + 1] - values[i]))}, "
            f"inside the noise margin {fmt(margins[i])} (two standard errors)"
        )
    else:
        res.verdict = REPRODUCED
    return res


def _rank(
    claim: Claim, labels: list[str], values: list[float], every: list[Found], res: Result
) -> Result:
    from arbench.report.kvbench import spearman

    rho = spearman(dict(zip(labels, values, strict=True)), dict(claim.source_values))
    if rho is None:
        res.verdict = NOT_RUN
        res.reason = res.reason or "fewer than three arms, or no spread, at this scale"
        return res
    res.rho = rho
    few = _too_few_seeds(claim.rule, every)
    if few:
        raise _Undecided(few)
    res.verdict = REPRODUCED if rho >= claim.threshold else NOT_REPRODUCED
    return res


def _flat_row(values: list[float], chances: list[bool | None]) -> str | None:
    """Why an ordering has nothing to read: every arm at chance, or every arm at ceiling."""
    if chances and all(c is True for c in chances):
        return "every arm at chance: no order to read"
    if min(values) >= CEILING and max(values) <= 1.0:
        return "every arm at ceiling: no order to read"
    return None


def source_check(res: Result) -> Result:
    """A claim the sources cannot satisfy takes the verdict "source inconsistent", naming
    the conflicting claims (or the source's error), with our data's own verdict kept in the
    reason."""
    c = res.claim
    if not (c.conflicts_with or c.source_error):
        return res
    why = (
        f"source error: {c.source_error}"
        if c.source_error
        else f"cannot hold together with {', '.join(c.conflicts_with)}"
    )
    ours = res.verdict + (f" ({res.reason})" if res.reason else "")
    res.verdict, res.reason = SOURCE_INCONSISTENT, f"{why}; our data: {ours}"
    return res
