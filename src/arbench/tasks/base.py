"""What every task shares: the task contract, with the label convention and the batch type
(`arbench.batch`, re-exported here).

A task is one module (or package) holding its generator, an independent oracle, a floor
calculator and an adapter class that subclasses `Task` and registers a name. The adapter's
class attributes are its declaration to the workflow, so rules never branch on a task name:

* `data`: "stream" (batches drawn on the fly from (seed, step); the workflow writes a held-out
  set and the oracle validates it and a sample of every seed's training stream) or "release"
  (a published file set that the task's `release` writes split by split and validates; the
  experiment block names the release and takes its data settings from it).
* `layout`: how its results render, a layout of `arbench.report.layouts` a task may declare
  (`arbench.layout_names.TASK_LAYOUTS`, checked by `register_task`): "bars" (one bar per arm,
  single-knob contrasts), "sweep" (accuracy per arm, evaluation length and answer type),
  "kvbench", ... An experiment with a grid renders as "grid" (accuracy per arm and grid
  value) whatever its task.
"""

from __future__ import annotations

import inspect
import io
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np

from arbench.batch import IGNORE, Batch, Signal  # noqa: F401  (every task module reads them here)
from arbench.layout_names import TASK_LAYOUTS
from arbench.settings import settings_block

DataKind = Literal["stream", "release"]
Progress = Any  # a callable taking one string, or None


EVAL_FILE = "eval.npz"  # a stream task's held-out set, inside its data folder


def _compact(a: np.ndarray) -> np.ndarray:
    """The array as int16 when every value fits (most vocabularies here), else int32."""
    a = np.asarray(a)
    fits = a.size == 0 or (a.min() >= np.iinfo(np.int16).min and a.max() <= np.iinfo(np.int16).max)
    return a.astype(np.int16 if fits else np.int32)


def save_eval_set(batch: Batch, path: str | Path) -> None:
    """Store a held-out set compressed, atomically, as int16 where every id fits and int32
    where the vocabulary is larger (the lattice tasks' 32,770 tokens)."""
    from arbench.io import atomic_write_bytes

    buf = io.BytesIO()
    np.savez_compressed(buf, tokens=_compact(batch.tokens), targets=_compact(batch.targets))
    atomic_write_bytes(path, buf.getvalue())


def load_eval_set(data_dir: str | Path | None) -> Batch:
    """The held-out set a stream task's data folder holds, widened to int64."""
    if data_dir is None:
        raise ValueError("evaluation needs the data folder that holds the held-out set")
    arrays = np.load(Path(data_dir) / EVAL_FILE)
    return Batch(arrays["tokens"].astype(np.int64), arrays["targets"].astype(np.int64))


@runtime_checkable
class Release(Protocol):
    """How a release-data task writes and checks its file set (see `Task.data`): the one
    statement of the contract, listing every member the workflow and the config use.

    Callers: `arbench.config.releases` checks a ``releases.<name>`` block (`schema`, then
    `check`); `arbench.plan.Plan` plans the jobs (`splits`, `split_settings`,
    `validate_settings`, `runtime_minutes`, and `split_files`/`index_files` as output
    patterns); `arbench.run` does the work (`write_split`, `write_index`, `validate`), called
    by ``scripts/release_split.py``, ``scripts/release_index.py`` and
    ``scripts/release_validate.py``. ``settings`` is always the release's config block.

    `write_split` writes one (subset, split) under ``out_dir``: the files `split_files` names,
    then ``stats/{subset}/{split}.json`` last, as the split's completion marker;
    `write_index` writes `index_files` (card, vocabulary...) from the splits; `validate` runs
    the task's oracle over everything in ``out_dir``, writes nothing, and returns a report
    whose "ok" says whether training may use it. Every file is thus some job's declared output.
    """

    schema: dict[str, Any]
    """JSON schema of the release's config block (its ``task`` key included)."""
    split_files: tuple[str, ...]
    """Files one split job writes besides its sidecar: patterns over {subset} and {split},
    relative to ``out_dir``."""
    index_files: tuple[str, ...]
    """Files the index job writes (card, vocabulary, statistics), relative to ``out_dir``."""

    def check(self, settings: dict[str, Any]) -> None:
        """Raise ValueError for what the schema cannot express (run before any job)."""

    def splits(self, settings: dict[str, Any]) -> list[tuple[str, str]]:
        """(subset, split) of every split the release holds, in the order it is written."""

    def split_settings(self, settings: dict[str, Any], subset: str, split: str) -> dict[str, Any]:
        """What one split's job reads, so an edit elsewhere in the block leaves it alone."""

    def validate_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """What the index and validation jobs read."""

    def runtime_minutes(self, settings: dict[str, Any], subset: str, split: str) -> int:
        """Minutes a scheduler should grant one split's job."""

    def write_split(
        self,
        out_dir: Path,
        subset: str,
        split: str,
        settings: dict[str, Any],
        progress: Progress = None,
    ) -> dict[str, Any]:
        """Write one split's `split_files`, then its sidecar, whose statistics it returns."""

    def write_index(
        self, out_dir: Path, settings: dict[str, Any], progress: Progress = None
    ) -> Any:
        """Write `index_files` from the finished splits' sidecars."""

    def validate(
        self, out_dir: Path, settings: dict[str, Any], progress: Progress = None
    ) -> dict[str, Any]:
        """Check every file with the oracle, writing nothing; the report's "ok" gates training."""


class Task:
    """The contract a task's adapter honours; subclasses register with `register_task`."""

    name: ClassVar[str]
    data: ClassVar[DataKind] = "stream"
    layout: ClassVar[str] = "bars"  # one of `arbench.layout_names.TASK_LAYOUTS`
    release: ClassVar[Release | None] = None  # the writer/validator of a "release" task
    release_keys: ClassVar[tuple[str, ...]] = ()  # settings it takes from its release block
    signals: ClassVar[frozenset[str]] = frozenset()  # `Signal` fields its batches honour
    marks_keys: ClassVar[bool] = False  # its training batches carry `Batch.key_positions`

    @classmethod
    def from_settings(cls, settings: dict[str, Any], data_dir: str | Path | None = None) -> Task:
        """Build the adapter from its config block (``name`` included) and, for tasks that
        read files, the folder holding its validated data."""
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        raise NotImplementedError

    def train_batch(self, seed: int, step: int, batch: int, signal: Signal | None = None) -> Batch:
        """Training batch ``step`` of run ``seed`` under ``signal`` (None: the task's own
        layout and supervision): a pure function of its arguments, so a resumed run needs no
        random state beyond the curriculum's, which the checkpoint holds."""
        raise NotImplementedError

    def evaluate(self, model: Any, examples: int | None = None, **options: Any) -> dict[str, Any]:
        """Scores of a trained model on the held-out data; "accuracy" is the headline."""
        raise NotImplementedError

    def eval_tokens(self, examples: int, **options: Any) -> int:
        """Tokens one evaluation reads, what a scheduler's runtime is sized from
        (`arbench.plan.Plan.eval_minutes`): by default ``examples`` held-out sequences of the
        eval set's length; a task whose evaluation streams a sweep overrides it."""
        return int(examples) * int(self.eval_set(1).tokens.shape[1])

    def train_shape(self, train: dict[str, Any]) -> tuple[int, int]:
        """(tokens, supervised answers) of the longest row a run with train block ``train``
        draws, what the resource model sizes its job from (`arbench.resources`): a row at
        the load schedule's last rung where the task honours ``load``, with every answer
        supervised where it honours ``dense``."""
        load = train.get("load")
        signal = Signal(
            load=max(load["values"]) if load and "load" in self.signals else None,
            dense="dense" in self.signals,
        )
        drawn = self.train_batch(0, 0, 1, signal) if self.signals else self.train_batch(0, 0, 1)
        return int(drawn.tokens.shape[1]), int((drawn.targets != IGNORE).sum())

    def eval_shape(self, **options: Any) -> tuple[int, int]:
        """(tokens, supervised answers) of the longest row one evaluation holds at once: by
        default a held-out row; a task whose evaluation streams or sweeps overrides it."""
        row = self.eval_set(1)
        return int(row.tokens.shape[1]), int((row.targets != IGNORE).sum())

    def floors(self) -> dict[str, float]:
        """Chance levels computed from the settings, never typed in. Every task gives
        ``value_marginal`` (a uniformly guessed answer: the floor "chance" is measured
        against); a recall task also ``best_no_binding`` (the best strategy that never binds),
        and where they apply ``uniform_pair_no_binding`` and ``rebinding_control``, the
        other columns of the floors table (`FLOOR_COLUMNS`); tables and figures show the
        ones a task gives."""
        raise NotImplementedError

    def summary(self) -> str:
        """One line naming the settings that set the task's floors (the floors table's row)."""
        return self.name

    def never_predicted(self) -> tuple[int, ...]:
        """Token ids that are never an answer (a MASK the input carries at the answer slot):
        evaluation drops them from the argmax (`arbench.evaluate.recall.predict`'s
        ``exclude``), and the training loss may drop them from its softmax. Empty by default."""
        return ()

    def positions(self) -> int | None:
        """The longest sequence the task feeds a model, what a model with learned absolute
        positions must be sized for; None (the default) where the task does not say."""
        return None

    def input_files(self) -> list[str]:
        """Files outside the workflow's datasets that the task reads (a corpus): the job that
        writes its held-out set takes them as inputs, so a rule that builds them runs first.
        None by default."""
        return []

    def self_tests(self, held_out: Batch) -> dict[str, dict[str, Any]]:
        """Checks of the task's controls on its held-out set, each {"ok": bool, ...}; the
        stream oracle job fails when one is not ok. None by default."""
        return {}

    # stream tasks only
    def eval_set(self, n: int) -> Batch:
        """The held-out evaluation set: ``n`` sequences from a seed range training never uses."""
        raise NotImplementedError

    def oracle(self, batch: Batch) -> list[str]:
        """Problems the independent oracle finds in ``batch`` (empty when every target holds)."""
        raise NotImplementedError

    @classmethod
    def eval_option_names(cls) -> set[str]:
        """Keyword options `evaluate` takes (an arm sets them as ``eval_<name>``)."""
        params = inspect.signature(cls.evaluate).parameters.values()
        skip = {"self", "model", "examples", "progress"}  # progress: the run layer's
        return {
            p.name
            for p in params
            if p.name not in skip and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }


def stream_rng(seed: int, step: int, purpose: int = 0) -> np.random.Generator:
    """Generator for one batch: a pure function of (purpose, seed, step).

    Training draws purpose 0; held-out evaluation sets draw purpose 1 (and controls derived
    from them purpose 2, a task's second control 3), so the seed ranges never overlap.
    """
    return np.random.default_rng(np.random.SeedSequence([purpose, seed, step]))


class ConfigTask(Task):
    """A stream task whose settings are one dataclass (`config_class`, with ``validate()``
    and ``vocab_size``) and whose module gives the four functions every such task has:
    ``generate(cfg, n, rng[, signal])``, ``heldout(cfg, n)``, ``oracle_check(tokens,
    targets, cfg)`` and ``floors(cfg)``. Construction, vocabulary, batches, the held-out set,
    the oracle and the floors are written once here for every such adapter (MQAR, Zoology
    MQAR, haystack, S5); a task that honours training signals (`Task.signals`) gets the
    batch's signal passed to its ``generate``."""

    config_class: ClassVar[type]
    functions: ClassVar[Any]  # the task's module (``sys.modules[__name__]``)

    def __init__(self, cfg: Any, data_dir: str | Path | None = None) -> None:
        self.cfg = cfg
        self.data_dir = None if data_dir is None else Path(data_dir)

    @classmethod
    def from_settings(cls, settings: dict[str, Any], data_dir: str | Path | None = None) -> Task:
        return cls(config_of(cls.config_class, settings), data_dir)

    @property
    def vocab_size(self) -> int:
        return self.cfg.vocab_size

    def held_out(self) -> Batch:
        """The held-out set the workflow wrote into this task's data folder."""
        return load_eval_set(self.data_dir)

    def train_batch(self, seed: int, step: int, batch: int, signal: Signal | None = None) -> Batch:
        rng = stream_rng(seed, step)
        if self.signals:
            return self.functions.generate(self.cfg, batch, rng, signal)
        return self.functions.generate(self.cfg, batch, rng)

    def eval_set(self, n: int) -> Batch:
        return self.functions.heldout(self.cfg, n)

    def oracle(self, batch: Batch) -> list[str]:
        return self.functions.oracle_check(batch.tokens, batch.targets, self.cfg)

    def floors(self) -> dict[str, float]:
        return self.functions.floors(self.cfg)


def settings_of(cls: type, block: dict[str, Any], where: str = "task") -> Any:
    """Construct dataclass ``cls`` from ``block`` (its ``name`` dropped); unknown keys are a
    ValueError that names them and lists the known ones."""
    return settings_block(cls, block, where, drop=("name",))


def config_of(cls: type, block: dict[str, Any]) -> Any:
    """`settings_of` followed by the dataclass's own ``validate()``: the settings of a
    `ConfigTask`, with the semantic checks a schema cannot express."""
    cfg = settings_of(cls, block)
    cfg.validate()
    return cfg


# The floors every experiment table and the floors table report, in this order; a task gives
# the ones that apply to it (`Task.floors`), the table shows "--" for the rest.
FLOOR_COLUMNS = (
    "value_marginal",
    "uniform_pair_no_binding",
    "best_no_binding",
    "rebinding_control",
)

TASKS: dict[str, type[Task]] = {}


def register_task(cls: type[Task]) -> type[Task]:
    """Class decorator: make a task constructible by its ``name`` through `build_task`."""
    if cls.name in TASKS:
        raise ValueError(f"task {cls.name!r} registered twice")
    if cls.layout not in TASK_LAYOUTS:
        raise ValueError(
            f"task {cls.name!r}: layout {cls.layout!r} is not a task's; known: "
            f"{', '.join(TASK_LAYOUTS)}"
        )
    TASKS[cls.name] = cls
    return cls


def task_class(name: str) -> type[Task]:
    """The registered adapter class of task ``name``; unknown names list the known ones."""
    if name not in TASKS:
        raise KeyError(f"unknown task {name!r}; known: {sorted(TASKS)}")
    return TASKS[name]


def build_task(settings: dict[str, Any], data_dir: str | Path | None = None) -> Task:
    """The task named by ``settings["name"]``, built from its (resolved) config block."""
    return task_class(settings.get("name", "")).from_settings(settings, data_dir)
