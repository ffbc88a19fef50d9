"""Load, validate and scale-resolve the pipeline config.

`config.yaml` states the paper protocol; its `scale` key picks an entry of
`scales`, whose `set` and `multiply` maps rewrite dotted key paths (a `*`
segment matches every key at that level, e.g. every experiment). Validation is
a JSON schema plus semantic checks, so a bad config fails before any job runs
and names the offending key.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schemas" / "config.schema.json"


class ConfigError(ValueError):
    """A config problem, with the key path that caused it."""


def _paths(tree: dict[str, Any], dotted: str) -> list[tuple[dict[str, Any], str, str]]:
    """Expand a dotted path with `*` wildcards into (parent dict, key, concrete path)."""
    parts = dotted.split(".")
    found: list[tuple[dict[str, Any], str, str]] = [(tree, "", "")]
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        nxt = []
        for node, _, prefix in found:
            if not isinstance(node, dict):
                raise ConfigError(f"scale path {dotted!r}: {prefix or '<root>'} is not a mapping")
            keys = list(node) if part == "*" else [part]
            for k in keys:
                here = f"{prefix}.{k}" if prefix else k
                if last:
                    if k not in node:
                        raise ConfigError(f"scale path {dotted!r}: no key {here!r}")
                    nxt.append((node, k, here))
                else:
                    if k not in node:
                        raise ConfigError(f"scale path {dotted!r}: no key {here!r}")
                    nxt.append((node[k], k, here))
        found = nxt
    return found


def apply_scale(config: dict[str, Any]) -> dict[str, Any]:
    """Return a deep copy of ``config`` with its chosen scale's rewrites applied."""
    cfg = copy.deepcopy(config)
    scale = cfg.get("scale", "paper")
    scales = cfg.get("scales", {})
    if scale not in scales:
        raise ConfigError(f"scale: {scale!r} is not one of {sorted(scales)}")
    rules = scales[scale] or {}
    for dotted, factor in (rules.get("multiply") or {}).items():
        for parent, key, here in _paths(cfg, dotted):
            old = parent[key]
            if not isinstance(old, int | float) or isinstance(old, bool):
                raise ConfigError(f"scales.{scale}.multiply: {here} is not a number")
            new = old * factor
            parent[key] = max(1, round(new)) if isinstance(old, int) else new
    for dotted, value in (rules.get("set") or {}).items():
        for parent, key, _ in _paths(cfg, dotted):
            parent[key] = copy.deepcopy(value)
    return cfg


def semantic_checks(cfg: dict[str, Any]) -> None:
    """Checks a schema cannot express; raise ConfigError naming the key."""
    from arbench.cells import CELLS
    from arbench.tasks import make_task

    for name, exp in cfg["experiments"].items():
        where = f"experiments.{name}"
        try:
            make_task(exp["task"])
        except (ValueError, KeyError) as e:
            raise ConfigError(f"{where}.task: {e}") from e
        tr = exp["train"]
        if tr["warmup"] >= tr["steps"]:
            raise ConfigError(f"{where}.train.warmup={tr['warmup']} must be < steps={tr['steps']}")
        for arm, spec in exp["arms"].items():
            if spec["cell"] not in CELLS:
                raise ConfigError(
                    f"{where}.arms.{arm}.cell: {spec['cell']!r} not one of {sorted(CELLS)}"
                )
        for i, c in enumerate(exp.get("contrasts", [])):
            for side in ("a", "b"):
                if c[side] not in exp["arms"]:
                    raise ConfigError(
                        f"{where}.contrasts[{i}].{side}: {c[side]!r} is not an arm of {name}"
                    )


def validate(cfg: dict[str, Any]) -> None:
    """Schema-validate a raw config, naming the failing key path and allowed values."""
    schema = json.loads(SCHEMA.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(cfg), key=str)
    if errors:
        e = errors[0]
        path = ".".join(str(p) for p in e.absolute_path) or "<root>"
        raise ConfigError(f"config key {path}: {e.message}")


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the raw config, apply its scale, and check the result."""
    validate(config)
    cfg = apply_scale(config)
    validate(cfg)
    semantic_checks(cfg)
    return cfg


def load(path: str | Path = ROOT / "config.yaml", **overrides: Any) -> dict[str, Any]:
    """Read a YAML config, apply top-level overrides (e.g. scale) and resolve it."""
    raw = yaml.safe_load(Path(path).read_text())
    raw.update(overrides)
    return resolve(raw)


def eval_options(exp: dict[str, Any], arm: str) -> dict[str, Any]:
    """An arm's evaluation options: its keys prefixed `eval_`, prefix removed."""
    return {k[5:]: v for k, v in exp["arms"][arm].items() if k.startswith("eval_")}


def model_config_dict(exp: dict[str, Any], arm: str, vocab_size: int) -> dict[str, Any]:
    """The ModelConfig fields of one arm: backbone from the experiment, knobs from the arm."""
    m = exp["model"]
    spec = {k: v for k, v in exp["arms"][arm].items() if not k.startswith("eval_")}
    cell = spec.pop("cell")
    options = {**m.get("cell_options", {}), **spec}
    return {
        "vocab_size": vocab_size,
        "d_model": m["d_model"],
        "layers": m["layers"],
        "mlp_ratio": m.get("mlp_ratio", 4),
        "cell": cell,
        "cell_options": options,
    }
