"""Read config files strictly, as the workflow merges them.

Config files are read through `arbench.strict_yaml` (`load_yaml`, `read_config`), as every
YAML input of the project is: a key repeated in one mapping is an error naming both lines
(PyYAML keeps the last silently), a syntax error names the file and line, and ``3e-3`` is a
number (YAML 1.1 reads it as a string).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from arbench import strict_yaml
from arbench.config.errors import ConfigError
from arbench.strict_yaml import StrictLoader


def load_yaml(path: str | Path) -> Any:
    """A config file read strictly (`arbench.strict_yaml.load`): a repeated key or a syntax
    error is a `ConfigError` naming the path and the line."""
    return strict_yaml.load(path, ConfigError)


def _unshare(value: Any) -> Any:
    """A copy of nested mappings and lists in which no two places share one object (an
    anchor's copies), so a merge into one place never reaches another."""
    if isinstance(value, Mapping):
        return {k: _unshare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshare(v) for v in value]
    return value


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base`` in place, mappings key by key (Snakemake's order)."""
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = _unshare(value)
    return base


def _retype(value: Any) -> Any:
    """A ``--config`` value with every string inside a mapping or list re-read as a YAML
    scalar: Snakemake parses nested values with YAML's base loader, which leaves 4, 3e-3
    and true as strings (top-level values it parses as numbers itself)."""
    if isinstance(value, Mapping):
        return {k: _retype(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_retype(v) for v in value]
    if isinstance(value, str):
        try:
            scalar = yaml.load(value, StrictLoader)  # noqa: S506 (a safe loader)
        except yaml.YAMLError:
            return value
        return value if isinstance(scalar, dict | list) or scalar is None else scalar
    return value


def _mismatch(ours: Any, theirs: Any, where: str) -> str | None:
    """The first key path where the strict read ``ours`` and a plain read ``theirs`` disagree
    (a string of theirs that reads as our scalar, such as '3e-3', agrees), or None."""
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        for key in sorted(set(ours) | set(theirs), key=str):
            here = f"{where}.{key}" if where else str(key)
            if key not in ours or key not in theirs:
                return here
            found = _mismatch(ours[key], theirs[key], here)
            if found:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list):
        if len(ours) != len(theirs):
            return where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            found = _mismatch(a, b, f"{where}[{i}]")
            if found:
                return found
        return None
    if ours == theirs or (isinstance(theirs, str) and _retype(theirs) == ours):
        return None
    return where or "<root>"


def read_config(
    files: Iterable[str | Path],
    overrides: Mapping[str, Any] | None = None,
    expected: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The config as the workflow sees it, read strictly: each file in order (each one's keys
    merged over the previous ones', as Snakemake merges ``configfile:`` and ``--configfile``),
    then ``overrides`` (``--config key=value``). ``expected``, the config Snakemake loaded
    itself, must agree key for key (numbers it read as strings aside), so the strict read
    can never run a different config than the one Snakemake reports."""
    files = list(files)
    cfg: dict[str, Any] = {}
    for path in files:
        data = load_yaml(path)
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the config must be a mapping, got {type(data).__name__}")
        _merge(cfg, _unshare(data))  # Snakemake's merge edits one copy of an anchor, not all
    for key, value in (overrides or {}).items():
        _merge(cfg, {key: _retype(value) if isinstance(value, Mapping | list) else value})
    if expected is not None:
        where = _mismatch(cfg, expected, "")
        if where:
            raise ConfigError(
                f"config key {where}: the strict read of {[str(f) for f in files]} differs "
                "from Snakemake's own; use plain YAML (no templates) in config files"
            )
    return cfg


def dealias(config: dict[str, Any]) -> dict[str, Any]:
    """A copy in which no two keys share one object. YAML anchors (``*mqar_train``) load as
    one shared dict, and a scale rewrite of one experiment must not reach the others."""
    return json.loads(json.dumps(config))
