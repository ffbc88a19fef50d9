"""Claims checked against the plan before any job runs, so no typo turns a claim off in
silence: an experiment or release the config does not know (and ``claims.yaml`` does not
list as pending or not planned) fails planning at every scale, and at paper scale, where
every arm runs, a statistic path naming an arm, a contrast arm or an ordering arm the
experiment does not have fails too, in one line naming the claim and the key. (Smaller
scales cut arms, some without a trace: a frontier generates only its smaller states.)"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from arbench.report.claims.paths import parse_path
from arbench.report.claims.schema import Claim, ClaimError, ClaimsFile

# path roots whose next key, or whose selectors' arm fields, name an arm of the experiment
ARM_ROOTS = ("arms",)
ARM_FIELDS = ("arm", "a", "b")


def check_against_plan(claims: ClaimsFile, plan: Any) -> None:
    """`ClaimError` for the first claim that names what the config does not have."""
    known = set(claims.pending) | set(claims.not_planned)
    for claim in claims.claims:
        readings = [(claim, "")] + ([(claim.causal, "causal.")] if claim.causal else [])
        for c, prefix in readings:
            _check_one(c, prefix, plan, known)


def _check_one(c: Claim, prefix: str, plan: Any, known: set[str]) -> None:
    where = f"claims.yaml: claim {c.id}: {prefix}"
    if c.release:
        if c.release not in plan.releases and c.release not in known:
            raise ClaimError(f"{where}release: no release {c.release!r} in the config")
        return
    name = str(c.experiment)
    exp = plan.experiments.get(name)
    if exp is None:
        block = plan.cfg.get(name)
        top_level = name not in ("experiments", "releases", "scales") and isinstance(block, Mapping)
        if not top_level and name not in known:
            raise ClaimError(
                f"{where}experiment: no experiment {name!r} in the config "
                "(nor in pending_experiments or not_planned)"
            )
        return
    if getattr(plan, "scale", None) != "paper":
        return
    arms = set(exp.get("arms", {})) | set((exp.get("skipped") or {}).get("arms", {}))
    for key, paths in (
        ("statistic", c.statistic),
        ("p", c.p),
        ("control.statistic", c.control),
    ):
        for path in _expanded(paths, c.arms):
            bad = _unknown_arm(path, arms)
            if bad:
                raise ClaimError(
                    f"{where}{key}: {path!r} names arm {bad!r}, which {name} does not have "
                    f"(arms: {', '.join(sorted(arms))})"
                )


def _expanded(paths: Iterable[str], arms: Iterable[str]) -> list[str]:
    out = []
    for p in paths:
        out += [p.replace("{arm}", a) for a in arms] if "{arm}" in p else [p]
    return out


def _unknown_arm(path: str, arms: set[str]) -> str | None:
    """The first arm a path names that is not one of ``arms`` (a run arm counts by its
    arm: ``delta-pairs32`` is arm ``delta`` at a grid value)."""
    steps = parse_path(path)

    def known(name: str) -> bool:
        return name in arms or any(name.startswith(f"{a}-") for a in arms)

    for i, step in enumerate(steps):
        if step.kind == "match":
            for field, value in step.fields:
                if field in ARM_FIELDS and isinstance(value, str) and not known(value):
                    return value
        if step.kind == "key" and step.key in ARM_ROOTS and i + 1 < len(steps):
            nxt = steps[i + 1]
            if nxt.kind == "key" and isinstance(nxt.key, str) and not known(nxt.key):
                return nxt.key
    return None
