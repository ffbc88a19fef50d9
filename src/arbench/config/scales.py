"""Apply a scale's rewrites to the paper protocol.

`config.yaml` states the paper protocol; its `scale` key picks an entry of `scales`, whose
`set` and `multiply` maps rewrite dotted key paths (a `*` segment matches every key at that
level, e.g. every experiment), whose `drop_arms` map names, per experiment, arms the scale
does not run (`drop_arms`: recorded as skipped, so a claim on one reads "not run at this
scale"), and whose `measures` list (where present) names the experiments whose numbers the
scale measures: every other one runs only to exercise its path and is marked ``path_only``.
"""

from __future__ import annotations

import copy
from typing import Any

from arbench.config.errors import ConfigError
from arbench.config.loading import dealias


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
            new = old * factor
            parent[key] = max(1, round(new)) if isinstance(old, int) else new
    for dotted, value in (rules.get("set") or {}).items():
        for parent, key, _ in _paths(cfg, dotted, f"scales.{scale}.set"):
            parent[key] = copy.deepcopy(value)
    return cfg


def drop_arms(cfg: dict[str, Any]) -> None:
    """Remove, in place, the arms the chosen scale's ``drop_arms`` names per experiment (run
    on the validated, scale-rewritten config) and every contrast naming one, recording both
    under the experiment's ``skipped`` key with the reason, as an arm that cannot run here is
    recorded (`validation.skip_unavailable`); an arm's entry in a per-arm ``seeds`` mapping
    goes with it. A name that is not an experiment or not one of
    its arms, or dropping every arm, fails naming it."""
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
        for arm in arms:
            del have[arm]
            skipped["arms"][arm] = why
            if isinstance(seeds, dict):  # its seed count goes with it (a mapping per arm)
                seeds.pop(arm, None)
        contrasts = exp.get("contrasts") or []
        skipped["contrasts"] += [c for c in contrasts if c["a"] in arms or c["b"] in arms]
        exp["contrasts"] = [c for c in contrasts if c["a"] not in arms and c["b"] not in arms]


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
