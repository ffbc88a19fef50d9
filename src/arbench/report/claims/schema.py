"""The claims file: what ``claims.yaml`` may say, validated once (a bad entry fails at once,
in one line naming the claim and the key), and `Claim`, the parsed entry every rule reads.

``claims.yaml`` (repository root) declares each claim once: a one-line paraphrase, its source
(title and section) and the value the source gives, the stats JSON that tests it (an
experiment's ``stats/<experiment>.json``, or a file of a published dataset), the statistic's
path inside that JSON (`arbench.report.claims.paths`), and a verdict rule saying what
"reproduced" means (`RULES`). Several paths may be given as a list; ``reduce`` (min, max,
mean, diff, ratio) folds the values into one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbench import strict_yaml
from arbench.report.claims.paths import parse_path

RULES = {
    "same_sign_significant": "our effect has the source's sign and p < alpha",
    "not_significant": "p >= alpha (the source reports no significant difference)",
    "within": "|ours - target| <= tolerance (target: the source's value)",
    "at_least": "ours >= threshold (threshold: the source's value)",
    "at_most": "ours <= threshold (threshold: the source's value)",
    "ordering": "the arms' statistics come in the declared order",
    "holds": "every statistic (a flag of the stats) is true",
    "at_chance": "every arm is at chance: not above its floor by a one-sided binomial test "
    "over its held-out answers (tenfold: every mean within 10x of the floor, the paper's rule)",
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
    "at",
    "source_effect",
    "source_n",
    "tenfold",
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
# the task settings a claim may say it is about (``at``), and how the report names them
AT_KEYS = {"pairs": "K", "seq_len": "L", "depth": "depth", "keys": "keys", "vocab": "V"}
# the roots of statistics that describe the setup (floors, state, parameters), not a model
SETUP_ROOTS = ("floors", "state_sizes_per_layer", "parameters")
SETUP_LEAVES = ("n_parameters", "state_size_per_layer", "floors")


class ClaimError(ValueError):
    """A claims-file problem, in one line naming the claim and the key."""


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
    # the task settings the source measured at (``at``: pairs, seq_len, ...): a row decided
    # at other settings says so
    at: tuple[tuple[str, Any], ...] = ()
    # the source's effect as a number where its value is text ("7/10 vs 1/10": 0.6), for
    # the interval's magnitude check
    source_effect: float | None = None
    source_n: int | None = None  # the source's seeds per arm: is the claim decidable there?
    tenfold: bool = False  # an at_chance claim quoting the paper's 10x-the-floor rule

    @property
    def source_name(self) -> str:
        """What the claim's values are read from: an experiment or a release."""
        return self.experiment or str(self.release)

    def stats_path(self) -> str:
        """The stats file, relative to the results root."""
        if self.experiment:
            return f"stats/{self.experiment}.json"
        return f"datasets/{self.release}/{self.file}"

    def effect(self) -> float | None:
        """The source's effect as a number: its value, or ``source_effect`` where that is text."""
        return self.source_effect if self.source_effect is not None else _number(self.source_value)

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

    unknown = sorted(set(entry) - KEYS - {"causal_of"})
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
    effect = source_number if source_number is not None else _number(entry.get("source_effect"))
    if rule == "same_sign_significant" and sign is None:
        if effect is None or effect == 0:
            raise fail("sign", "the source's value gives no sign: give sign")
        sign = "positive" if effect > 0 else "negative"
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
    at = entry.get("at", {})
    if not isinstance(at, Mapping) or not set(at) <= set(AT_KEYS):
        raise fail("at", f"expected a mapping of task settings, keys among {sorted(AT_KEYS)}")
    if "source_effect" in entry and _number(entry["source_effect"]) is None:
        raise fail("source_effect", f"expected a number, got {entry['source_effect']!r}")
    if "source_effect" in entry and source_number is not None:
        raise fail("source_effect", "the source's value is already a number")
    source_n = entry.get("source_n")
    if source_n is not None and (
        isinstance(source_n, bool) or not isinstance(source_n, int) or source_n < 2
    ):
        raise fail("source_n", "expected the source's seeds per arm, an integer >= 2")
    if source_n is not None and rule != "not_significant":
        raise fail("source_n", "only a no-difference claim is sized at the source's n")
    if "tenfold" in entry and (not isinstance(entry["tenfold"], bool) or rule != "at_chance"):
        raise fail("tenfold", "true or false, on an at_chance claim only")
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
        skip = ("causal", "p", "n", "note", "refs", "control", "source_n")
        own = {k: v for k, v in entry.items() if k not in skip}
        causal = _parse_claim({**own, **block, "causal_of": cid}, index, alpha, sources, where)
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
    collapse = rule == "at_chance" or (
        rule == "holds" and all(p.rstrip("]").endswith("chance") for p in statistic)
    )
    if collapse and not control and "causal_of" not in entry:
        raise fail(
            "control",
            "a chance or collapse claim names its positive control {statistic, at_least, what}: "
            "without one, a model that learned nothing passes it",
        )
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
        at=tuple(sorted(at.items())),
        source_effect=_number(entry.get("source_effect")),
        source_n=source_n,
        tenfold=bool(entry.get("tenfold", False)),
    )


def load_claims(path: str | Path) -> ClaimsFile:
    """Read and validate a claims file."""
    path = Path(path)
    doc = strict_yaml.load(path, ClaimError, name=path.name)  # a repeated key, a syntax error
    return parse_claims(doc, where=path.name)


def claim_kind(claim: Claim) -> str:
    """ "model" for a claim about trained models (an arm's scores, a contrast, a curve),
    "setup" for a check of the setup, the data or a floor (a release file, a floor, a state
    or parameter count), so the report never counts a definition as a result."""
    if claim.release:
        return "setup"
    for path in claim.statistic:
        steps = parse_path(path.replace("{arm}", "x"))
        first = steps[0]
        if first.kind == "key" and first.key in SETUP_ROOTS:
            continue
        if any(s.kind == "key" and s.key in SETUP_LEAVES for s in steps[1:]):
            continue
        return "model"
    return "setup"
