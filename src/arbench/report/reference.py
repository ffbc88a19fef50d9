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

A file is read strictly (`arbench.strict_yaml`: a seed listed twice or a syntax error fails
naming the file and line) and validated whole when first read (`check_reference`: every
score a number in [0, 1] under a whole-number seed), which the config's validation does
while planning, so a bad value fails before any job, naming the file, set, arm and seed.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import numpy as np

from arbench import strict_yaml

# the per-seed score maps of a set that stats reads: held-out accuracy, and the rebinding
# control where the source records one
SCORE_MAPS = ("arms", "rebind")


class ReferenceFileError(ValueError):
    """A reference file problem, in one line naming the file (and the line of a YAML error,
    or the set, arm and seed of a bad value)."""


def check_reference(doc: Any, path: str) -> dict[str, Any]:
    """A reference file's document, validated: ``sets`` maps each set's name to a mapping
    whose ``arms`` (and ``rebind``, where present) map each arm to ``{seed: accuracy}``, every
    seed a whole number >= 0 and every accuracy a number in [0, 1]; else `ReferenceFileError`
    naming the file, set, arm and seed."""
    if not isinstance(doc, dict):
        raise ReferenceFileError(f"{path}: expected a mapping with a sets: key")
    sets = doc.get("sets")
    if not isinstance(sets, dict) or not sets:
        raise ReferenceFileError(f"{path}: sets: expected a mapping of set names to sets")
    for name, entry in sets.items():
        if not isinstance(entry, dict):
            raise ReferenceFileError(f"{path}: set {name}: expected a mapping, got {entry!r:.40}")
        if "arms" not in entry:
            raise ReferenceFileError(f"{path}: set {name}: arms: missing (arm -> seed -> score)")
        for block in SCORE_MAPS:
            if block not in entry:
                continue
            arms = entry[block]
            if not isinstance(arms, dict) or not arms:
                raise ReferenceFileError(
                    f"{path}: set {name}: {block}: expected a mapping of arm -> seed -> score"
                )
            for arm, scores in arms.items():
                at = f"{path}: set {name}, arm {arm} ({block})"
                if not isinstance(scores, dict) or not scores:
                    raise ReferenceFileError(
                        f"{at}: expected a mapping of seed -> score, got {scores!r:.40}"
                    )
                for seed, value in scores.items():
                    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
                        raise ReferenceFileError(
                            f"{at}, seed {seed!r}: a seed is a whole number >= 0, unquoted"
                        )
                    if isinstance(value, bool) or not isinstance(value, int | float):
                        raise ReferenceFileError(
                            f"{at}, seed {seed}: {value!r} is not a number (an accuracy in "
                            "[0, 1], as the source's result file stores it)"
                        )
                    if not 0 <= value <= 1:
                        raise ReferenceFileError(
                            f"{at}, seed {seed}: {value!r} is not an accuracy in [0, 1]"
                        )
    return doc


@functools.lru_cache(maxsize=16)
def _read(path: str, mtime_ns: int) -> dict[str, Any]:
    """A reference file's YAML, read strictly (a repeated key or a syntax error names the
    file and line) and validated (`check_reference`), once per version (the planner checks
    every scale)."""
    return check_reference(strict_yaml.load(path, ReferenceFileError), path)


def load_set(path: str | Path, name: str) -> dict[str, Any]:
    """One set of a reference file, with the file's provenance (repository, commit, file
    pattern); a missing set fails naming the file and the sets it has (`KeyError`), a bad
    file or value naming the file and where (`ReferenceFileError`)."""
    data = copy.deepcopy(_read(str(path), Path(path).stat().st_mtime_ns))
    sets = data.get("sets") or {}
    if name not in sets:
        raise KeyError(f"{path}: no set {name!r}; sets: {sorted(sets)}")
    entry = dict(sets[name])
    entry.setdefault("repository", data.get("repository"))
    entry.setdefault("commit", data.get("commit"))
    entry["name"] = name
    return entry


# the provenance fields a merged reference joins from its sets
PROVENANCE = ("description", "repository", "commit", "folder", "file", "field")


def load_reference(path: str | Path, sets: str | list[dict[str, Any]]) -> dict[str, Any]:
    """The reference an experiment's ``reference.set`` names: one set (`load_set`), or a list
    of ``{set, at}`` merged into one, each set's arms (score maps and ``task_by_arm``) renamed
    ``<arm>-<at>`` where it names a grid value's label ``at`` (``pairs8``, ``lr0.003``) and kept
    as they are where it names none. Two sets giving the same name fail (`ReferenceFileError`),
    as an unknown set does (`KeyError`); the merged provenance joins the sets' own, and
    ``sets`` lists each set's."""
    if isinstance(sets, str):
        return load_set(path, sets)
    merged: dict[str, Any] = {"arms": {}, "rebind": {}, "task_by_arm": {}, "sets": []}
    for place in sets:
        entry = load_set(path, place["set"])
        at = place.get("at")
        merged["sets"].append(
            {"name": entry["name"], "at": at, **{k: entry.get(k) for k in PROVENANCE}}
        )
        for block in (*SCORE_MAPS, "task_by_arm"):
            for arm, value in (entry.get(block) or {}).items():
                name = f"{arm}-{at}" if at else arm
                if name in merged[block]:
                    raise ReferenceFileError(
                        f"{path}: set {entry['name']} gives {block} of {name!r}, which an "
                        "earlier set of the same reference already gives"
                    )
                merged[block][name] = value
    for block in ("rebind", "task_by_arm"):
        if not merged[block]:
            del merged[block]
    merged["name"] = ", ".join(s["name"] for s in merged["sets"])
    for key in PROVENANCE:
        values = list(dict.fromkeys(str(s[key]) for s in merged["sets"] if s.get(key)))
        merged[key] = values[0] if len(values) == 1 else "; ".join(values) if values else None
    return merged


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
