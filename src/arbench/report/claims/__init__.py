"""The claim-by-claim reproduction report: every quantitative claim of the sources, tested
against the statistics this run produced.

Five modules, one seam each: `schema` (what ``claims.yaml`` may say, validated once, one line
naming the claim and the key), `paths` (the statistic path language and why a path found
nothing), `verdicts` (the rules, and when the data cannot decide one), `values` (how a
value reads in a cell or a reason), `render` (claims.md and tables/claims.tex). This module
plans which stats files the claims read, evaluates a results folder and writes the report.

Our values always come from the stats JSON, never from the claims file. A claim whose
experiment is not in the config, whose stats file is absent, or whose statistic names a grid
value, an arm, a contrast or an evaluation length that this scale does not run, gets the
verdict "not run at this scale" with the reason; a path that is wrong for any other reason is
an error naming the claim.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from arbench.io import atomic_write_text
from arbench.report.claims.paths import (
    Found,
    Missing,
    Step,
    n_of,
    parse_path,
    resolve,
    scale_reason,
    seeds_of,
)
from arbench.report.claims.plan_check import check_against_plan
from arbench.report.claims.render import (
    KINDS,
    count_line,
    counts,
    counts_by_kind,
    fmt,
    md_text,
    render_markdown,
    render_tex,
    row,
    tex_ref,
    tex_text,
)
from arbench.report.claims.schema import (
    RULES,
    Claim,
    ClaimError,
    ClaimsFile,
    NotClaim,
    claim_kind,
    load_claims,
    parse_claims,
)
from arbench.report.claims.verdicts import (
    INCONCLUSIVE,
    MIN_SEEDS,
    NOT_PLANNED,
    NOT_REPRODUCED,
    NOT_RUN,
    REPRODUCED,
    REPRODUCED_SIGN,
    SOURCE_INCONSISTENT,
    VERDICTS,
    Result,
    evaluate_claim,
    minimum_detectable_effect,
    smallest_p,
    source_check,
)

__all__ = [
    "INCONCLUSIVE",
    "KINDS",
    "MIN_SEEDS",
    "NOT_PLANNED",
    "NOT_REPRODUCED",
    "NOT_RUN",
    "REPRODUCED",
    "REPRODUCED_SIGN",
    "RULES",
    "SOURCE_INCONSISTENT",
    "VERDICTS",
    "Claim",
    "ClaimError",
    "ClaimsFile",
    "Found",
    "Missing",
    "NotClaim",
    "Result",
    "Step",
    "causal_key",
    "check_against_plan",
    "claim_kind",
    "count_line",
    "counts",
    "counts_by_kind",
    "default_refs",
    "evaluate",
    "evaluate_claim",
    "fmt",
    "in_study",
    "load_claims",
    "main",
    "md_text",
    "minimum_detectable_effect",
    "n_of",
    "parse_claims",
    "parse_path",
    "planned_for",
    "planned_stats",
    "render_markdown",
    "render_tex",
    "resolve",
    "row",
    "scale_reason",
    "seeds_of",
    "smallest_p",
    "stats_inputs",
    "tex_ref",
    "tex_text",
    "write_report",
]


def planned_stats(
    claims: ClaimsFile, plan: Any, study: Collection[str] | None = None
) -> dict[str, str | None]:
    """Claim id -> the stats file (relative to the results root) that this config produces
    for it, or None when it produces none: the experiment is not in the config (a top-level
    config block such as ``score_variance`` counts: its rule writes ``stats/<block>.json``),
    or the release or its file is not planned, or (given a ``study``'s experiments) it is
    not one of them. A claim naming what the config does not have at all fails here, before
    any job (`plan_check`)."""
    check_against_plan(claims, plan)

    def planned(c: Claim) -> str | None:
        if study is not None and c.source_name not in study:
            return None
        return _planned(c, plan)

    out: dict[str, str | None] = {}
    for c in claims.claims:
        out[c.id] = planned(c)
        if c.causal is not None:
            out[causal_key(c)] = planned(c.causal)
    return out


def in_study(claims: ClaimsFile, experiments: Collection[str]) -> ClaimsFile:
    """The claims one study decides: those read off one of its ``experiments`` (in the main
    or the causal reading), with their sources and those sources' statements that are not
    claims; what `make demo-<study>` reports."""
    names = set(experiments)
    kept = tuple(
        c
        for c in claims.claims
        if c.source_name in names or (c.causal is not None and c.causal.source_name in names)
    )
    titles = {c.source_title for c in kept}
    return dataclasses.replace(
        claims,
        claims=kept,
        sources=tuple(s for s in claims.sources if s in titles),
        # a statement's source reads "title, section"
        not_claims=tuple(
            n
            for n in claims.not_claims
            if any(n.source == t or n.source.startswith(f"{t}, ") for t in titles)
        ),
    )


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


def planned_for(
    claims_path: str | Path, plan: Any, study: Collection[str] | None = None
) -> dict[str, str | None]:
    """`planned_stats` of a claims file (of a ``study``'s claims only, where given), {} when
    the file is absent (the claims rule then reports it as its missing input instead of the
    workflow failing to parse)."""
    if not Path(claims_path).exists():
        return {}
    claims = load_claims(claims_path)
    if study is not None:
        claims = in_study(claims, study)
    return planned_stats(claims, plan, study)


def stats_inputs(
    claims_path: str | Path, plan: Any, study: Collection[str] | None = None
) -> list[str]:
    """The stats files (under the plan's root) that the claims read and the config plans
    (of a ``study``'s experiments only, where given): the claims rules' inputs."""
    found = {p for p in planned_for(claims_path, plan, study).values() if p}
    return sorted(f"{plan.root}/{p}" for p in found)


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
    study: Collection[str] | None = None,
) -> list[Result]:
    """Every claim's verdict on the stats under ``root``. ``planned`` (from `planned_stats`)
    says which stats files the config produces; without it every claim's file is read when
    it exists. A claim on an unplanned experiment or an absent file is "not run", as is a
    reading off an experiment outside ``study`` (a study's experiments), where given."""
    root = Path(root)
    cache: dict[str, Any] = {}

    def one(claim: Claim, key: str) -> Result:
        if claim.source_name in claims.not_planned:
            why = claims.not_planned[claim.source_name]
            return Result(claim, NOT_PLANNED, scale=scale, reason=why)
        if study is not None and claim.source_name not in study:
            why = f"experiment {claim.source_name} is not one of this study's"
            return Result(claim, NOT_RUN, scale=scale, reason=why)
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
        res = source_check(one(claim, claim.id))
        if claim.causal is not None:
            res.causal = one(claim.causal, causal_key(claim))
        results.append(res)
    return results


def write_report(
    claims_path: str | Path,
    root: str | Path,
    scale: str,
    md_out: str | Path,
    tex_out: str | Path,
    planned: Mapping[str, str | None] | None = None,
    md_template: str | Path | None = None,
    tex_template: str | Path | None = None,
    study: tuple[str, Sequence[str]] | None = None,
) -> list[Result]:
    """Load, evaluate and render: what the claims rules and the command line run. With a
    ``study`` (its name and experiments) only the claims it decides, linked from its
    ``studies/<name>/`` folder."""
    claims = load_claims(claims_path)
    experiments = None
    if study is not None:
        experiments = list(study[1])
        claims = in_study(claims, experiments)
    results = evaluate(claims, root, scale, planned, experiments)
    base = os.path.relpath(root, Path(md_out).parent)
    scope = None if study is None else (study[0], experiments)
    md = render_markdown(results, scale, md_template, claims, scope=scope, link_base=base)
    atomic_write_text(md_out, md)
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
