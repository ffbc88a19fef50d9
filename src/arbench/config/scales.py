"""Apply a scale's rewrites to the paper protocol.

`config.yaml` states the paper protocol; its `scale` key picks an entry of `scales`, whose
`set` and `multiply` maps rewrite dotted key paths (a `*` segment matches every key at that
level, e.g. every experiment), whose `drop_arms` map names, per experiment, arms the scale
does not run (`drop_arms`: recorded as skipped, so a claim on one reads "not run at this
scale"), and whose `measures` list (where present) names the experiments whose numbers the
scale measures: every other one runs only to exercise its path and is marked ``path_only``.
Beside the scale's own ``drop_arms``, `skip_unavailable` drops, after validation, the arms
whose cell cannot run on this machine (an optional package missing), recorded alike.

A rule that reaches an experiment's setting also reaches that setting's per-value list in the
experiment's grid (``grid.with``, `arbench.experiment.grid_settings`), entry by entry: the
paper's K-sweep gives ``train.steps`` one value per K, and a scale's
``experiments.*.train.steps`` (a factor, or a value set) applies to each of them, as it would
to the block's own.
"""

from __future__ import annotations

import copy
from typing import Any

from arbench.config.errors import ConfigError
from arbench.config.loading import dealias
from arbench.experiment import point_label, restrict_grid


def _paths(
    tree: dict[str, Any], dotted: str, where: str = "scale path"
) -> list[tuple[dict[str, Any], str, str]]:
    """Expand a dotted path with `*` wildcards into (parent dict, key, concrete path); a
    missing key fails naming ``where`` (the scale rule), the key and the keys there."""
    parts = dotted.split(".")
    found: list[tuple[dict[str, Any], str, str]] = [(tree, "", "")]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = []
        for node, _, prefix in found:
            if not isinstance(node, dict):
                raise ConfigError(f"{where} {dotted!r}: {prefix or '<root>'} is not a mapping")
            keys = list(node) if part == "*" else [part]
            for k in keys:
                here = f"{prefix}.{k}" if prefix else k
                if k not in node:
                    raise ConfigError(
                        f"{where} {dotted!r}: no key {here!r} (a scale rewrites existing "
                        f"keys only); {prefix or '<root>'} has {sorted(node)}"
                    )
                nxt.append((node, k, here) if last else (node[k], k, here))
        found = nxt
    return found


def _grid_lists(cfg: dict[str, Any], here: str) -> list[tuple[list[Any], str]]:
    """The grid ``with`` lists a rule at the concrete path ``here`` also reaches: for
    ``experiments.<e>.<block>.<key...>``, each list of that experiment's ``grid.with`` whose key
    is that setting or lies inside it, with the rest of its key below ``here`` ("" for the
    setting itself)."""
    parts = here.split(".")
    if len(parts) < 3 or parts[0] != "experiments":
        return []
    exp = (cfg.get("experiments") or {}).get(parts[1])
    lists = ((exp or {}).get("grid") or {}).get("with") if isinstance(exp, dict) else None
    if not isinstance(lists, dict):
        return []
    setting = ".".join(parts[2:])
    return [
        (values, key[len(setting) :].lstrip("."))
        for key, values in lists.items()
        if isinstance(values, list) and (key == setting or key.startswith(f"{setting}."))
    ]


def _cuts_grid(here: str, parent: dict[str, Any], key: str, value: Any) -> bool:
    """Whether a set rule at ``here`` gives an experiment's grid a subset of its values
    (``experiments.<e>.grid.values``): its per-value ``with`` lists and its ``arms`` subsets
    are then cut to the values kept (`arbench.experiment.restrict_grid`), so a scale names
    the values it runs and nothing else. Values outside the grid's own are set as any value
    is, and the ``with`` lists must then be set too (validation names them)."""
    if not _grid_values_at(here):
        return False
    if not (parent.get("with") or parent.get("arms")) or not isinstance(value, list):
        return False
    return all(v in parent[key] for v in value)


def _grid_values_at(here: str) -> bool:
    """Whether the concrete path ``here`` is an experiment's ``grid.values``."""
    parts = here.split(".")
    return len(parts) == 4 and parts[0] == "experiments" and parts[2:] == ["grid", "values"]


def _cut_reference(exp: dict[str, Any], values: list[Any]) -> None:
    """Drop the reference sets an experiment places at grid values a scale no longer runs
    (``reference.set: [{set, at}]``, ``at`` a value's label): the sets left are those of the
    values kept and those placed at none; with none left, the reference goes."""
    ref = exp.get("reference")
    if not isinstance(ref, dict) or not isinstance(ref.get("set"), list):
        return
    kept = {point_label(exp, v) for v in values}
    ref["set"] = [s for s in ref["set"] if not isinstance(s, dict) or s.get("at") in (None, *kept)]
    if not ref["set"]:
        del exp["reference"]


def _inside(value: Any, rest: str) -> tuple[bool, Any]:
    """``value`` at the dotted ``rest`` below it (whether it is there, and what)."""
    for part in rest.split(".") if rest else []:
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def apply_scale(config: dict[str, Any]) -> dict[str, Any]:
    """Return an unaliased copy of ``config`` with its chosen scale's rewrites applied."""
    cfg = dealias(config)
    scale = cfg.get("scale", "paper")
    scales = cfg.get("scales", {})
    if scale not in scales:
        raise ConfigError(f"scale: {scale!r} is not one of {sorted(scales)}")
    rules = scales[scale] or {}
    for dotted, factor in (rules.get("multiply") or {}).items():
        for parent, key, here in _paths(cfg, dotted, f"scales.{scale}.multiply"):
            old = parent[key]
            if not isinstance(old, int | float) or isinstance(old, bool):
                raise ConfigError(
                    f"scales.{scale}.multiply {dotted!r}: {here} is {old!r}, not a number"
                )
            parent[key] = _times(old, factor)
            for values, rest in _grid_lists(cfg, here):
                if not rest:  # the setting's own per-value list
                    values[:] = [_times(v, factor) for v in values]
    for dotted, value in (rules.get("set") or {}).items():
        for parent, key, here in _paths(cfg, dotted, f"scales.{scale}.set"):
            if _cuts_grid(here, parent, key, value):  # its ``with`` and ``arms`` follow
                at = [parent[key].index(v) for v in value]
                lists = parent.get("with") or {}
                parent["with"] = {k: [vs[i] for i in at] for k, vs in lists.items()}
                if not lists:
                    del parent["with"]
                parent.update(restrict_grid({**parent, key: value}, lambda v: True))
                _cut_reference(cfg["experiments"][here.split(".")[1]], value)
                continue
            parent[key] = copy.deepcopy(value)
            if _grid_values_at(here) and isinstance(value, list):  # its placed sets follow
                _cut_reference(cfg["experiments"][here.split(".")[1]], value)
            for values, rest in _grid_lists(cfg, here):
                there, setting = _inside(value, rest)
                if there:  # the value set holds this setting: every grid value takes it
                    values[:] = [copy.deepcopy(setting) for _ in values]
    return cfg


def _times(old: Any, factor: float) -> Any:
    """A number scaled by ``factor``: an integer stays a whole number of at least 1."""
    new = old * factor
    return max(1, round(new)) if isinstance(old, int) and not isinstance(old, bool) else new


def drop_arms(cfg: dict[str, Any]) -> None:
    """Remove, in place, the arms the chosen scale's ``drop_arms`` names per experiment (run
    on the validated, scale-rewritten config) and every contrast naming one, recording both
    under the experiment's ``skipped`` key with the reason, as an arm that cannot run here is
    recorded (`skip_unavailable`); an arm's entry in a per-arm ``seeds`` mapping goes with
    it. A name that is not an experiment or not one of its arms, or dropping every arm, fails
    naming it."""
    scale = cfg.get("scale", "paper")
    where = f"scales.{scale}.drop_arms"
    for name, arms in ((cfg["scales"][scale] or {}).get("drop_arms") or {}).items():
        if name not in cfg.get("experiments", {}):
            raise ConfigError(
                f"{where}.{name}: not an experiment; known: {sorted(cfg.get('experiments', {}))}"
            )
        exp = cfg["experiments"][name]
        have = exp.get("arms") or {}
        unknown = [a for a in arms if a not in have]
        if unknown:
            raise ConfigError(
                f"{where}.{name}: {unknown[0]!r} is not an arm of {name}; arms: {sorted(have)}"
            )
        if len(arms) == len(have):
            raise ConfigError(f"{where}.{name}: drops every arm; keep at least one")
        why = f"not run at scale {scale} ({where})"
        skipped = exp.setdefault("skipped", {"arms": {}, "contrasts": []})
        seeds = exp.get("seeds")
        subsets = (exp.get("grid") or {}).get("arms")
        for arm in arms:
            del have[arm]
            skipped["arms"][arm] = why
            if isinstance(seeds, dict):  # its seed count goes with it (a mapping per arm)
                seeds.pop(arm, None)
            if isinstance(subsets, dict):  # and its grid values (the grid's ``arms``)
                subsets.pop(arm, None)
        contrasts = exp.get("contrasts") or []
        skipped["contrasts"] += [c for c in contrasts if c["a"] in arms or c["b"] in arms]
        exp["contrasts"] = [c for c in contrasts if c["a"] not in arms and c["b"] not in arms]


def skip_unavailable(cfg: dict[str, Any]) -> None:
    """Drop, in place, every arm whose cell cannot run here (an optional package is missing)
    and every contrast that names one, recording each with its reason under the experiment's
    ``skipped`` key, so its table can say what was not run and why."""
    from arbench.cells import CELLS

    for name, exp in cfg["experiments"].items():
        skipped: dict[str, str] = {}
        for arm, spec in list(exp["arms"].items()):
            if "cell" not in spec:  # another model family: nothing optional to miss
                continue
            reason = CELLS[spec["cell"]].unavailable_reason()
            if reason:
                skipped[arm] = reason
                del exp["arms"][arm]
                ((exp.get("grid") or {}).get("arms") or {}).pop(arm, None)
        if not skipped:
            continue
        if not exp["arms"]:
            raise ConfigError(f"experiments.{name}.arms: none can run here: {skipped}")
        # added to what the scale dropped (`drop_arms`), if anything
        record = exp.setdefault("skipped", {"arms": {}, "contrasts": []})
        record["arms"].update(skipped)
        dropped = [c for c in exp.get("contrasts", []) if c["a"] in skipped or c["b"] in skipped]
        record["contrasts"] += dropped
        exp["contrasts"] = [c for c in exp.get("contrasts", []) if c not in dropped]


def mark_path_only(cfg: dict[str, Any]) -> None:
    """Mark, in place, every experiment the chosen scale does not measure (``path_only``):
    a scale with a ``measures`` list runs the others only to exercise their path, so their
    claims read "not run at this scale". A name the list gives must be an experiment."""
    scale = cfg.get("scale", "paper")
    measures = (cfg["scales"][scale] or {}).get("measures")
    if measures is None:
        return
    unknown = sorted(set(measures) - set(cfg["experiments"]))
    if unknown:
        raise ConfigError(
            f"scales.{scale}.measures: {unknown[0]!r} is not an experiment; "
            f"known: {sorted(cfg['experiments'])}"
        )
    for name, exp in cfg["experiments"].items():
        if name not in measures:
            exp["path_only"] = True
