"""Load, validate and scale-resolve the pipeline config.

`config.yaml` states the paper protocol; its `scale` key picks an entry of
`scales`, whose `set` and `multiply` maps rewrite dotted key paths (a `*`
segment matches every key at that level, e.g. every experiment). Validation is
a JSON schema plus semantic checks, so a bad config fails before any job runs
and names the offending key.

An experiment may declare a `grid`: one setting (``task.pairs``, ``train.lr``, ...) taking
each of a list of values. Every arm then runs at every value, as the *run arm*
``<arm>-<leaf><value>`` (e.g. ``delta-pairs16``); `run_arms`, `point_of` and the
``*_settings`` functions below are the one place that expansion is spelled out.
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


def dealias(config: dict[str, Any]) -> dict[str, Any]:
    """A copy in which no two keys share one object. YAML anchors (``*mqar_train``) load as
    one shared dict, and a scale rewrite of one experiment must not reach the others."""
    return json.loads(json.dumps(config))


def apply_scale(config: dict[str, Any]) -> dict[str, Any]:
    """Return an unaliased copy of ``config`` with its chosen scale's rewrites applied."""
    cfg = dealias(config)
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
    for key in spec.get("model", {}):
        if key not in MODEL_KEYS:
            raise ConfigError(f"{here}.model.{key}: not a model setting; known: {MODEL_KEYS}")
    model = {**exp["model"], **spec.get("model", {})}
    options = {**model.get("cell_options", {}), **cell_options_of(spec)}
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
    evaluator = task_class({**exp["task"], **spec.get("task", {})}["name"])
    takes = evaluator.eval_option_names()
    for key in spec:
        if key.startswith(EVAL_PREFIX) and key[len(EVAL_PREFIX) :] not in takes:
            raise ConfigError(
                f"{here}.{key}: task {evaluator.name!r} takes no evaluation option "
                f"{key[len(EVAL_PREFIX) :]!r}; it takes {sorted(takes)}"
            )


def _check_reference(where: str, ref: dict[str, str], cfg: dict[str, Any]) -> None:
    """A {experiment, arm} pointer names an experiment and one of its run arms."""
    exp = cfg["experiments"].get(ref["experiment"])
    if exp is None:
        raise ConfigError(
            f"{where}.experiment: {ref['experiment']!r} not one of {sorted(cfg['experiments'])}"
        )
    if ref["arm"] not in grid_points(exp):
        raise ConfigError(
            f"{where}.arm: {ref['arm']!r} is not a run arm of {ref['experiment']}; "
            f"known: {run_arms(exp)}"
        )


def _check_grid(where: str, exp: dict[str, Any]) -> None:
    """A grid key points into the task, model or train block, its values are distinct, and a
    tuned grid holds the block's own value (the shared default it is reported against)."""
    grid = exp["grid"]
    key, values = grid["key"], grid["values"]
    first = key.split(".")[0]
    if first not in BLOCKS or "." not in key:
        raise ConfigError(f"{where}.grid.key: {key!r} must name a setting inside one of {BLOCKS}")
    if len({json.dumps(v) for v in values}) != len(values):
        raise ConfigError(f"{where}.grid.values: {values} repeats a value")
    if grid.get("tune") and grid_default(exp) not in values:
        raise ConfigError(
            f"{where}.grid.values: a tuned grid must include the shared default "
            f"{key}={grid_default(exp)!r}"
        )


def _check_eval_block(where: str, exp: dict[str, Any]) -> None:
    """Every key of an eval block but `examples` is an option of the task's evaluator."""
    from arbench.tasks import task_class

    evaluator = task_class(exp["task"]["name"])
    takes = evaluator.eval_option_names()
    for key in exp["eval"]:
        if key != "examples" and key not in takes:
            raise ConfigError(
                f"{where}.eval.{key}: task {evaluator.name!r} takes no evaluation option "
                f"{key!r}; it takes {sorted(takes)}"
            )


def _check_signals(where: str, task: Any, train: dict[str, Any]) -> None:
    """A run arm's training-signal options (curriculum, dense) are well formed and honoured
    by its (built) task."""
    from arbench.train.loop import TrainConfig, check_signals

    try:
        check_signals(task, TrainConfig.from_dict(train))
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def semantic_checks(cfg: dict[str, Any]) -> None:
    """Checks a schema cannot express; raise ConfigError naming the key."""
    from arbench.tasks import build_task, task_class

    for name, exp in cfg["experiments"].items():
        where = f"experiments.{name}"
        if name in cfg.get("releases", {}) and task_class(exp["task"]["name"]).data == "stream":
            raise ConfigError(f"{where}: its held-out set would share release {name!r}'s folder")
        if exp.get("grid"):
            _check_grid(where, exp)
        _check_eval_block(where, exp)
        points = grid_points(exp)
        for run_arm, (_, value) in points.items():
            at = "" if value is None else f" (grid {exp['grid']['key']}={value_label(value)})"
            try:
                task = build_task(task_settings(exp, run_arm))
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{where}.task{at}: {e}") from e
            tr = train_settings(exp, run_arm)
            if tr["warmup"] >= tr["steps"]:
                raise ConfigError(
                    f"{where}.train.warmup={tr['warmup']} must be < steps={tr['steps']}{at}"
                )
            _check_signals(f"{where} (run arm {run_arm})", task, tr)
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


def skip_unavailable(cfg: dict[str, Any]) -> None:
    """Drop, in place, every arm whose cell cannot run here (an optional package is missing)
    and every contrast that names one, recording each with its reason under the experiment's
    ``skipped`` key, so its table can say what was not run and why."""
    from arbench.cells import CELLS

    for name, exp in cfg["experiments"].items():
        skipped: dict[str, str] = {}
        for arm, spec in list(exp["arms"].items()):
            reason = CELLS[spec["cell"]].unavailable_reason()
            if reason:
                skipped[arm] = reason
                del exp["arms"][arm]
        if not skipped:
            continue
        if not exp["arms"]:
            raise ConfigError(f"experiments.{name}.arms: none can run here: {skipped}")
        exp["skipped"] = {
            "arms": skipped,
            "contrasts": [
                c for c in exp.get("contrasts", []) if c["a"] in skipped or c["b"] in skipped
            ],
        }
        dropped = exp["skipped"]["contrasts"]
        exp["contrasts"] = [c for c in exp.get("contrasts", []) if c not in dropped]


def validate(cfg: dict[str, Any]) -> None:
    """Schema-validate a raw config, naming the failing key path and allowed values."""
    schema = json.loads(SCHEMA.read_text())
    err = _schema_error(list(jsonschema.Draft202012Validator(schema).iter_errors(cfg)))
    if err:
        raise err


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the raw config, apply its scale, and check the result."""
    config = dealias(config)
    validate(config)
    cfg = apply_scale(config)
    validate(cfg)
    for name, block in cfg.get("releases", {}).items():
        _check_release(name, block)
    merge_releases(cfg)
    semantic_checks(cfg)
    skip_unavailable(cfg)
    return cfg


def load(path: str | Path = ROOT / "config.yaml", **overrides: Any) -> dict[str, Any]:
    """Read a YAML config, apply top-level overrides (e.g. scale) and resolve it."""
    raw = yaml.safe_load(Path(path).read_text())
    raw.update(overrides)
    return resolve(raw)


EVAL_PREFIX = "eval_"  # an arm's keys with this prefix are options of the task's evaluator
# The settings blocks of an experiment: a grid key points into one of them, and an arm may
# change settings of each (``train: {curriculum: ...}``, ``task: {layout: shifting}``,
# ``model: {layers: 1}``), each key replacing the experiment block's own.
BLOCKS = ("task", "model", "train")
MODEL_KEYS = ("d_model", "layers", "mlp_ratio", "cell_options", "embed_std", "tied_embeddings")


def value_label(value: Any) -> str:
    """A grid value as it appears in a run arm's name: 16, 0.006, 1e-05."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_label(exp: dict[str, Any], value: Any) -> str:
    """A grid value as it names a run arm or a dataset: the key's leaf and the value
    (``pairs16``, ``lr0.006``)."""
    return f"{exp['grid']['key'].split('.')[-1]}{value_label(value)}"


def run_arm_name(exp: dict[str, Any], arm: str, value: Any) -> str:
    """The run arm of ``arm`` at grid value ``value``: ``<arm>-<leaf><value>``, or the arm
    itself without a grid (value None)."""
    return arm if value is None else f"{arm}-{point_label(exp, value)}"


def grid_points(exp: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Every run arm of an experiment (arm-major, in config order) -> (its arm, its grid
    value); without a grid each arm is its own run arm, at value None."""
    values = exp["grid"]["values"] if exp.get("grid") else [None]
    return {run_arm_name(exp, arm, v): (arm, v) for arm in exp["arms"] for v in values}


def run_arms(exp: dict[str, Any]) -> list[str]:
    """The run arms of an experiment: one per (arm, grid value)."""
    return list(grid_points(exp))


def point_of(exp: dict[str, Any], run_arm: str) -> tuple[str, Any]:
    """(arm, grid value) of a run arm; a KeyError names the known run arms."""
    points = grid_points(exp)
    if run_arm not in points:
        raise KeyError(f"{run_arm!r} is not a run arm; known: {sorted(points)}")
    return points[run_arm]


def grid_default(exp: dict[str, Any]) -> Any:
    """The value the experiment's own block gives the grid key (the shared default)."""
    path = exp["grid"]["key"].split(".")
    node: Any = exp
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def settings_block(exp: dict[str, Any], block: str, run_arm: str) -> dict[str, Any]:
    """The experiment's ``block`` ("task", "model" or "train") as one run arm sees it: the
    arm's own settings for the block (`BLOCKS`) over the experiment's, then the grid key,
    where it points into this block, set to the run arm's value."""
    arm, value = point_of(exp, run_arm)
    out = copy.deepcopy({**exp[block], **exp["arms"][arm].get(block, {})})
    grid = exp.get("grid")
    if grid is not None:
        first, *middle, leaf = grid["key"].split(".")
        if first == block:
            node = out
            for part in middle:
                node = node.setdefault(part, {})
            node[leaf] = value
    return out


def task_settings(exp: dict[str, Any], run_arm: str) -> dict[str, Any]:
    """The task block a run arm trains and is evaluated on."""
    return settings_block(exp, "task", run_arm)


def train_settings(exp: dict[str, Any], run_arm: str) -> dict[str, Any]:
    """The train block a run arm trains with."""
    return settings_block(exp, "train", run_arm)


def cell_options_of(spec: dict[str, Any]) -> dict[str, Any]:
    """An arm's cell options: its keys other than ``cell``, the ``eval_`` ones and its
    block overrides (`BLOCKS`)."""
    return {
        k: v
        for k, v in spec.items()
        if k != "cell" and k not in BLOCKS and not k.startswith(EVAL_PREFIX)
    }


def eval_options(exp: dict[str, Any], run_arm: str) -> dict[str, Any]:
    """A run arm's evaluation options: the experiment's eval block (its `examples` aside)
    under the arm's keys prefixed `eval_` (prefix removed)."""
    spec = exp["arms"][point_of(exp, run_arm)[0]]
    shared = {k: v for k, v in exp["eval"].items() if k != "examples"}
    own = {k[len(EVAL_PREFIX) :]: v for k, v in spec.items() if k.startswith(EVAL_PREFIX)}
    return {**shared, **own}


def model_settings(exp: dict[str, Any], run_arm: str) -> dict[str, Any]:
    """One run arm's model: the backbone from the experiment, the cell and its knobs from the
    arm (the `ModelConfig` fields but the vocabulary, which the task sets)."""
    m = settings_block(exp, "model", run_arm)
    spec = exp["arms"][point_of(exp, run_arm)[0]]
    return {
        "d_model": m["d_model"],
        "layers": m["layers"],
        "mlp_ratio": m.get("mlp_ratio", 4),
        "cell": spec["cell"],
        "cell_options": {**m.get("cell_options", {}), **cell_options_of(spec)},
        **{k: m[k] for k in ("embed_std", "tied_embeddings") if k in m},
    }
