"""Validate a scale-resolved config: a JSON schema, then the checks a schema cannot express
(every arm's cell builds, every option is declared and typed (`type_check`), grids,
references, warm starts), read off the run table's rows, so a bad config fails before any
job runs, in one line naming the key. A ``releases`` block's checks are `releases`'; the
rewrites that drop arms are `scales`'.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from arbench.config.errors import ConfigError
from arbench.config.paths import ROOT
from arbench.config.type_check import (
    NUMBER_FIX,
    check_type,
    describe,
    hint_ok,
    hints,
    numeric_string,
    option_hints,
)
from arbench.experiment import (
    BLOCKS,
    CELL_FAMILIES,
    EVAL_PREFIX,
    SEEDS_DEFAULT,
    WARM_START,
    Run,
    block_of,
    cell_options_of,
    family_of,
    grid_default,
    grid_settings,
    point_label,
    runs_of,
    value_label,
)

SCHEMA = ROOT / "schemas" / "config.schema.json"


def schema_error(errors: list[Any], prefix: str = "") -> ConfigError | None:
    """The first schema error as a ConfigError naming its key path (None if no errors)."""
    if not errors:
        return None
    e = sorted(errors, key=lambda e: (str(list(e.absolute_path)), e.message))[0]
    about = ""
    if e.validator in ("oneOf", "anyOf") and e.context:
        # "0 is not valid under any of the given schemas" says nothing: the failure inside
        # the alternative the value's type picks (0 < the minimum of 1), and what is allowed
        description = e.schema.get("description")
        about = f" ({description})" if description else ""
        e = jsonschema.exceptions.best_match([e])
    path = ".".join(str(p) for p in e.absolute_path)
    where = ".".join(x for x in (prefix, path) if x) or "<root>"
    message = e.message + about
    if e.validator == "additionalProperties" and isinstance(e.instance, dict):
        allowed = sorted(e.schema.get("properties", {}))
        unknown = sorted(set(e.instance) - set(allowed), key=str)
        if unknown:
            where = f"{where}.{unknown[0]}" if where != "<root>" else str(unknown[0])
            message = f"unknown key; allowed: {allowed}"
    elif e.validator in ("type", "oneOf", "anyOf") and numeric_string(e.instance):
        message = f"{message}: {NUMBER_FIX}"
    return ConfigError(f"config key {where}: {message}")


class _Rows:
    """The run table the checks read: each experiment's rows (`arbench.experiment.runs_of`),
    expanded once, when a check first asks for them (an experiment's own once its grid and
    seeds are checked; a warm start's base when a run names it)."""

    def __init__(self, experiments: dict[str, Any]) -> None:
        self.experiments = experiments
        self._rows: dict[str, list[Run]] = {}

    def of(self, name: str) -> list[Run]:
        """The rows of experiment ``name``, in config order."""
        if name not in self._rows:
            self._rows[name] = runs_of(name, self.experiments[name])
        return self._rows[name]


def _task_declaration(cls: type) -> type | None:
    """The dataclass whose fields are a task block's settings: `ConfigTask.config_class`, or
    a task's own `settings_class`; None when the task declares none."""
    declared = getattr(cls, "config_class", None) or getattr(cls, "settings_class", None)
    return declared if dataclasses.is_dataclass(declared) else None


def _task_of(where: str, settings: dict[str, Any]) -> type:
    """The task class a (merged) task block names, as a ConfigError naming the key."""
    from arbench.tasks import task_class

    try:
        return task_class(settings.get("name", ""))
    except KeyError as e:
        raise ConfigError(f"{where}.name: {e.args[0]}") from None


def _check_task_block(where: str, exp: dict[str, Any], arm: str) -> None:
    """Every key of the task block an arm trains on (the experiment's, under the arm's own
    `task:` keys) is a setting its task declares, with a value of the declared type; an
    error names the block the key came from."""
    own = exp["arms"][arm].get("task", {})
    merged = {**exp["task"], **own}
    origin = lambda key: f"{where}.arms.{arm}.task" if key in own else f"{where}.task"  # noqa: E731
    cls = _task_of(origin("name"), merged)
    declared = _task_declaration(cls)
    if declared is None:
        return
    hinted = hints(declared)
    allowed = sorted({f.name for f in dataclasses.fields(declared)} | {"name"})
    for key, value in merged.items():
        if key not in allowed:
            raise ConfigError(
                f"{origin(key)}.{key}: not a setting of task {cls.name!r}; allowed: {allowed}"
            )
        check_type(f"{origin(key)}.{key}", value, hinted.get(key), f"task {cls.name!r}")


def _check_eval_options(where: str, cls: type, options: dict[str, Any], prefix: str) -> None:
    """Every evaluation option (an eval block's keys but `examples`, or an arm's ``eval_``
    keys, given here without the prefix) is one task ``cls``'s evaluator takes, with a value
    of its declared type; ``where`` + ``prefix`` + the option is its key path."""
    takes = cls.eval_option_names()
    hinted = hints(cls.evaluate)
    for key, value in options.items():
        if key not in takes:
            raise ConfigError(
                f"{where}.{prefix}{key}: task {cls.name!r} takes no evaluation option "
                f"{key!r}; allowed: {sorted(takes)}"
            )
        owner = f"task {cls.name!r}'s evaluator"
        check_type(f"{where}.{prefix}{key}", value, hinted.get(key), owner, key)


_BUILT: dict[str, str | None] = {}  # a cell's settings (JSON) -> why building it failed, or None
# what a constructor raises on options it rejects (RuntimeError: torch on a bad shape)
_BUILD_ERRORS = (ValueError, TypeError, KeyError, AssertionError, ArithmeticError, RuntimeError)


def _build_error(settings: dict[str, Any]) -> str | None:
    """Why the cell of one run arm's model settings cannot be built, or None: its
    constructor's own checks (d_model divisible by heads, decay one of its values, ...)
    run here, before any job, instead of at training time. Cached per distinct settings."""
    from arbench.cells import build_cell

    key = json.dumps(settings, sort_keys=True, default=str)
    if key not in _BUILT:
        import torch

        try:
            with torch.random.fork_rng(devices=[]):  # the caller's RNG state is untouched
                build_cell(settings["cell"], settings["d_model"], **settings["cell_options"])
            _BUILT[key] = None
        except _BUILD_ERRORS as e:
            _BUILT[key] = f"{type(e).__name__}: {e}"
    return _BUILT[key]


def _check_family_arm(where: str, exp: dict[str, Any], arm: str, rows: list[Run]) -> None:
    """An arm of another model family than ``lm``: no cell, and every key of its model (the
    block's and the arm's own) is a field of the family's model configuration, which must
    accept them at every run arm."""
    from arbench.models import families

    here = f"{where}.arms.{arm}"
    family = family_of(exp, arm)
    spec = exp["arms"][arm]
    if "cell" in spec:
        raise ConfigError(f"{here}.cell: a model of family {family!r} takes no cell")
    fields = families.fields_of(family)
    for run in rows:
        if run.arm != arm:
            continue
        run_arm, settings = run.name, run.model
        for key in settings:
            if key not in fields:
                origin = here if key in spec else f"{where}.model"
                raise ConfigError(
                    f"{origin}.{key}: not a setting of model family {family!r}; "
                    f"allowed: {sorted(fields)}"
                )
        try:
            families.model_config(settings, vocab_size=2).validate()
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{here} (run arm {run_arm}): {e}") from None


def _check_cell_family(where: str, exp: dict[str, Any], arm: str, rows: list[Run]) -> None:
    """An arm of a cell family other than ``lm`` (the denoiser): every key of its model is a
    field of the family's configuration, which must accept them at every run arm."""
    from arbench.models import families

    here = f"{where}.arms.{arm}"
    family = family_of(exp, arm)
    fields = families.fields_of(family)
    spec = exp["arms"][arm]
    for run in rows:
        if run.arm != arm:
            continue
        for key in run.model:
            if key not in fields | {"family"}:
                origin = here if key in spec.get("model", {}) else f"{where}.model"
                raise ConfigError(
                    f"{origin}.{key}: not a setting of model family {family!r}; "
                    f"allowed: {sorted(fields)} (the experiment's recipe is "
                    f"{exp.get('recipe')!r}; recipe: causal keeps a causal model block)"
                )
        try:  # the task sets the vocabulary and the positions; any stand-in checks the rest
            families.model_config(run.model, vocab_size=2, positions=1).validate()
        except (ValueError, TypeError) as e:
            raise ConfigError(f"{here} (run arm {run.name}): {e}") from None


def _check_arm(where: str, exp: dict[str, Any], arm: str, rows: list[Run]) -> None:
    """An arm names a registered cell; every option is one that cell's constructor declares,
    of its declared type; the cell builds with it at every run arm's model settings; and
    every ``eval_`` option is one the task's evaluator takes. An arm of another model family
    names that family's fields instead (`_check_family_arm`)."""
    from arbench.cells import CELLS

    spec = exp["arms"][arm]
    here = f"{where}.arms.{arm}"
    family = family_of(exp, arm)
    if family not in CELL_FAMILIES:
        _check_family_arm(where, exp, arm, rows)
        _check_eval(here, where, exp, spec)
        return
    if "cell" not in spec:
        raise ConfigError(
            f"{here}.cell: missing; every arm of a family-{family} model names a cell"
        )
    if family != "lm":
        _check_cell_family(where, exp, arm, rows)
    cell = spec["cell"]
    if cell not in CELLS:
        raise ConfigError(f"{here}.cell: {cell!r} not one of {sorted(CELLS)}")
    model = {**exp["model"], **spec.get("model", {})}
    options = {**model.get("cell_options", {}), **cell_options_of(spec)}
    try:
        accepted = CELLS[cell].option_names(options)
    except KeyError as e:  # a wrapper naming an unknown inner cell
        raise ConfigError(f"{here}: {e.args[0]}") from None
    hinted = option_hints(CELLS[cell])
    arm_model_options = spec.get("model", {}).get("cell_options", {})
    for key, value in options.items():
        origin = here if key in spec else f"{where}.model.cell_options"
        if key not in spec and key in arm_model_options:
            origin = f"{here}.model.cell_options"
        if key not in accepted:
            raise ConfigError(
                f"{origin}.{key}: not an option of cell {cell!r}; allowed: {sorted(accepted)}"
            )
        check_type(f"{origin}.{key}", value, hinted.get(key), f"cell {cell!r}")
    if CELLS[cell].unavailable_reason() is None:  # an unavailable cell is skipped, not built
        for run in rows:
            if run.arm != arm:
                continue
            run_arm, value, settings = run.name, run.value, run.model
            error = _build_error(settings)
            if error:
                gridded = value is not None and exp["grid"]["key"].startswith("model.")
                at = f" (run arm {run_arm})" if gridded else ""
                shown = ", ".join(f"{k}={v!r}" for k, v in settings["cell_options"].items())
                raise ConfigError(
                    f"{here}: cell {cell!r} rejects d_model={settings['d_model']}, "
                    f"{shown}{at}: {error}"
                )
    _check_eval(here, where, exp, spec)


def _check_eval(here: str, where: str, exp: dict[str, Any], spec: dict[str, Any]) -> None:
    """Every ``eval_`` option of an arm and every option of the eval block is one the task's
    evaluator takes."""
    evaluator = _task_of(f"{here}.task", {**exp["task"], **spec.get("task", {})})
    own_eval = {k[len(EVAL_PREFIX) :]: v for k, v in spec.items() if k.startswith(EVAL_PREFIX)}
    _check_eval_options(here, evaluator, own_eval, EVAL_PREFIX)
    shared = {k: v for k, v in exp["eval"].items() if k != "examples"}
    _check_eval_options(f"{where}.eval", evaluator, shared, "")


def _check_reference(where: str, ref: dict[str, str], table: _Rows) -> None:
    """A {experiment, arm} pointer names an experiment and one of its run arms."""
    if ref["experiment"] not in table.experiments:
        raise ConfigError(
            f"{where}.experiment: {ref['experiment']!r} not one of {sorted(table.experiments)}"
        )
    names = [run.name for run in table.of(ref["experiment"])]
    if ref["arm"] not in names:
        raise ConfigError(
            f"{where}.arm: {ref['arm']!r} is not a run arm of {ref['experiment']}; known: {names}"
        )


def _check_grid(where: str, exp: dict[str, Any]) -> None:
    """A grid key points into the task, model or train block, its values are distinct, and a
    tuned grid holds the block's own value (the shared default it is reported against)."""
    grid = exp["grid"]
    key, values = grid["key"], grid["values"]
    first, *rest = key.split(".")
    if first not in BLOCKS or not rest:
        raise ConfigError(f"{where}.grid.key: {key!r} must name a setting inside one of {BLOCKS}")
    allowed = _block_keys(where, exp, first)
    if rest[0] not in allowed:
        raise ConfigError(
            f"{where}.grid.key: {key!r} names no {first} setting; allowed: "
            f"{sorted(f'{first}.{k}' for k in allowed)}"
        )
    if first == "model" and rest[0] == "cell_options" and len(rest) == 2:
        for arm, spec in exp["arms"].items():
            if rest[1] in cell_options_of(spec):
                raise ConfigError(
                    f"{where}.grid.key: {key!r} is set by arm {arm!r} itself "
                    f"({rest[1]}={spec[rest[1]]!r}), which would override every grid value"
                )
    if len({json.dumps(v) for v in values}) != len(values):
        raise ConfigError(f"{where}.grid.values: {values} repeats a value")
    if grid.get("tune") and grid_default(exp) not in values:
        raise ConfigError(
            f"{where}.grid.values: a tuned grid must include the shared default "
            f"{key}={grid_default(exp)!r}"
        )
    for other, settings in (grid.get("with") or {}).items():
        at = f"{where}.grid.with.{other}"
        head, *tail = other.split(".")
        if head not in BLOCKS or not tail:
            raise ConfigError(f"{at}: must name a setting inside one of {BLOCKS}")
        if tail[0] not in _block_keys(where, exp, head):
            raise ConfigError(f"{at}: names no {head} setting")
        if other == key:
            raise ConfigError(f"{at}: is the grid key itself")
        if len(settings) != len(values):
            raise ConfigError(
                f"{at}: {len(settings)} settings for {len(values)} grid values {values} "
                "(one per value, in the same order; a scale that cuts the values cuts these too)"
            )
    for arm, subset in (grid.get("arms") or {}).items():
        at = f"{where}.grid.arms.{arm}"
        if arm not in exp["arms"]:
            raise ConfigError(f"{at}: not an arm of the experiment; arms: {sorted(exp['arms'])}")
        stray = [v for v in subset if v not in values]
        if stray:
            raise ConfigError(
                f"{at}: {stray} not among the grid's values {values} (a scale that cuts the "
                "values cuts these too)"
            )


def _block_keys(where: str, exp: dict[str, Any], block: str) -> set[str]:
    """The settings a block of ``exp`` may hold: the schema's train and model keys, the
    experiment's task's declared settings (every key, when it declares none)."""
    if block == "task":
        declared = _task_declaration(_task_of(f"{where}.task", exp["task"]))
        if declared is None:
            return set(exp["task"])
        return {f.name for f in dataclasses.fields(declared)}
    return set(_schema()["$defs"][block]["properties"])


def _check_run_blocks(
    where: str, exp: dict[str, Any], validators: dict[str, Any], rows: list[Run]
) -> None:
    """Each run arm's merged train and model blocks fit the schema, and its task block the
    task's declared types. The blocks themselves were validated as written, so what fails here
    is a grid value, reported as such."""
    grid = exp.get("grid")
    if grid is None:
        return
    for run in rows:
        run_arm, value = run.name, run.value
        for key, setting in grid_settings(grid, value):
            first, *rest = key.split(".")
            name = "values" if key == grid["key"] else f"with.{key}"
            bad = f"{where}.grid.{name}: {setting!r} for {key}"
            block = block_of(exp, first, run.arm, value)
            if first == "task":
                declared = _task_declaration(_task_of(f"{where}.task", block))
                if declared is not None and len(rest) == 1:
                    hint = hints(declared).get(rest[0])
                    if hint is not None and not hint_ok(setting, hint):
                        raise ConfigError(f"{bad}: not allowed; the task takes {describe(hint)}")
                continue
            errors = list(validators[first].iter_errors(block))
            if errors:
                e = sorted(errors, key=lambda e: e.message)[0]
                number = e.validator == "type" and numeric_string(setting)
                fix = f" ({NUMBER_FIX})" if number else ""
                raise ConfigError(f"{bad} (run arm {run_arm}): {e.message}{fix}")


def _check_signals(where: str, task: Any, train: dict[str, Any]) -> None:
    """A run arm's training-signal options (curriculum, dense) are well formed and honoured
    by its (built) task."""
    from arbench.train.settings import TrainConfig, check_signals

    try:
        check_signals(task, TrainConfig.from_dict(train))
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _check_spread(where: str, task: Any, train: dict[str, Any], spec: dict[str, Any]) -> None:
    """A run arm's address-spread regulariser (train.spread) applies: its task marks its keys
    and its cell is a lattice layer (`arbench.train.spread.check_spread`)."""
    from arbench.train.spread import SpreadConfig, check_spread

    if train.get("spread") is None:
        return
    try:
        check_spread(task, SpreadConfig.from_dict(train["spread"]), spec.get("cell"))
    except (ValueError, TypeError) as e:
        raise ConfigError(f"{where}: {e}") from None


def _check_seeds(where: str, exp: dict[str, Any]) -> None:
    """A per-arm ``seeds`` mapping names arms of the experiment (or ``default``) and gives
    every arm a count: one it names, or the default."""
    seeds = exp["seeds"]
    if not isinstance(seeds, dict):
        return
    for key in seeds:
        if key != SEEDS_DEFAULT and key not in exp["arms"]:
            raise ConfigError(
                f"{where}.seeds.{key}: not an arm of the experiment (nor {SEEDS_DEFAULT!r}); "
                f"arms: {sorted(exp['arms'])}"
            )
    if SEEDS_DEFAULT in exp["arms"]:
        raise ConfigError(
            f"{where}.arms.{SEEDS_DEFAULT}: the name is reserved for the seeds mapping's default"
        )
    missing = [arm for arm in exp["arms"] if arm not in seeds]
    if missing and SEEDS_DEFAULT not in seeds:
        raise ConfigError(
            f"{where}.seeds: no count for arm {missing[0]!r}; name it or give {SEEDS_DEFAULT!r}"
        )


def _check_warm_start(where: str, run: Run, table: _Rows) -> None:
    """A warm-started run arm (``train.warm_start``) names an experiment and one of its run
    arms that trains the same model on a smaller vocabulary of keys and as many values, with
    at least as many seeds (each seed continues the base's same seed): one line naming the
    key, before any job."""
    from arbench.tasks import build_task

    warm = run.train.get(WARM_START)
    if not warm:
        return
    key = f"{where} (run arm {run.name}).train.{WARM_START}"
    experiments = table.experiments
    if warm["experiment"] not in experiments:
        raise ConfigError(
            f"{key}.experiment: {warm['experiment']!r} is not an experiment; "
            f"known: {sorted(experiments)}"
        )
    if warm["experiment"] == run.experiment:
        raise ConfigError(f"{key}.experiment: a run cannot warm-start from its own experiment")
    rows = {r.name: r for r in table.of(warm["experiment"])}
    if warm["arm"] not in rows:
        raise ConfigError(
            f"{key}.arm: {warm['arm']!r} is not a run arm of {warm['experiment']}; "
            f"known: {sorted(rows)}"
        )
    base = rows[warm["arm"]]
    if base.model != run.model:
        diff = {k for k in {*base.model, *run.model} if base.model.get(k) != run.model.get(k)}
        raise ConfigError(
            f"{key}: the base {base.experiment}/{base.name} has another model shape "
            f"(differs in {sorted(diff)}); a warm start only grows the vocabulary"
        )
    ours, theirs = build_task(run.task), build_task(base.task)
    for task in (ours, theirs):
        cfg_ = getattr(task, "cfg", None)
        if getattr(cfg_, "n_keys", None) != getattr(cfg_, "n_values", None):
            raise ConfigError(
                f"{key}: the vocabulary extension grows keys and values together; "
                f"{task.name} has n_keys={cfg_.n_keys}, n_values={cfg_.n_values}"
            )
    if theirs.vocab_size >= ours.vocab_size or theirs.vocab_size % 2 or ours.vocab_size % 2:
        raise ConfigError(
            f"{key}: the base {base.experiment}/{base.name} has vocabulary "
            f"{theirs.vocab_size}, not smaller than this run's {ours.vocab_size} (both "
            "2 keys + 2 ids)"
        )
    if base.seeds < run.seeds:
        raise ConfigError(
            f"{key}: the base {base.experiment}/{base.name} trains {base.seeds} seed(s), "
            f"fewer than this run's {run.seeds}"
        )


def _check_source_results(where: str, exp: dict[str, Any], rows: list[Run]) -> None:
    """An experiment's ``reference`` names a file that exists, reads strictly and holds only
    valid scores (`arbench.references.check_reference`), and a set of it that shares at
    least one arm or run arm name with the experiment (what its table puts side by side); sets
    placed at grid values (``set: [{set, at}]``) each at a label of one of the grid's values;
    ``rows`` are the experiment's."""
    from arbench.references import ReferenceFileError, load_reference

    ref = exp.get("reference")
    if not ref:
        return
    path = Path(ref["file"])
    path = path if path.is_absolute() else ROOT / path
    if not path.is_file():
        raise ConfigError(f"{where}.reference.file: no file {ref['file']!r}")
    if isinstance(ref["set"], list):  # each set placed at one of the grid's values, or none
        labels = [point_label(exp, v) for v in exp["grid"]["values"]] if exp.get("grid") else []
        for i, place in enumerate(ref["set"]):
            at = place.get("at")
            if at is not None and at not in labels:
                raise ConfigError(
                    f"{where}.reference.set[{i}].at: {at!r} is no grid value's label "
                    f"(the grid's: {labels})"
                )
    try:
        entry = load_reference(path, ref["set"])
    except KeyError as e:
        raise ConfigError(f"{where}.reference.set: {e.args[0]}") from None
    except ReferenceFileError as e:
        raise ConfigError(f"{where}.reference.file: {e}") from None
    if not set(entry.get("arms") or {}) & {*exp["arms"], *(r.name for r in rows)}:
        raise ConfigError(
            f"{where}.reference.set: {ref['set']!r} has none of the experiment's arms "
            f"(it has {sorted(entry.get('arms') or {})})"
        )


def semantic_checks(cfg: dict[str, Any]) -> None:
    """Checks a schema cannot express; raise ConfigError naming the key. Every check that
    reads run arms reads one table's rows (`_Rows`), never its own expansion."""
    from arbench.tasks import build_task, task_class

    defs = _schema()["$defs"]
    validators = {b: jsonschema.Draft202012Validator(defs[b]) for b in ("model", "train")}
    table = _Rows(cfg["experiments"])
    for name, exp in cfg["experiments"].items():
        where = f"experiments.{name}"
        if name in cfg.get("releases", {}) and task_class(exp["task"]["name"]).data == "stream":
            raise ConfigError(f"{where}: its held-out set would share release {name!r}'s folder")
        for arm in exp["arms"]:
            _check_task_block(where, exp, arm)
        if exp.get("grid"):  # before anything expands its rows
            _check_grid(where, exp)
        _check_seeds(where, exp)
        rows = table.of(name)  # every check below reads these
        _check_source_results(where, exp, rows)
        if exp.get("grid"):
            _check_run_blocks(where, exp, validators, rows)
        for run in rows:
            value = run.value
            at = "" if value is None else f" (grid {exp['grid']['key']}={value_label(value)})"
            try:
                task = build_task(run.task)
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"{where}.task{at}: {e}") from e
            tr = run.train
            if tr["warmup"] >= tr["steps"]:
                raise ConfigError(
                    f"{where}.train.warmup={tr['warmup']} must be < steps={tr['steps']}{at}"
                )
            _check_signals(f"{where} (run arm {run.name})", task, tr)
            _check_spread(f"{where} (run arm {run.name})", task, tr, run.spec)
            _check_warm_start(where, run, table)
        for arm in exp["arms"]:
            _check_arm(where, exp, arm, rows)
        for i, c in enumerate(exp.get("contrasts", [])):
            for side in ("a", "b"):
                if c[side] not in exp["arms"]:
                    raise ConfigError(
                        f"{where}.contrasts[{i}].{side}: {c[side]!r} is not an arm of {name}"
                    )
    _check_reference("zoo.reference", cfg["zoo"]["reference"], table)
    _check_reference("bench.stream", cfg["bench"]["stream"], table)
    _check_resources(cfg)


def _check_resources(cfg: dict[str, Any]) -> None:
    """``resources:`` at every scale (`arbench.resources.check_config`)."""
    from arbench.resources import ResourceError, check_config

    try:
        check_config(cfg)
    except ResourceError as e:
        raise ConfigError(str(e)) from None


@functools.cache
def _schema() -> dict[str, Any]:
    """The config's JSON schema (read once; never mutate it)."""
    return json.loads(SCHEMA.read_text())


def validate_recipes(cfg: dict[str, Any]) -> None:
    """The ``recipe`` and ``recipes`` keys of a raw config, checked before any experiment is
    merged over a preset (`arbench.config.recipes.expand`): a preset's bad key or value fails
    naming ``recipes.<name>.<block>.<key>``, not the first experiment that runs under it."""
    from arbench.config.recipes import check_names

    check_names(cfg)
    root = _schema()
    keys = ("recipe", "recipes")
    schema = {
        "$defs": root["$defs"],
        "type": "object",
        "properties": {k: root["properties"][k] for k in keys},
    }
    part = {k: cfg[k] for k in keys if k in cfg}
    err = schema_error(list(jsonschema.Draft202012Validator(schema).iter_errors(part)))
    if err:
        raise err


def validate(cfg: dict[str, Any]) -> None:
    """Schema-validate a raw config, naming the failing key path and allowed values."""
    err = schema_error(list(jsonschema.Draft202012Validator(_schema()).iter_errors(cfg)))
    if err:
        raise err
