"""The experiment grammar, expanded once into a run table.

An experiment block names arms, and may declare a ``grid`` (one setting taking each of a list
of values) and per-arm overrides of its ``task``, ``model`` and ``train`` blocks; a frontier
declaration becomes arms before this (`arbench.frontier_arms`), a scale's rewrites before that
(`arbench.config.scales`). This module is the one place where that grammar becomes runs:

* a **run arm** is one (arm, grid value): ``<arm>-<leaf><value>`` (``delta-pairs16``), or the
  arm itself without a grid. `runs_of` gives an experiment's run arms as `Run` rows, each with
  its resolved task, model, train and evaluation settings. Two grid options shape the rows:
  ``with`` gives other settings one value per grid value (``with: {train.steps: [3000, 4000,
  6000]}`` beside ``values: [8, 16, 32]``: the paper's steps grow with K), set like the grid key
  itself; ``arms`` runs the arms it names at a subset of the values only (``arms: {armed_gdn:
  [1.0e-3, 3.0e-3]}``: the paper swept some arms over fewer rates), every other arm at all;
* the **run table** (`RunTable`) holds every row of a config, with the two things decided
  across experiments: the stream **dataset** a row reads (one per distinct task block of an
  experiment: its name, ``-<arm>`` for an arm that changes the task, ``-<leaf><value>`` per
  value of a grid over a task setting) and the **owner** of each of its seeds' runs (a run is
  identified by its task, model and train blocks and its seed, so the first identical row in
  config order trains it and every later one evaluates that run).

The workflow's plan (`arbench.plan`), the validation (`arbench.config.validation`) and the
reports read rows; none of them re-derives a run arm.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

EVAL_PREFIX = "eval_"  # an arm's keys with this prefix are options of the task's evaluator
# The settings blocks of an experiment: a grid key points into one of them, and an arm may
# change settings of each (``train: {curriculum: ...}``, ``task: {layout: shifting}``,
# ``model: {layers: 1}``), each key replacing the experiment block's own.
BLOCKS = ("task", "model", "train")
SEEDS_DEFAULT = "default"  # the key of a per-arm ``seeds`` mapping that every other arm takes


def value_label(value: Any) -> str:
    """A grid value as it appears in a run arm's name: 16, 0.006, 1e-05."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def point_label(exp: Mapping[str, Any], value: Any) -> str:
    """A grid value as it names a run arm or a dataset: the key's leaf and the value
    (``pairs16``, ``lr0.006``)."""
    return f"{exp['grid']['key'].split('.')[-1]}{value_label(value)}"


def run_arm_name(exp: Mapping[str, Any], arm: str, value: Any) -> str:
    """The run arm of ``arm`` at grid value ``value``: ``<arm>-<leaf><value>``, or the arm
    itself without a grid (value None)."""
    return arm if value is None else labelled_run_arm(arm, point_label(exp, value))


def labelled_run_arm(arm: str, label: str | None) -> str:
    """The run arm of ``arm`` at the grid point labelled ``label`` (``pairs8``, ``lr0.003``),
    or the arm itself for no label: the one place the run-arm naming rule is spelled."""
    return f"{arm}-{label}" if label else arm


def grid_values(exp: Mapping[str, Any], arm: str | None = None) -> list[Any]:
    """The grid's values, or ``[None]`` for an experiment without a grid; for ``arm``, the
    values it runs at (the grid's ``arms`` may name a subset, in the grid's order)."""
    if not exp.get("grid"):
        return [None]
    values = list(exp["grid"]["values"])
    subset = (exp["grid"].get("arms") or {}).get(arm) if arm is not None else None
    return values if subset is None else [v for v in values if v in subset]


def grid_settings(grid: Mapping[str, Any], value: Any) -> list[tuple[str, Any]]:
    """The settings one grid value gives a run arm, as (dotted key, value): the grid key's,
    then each ``with`` key's entry at the same position as ``value`` in the grid's values."""
    at = list(grid["values"]).index(value)
    return [(grid["key"], value)] + [(k, vs[at]) for k, vs in (grid.get("with") or {}).items()]


def restrict_grid(grid: Mapping[str, Any], keep: Any) -> dict[str, Any]:
    """A copy of ``grid`` with only the values ``keep(value)`` accepts, its ``with`` lists and
    ``arms`` subsets cut alike (an arm left with no value keeps an empty list)."""
    kept = [i for i, v in enumerate(grid["values"]) if keep(v)]
    out = copy.deepcopy(dict(grid))
    out["values"] = [grid["values"][i] for i in kept]
    if grid.get("with"):
        out["with"] = {k: [vs[i] for i in kept] for k, vs in grid["with"].items()}
    if grid.get("arms"):
        out["arms"] = {a: [v for v in vs if v in out["values"]] for a, vs in grid["arms"].items()}
    return out


def grid_default(exp: Mapping[str, Any]) -> Any:
    """The value the experiment's own block gives the grid key (the shared default)."""
    node: Any = exp
    for part in exp["grid"]["key"].split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def cell_options_of(spec: Mapping[str, Any]) -> dict[str, Any]:
    """An arm's cell options: its keys other than ``cell``, the ``eval_`` ones and its
    block overrides (`BLOCKS`)."""
    return {
        k: v
        for k, v in spec.items()
        if k != "cell" and k not in BLOCKS and not k.startswith(EVAL_PREFIX)
    }


# the model families whose arms name a cell and its options (`arbench.models.families`): the
# causal LM and the paper's bidirectional denoiser; another family's arms name its own fields
CELL_FAMILIES = ("lm", "denoiser")


def family_of(exp: Mapping[str, Any], arm: str) -> str:
    """The model family an arm builds (`arbench.models.families`): its model block's
    ``family`` over the experiment's, ``lm`` when neither names one."""
    return {**exp["model"], **exp["arms"][arm].get("model", {})}.get("family", "lm")


def _block(exp: Mapping[str, Any], block: str, arm: str, value: Any) -> dict[str, Any]:
    """The experiment's ``block`` as one run arm sees it: the arm's own settings for the block
    over the experiment's, then the grid key and each of the grid's ``with`` keys, where they
    point into this block, set to the run arm's value (`grid_settings`)."""
    out = copy.deepcopy({**exp[block], **exp["arms"][arm].get(block, {})})
    grid = exp.get("grid")
    if grid is not None:
        for key, setting in grid_settings(grid, value):
            first, *middle, leaf = key.split(".")
            if first == block:
                node = out
                for part in middle:
                    node = node.setdefault(part, {})
                node[leaf] = setting
    return out


def _model(exp: Mapping[str, Any], arm: str, value: Any) -> dict[str, Any]:
    """One run arm's model: the backbone from the experiment, the cell and its knobs from the
    arm (the `ModelConfig` fields but the vocabulary, which the task sets); another family's
    model is its configuration's fields, the block's then the arm's."""
    m = _block(exp, "model", arm, value)
    spec = exp["arms"][arm]
    family = m.get("family", "lm")
    if family not in CELL_FAMILIES:
        return {**m, **cell_options_of(spec)}
    if family != "lm":  # a cell family's own fields, then the cell and its knobs
        return {
            **{k: v for k, v in m.items() if k != "cell_options"},
            "cell": spec.get("cell"),
            "cell_options": {**m.get("cell_options", {}), **cell_options_of(spec)},
        }
    return {
        "d_model": m["d_model"],
        "layers": m["layers"],
        "mlp_ratio": m.get("mlp_ratio", 4),
        "cell": spec.get("cell"),  # validation names an arm without one
        "cell_options": {**m.get("cell_options", {}), **cell_options_of(spec)},
        **{k: m[k] for k in ("embed_std", "tied_embeddings") if k in m},
    }


def _eval_options(exp: Mapping[str, Any], arm: str) -> dict[str, Any]:
    """A run arm's evaluation options: the experiment's eval block (its `examples` aside)
    under the arm's keys prefixed `eval_` (prefix removed)."""
    spec = exp["arms"][arm]
    shared = {k: v for k, v in exp["eval"].items() if k != "examples"}
    own = {k[len(EVAL_PREFIX) :]: v for k, v in spec.items() if k.startswith(EVAL_PREFIX)}
    return {**shared, **own}


@dataclass(frozen=True)
class Run:
    """One run arm of an experiment, resolved: what it trains on, with, and is scored by."""

    experiment: str
    name: str  # the run arm: <arm>-<leaf><value>, or the arm
    arm: str
    value: Any  # its grid value (None without a grid)
    spec: Mapping[str, Any] = field(repr=False)  # the arm as the config writes it
    task: dict[str, Any] = field(repr=False)
    model: dict[str, Any] = field(repr=False)
    train: dict[str, Any] = field(repr=False)
    eval_options: dict[str, Any] = field(repr=False)
    examples: int = 0  # held-out examples
    seeds: int = 1

    @property
    def identity(self) -> str:
        """What a trained run is identified by, besides its seed (the shared-run key)."""
        return json.dumps([self.task, self.model, self.train], sort_keys=True)


WARM_START = "warm_start"  # the train-block key of a run continued from another run's model


def _train(exp: Mapping[str, Any], arm: str, value: Any) -> dict[str, Any]:
    """One run arm's train block. A ``warm_start`` in it (the run starts from another run's
    trained model, its vocabulary grown: `arbench.models.vocab_extension`) names the base
    ``experiment`` and ``arm``; without an ``arm`` it is the run's own arm, so one experiment
    block can warm-start every arm from the same-named arm of its base. ``warm_start: null``
    (an arm's own) trains from scratch and is dropped from the block."""
    out = _block(exp, "train", arm, value)
    if WARM_START in out and out[WARM_START] is None:
        del out[WARM_START]
    elif WARM_START in out:
        out[WARM_START] = {"arm": arm, **out[WARM_START]}
    return out


def runs_of(name: str, exp: Mapping[str, Any]) -> list[Run]:
    """Every run arm of one experiment (arm-major, in config order) as a row: each arm at each
    grid value it runs at (`grid_values`)."""
    return [
        Run(
            experiment=name,
            name=run_arm_name(exp, arm, value),
            arm=arm,
            value=value,
            spec=exp["arms"][arm],
            task=_block(exp, "task", arm, value),
            model=_model(exp, arm, value),
            train=_train(exp, arm, value),
            eval_options=_eval_options(exp, arm),
            examples=exp["eval"]["examples"],
            seeds=seeds_of(exp, arm),
        )
        for arm in exp["arms"]
        for value in grid_values(exp, arm)
    ]


def seeds_of(exp: Mapping[str, Any], arm: str) -> int:
    """How many seeds ``arm`` trains: the experiment's ``seeds``, or where that is a mapping
    (the paper ran some arms at other counts: ``{default: 10, deltanet: 20}``), the arm's
    entry, else its ``default``. A scale that sets ``seeds`` to a number sets every arm's."""
    seeds = exp["seeds"]
    if isinstance(seeds, Mapping):
        return int(seeds.get(arm, seeds.get(SEEDS_DEFAULT, 0)))
    return int(seeds)


def block_of(exp: Mapping[str, Any], block: str, arm: str, value: Any) -> dict[str, Any]:
    """One block (`BLOCKS`) at (arm, value) before the model is resolved: what validation
    checks against the schema."""
    return _block(exp, block, arm, value)


class RunTable:
    """Every run arm of a config as rows, with their datasets and their runs' owners."""

    def __init__(self, experiments: Mapping[str, Mapping[str, Any]], stream: set[str]) -> None:
        """``stream``: the experiments whose task's data is a stream (its held-out set and
        oracle report are a dataset of the table's); the others read a release."""
        self.experiments = experiments
        self._rows: dict[str, dict[str, Run]] = {
            name: {run.name: run for run in runs_of(name, exp)} for name, exp in experiments.items()
        }
        self._dataset: dict[tuple[str, str], str] = {}
        self.datasets: dict[str, dict[str, Any]] = {}
        for name in experiments:
            first: dict[str, str] = {}  # task block -> the dataset its first run arm names
            for run in self.of(name):
                ds = first.setdefault(json.dumps(run.task, sort_keys=True), self._name(run))
                self._dataset[(name, run.name)] = ds
                if name in stream:
                    entry = self.datasets.setdefault(
                        ds,
                        {
                            "task": run.task,
                            "examples": run.examples,
                            "seeds": run.seeds,
                            "batch": run.train["batch"],
                        },
                    )
                    entry["seeds"] = max(entry["seeds"], run.seeds)  # every arm's seeds checked
        owners: dict[tuple[str, int], tuple[str, str]] = {}
        self._owner: dict[tuple[str, str, int], tuple[str, str]] = {}
        for run in self:
            identity = self.identity(run)
            for seed in range(run.seeds):
                owner = owners.setdefault((identity, seed), (run.experiment, run.name))
                self._owner[(run.experiment, run.name, seed)] = owner

    def warm_base(self, run: Run) -> Run | None:
        """The row a warm-started run (its train block's ``warm_start``) continues from, or
        None; a KeyError names a base experiment or run arm the table does not hold."""
        warm = run.train.get(WARM_START)
        if not warm:
            return None
        if warm["experiment"] not in self._rows:
            raise KeyError(
                f"{run.experiment}.train.warm_start.experiment: {warm['experiment']!r} is not "
                f"an experiment; known: {sorted(self._rows)}"
            )
        return self.row(warm["experiment"], warm["arm"])

    def identity(self, run: Run) -> str:
        """A run's shared-run key (`Run.identity`), with, for a warm-started run, its base
        run's key appended (recursively), so that a change of the base retrains it too."""
        parts, seen = [run.identity], {(run.experiment, run.name)}
        base = self.warm_base(run)
        while base is not None and (base.experiment, base.name) not in seen:
            seen.add((base.experiment, base.name))
            parts.append(base.identity)
            base = self.warm_base(base)
        return "|".join(parts)

    def _name(self, run: Run) -> str:
        """The dataset a run arm's task block names when it is the first to train on it."""
        exp = self.experiments[run.experiment]
        name = run.experiment
        if run.spec.get("task"):
            name += f"-{run.arm}"
        grid = exp.get("grid")
        if grid is not None and grid["key"].startswith("task."):
            name += f"-{point_label(exp, run.value)}"
        return name

    def __iter__(self) -> Iterator[Run]:
        for rows in self._rows.values():
            yield from rows.values()

    def of(self, experiment: str) -> list[Run]:
        """An experiment's rows, in config order."""
        return list(self._rows[experiment].values())

    def row(self, experiment: str, run_arm: str) -> Run:
        """One row; a KeyError names the experiment's run arms."""
        rows = self._rows[experiment]
        if run_arm not in rows:
            raise KeyError(f"{run_arm!r} is not a run arm of {experiment}; known: {sorted(rows)}")
        return rows[run_arm]

    def dataset(self, experiment: str, run_arm: str) -> str:
        """The stream dataset a run arm reads (see the module docstring)."""
        return self._dataset[(experiment, run_arm)]

    def owner(self, experiment: str, run_arm: str, seed: int) -> tuple[str, str]:
        """The (experiment, run arm) whose identical run trains this row's ``seed``."""
        return self._owner.get((experiment, run_arm, int(seed)), (experiment, run_arm))

    def trainings(self) -> list[tuple[str, str, int]]:
        """Every distinct run, as (experiment, run arm, seed) of its owner, in config order."""
        return list(dict.fromkeys((*owner, seed) for (_, _, seed), owner in self._owner.items()))


def run_of(exp: Mapping[str, Any], run_arm: str, experiment: str = "") -> Run:
    """One run arm of an experiment block as its row; a KeyError names the known run arms."""
    rows = {run.name: run for run in runs_of(experiment, exp)}
    if run_arm not in rows:
        raise KeyError(f"{run_arm!r} is not a run arm; known: {sorted(rows)}")
    return rows[run_arm]
