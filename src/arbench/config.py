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


def _schema_error(errors: list[Any], prefix: str = "") -> ConfigError | None:
    """The first schema error as a ConfigError naming its key path (None if no errors)."""
    if not errors:
        return None
    e = sorted(errors, key=str)[0]
    path = ".".join(str(p) for p in e.absolute_path)
    where = ".".join(x for x in (prefix, path) if x) or "<root>"
    return ConfigError(f"config key {where}: {e.message}")


def _check_release(name: str, block: dict[str, Any]) -> None:
    """A release block names a release task and fits that task's own schema."""
    from arbench.tasks import task_class

    where = f"releases.{name}"
    try:
        cls = task_class(block["task"])
    except KeyError as e:
        raise ConfigError(f"{where}.task: {e.args[0]}") from None
    if cls.release is None:
        raise ConfigError(f"{where}.task: {cls.name!r} has no release (its data is {cls.data!r})")
    schema_errors = list(jsonschema.Draft202012Validator(cls.release.schema).iter_errors(block))
    err = _schema_error(schema_errors, where)
    if err:
        raise err
    try:
        cls.release.check(block)
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def merge_releases(cfg: dict[str, Any]) -> None:
    """Give every release task's block the settings it takes from its release, in place.

    The release block is the one source of a release's data settings (its params, the configs
    it holds); an experiment block only names it. Setting one of those keys in both places is
    an error, so the two can never disagree.
    """
    from arbench.tasks import task_class

    releases = cfg.get("releases", {})
    for name, exp in cfg["experiments"].items():
        task = exp["task"]
        where = f"experiments.{name}.task"
        try:
            cls = task_class(task["name"])
        except KeyError as e:
            raise ConfigError(f"{where}.name: {e.args[0]}") from None
        if cls.data != "release":
            continue
        release = task.get("release")
        if release not in releases:
            raise ConfigError(
                f"{where}.release: {release!r} is not a release; known: {sorted(releases)}"
            )
        if releases[release]["task"] != cls.name:
            raise ConfigError(
                f"{where}.release: {release!r} is a {releases[release]['task']!r} release"
            )
        for key in cls.release_keys:
            if key in task:
                raise ConfigError(
                    f"{where}.{key}: set it in releases.{release}.{key} (its one source)"
                )
            task[key] = copy.deepcopy(releases[release][key])


def _check_arm(where: str, exp: dict[str, Any], arm: str) -> None:
    """An arm names a registered cell, every option is one that cell's constructor takes, and
    every ``eval_`` option is one the task's evaluator takes."""
    from arbench.cells import CELLS
    from arbench.tasks import task_class

    spec = exp["arms"][arm]
    here = f"{where}.arms.{arm}"
    cell = spec["cell"]
    if cell not in CELLS:
        raise ConfigError(f"{here}.cell: {cell!r} not one of {sorted(CELLS)}")
    options = {**exp["model"].get("cell_options", {}), **cell_options_of(spec)}
    try:
        accepted = CELLS[cell].option_names(options)
    except KeyError as e:  # a wrapper naming an unknown inner cell
        raise ConfigError(f"{here}: {e.args[0]}") from None
    for key in options:
        if key not in accepted:
            origin = here if key in spec else f"{where}.model.cell_options"
            raise ConfigError(
                f"{origin}.{key}: not an option of cell {cell!r}; it takes {sorted(accepted)}"
            )
    evaluator = task_class(exp["task"]["name"])
    takes = evaluator.eval_option_names()
    for key in spec:
        if key.startswith(EVAL_PREFIX) and key[len(EVAL_PREFIX) :] not in takes:
            raise ConfigError(
                f"{here}.{key}: task {evaluator.name!r} takes no evaluation option "
                f"{key[len(EVAL_PREFIX) :]!r}; it takes {sorted(takes)}"
            )


def _check_reference(where: str, ref: dict[str, str], cfg: dict[str, Any]) -> None:
    """A {experiment, arm} pointer names an experiment and one of its arms."""
    exp = cfg["experiments"].get(ref["experiment"])
    if exp is None:
        raise ConfigError(
            f"{where}.experiment: {ref['experiment']!r} not one of {sorted(cfg['experiments'])}"
        )
    if ref["arm"] not in exp["arms"]:
        raise ConfigError(f"{where}.arm: {ref['arm']!r} is not an arm of {ref['experiment']}")


def semantic_checks(cfg: dict[str, Any]) -> None:
    """Checks a schema cannot express; raise ConfigError naming the key."""
    from arbench.tasks import build_task

    for name, exp in cfg["experiments"].items():
        where = f"experiments.{name}"
        try:
            build_task(exp["task"])
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(f"{where}.task: {e}") from e
        tr = exp["train"]
        if tr["warmup"] >= tr["steps"]:
            raise ConfigError(f"{where}.train.warmup={tr['warmup']} must be < steps={tr['steps']}")
        for arm in exp["arms"]:
            _check_arm(where, exp, arm)
        for i, c in enumerate(exp.get("contrasts", [])):
            for side in ("a", "b"):
                if c[side] not in exp["arms"]:
                    raise ConfigError(
                        f"{where}.contrasts[{i}].{side}: {c[side]!r} is not an arm of {name}"
                    )
    _check_reference("zoo.reference", cfg["zoo"]["reference"], cfg)
    _check_reference("bench.stream", cfg["bench"]["stream"], cfg)


def validate(cfg: dict[str, Any]) -> None:
    """Schema-validate a raw config, naming the failing key path and allowed values."""
    schema = json.loads(SCHEMA.read_text())
    err = _schema_error(list(jsonschema.Draft202012Validator(schema).iter_errors(cfg)))
    if err:
        raise err


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the raw config, apply its scale, and check the result."""
    validate(config)
    cfg = apply_scale(config)
    validate(cfg)
    for name, block in cfg.get("releases", {}).items():
        _check_release(name, block)
    merge_releases(cfg)
    semantic_checks(cfg)
    return cfg


def load(path: str | Path = ROOT / "config.yaml", **overrides: Any) -> dict[str, Any]:
    """Read a YAML config, apply top-level overrides (e.g. scale) and resolve it."""
    raw = yaml.safe_load(Path(path).read_text())
    raw.update(overrides)
    return resolve(raw)


EVAL_PREFIX = "eval_"  # an arm's keys with this prefix are options of the task's evaluator


def cell_options_of(spec: dict[str, Any]) -> dict[str, Any]:
    """An arm's cell options: its keys other than ``cell`` and the ``eval_`` ones."""
    return {k: v for k, v in spec.items() if k != "cell" and not k.startswith(EVAL_PREFIX)}


def eval_options(exp: dict[str, Any], arm: str) -> dict[str, Any]:
    """An arm's evaluation options: its keys prefixed `eval_`, prefix removed."""
    spec = exp["arms"][arm]
    return {k[len(EVAL_PREFIX) :]: v for k, v in spec.items() if k.startswith(EVAL_PREFIX)}


def model_settings(exp: dict[str, Any], arm: str) -> dict[str, Any]:
    """One arm's model: the backbone from the experiment, the cell and its knobs from the arm
    (the `ModelConfig` fields but the vocabulary, which the task sets)."""
    m = exp["model"]
    spec = exp["arms"][arm]
    return {
        "d_model": m["d_model"],
        "layers": m["layers"],
        "mlp_ratio": m.get("mlp_ratio", 4),
        "cell": spec["cell"],
        "cell_options": {**m.get("cell_options", {}), **cell_options_of(spec)},
        **{k: m[k] for k in ("embed_std", "tied_embeddings") if k in m},
    }
