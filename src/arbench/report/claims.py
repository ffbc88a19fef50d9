"""The claim-by-claim reproduction report: every quantitative claim of the sources, tested
against the statistics this run produced.

``claims.yaml`` (repository root) declares each claim once: a one-line paraphrase, its source
(title and section) and the value the source gives, the stats JSON that tests it (an
experiment's ``stats/<experiment>.json``, or a file of a published dataset), the statistic's
path inside that JSON, and a verdict rule saying what "reproduced" means. This module loads
and validates that file (a bad entry fails at once, one line naming the claim and the key),
evaluates every claim, and renders ``claims.md`` and ``tables/claims.tex``.

Our values always come from the stats JSON, never from the claims file. A claim whose
experiment is not in the config, whose stats file is absent, or whose statistic names a grid
value, an arm, a contrast or an evaluation length that this scale does not run, gets the
verdict "not run at this scale" with the reason; a path that is wrong for any other reason is
an error naming the claim.

Statistic paths are ``/``-separated keys (``contrasts[a=delta_conv,b=delta]/diff``,
``arms/delta-pairs32/mean``, ``independent/raw[-1][0]``). A segment may carry selectors:
``[i]`` indexes a list, ``[*]`` (or a bare ``*`` segment) takes every element of a list or
value of a mapping, and ``[k=v,...]`` takes every element (or mapping value) whose fields
equal those values (YAML-parsed: ``value=32`` matches 32, ``value=null`` None). A path that
fans out yields several values, and the rule must hold for each ("at every depth"). Several
paths may be given as a list; ``reduce`` (min, max, mean, diff, ratio) folds the values into
one. Rules: `RULES`.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import yaml

from arbench.report.tables import TEMPLATES, environment, fmt_p, latex_escape
from arbench.stats.bootstrap import bootstrap_diff_ci
from arbench.stats.power import fisher_mde, permutation_mde

REPRODUCED = "reproduced"
# a positive claim whose sign and significance hold while the source's value lies outside
# our interval of the difference (bootstrap over seeds)
REPRODUCED_SIGN = "reproduced (sign only)"
NOT_REPRODUCED = "not reproduced"
NOT_RUN = "not run at this scale"
# a claim on an experiment no scale plans (``not_planned``: name -> why), at any scale
NOT_PLANNED = "not planned"
# a verdict the data cannot give: a tie of two arms at the floor, a NaN p, a claim on arm a
# that never left chance, a per-seed rule on fewer than MIN_SEEDS seeds (the reason says which)
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
MIN_SEEDS = 3  # per arm, for within / at_least / at_most / ordering on per-seed statistics

RULES = {
    "same_sign_significant": "our effect has the source's sign and p < alpha",
    "not_significant": "p >= alpha (the source reports no significant difference)",
    "within": "|ours - target| <= tolerance (target: the source's value)",
    "at_least": "ours >= threshold (threshold: the source's value)",
    "at_most": "ours <= threshold (threshold: the source's value)",
    "ordering": "the arms' statistics come in the declared order",
    "holds": "every statistic (a flag of the stats) is true",
    "at_chance": "every mean is within 10x of its floor (the paper's rule for 'chance')",
    "rank_correlation": "Spearman's rank correlation of the arms' statistics with the "
    "source's values is at least the threshold",
}
REDUCERS = ("min", "max", "mean", "diff", "ratio")
NEEDS_P = ("same_sign_significant", "not_significant")
SIGNS = {"positive": 1, "negative": -1}

KEYS = {
    "id",
    "claim",
    "source",
    "source_value",
    "experiment",
    "release",
    "file",
    "statistic",
    "p",
    "n",
    "reduce",
    "rule",
    "alpha",
    "tolerance",
    "target",
    "threshold",
    "sign",
    "arms",
    "source_values",
    "order",
    "strict",
    "skip_missing",
    "refs",
    "note",
    "causal",
    "control",
    "conflicts_with",
    "source_error",
    "delta",
    "floor",
}
# what a claim's ``causal`` block may set: the same claim read off the causal recipe's
# experiment (today's harness), whose verdict is the report's "holds under the causal recipe"
CAUSAL_KEYS = {"experiment", "statistic", "p", "n", "note", "arms"}
TOP_KEYS = {
    "alpha",
    "sources",
    "pending_experiments",
    "not_planned",
    "claims",
    "not_claims",
}
# a quantitative statement of a source that is no claim: a parameter of the protocol the
# config reproduces (``design``, ``where``: the config key), or one no run of this harness
# can test (``untestable``, ``where``: why)
NOT_CLAIM_KINDS = ("design", "untestable")
ID = re.compile(r"^[a-z][a-z0-9_]*$")
SEGMENT = re.compile(r"^([^\[\]]*)((?:\[[^\[\]]*\])*)$")
SELECTOR = re.compile(r"\[([^\[\]]*)\]")


class ClaimError(ValueError):
    """A claims-file problem, in one line naming the claim and the key."""


# ------------------------------------------------------------------ paths


@dataclass(frozen=True)
class Step:
    """One step of a statistic path: ``key`` (a mapping key or list index), ``all`` (every
    element), or ``match`` (every element whose fields equal ``fields``)."""

    kind: str
    key: str | int | None = None
    fields: tuple[tuple[str, Any], ...] = ()
    text: str = ""


def parse_path(text: str) -> list[Step]:
    """The steps of a statistic path (see the module docstring); ValueError when malformed."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty path")
    steps: list[Step] = []
    for segment in text.split("/"):
        m = SEGMENT.match(segment)
        if not m or (not m.group(1) and not m.group(2)):
            raise ValueError(f"malformed segment {segment!r} in {text!r}")
        name, selectors = m.group(1), m.group(2)
        if name == "*":
            steps.append(Step("all", text=segment))
        elif name:
            steps.append(Step("key", key=name, text=name))
        for sel in SELECTOR.findall(selectors):
            sel = sel.strip()
            if sel == "*":
                steps.append(Step("all", text=f"[{sel}]"))
            elif re.fullmatch(r"-?\d+", sel):
                steps.append(Step("key", key=int(sel), text=f"[{sel}]"))
            else:
                pairs = []
                for part in sel.split(","):
                    k, eq, v = part.partition("=")
                    if not eq or not k.strip():
                        raise ValueError(f"selector [{sel}] in {text!r}: expected k=v,...")
                    pairs.append((k.strip(), yaml.safe_load(v.strip()) if v.strip() else ""))
                steps.append(Step("match", fields=tuple(pairs), text=f"[{sel}]"))
    return steps


class Missing(LookupError):
    """A path step that found nothing: the step and the node it was applied to."""

    def __init__(self, step: Step, node: Any) -> None:
        super().__init__(step.text)
        self.step = step
        self.node = node


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return a == b or (a is not None and b is not None and str(a) == str(b))


def _children(node: Any) -> list[Any]:
    if isinstance(node, Mapping):
        return list(node.values())
    if isinstance(node, list):
        return list(node)
    return []


@dataclass
class Found:
    """One value a path reached, with the mappings it went through (for its n)."""

    value: Any
    trail: list[Mapping[str, Any]]


def resolve(stats: Any, text: str) -> tuple[list[Found], bool]:
    """Every value ``text`` reaches in ``stats`` and whether the path fans out; `Missing`
    when a step finds nothing."""
    frontier = [Found(stats, [])]
    fans = False
    for step in parse_path(text):
        nxt: list[Found] = []
        for f in frontier:
            node, trail = f.value, f.trail + ([f.value] if isinstance(f.value, Mapping) else [])
            if step.kind == "key":
                if isinstance(node, Mapping) and step.key in node:
                    nxt.append(Found(node[step.key], trail))
                elif (
                    isinstance(node, list)
                    and isinstance(step.key, int)
                    and -len(node) <= step.key < len(node)
                ):
                    nxt.append(Found(node[step.key], trail))
                else:
                    raise Missing(step, node)
            else:
                fans = True
                kids = _children(node)
                if step.kind == "match":
                    kids = [
                        k
                        for k in kids
                        if isinstance(k, Mapping)
                        and all(name in k and _equal(k[name], v) for name, v in step.fields)
                    ]
                if not kids:
                    raise Missing(step, node)
                nxt += [Found(k, trail) for k in kids]
        frontier = nxt
    return frontier, fans


def n_of(found: Found) -> str | None:
    """The sample size of a value: ``n_a vs n_b`` or ``n`` of the innermost mapping on its
    path that has them (an arm's seeds, a contrast's two arms, a sweep cell's seeds)."""
    for node in reversed(found.trail + ([found.value] if isinstance(found.value, dict) else [])):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return f"{node['n_a']} vs {node['n_b']}"
        if isinstance(node.get("n"), int) and not isinstance(node.get("n"), bool):
            return str(node["n"])
    return None


# ------------------------------------------------------------------ scale reasons


def _grid_labels(stats: Mapping[str, Any]) -> tuple[str, list[Any], list[str]] | None:
    grid = stats.get("grid")
    if not isinstance(grid, Mapping) or "values" not in grid:
        return None
    return grid.get("leaf", ""), list(grid["values"]), [str(v) for v in grid.get("labels", [])]


def scale_reason(stats: Mapping[str, Any], missing: Missing) -> str | None:
    """Why a path found nothing, when the reason is this scale's plan: an arm or contrast
    the stats list as skipped, a grid value not in this scale's grid, or an evaluation
    length this scale does not evaluate. None: the path itself is wrong."""
    step = missing.step
    skipped = stats.get("skipped") or {}
    skipped_arms: Mapping[str, str] = skipped.get("arms") or {}
    names: list[str] = []
    if step.kind == "key" and isinstance(step.key, str):
        names.append(step.key)
    names += [str(v) for _, v in step.fields]
    for arm, why in skipped_arms.items():
        if any(n == arm or n.startswith(f"{arm}-") for n in names):
            return f"arm {arm} not run: {why}"
    if step.kind == "match":
        fields = dict(step.fields)
        for c in skipped.get("contrasts") or []:
            if all(_equal(c.get(k), v) for k, v in fields.items() if k in ("a", "b")):
                if fields.keys() & {"a", "b"}:
                    return f"contrast {c.get('a')} - {c.get('b')} not run (arm skipped)"
    grid = _grid_labels(stats)
    if grid is not None:
        leaf, values, labels = grid
        for k, v in step.fields:
            if k in ("value", "value_a", "value_b") and not any(_equal(v, g) for g in values):
                return f"{leaf} = {v} not in this scale's grid ({', '.join(labels)})"
        if step.kind == "key" and isinstance(step.key, str) and leaf:
            m = re.fullmatch(rf"(.+)-{re.escape(leaf)}(.+)", step.key)
            if m and m.group(2) not in labels:
                return f"{leaf} = {m.group(2)} not in this scale's grid ({', '.join(labels)})"
    if step.kind == "key" and isinstance(step.key, str) and re.fullmatch(r"n\d+", step.key):
        for block in stats.values():
            if isinstance(block, Mapping) and isinstance(block.get("configs"), list):
                if step.key not in block["configs"]:
                    return f"{step.key} not evaluated at this scale"
                return f"{step.key} not evaluated for this arm (beyond its evaluation limit)"
    return None


# ------------------------------------------------------------------ the claims file


@dataclass(frozen=True)
class Claim:
    """One declared claim (see the module docstring and claims.yaml's header)."""

    id: str
    claim: str
    source_title: str
    section: str
    source_value: Any
    rule: str
    statistic: tuple[str, ...]
    experiment: str | None = None
    release: str | None = None
    file: str | None = None
    p: tuple[str, ...] = ()
    n: str | None = None
    reduce: str | None = None
    alpha: float = 0.05
    tolerance: float | None = None
    target: float | None = None
    threshold: float | None = None
    sign: int | None = None
    arms: tuple[str, ...] = ()
    source_values: tuple[tuple[str, float], ...] = ()
    order: str = "descending"
    strict: bool = True
    skip_missing: bool = False
    refs: tuple[str, ...] | None = None
    note: str = ""
    causal: Claim | None = None  # the same claim read off the causal recipe's experiment
    # a "collapses" / "cannot" claim's positive control: statistics of the same budget that
    # must reach control_at_least, or the claim is inconclusive (nothing learned at all)
    control: tuple[str, ...] = ()
    control_at_least: float | None = None
    control_what: str = ""
    delta: float | None = None  # a no-difference claim: the smallest difference it rules out
    floor: str | None = None  # an at_chance claim: the stats path of the floor
    conflicts_with: tuple[str, ...] = ()  # claims the source's numbers cannot hold beside
    source_error: str = ""  # why no data can meet the source's number

    @property
    def source_name(self) -> str:
        """What the claim's values are read from: an experiment or a release."""
        return self.experiment or str(self.release)

    def stats_path(self) -> str:
        """The stats file, relative to the results root."""
        if self.experiment:
            return f"stats/{self.experiment}.json"
        return f"datasets/{self.release}/{self.file}"

    def paths(self, arm: str | None = None) -> tuple[str, ...]:
        return tuple(p.replace("{arm}", arm) if arm else p for p in self.statistic)


@dataclass(frozen=True)
class ClaimsFile:
    alpha: float
    sources: tuple[str, ...]
    pending: Mapping[str, str]
    claims: tuple[Claim, ...]
    not_claims: tuple[NotClaim, ...] = ()
    not_planned: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NotClaim:
    """A statement of a source listed as a design parameter or as untestable, so the
    report accounts for every quantitative statement of the sources."""

    statement: str
    source: str
    kind: str
    where: str


def _parse_not_claims(doc: Any, sources: Sequence[str], where: str) -> tuple[NotClaim, ...]:
    entries = doc.get("not_claims") or []
    if not isinstance(entries, list):
        raise ClaimError(f"{where}: not_claims: expected a list")
    out = []
    for i, e in enumerate(entries):
        at = f"{where}: not_claims #{i + 1}"
        if not isinstance(e, Mapping) or set(e) != {"statement", "source", "kind", "where"}:
            raise ClaimError(f"{at}: expected exactly statement, source, kind, where")
        src = e["source"]
        if not isinstance(src, Mapping) or src.get("title") not in sources:
            raise ClaimError(f"{at}: source: expected {{title, section}}, title one of the sources")
        if e["kind"] not in NOT_CLAIM_KINDS:
            raise ClaimError(f"{at}: kind: one of {list(NOT_CLAIM_KINDS)}")
        for key in ("statement", "where"):
            if not isinstance(e[key], str) or not e[key].strip():
                raise ClaimError(f"{at}: {key}: expected text")
        section = src.get("section")
        title = f"{src['title']}, {section}" if section else str(src["title"])
        out.append(NotClaim(" ".join(e["statement"].split()), title, e["kind"], e["where"]))
    return tuple(out)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _paths(cid: str, key: str, value: Any, where: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(p, str) for p in items):
        raise ClaimError(f"{where}: claim {cid}: {key}: expected a path or a list of paths")
    for p in items:
        try:
            parse_path(p.replace("{arm}", "x"))
        except ValueError as err:
            raise ClaimError(f"{where}: claim {cid}: {key}: {err}") from None
    return tuple(items)


def parse_claims(doc: Any, where: str = "claims.yaml") -> ClaimsFile:
    """Validate a loaded claims document; `ClaimError` names the first bad claim and key."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("claims"), list):
        raise ClaimError(f"{where}: expected a mapping with a 'claims' list")
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise ClaimError(
            f"{where}: unknown top-level key {unknown[0]!r}; allowed {sorted(TOP_KEYS)}"
        )
    alpha = doc.get("alpha", 0.05)
    if _number(alpha) is None or not 0 < alpha < 1:
        raise ClaimError(f"{where}: alpha: expected a number in (0, 1), got {alpha!r}")
    sources = doc.get("sources") or []
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise ClaimError(f"{where}: sources: expected a list of titles")
    pending = doc.get("pending_experiments") or {}
    if not isinstance(pending, Mapping):
        raise ClaimError(f"{where}: pending_experiments: expected a mapping name -> why")
    not_planned = doc.get("not_planned") or {}
    if not isinstance(not_planned, Mapping):
        raise ClaimError(f"{where}: not_planned: expected a mapping name -> why")
    both = sorted(set(not_planned) & set(pending))
    if both:
        raise ClaimError(f"{where}: not_planned: {both[0]} is also in pending_experiments")
    claims: list[Claim] = []
    seen: set[str] = set()
    for i, entry in enumerate(doc["claims"]):
        claims.append(_parse_claim(entry, i, float(alpha), sources, where))
        if claims[-1].id in seen:
            raise ClaimError(f"{where}: claim {claims[-1].id}: id: declared twice")
        seen.add(claims[-1].id)
    for c in claims:
        for other in c.conflicts_with:
            if other not in seen:
                raise ClaimError(f"{where}: claim {c.id}: conflicts_with: no claim {other}")
            if c.id not in next(x for x in claims if x.id == other).conflicts_with:
                raise ClaimError(
                    f"{where}: claim {c.id}: conflicts_with: {other} does not name {c.id} back"
                )
    return ClaimsFile(
        float(alpha),
        tuple(sources),
        dict(pending),
        tuple(claims),
        _parse_not_claims(doc, sources, where),
        {str(k): str(v) for k, v in not_planned.items()},
    )


def _parse_claim(entry: Any, index: int, alpha: float, sources: Sequence[str], where: str) -> Claim:
    if not isinstance(entry, Mapping):
        raise ClaimError(f"{where}: claim #{index + 1}: expected a mapping")
    cid = entry.get("id")
    if not isinstance(cid, str) or not ID.match(cid):
        raise ClaimError(f"{where}: claim #{index + 1}: id: expected a lower_snake_case name")

    def fail(key: str, problem: str) -> ClaimError:
        return ClaimError(f"{where}: claim {cid}: {key}: {problem}")

    unknown = sorted(set(entry) - KEYS)
    if unknown:
        raise fail(unknown[0], "unknown key")
    for key in ("claim", "source", "source_value", "rule", "statistic"):
        if entry.get(key) is None or entry.get(key) == "":
            raise fail(key, "missing")
    if not isinstance(entry["claim"], str):
        raise fail("claim", "expected a one-line paraphrase")
    src = entry["source"]
    if not isinstance(src, Mapping) or set(src) != {"title", "section"}:
        raise fail("source", "expected {title, section}")
    if sources and src["title"] not in sources:
        raise fail("source", f"title {src['title']!r} is not one of the sources {list(sources)}")
    rule = entry["rule"]
    if rule not in RULES:
        raise fail("rule", f"unknown rule {rule!r}; one of {sorted(RULES)}")
    has_exp, has_rel = "experiment" in entry, "release" in entry
    if has_exp == has_rel:
        raise fail("experiment", "name exactly one of experiment or release (+ file)")
    if has_rel and not isinstance(entry.get("file"), str):
        raise fail("file", "a release claim names the file its statistic is read from")
    if has_exp and "file" in entry:
        raise fail("file", "only a release claim names a file")
    name = entry.get("experiment") or entry.get("release")
    if not isinstance(name, str) or not ID.match(name):
        raise fail("experiment" if has_exp else "release", f"expected a name, got {name!r}")
    statistic = _paths(cid, "statistic", entry["statistic"], where)
    templated = any("{arm}" in p for p in statistic)
    arms = entry.get("arms", [])
    if rule == "rank_correlation":
        values = entry.get("source_values")
        if not isinstance(values, Mapping) or len(values) < 3:
            raise fail("source_values", "a rank correlation maps at least three arms to values")
        if any(_number(v) is None for v in values.values()):
            raise fail("source_values", "every source value must be a number")
        arms = list(values)
        if "arms" in entry:
            raise fail("arms", "a rank correlation's arms are its source_values' keys")
        if not templated:
            raise fail("statistic", "a rank correlation's statistic names {arm}")
        if _number(entry.get("threshold")) is None:
            raise fail("threshold", "a rank correlation needs the smallest rho that counts")
    elif "source_values" in entry:
        raise fail("source_values", "only a rank correlation names source values")
    if rule == "ordering":
        if not isinstance(arms, list) or len(arms) < 2 or not all(isinstance(a, str) for a in arms):
            raise fail("arms", "an ordering names at least two arms")
        if not templated:
            raise fail("statistic", "an ordering's statistic names {arm}")
        if entry.get("order", "descending") not in ("descending", "ascending"):
            raise fail("order", "descending or ascending")
    elif rule != "rank_correlation":
        if templated:
            raise fail("statistic", "{arm} only in an ordering or a rank correlation")
        if "arms" in entry:
            raise fail("arms", "only an ordering names arms")
    p = _paths(cid, "p", entry["p"], where) if "p" in entry else ()
    if rule in NEEDS_P and not p:
        raise fail("p", f"rule {rule} needs the path of the p-value")
    reduce = entry.get("reduce")
    if reduce is not None and reduce not in REDUCERS:
        raise fail("reduce", f"unknown reducer {reduce!r}; one of {list(REDUCERS)}")
    if reduce in ("diff", "ratio") and len(statistic) != 2:
        raise fail("reduce", f"{reduce} takes exactly two paths")
    numbers = {}
    for key in ("alpha", "tolerance", "target", "threshold", "delta"):
        if key in entry:
            numbers[key] = _number(entry[key])
            if numbers[key] is None:
                raise fail(key, f"expected a number, got {entry[key]!r}")
    source_number = _number(entry["source_value"])
    if rule == "within":
        if numbers.get("tolerance") is None or numbers["tolerance"] < 0:
            raise fail("tolerance", "rule within needs a tolerance >= 0")
        if numbers.get("target") is None and source_number is None:
            raise fail("target", "the source's value is not a number: give target")
    floor = entry.get("floor")
    if rule == "at_chance" and not isinstance(floor, str):
        raise fail("floor", "an at_chance claim names the stats path of its floor")
    if floor is not None and rule != "at_chance":
        raise fail("floor", "only an at_chance claim names a floor")
    if rule == "not_significant" and not (numbers.get("delta") or 0) > 0:
        raise fail(
            "delta", "a no-difference claim names the smallest difference it rules out (> 0)"
        )
    if rule in ("at_least", "at_most") and numbers.get("threshold") is None:
        if source_number is None:
            raise fail("threshold", "the source's value is not a number: give threshold")
    sign = entry.get("sign")
    if sign is not None and sign not in SIGNS:
        raise fail("sign", "positive or negative")
    if rule == "same_sign_significant" and sign is None:
        if source_number is None or source_number == 0:
            raise fail("sign", "the source's value gives no sign: give sign")
        sign = "positive" if source_number > 0 else "negative"
    refs = entry.get("refs")
    if refs is not None and (
        not isinstance(refs, list) or not all(isinstance(r, str) for r in refs)
    ):
        raise fail("refs", "expected a list of paths under the results root")
    for key in ("strict", "skip_missing"):
        if key in entry and not isinstance(entry[key], bool):
            raise fail(key, "expected true or false")
    if "n" in entry:
        _paths(cid, "n", entry["n"], where)
    causal = None
    if "causal" in entry:
        block = entry["causal"]
        if not isinstance(block, Mapping) or not {"experiment", "statistic"} <= set(block):
            raise fail("causal", "expected {experiment, statistic[, p, n, note, arms]}")
        extra = sorted(set(block) - CAUSAL_KEYS)
        if extra:
            raise fail(f"causal.{extra[0]}", f"unknown key; allowed {sorted(CAUSAL_KEYS)}")
        if "experiment" not in entry:
            raise fail("causal", "only an experiment's claim has a causal-recipe reading")
        skip = ("causal", "p", "n", "note", "refs", "control")
        own = {k: v for k, v in entry.items() if k not in skip}
        causal = _parse_claim({**own, **block}, index, alpha, sources, where)
    conflicts = entry.get("conflicts_with", [])
    if not isinstance(conflicts, list) or not all(isinstance(c, str) for c in conflicts):
        raise fail("conflicts_with", "expected a list of claim ids")
    control, control_at_least, control_what = (), None, ""
    if "control" in entry:
        block = entry["control"]
        if (
            not isinstance(block, Mapping)
            or set(block) - {"statistic", "at_least", "what"}
            or not {"statistic", "at_least", "what"} <= set(block)
        ):
            raise fail("control", "expected {statistic, at_least, what}")
        control = _paths(cid, "control.statistic", block["statistic"], where)
        if isinstance(block["at_least"], bool) or not isinstance(block["at_least"], int | float):
            raise fail("control.at_least", "expected a number")
        control_at_least, control_what = float(block["at_least"]), str(block["what"])
    return Claim(
        id=cid,
        claim=" ".join(entry["claim"].split()),
        source_title=str(src["title"]),
        section=str(src["section"]),
        source_value=entry["source_value"],
        rule=rule,
        statistic=statistic,
        experiment=entry.get("experiment"),
        release=entry.get("release"),
        file=entry.get("file"),
        p=p,
        n=entry.get("n"),
        reduce=reduce,
        alpha=numbers.get("alpha", alpha),
        tolerance=numbers.get("tolerance"),
        target=numbers.get("target", source_number),
        threshold=numbers.get("threshold", source_number),
        delta=numbers.get("delta"),
        floor=floor,
        sign=SIGNS[sign] if sign else None,
        arms=tuple(arms),
        source_values=tuple(
            (str(a), float(v)) for a, v in (entry.get("source_values") or {}).items()
        ),
        order=entry.get("order", "descending"),
        strict=entry.get("strict", True),
        skip_missing=entry.get("skip_missing", False),
        refs=tuple(refs) if refs is not None else None,
        note=" ".join(str(entry.get("note", "")).split()),
        causal=causal,
        control=control,
        control_at_least=control_at_least,
        control_what=control_what,
        conflicts_with=tuple(conflicts),
        source_error=" ".join(str(entry.get("source_error", "")).split()),
    )


def load_claims(path: str | Path) -> ClaimsFile:
    """Read and validate a claims file."""
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise ClaimError(f"{path.name}: not valid YAML: {' '.join(str(err).split())}") from None
    return parse_claims(doc, where=path.name)


# ------------------------------------------------------------------ what the config plans


def planned_stats(claims: ClaimsFile, plan: Any) -> dict[str, str | None]:
    """Claim id -> the stats file (relative to the results root) that this config produces
    for it, or None when it produces none: the experiment is not in the config (a top-level
    config block such as ``score_variance`` counts: its rule writes ``stats/<block>.json``),
    or the release or its file is not planned."""
    out: dict[str, str | None] = {}
    for c in claims.claims:
        out[c.id] = _planned(c, plan)
        if c.causal is not None:
            out[causal_key(c)] = _planned(c.causal, plan)
    return out


def causal_key(claim: Claim) -> str:
    """The key of a claim's causal-recipe reading in `planned_stats`' answer."""
    return f"{claim.id}/causal"


def _planned(c: Claim, plan: Any) -> str | None:
    """The stats file this config produces for one claim (or reading), None if none."""
    if c.experiment:
        block = plan.cfg.get(c.experiment)
        known = c.experiment in plan.experiments or (
            c.experiment not in ("experiments", "releases", "scales") and isinstance(block, Mapping)
        )
        return c.stats_path() if known else None
    if c.release not in plan.releases:
        return None
    root = plan.release_dir(c.release)
    files = [
        *plan.release_sidecars(c.release),
        *plan.release_index_files(c.release),
        f"{root}/oracle_report.json",
    ]
    return c.stats_path() if f"{plan.root}/{c.stats_path()}" in files else None


def planned_for(claims_path: str | Path, plan: Any) -> dict[str, str | None]:
    """`planned_stats` of a claims file, {} when the file is absent (the claims rule then
    reports it as its missing input instead of the workflow failing to parse)."""
    if not Path(claims_path).exists():
        return {}
    return planned_stats(load_claims(claims_path), plan)


def stats_inputs(claims_path: str | Path, plan: Any) -> list[str]:
    """The stats files (under the plan's root) that the claims read and the config plans:
    the claims rule's inputs."""
    found = {p for p in planned_for(claims_path, plan).values() if p}
    return sorted(f"{plan.root}/{p}" for p in found)


# ------------------------------------------------------------------ evaluation


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


class _NotRun(Exception):
    pass


class _PathMissing(ClaimError):
    """A statistic path that finds nothing, for no reason of this scale's plan."""


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
        res.verdict = NOT_RUN
        res.reason = (
            f"at scale {scale} {stats.get('experiment', 'this experiment')} runs at its "
            "smallest size, to exercise its path, not to measure (make demo-<study> runs it "
            "at the study scale)"
        )
        return res
    try:
        if claim.rule in ("ordering", "rank_correlation"):
            return _ordering(claim, stats, res)
        found = _read(stats, claim.statistic, claim.id)
        raw = [f.value for f in found]
        values = _reduce(claim.reduce, raw, claim.id)
        res.values = values
        res.n = _n_explicit(claim, stats) or _ns(found)
        if claim.p:
            p_found = _read(stats, claim.p, claim.id)
            res.p = [_as_number(f.value, claim.id) for f in p_found]
            weak = [m for m in (_underpowered(f, claim.alpha) for f in p_found) if m]
            if weak and claim.rule in NEEDS_P:  # elsewhere the p is shown, not tested
                raise _NotRun(weak[0])
        control = _read(stats, claim.control, claim.id) if claim.control else []
        floor = (
            _as_number(_read(stats, [claim.floor], claim.id)[0].value, claim.id)
            if claim.floor
            else None
        )
    except _NotRun as why:
        res.verdict, res.reason = NOT_RUN, str(why)
        return res
    why = _inconclusive(claim, found + (p_found if claim.p else []), res.p)
    learned = [_as_number(f.value, claim.id) for f in control]
    if not why and any(v < claim.control_at_least for v in learned):
        why = (
            f"the positive control ({claim.control_what}) did not learn at this budget: "
            f"{', '.join(_fmt(v) for v in learned)} against {_fmt(claim.control_at_least)}"
        )
    if not why and claim.rule == "not_significant":
        why, res.reason = _null_power(claim, p_found)
    if why:
        res.verdict, res.reason = INCONCLUSIVE, why
        return res
    if claim.rule == "at_chance":
        return _at_chance(claim, res, floor)
    res.verdict = REPRODUCED if _holds(claim, res.values, res.p) else NOT_REPRODUCED
    if claim.rule == "same_sign_significant":
        _interval(claim, found, res)
    return res


def _at_chance(claim: Claim, res: Result, floor: float | None) -> Result:
    """The paper's rule for a "chance" claim: every mean within CHANCE_FACTOR times its
    floor; the reason prints the means beside the source's number and the floor."""
    assert floor is not None
    nums = [_as_number(v, claim.id) for v in res.values]
    bound = CHANCE_FACTOR * floor
    ok = all(v <= bound for v in nums)
    res.verdict = REPRODUCED if ok else NOT_REPRODUCED
    means = ", ".join(_fmt(v) for v in nums)
    res.reason = (
        f"mean {means} against the source's {claim.source_value}; floor {_fmt(floor)}, "
        f"chance up to {CHANCE_FACTOR}x it ({_fmt(bound)})"
    )
    return res


def _interval(claim: Claim, found: list[Found], res: Result) -> None:
    """A positive claim's 95 % interval of the difference (bootstrap over each arm's seeds)
    and whether the source's value lies in it: "reproduced (sign only)" where it does not."""
    target = _number(claim.source_value)
    seed = zlib.crc32(claim.id.encode())
    texts, outside = [], False
    for f in found:
        node = next((t for t in reversed(f.trail) if "scores_a" in t and "scores_b" in t), None)
        if node is None or f.value != node.get("diff"):
            continue  # not a contrast's own difference (a lock-in rate, a mean)
        low, high = bootstrap_diff_ci(
            node["scores_a"], node["scores_b"], rng=np.random.default_rng(seed)
        )
        inside = target is None or low - 1e-12 <= target <= high + 1e-12
        outside |= not inside
        where = "" if target is None else (" holds" if inside else " excludes")
        texts.append(f"95 % interval [{_fmt(low)}, {_fmt(high)}]{where}")
    if not texts:
        return
    what = "" if target is None else f" the source's {_fmt(target)}"
    line = "; ".join(t + what for t in texts)
    res.reason = "; ".join(x for x in (res.reason, line) if x)
    if res.verdict == REPRODUCED and outside:
        res.verdict = REPRODUCED_SIGN


POWER = 0.8  # the power at which a no-difference claim's minimum detectable effect is read


def minimum_detectable_effect(node: Mapping[str, Any], alpha: float, seed: int) -> float | None:
    """The MDE of the exact test behind a contrast's p (80 % power, two-sided ``alpha``):
    Fisher's on a lock-in block (rates centred on the pooled rate), else the permutation
    test of means on the contrast's per-seed scores. None: nothing is detectable."""
    if "k_a" in node:
        pooled = (node["k_a"] + node["k_b"]) / (node["n_a"] + node["n_b"])
        return fisher_mde(node["n_a"], node["n_b"], pooled, alpha, POWER)
    return permutation_mde(
        node["scores_a"], node["scores_b"], alpha, POWER, rng=np.random.default_rng(seed)
    )


def _null_power(claim: Claim, p_found: list[Found]) -> tuple[str | None, str]:
    """(why inconclusive, or None; the MDE line for the reason): a "no difference" is
    evidence only where the test could have seen the claim's delta."""
    seed = zlib.crc32(claim.id.encode())
    worst: tuple[float, str] | None = None
    for f in p_found:
        node = _test_node(f)
        if node is None or not ("k_a" in node or "scores_a" in node):
            return "no per-seed scores to size the test by (rerun the stats rule)", ""
        n = f"n = {node['n_a']} vs {node['n_b']}"
        mde = minimum_detectable_effect(node, claim.alpha, seed)
        if mde is None:
            return f"no difference is detectable at {n} (80 % power, two-sided)", ""
        if worst is None or mde > worst[0]:
            worst = (mde, n)
    if worst is None:
        return None, ""
    mde, n = worst
    what = "lock-in rate" if "lock_in" in claim.p[0] else "mean"
    line = (
        f"minimum detectable {what} difference {mde:.3g} at {n} (80 % power, "
        f"two-sided alpha {claim.alpha:g}), against delta {claim.delta:g}"
    )
    return (line if mde > claim.delta else None), line


def _flag(found: Found, key: str) -> Any:
    """``key`` of the innermost mapping on a value's path that has it (None: none has)."""
    for node in reversed(found.trail):
        if key in node:
            return node[key]
    return None


def seeds_of(found: Found) -> int | None:
    """The seeds behind a value: the smaller of a contrast's n_a and n_b, or an arm's n, of
    the innermost mapping on its path that has them (None: not a per-seed statistic)."""
    for node in reversed(found.trail + ([found.value] if isinstance(found.value, dict) else [])):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return min(node["n_a"], node["n_b"])
        if isinstance(node.get("n"), int) and not isinstance(node.get("n"), bool):
            return node["n"]
    return None


def _too_few_seeds(rule: str, found: Iterable[Found]) -> str | None:
    ns = [n for n in (seeds_of(f) for f in found) if n is not None]
    if ns and min(ns) < MIN_SEEDS:
        return f"{min(ns)} seed(s) per arm: a {rule} rule needs at least {MIN_SEEDS}"
    return None


def _inconclusive(claim: Claim, found: list[Found], p: list[float]) -> str | None:
    """Why the data cannot decide the claim either way (None: they can). A tie of two arms
    at chance is no evidence of "no difference", nor a NaN p of anything; a "better" claim
    on an arm that never left chance says nothing of the effect; a per-seed threshold or
    interval on one or two seeds is a draw, not a reproduction."""
    rule = claim.rule
    if rule in NEEDS_P and any(math.isnan(q) for q in p):
        return "p is not a number"
    if rule == "not_significant" and any(_flag(f, "both_chance") is True for f in found):
        return "both arms at chance: a tie at the floor tests no difference"
    if rule == "same_sign_significant" and any(_flag(f, "a_chance") is True for f in found):
        return "arm a at chance: no effect of a learned arm to read"
    if rule in ("within", "at_least", "at_most", "at_chance"):
        return _too_few_seeds(rule, found)
    return None


def smallest_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p an exact test of n_a against n_b samples can reach (the
    permutation test of means and Fisher's test of lock-in counts alike): the most extreme
    split of the pooled samples, and its mirror when the two sizes are equal."""
    ways = math.comb(n_a + n_b, n_a)
    return min(1.0, (2.0 if n_a == n_b else 1.0) / ways)


def _test_node(found: Found) -> Mapping[str, Any] | None:
    """The mapping of the test behind a p on this path: the innermost with n_a and n_b (a
    contrast, or its lock-in block)."""
    for node in reversed(found.trail):
        if isinstance(node.get("n_a"), int) and isinstance(node.get("n_b"), int):
            return node
    return None


def _underpowered(found: Found, alpha: float) -> str | None:
    """Why a p-value cannot test the claim at this scale: its exact test (`_test_node`; a
    Monte-Carlo one, ``exact: false``, is never flagged) could not reach p < alpha whatever
    the data."""
    node = _test_node(found)
    if node is None or node.get("exact", True) is False:
        return None
    floor = smallest_p(node["n_a"], node["n_b"])
    if floor >= alpha:
        return f"too few seeds: at n = {node['n_a']} vs {node['n_b']} no p is below {floor:.3g}"
    return None


def _n_explicit(claim: Claim, stats: Any) -> str | None:
    if not claim.n:
        return None
    found = _read(stats, [claim.n], claim.id)
    return ", ".join(dict.fromkeys(_fmt(f.value) for f in found))


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
            return all(not (q < alpha) for q in ps)
        return all(
            not math.isnan(v) and v * claim.sign > 0 and q < alpha
            for v, q in zip(nums, ps, strict=True)
        )
    if rule == "within":
        return all(abs(v - claim.target) <= claim.tolerance + 1e-12 for v in nums)
    if rule == "at_least":
        return all(v >= claim.threshold for v in nums)
    if rule == "at_most":
        return all(v <= claim.threshold for v in nums)
    raise AssertionError(rule)


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
        sds = [_flag(f, "sd") for f in found]
        counts_ = [seeds_of(f) for f in found]
        one = len(found) == 1 and isinstance(sds[0], int | float)
        noise.append((float(sds[0]), counts_[0]) if one and counts_[0] else (None, None))
        chances.append(_flag(found[0], "chance") if len(found) == 1 else None)
    res.labels, res.values = labels, values
    res.n = ", ".join(dict.fromkeys(n for n in ns if n)) or None
    if dropped:
        res.reason = "left out: " + "; ".join(dropped)
    if claim.rule == "rank_correlation":
        from arbench.report.kvbench import spearman

        theirs = dict(claim.source_values)
        rho = spearman(dict(zip(labels, values, strict=True)), theirs)
        if rho is None:
            res.verdict = NOT_RUN
            res.reason = res.reason or "fewer than three arms, or no spread, at this scale"
            return res
        res.rho = rho
        res.verdict = REPRODUCED if rho >= claim.threshold else NOT_REPRODUCED
        return res
    if len(values) < 2:
        res.verdict = NOT_RUN
        res.reason = res.reason or "fewer than two arms at this scale"
        return res
    few = _too_few_seeds(claim.rule, every)
    if few:
        res.verdict, res.reason = INCONCLUSIVE, "; ".join(x for x in (few, res.reason) if x)
        return res
    if max(values) - min(values) < 1e-9:  # all at chance, or all at ceiling
        res.verdict = INCONCLUSIVE
        res.reason = "; ".join(
            x for x in ("every arm at one value: no order to read", res.reason) if x
        )
        return res
    flat = _flat_row(values, chances)
    if flat:
        res.verdict = INCONCLUSIVE
        res.reason = "; ".join(x for x in (flat, res.reason) if x)
        return res
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
        res.verdict = INCONCLUSIVE
        why = (
            f"{labels[i]} and {labels[i + 1]} differ by {_fmt(abs(values[i + 1] - values[i]))}, "
            f"inside the noise margin {_fmt(margins[i])} (two standard errors)"
        )
        res.reason = "; ".join(x for x in (why, res.reason) if x)
    else:
        res.verdict = REPRODUCED
    return res


def _flat_row(values: list[float], chances: list[bool | None]) -> str | None:
    """Why an ordering has nothing to read: every arm at chance, or every arm at ceiling."""
    if chances and all(c is True for c in chances):
        return "every arm at chance: no order to read"
    if min(values) >= 0.99 and max(values) <= 1.0:
        return "every arm at ceiling: no order to read"
    return None


def _source_check(res: Result) -> Result:
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


def default_refs(claim: Claim) -> list[str]:
    """The table and figure a claim's statistic comes from, relative to the results root."""
    if claim.refs is not None:
        return list(claim.refs)
    if claim.experiment:
        return [f"tables/{claim.experiment}.tex", f"figures/{claim.experiment}.png"]
    return [claim.stats_path()]


def evaluate(
    claims: ClaimsFile,
    root: str | Path,
    scale: str,
    planned: Mapping[str, str | None] | None = None,
) -> list[Result]:
    """Every claim's verdict on the stats under ``root``. ``planned`` (from `planned_stats`)
    says which stats files the config produces; without it every claim's file is read when
    it exists. A claim on an unplanned experiment or an absent file is "not run"."""
    root = Path(root)
    cache: dict[str, Any] = {}

    def one(claim: Claim, key: str) -> Result:
        if claim.source_name in claims.not_planned:
            why = claims.not_planned[claim.source_name]
            return Result(claim, NOT_PLANNED, scale=scale, reason=why)
        path = claim.stats_path() if planned is None else planned.get(key)
        if path is None:
            why = claims.pending.get(claim.source_name)
            what = "experiment" if claim.experiment else "release"
            reason = f"{what} {claim.source_name} is not in the config" + (
                f" ({why})" if why else ""
            )
            return Result(claim, NOT_RUN, scale=scale, reason=reason)
        if path not in cache:
            file = root / path
            cache[path] = json.loads(file.read_text()) if file.exists() else None
        if cache[path] is None:
            return Result(claim, NOT_RUN, scale=scale, reason=f"no {path} at this scale")
        res = evaluate_claim(claim, cache[path], scale)
        res.stats_path = path
        res.refs = default_refs(claim)
        return res

    results = []
    for claim in claims.claims:
        res = _source_check(one(claim, claim.id))
        if claim.causal is not None:
            res.causal = one(claim.causal, causal_key(claim))
        results.append(res)
    return results


# ------------------------------------------------------------------ rendering


def _fmt(value: Any, signed: bool = False) -> str:
    """A value for a table cell: yes/no, integers as they are, floats to 3 decimals (1 above
    100, scientific below 0.001)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and abs(value) < 1e-3:
            text = f"{value:.1e}"
        elif abs(value) >= 100 and value.is_integer():
            text = f"{value:,.0f}"
        elif abs(value) >= 100:
            text = f"{value:,.1f}"
        else:
            text = f"{value:.3f}"
        return f"+{text}" if signed and value > 0 else text
    return str(value)


def _typed(value: Any) -> str:
    """A value as the claims file types it (the source's side: no added precision)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if value.is_integer() and abs(value) >= 100 else f"{value:g}"
    return str(value)


def _signed(claim: Claim) -> bool:
    return claim.rule in NEEDS_P or claim.reduce == "diff"


def row(res: Result) -> dict[str, Any]:
    """The display strings of one result (what both templates print); a claim with a
    causal-recipe reading carries that reading's row as ``causal``."""
    c = res.claim
    if res.verdict == NOT_RUN and not res.values:
        ours = "--"
    elif c.rule == "ordering":
        ours = ", ".join(f"{a} {_fmt(v)}" for a, v in zip(res.labels, res.values, strict=True))
    elif c.rule == "rank_correlation":
        each = ", ".join(f"{a} {_fmt(v)}" for a, v in zip(res.labels, res.values, strict=True))
        rho = "--" if res.rho is None else f"{res.rho:.2f}"
        ours = f"rho = {rho} over {len(res.labels)} arms ({each})"
    else:
        ours = ", ".join(_fmt(v, _signed(c)) for v in res.values)
        if c.rule == "holds":  # name the flag: "chance: yes, no"
            last = parse_path(c.statistic[-1])[-1]
            ours = f"{last.key}: {ours}" if last.kind == "key" else ours
    test = RULES[c.rule]
    if c.rule == "within":
        test = f"within {_typed(c.tolerance)} of {_typed(c.target)}"
    elif c.rule in ("at_least", "at_most"):
        test = f"{'>=' if c.rule == 'at_least' else '<='} {_typed(c.threshold)}"
    elif c.rule == "same_sign_significant":
        test = f"{'positive' if c.sign > 0 else 'negative'}, p < {_typed(c.alpha)}"
    elif c.rule == "not_significant":
        test = f"p >= {_typed(c.alpha)}"
    elif c.rule == "holds":
        test = "all true"
    elif c.rule == "rank_correlation":
        test = f"Spearman rho >= {_typed(c.threshold)} against the source's values"
    elif c.rule == "ordering":
        test = f"{c.order}{'' if c.strict else ' (ties allowed)'}: {' > '.join(c.arms)}"
    if c.reduce:
        test += f" ({c.reduce} of the values)"
    return {
        "id": c.id,
        "claim": c.claim,
        "source": f"{c.source_title}, {c.section}",
        "source_title": c.source_title,
        "section": c.section,
        "source_value": _typed(c.source_value),
        "ours": ours,
        "n": res.n or "--",
        "p": ", ".join(fmt_p(q) for q in res.p) if res.p else "--",
        "verdict": res.verdict,
        "reason": res.reason,
        "note": c.note,
        "test": test,
        "rule": c.rule,
        "where": c.source_name,
        "stats": res.stats_path,
        "refs": res.refs,
        "causal": row(res.causal) if res.causal is not None else None,
    }


def counts(results: Sequence[Result]) -> dict[str, int]:
    return {v: sum(r.verdict == v for r in results) for v in VERDICTS}


_TEX_TEXT = {
    "<": "$<$",
    ">": "$>$",
    "|": "$|$",
    "§": r"\S{}",
    "≈": r"$\approx$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "×": r"$\times$",
    "→": r"$\rightarrow$",
    "±": r"$\pm$",
    "–": "--",
    "—": "---",
    "−": "-",
    "α": r"$\alpha$",
}


def tex_text(value: Any) -> str:
    """Plain text for LaTeX: the tables' escapes, plus <, >, | and the few non-ASCII signs
    the claims use, which the default fonts would print wrongly or not at all; a long name
    (``delta_conv-pairs16``, a path) may break after its ``_``, ``-`` and ``/``."""
    text = str(value)
    out = []
    for i, ch in enumerate(text):
        out.append(_TEX_TEXT.get(ch, latex_escape(ch)))
        after_letter = (
            i > 0 and text[i - 1].isalnum() and i + 1 < len(text) and text[i + 1].isalnum()
        )
        if ch in "_/" or (ch == "-" and after_letter):
            out.append(r"\allowbreak{}")
    return "".join(out)


def tex_ref(path: str) -> str:
    """A reference to a table or figure: ``\\claimref{kind}{label}{path}`` (the paper
    defines it as a cross-reference, claims.tex alone prints the path); other files by path."""
    m = re.fullmatch(r"(tables|figures)/([^/]+)\.(tex|png|pdf)", path)
    if not m:
        return rf"\texttt{{{tex_text(path)}}}"
    kind, label = ("Table", "tab") if m.group(1) == "tables" else ("Figure", "fig")
    return rf"\claimref{{{kind}}}{{{label}:{m.group(2)}}}{{{tex_text(path)}}}"


def md_text(value: Any) -> str:
    return str(value).replace("|", r"\|").replace("\n", " ")


def _groups(rows: list[dict[str, Any]], size: int) -> list[dict[str, Any]]:
    """Rows in chunks of at most ``size`` (one float each, so a long list breaks across
    pages without packages beyond booktabs), a chunk per source title."""
    out: list[dict[str, Any]] = []
    for title in dict.fromkeys(r["source_title"] for r in rows):
        mine = [r for r in rows if r["source_title"] == title]
        parts = [mine[i : i + size] for i in range(0, len(mine), size)]
        for k, part in enumerate(parts):
            out.append({"title": title, "rows": part, "part": k + 1, "parts": len(parts)})
    return out


def render_markdown(
    results: Sequence[Result],
    scale: str,
    template: str | Path | None = None,
    claims: ClaimsFile | None = None,
) -> str:
    """claims.md: a summary, then a row per claim (reasons and notes beside the verdict),
    then the sources' statements that are design parameters or untestable."""
    template = Path(template or TEMPLATES / "claims.md.j2")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(template.parent)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["md"] = md_text
    rows = [row(r) for r in results]
    sources = claims.sources if claims else ()
    return env.get_template(template.name).render(
        rows=rows,
        scale=scale,
        counts=counts(results),
        rules=RULES,
        sources=sources,
        not_claims=claims.not_claims if claims else (),
    )


def render_tex(
    results: Sequence[Result],
    scale: str,
    template: str | Path | None = None,
    source: str = "claims.yaml",
    rows_per_table: int = 14,
) -> str:
    """tables/claims.tex: the claims as booktabs tables with p{} columns, one float per
    source (split every ``rows_per_table`` rows), compiling with booktabs alone."""
    template = Path(template or TEMPLATES / "claims.tex.j2")
    env = environment(template.parent)
    env.filters["text"] = tex_text
    env.filters["ref"] = tex_ref
    rows = [row(r) for r in results]
    return env.get_template(template.name).render(
        groups=_groups(rows, rows_per_table),
        scale=scale,
        counts=counts(results),
        source=source,
    )


def write_report(
    claims_path: str | Path,
    root: str | Path,
    scale: str,
    md_out: str | Path,
    tex_out: str | Path,
    planned: Mapping[str, str | None] | None = None,
    md_template: str | Path | None = None,
    tex_template: str | Path | None = None,
) -> list[Result]:
    """Load, evaluate and render: what the claims rule and the command line run."""
    from arbench.io import atomic_write_text

    claims = load_claims(claims_path)
    results = evaluate(claims, root, scale, planned)
    atomic_write_text(md_out, render_markdown(results, scale, md_template, claims))
    atomic_write_text(
        tex_out, render_tex(results, scale, tex_template, source=Path(claims_path).name)
    )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m arbench.report.claims --root results/demo --scale demo``: render the
    report for a results folder outside the workflow (every claim whose file exists)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", default="claims.yaml")
    ap.add_argument("--root", required=True, help="the results root (results, results/demo)")
    ap.add_argument("--scale", required=True)
    ap.add_argument("--md", help="default: <root>/claims.md")
    ap.add_argument("--tex", help="default: <root>/tables/claims.tex")
    args = ap.parse_args(argv)
    root = Path(args.root)
    results = write_report(
        args.claims,
        root,
        args.scale,
        args.md or root / "claims.md",
        args.tex or root / "tables" / "claims.tex",
    )
    c = counts(results)
    print(", ".join(f"{k}: {v}" for k, v in c.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
