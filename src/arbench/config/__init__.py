"""The pipeline config: read strictly (`loading`), each experiment merged over its recipe
(`recipes`), scale-rewritten (`scales`), validated (`validation`, its type checks in
`type_check`), its releases checked and merged (`releases`), in that order, by `resolve`.

`resolve` checks every scale's rewrites whichever scale is planned, so a typo inside another
scale's overrides fails a paper-scale plan too. What the resolved experiments expand into
(run arms, datasets, shared runs) is `arbench.experiment`'s job.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from arbench import frontier_arms
from arbench.config import check_memo
from arbench.config.errors import ConfigError
from arbench.config.loading import StrictLoader, dealias, load_yaml, read_config
from arbench.config.paths import ROOT
from arbench.config.recipes import expand as expand_recipes
from arbench.config.recipes import origin as recipe_origin
from arbench.config.recipes import stamp as stamp_recipes
from arbench.config.releases import check_release, merge_releases
from arbench.config.scales import apply_scale, drop_arms, mark_path_only, skip_unavailable
from arbench.config.validation import SCHEMA, semantic_checks, validate, validate_recipes

__all__ = [
    "ROOT",
    "SCHEMA",
    "ConfigError",
    "StrictLoader",
    "apply_scale",
    "dealias",
    "expand_recipes",
    "load",
    "load_yaml",
    "merge_releases",
    "read_config",
    "resolve",
    "semantic_checks",
    "skip_unavailable",
    "validate",
]


def _check_studies(cfg: dict[str, Any]) -> None:
    """Every experiment a study lists is one the config defines."""
    for study, names in (cfg.get("studies") or {}).items():
        for i, name in enumerate(names):
            if name not in cfg["experiments"]:
                raise ConfigError(
                    f"studies.{study}[{i}]: {name!r} is not an experiment; "
                    f"known: {sorted(cfg['experiments'])}"
                )


def _resolve_scale(config: dict[str, Any]) -> dict[str, Any]:
    """Apply the config's own scale to a schema-valid raw config and check the result."""
    cfg = apply_scale(config)
    stamp_recipes(cfg)
    scale = cfg.get("scale", "paper")
    try:
        frontier_arms.expand_all(cfg)
    except frontier_arms.FrontierError as e:
        raise ConfigError(str(e)) from None
    rewrites = any((cfg["scales"][scale] or {}).values())
    try:
        validate(cfg)
    except ConfigError as e:  # the config as written passed: a scale rule set this value
        raise ConfigError(f"{e} (as rewritten by scales.{scale})") from None
    drop_arms(cfg)
    try:
        for name, block in cfg.get("releases", {}).items():
            check_release(name, block)
        merge_releases(cfg)
        semantic_checks(cfg)
        _check_studies(cfg)
        mark_path_only(cfg)
    except ConfigError as e:
        raise ConfigError(f"{e} (at scale {scale})" if rewrites else str(e)) from None
    skip_unavailable(cfg)
    return cfg


@functools.lru_cache(maxsize=64)
def _other_scale_error(raw: str, scale: str) -> str | None:
    """Why ``scale``'s rewrites of the raw config (JSON) fail, or None; cached, since one
    process resolves the same config many times, and a pass is remembered across processes
    (`check_memo`)."""
    if check_memo.passed(raw, scale):
        return None
    try:
        _resolve_scale({**json.loads(raw), "scale": scale})
    except ConfigError as e:
        return str(e)
    check_memo.record_pass(raw, scale)
    return None


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the raw config, apply its scale, and check the result; then check that every
    other scale's rewrites resolve too (an error names that scale). An error on a setting
    only a recipe's preset gives names that preset too (`recipes.origin`)."""
    written = dealias(config)
    validate_recipes(written)  # a preset's error names the preset, before it is merged
    try:
        return _resolve_expanded(expand_recipes(written))
    except ConfigError as e:
        raise ConfigError(recipe_origin(str(e), written)) from None


def _resolve_expanded(config: dict[str, Any]) -> dict[str, Any]:
    """`resolve` after the recipes are merged."""
    validate(config)
    cfg = _resolve_scale(config)
    raw = json.dumps(config, sort_keys=True)
    planned = cfg.get("scale", "paper")
    for other in config["scales"]:
        if other == planned:
            continue
        error = _other_scale_error(raw, other)
        if not error:
            continue
        if any((config["scales"][other] or {}).values()):
            raise ConfigError(f"scales.{other}: {error} (checked while planning every scale)")
        # a scale that rewrites nothing runs the config as written: the error is the config's
        raise ConfigError(
            f"{error} (in the config as written, which scale {other} runs unchanged; found "
            f"while planning scale {planned}, whose rewrites hide it)"
        )
    return cfg


def load(path: str | Path = ROOT / "config.yaml", **overrides: Any) -> dict[str, Any]:
    """Read a YAML config, apply top-level overrides (e.g. scale) and resolve it."""
    raw = load_yaml(path)
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the config must be a mapping, got {type(raw).__name__}")
    raw.update(overrides)
    return resolve(raw)
