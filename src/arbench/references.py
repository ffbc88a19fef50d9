"""The sources' per-seed result files (``references/*.yaml``) read and validated: below the
config's validation (which checks an experiment's ``reference`` block while planning) and the
reports (`arbench.report.reference`, which sets them beside our stats), so neither imports
the other for it.

A file is read strictly (`arbench.strict_yaml`: a seed listed twice or a syntax error fails
naming the file and line) and validated whole when first read (`check_reference`: every
score a number in [0, 1] under a whole-number seed), so a bad value fails before any job,
naming the file, set, arm and seed. `load_set` reads one named set with the file's
provenance; `load_reference` merges several sets placed at grid values.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from arbench import strict_yaml
from arbench.experiment import labelled_run_arm

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
                name = labelled_run_arm(arm, at)
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
