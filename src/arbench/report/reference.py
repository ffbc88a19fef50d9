"""The sources' own per-seed results beside ours: a reference file and what stats make of it.

A reference file (``references/*.yaml``) holds, per named set, each arm's held-out accuracy
by seed as the source's result files store them (`load_set`); an experiment's ``reference``
block names the file and the set whose arms share its arms' names. `annotate` adds, to every
arm the set has, the source's seeds, mean and range, and to every contrast whose two arms it
has, the source's difference of means, so the table can print each of our seeds beside the
paper's mean and range and each toggle beside the paper's. An arm on a task setting of its
own (an arm-level ``task`` block) is not the set's and gets none, unless the set declares
that very setting for that arm (``task_by_arm``). In an experiment with a grid, a set may name
each run arm (``armed-depth4``) to give every grid value its own seeds, or the experiment may
name several sets, each placed at one grid value (``set: [{set: ksweep_k8, at: pairs8}, ...]``,
`load_reference`): each set's arms become that value's run arms (``armed_gdn-pairs8``), as the
source keeps one result set per K or per learning rate.

Reading and validating a file (`load_set`, `load_reference`, `check_reference`) is
`arbench.references`' (re-exported here), below the config's validation, which reads the
file while planning, so a bad value fails before any job, naming the file, set, arm and seed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arbench.references import (  # noqa: F401  (read here by stats, tests and tools)
    PROVENANCE,
    SCORE_MAPS,
    ReferenceFileError,
    check_reference,
    load_reference,
    load_set,
)


def summarise(scores: dict[Any, float], lock_in: float, above: float | None) -> dict[str, Any]:
    """A source arm's seeds (sorted), their mean, sd, range and lock-in counts."""
    seeds = sorted(scores, key=int)
    values = [float(scores[s]) for s in seeds]
    out = {
        "seeds": [int(s) for s in seeds],
        "scores": values,
        "n": len(values),
        "mean": float(np.mean(values)),
        "sd": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
        "min": float(min(values)),
        "max": float(max(values)),
        "lock_in": int(sum(v >= lock_in for v in values)),
    }
    if above is not None:
        out["lock_in_above"] = int(sum(v > above for v in values))
    return out


def _key(arms: dict[str, Any], run_arm: str, arm: str) -> str:
    """The set's name for a run arm: the run arm's own (``armed-depth4``, a set that holds
    each grid value apart) where the set has it, else the arm's."""
    return run_arm if run_arm in arms else arm


def annotate(stats: dict[str, Any], reference: dict[str, Any]) -> None:
    """Add the source's side, in place: ``reference`` on every arm the set has (and its
    rebinding control where the set records one), ``reference_diff`` on every contrast
    whose arms it has, and the set's provenance as ``stats["reference"]``."""
    lock_in = stats["lock_in_threshold"]
    above = stats.get("lock_in_above")
    arms = reference.get("arms") or {}
    rebind = reference.get("rebind") or {}
    # an arm on a task setting of its own is the set's only if the set declares that setting
    # for it (``task_by_arm``: the paper's dense arms ask 4 queries); otherwise it gets none
    declared = reference.get("task_by_arm") or {}
    own_task = {
        n
        for n, a in stats["arms"].items()
        if (a.get("spec", {}).get("task") or {}) != (declared.get(a.get("arm", n)) or {})
    }
    for name, arm in stats["arms"].items():
        key = _key(arms, name, arm.get("arm", name))
        if key in arms and name not in own_task:  # the set is the experiment's task's
            arm["reference"] = summarise(arms[key], lock_in, above)
            if key in rebind:
                arm["reference"]["rebinding"] = summarise(rebind[key], lock_in, above)
    run_arm = {(a.get("arm", n), a.get("value")): n for n, a in stats["arms"].items()}
    for c in stats["contrasts"]:
        run_a = run_arm.get((c["a"], c.get("value_a")), c["a"])
        run_b = run_arm.get((c["b"], c.get("value_b")), c["b"])
        a, b = arms.get(_key(arms, run_a, c["a"])), arms.get(_key(arms, run_b, c["b"]))
        if a and b and not {run_a, run_b} & own_task:
            c["reference_diff"] = float(np.mean(list(a.values())) - np.mean(list(b.values())))
    stats["reference"] = {
        k: reference.get(k)
        for k in ("name", "description", "repository", "commit", "folder", "file", "field")
    }
