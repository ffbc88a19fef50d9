"""The workflow's view of a resolved config: where each scale's results go, what each job
reads, and what each task declares (its data kind and report layout).

Two things are decided here once, for every rule:

* **datasets**: a stream task's held-out set and oracle report live in
  ``datasets/<dataset>/``, one per distinct task block an experiment trains on: the
  experiment's name, ``<experiment>-<arm>`` for an arm that changes the task, and
  ``-<leaf><value>`` appended for each value of a grid over a task setting.
* **shared runs**: a run is identified by what it trains (task, model and train blocks, and
  the seed), never by the experiment that asks for it. Every (experiment, run arm, seed) maps
  to the first identical run in config order, so the transition table's K = 32 rows and the
  factorial's are the same trained models, trained once.

`rules/common.smk` calls these so that the rules stay generic over experiments and never
branch on a task or cell name; each function here is plain Python, tested without Snakemake.
"""

from __future__ import annotations

import json
from typing import Any

from arbench.config import (
    eval_options,
    grid_points,
    model_settings,
    point_label,
    run_arms,
    task_settings,
    train_settings,
)
from arbench.tasks import Task, build_task, task_class
from arbench.tasks.base import Release

PAPER = "paper"
# streaming evaluation on one CPU thread, generous: the benchmark measures ~4e5 tokens/s
# for the factorial's delta_conv model on 2 threads (results/bench/cells.json, "streaming")
EVAL_TOKENS_PER_S = 5e4


def results_root(scale: str) -> str:
    """``results`` at paper scale, ``results/<scale>`` for every other scale, so that runs at
    different scales never write the same file."""
    return "results" if scale == PAPER else f"results/{scale}"


class Plan:
    """Paths and per-job settings of one resolved config."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.scale: str = cfg["scale"]
        self.root = results_root(self.scale)
        self.experiments: dict[str, dict[str, Any]] = cfg["experiments"]
        self.releases: dict[str, dict[str, Any]] = cfg.get("releases", {})
        self._dataset_of = self._dataset_names()
        self.datasets = self._datasets()
        self._runs = self._shared_runs()

    # ------------------------------------------------------------------ what tasks declare

    def task(self, experiment: str) -> type[Task]:
        """The adapter class of an experiment's task (its declaration to the workflow)."""
        return task_class(self.experiments[experiment]["task"]["name"])

    def experiments_with(self, data: str) -> list[str]:
        """Experiments whose task's data is of kind ``data`` ("stream" or "release")."""
        return [name for name in self.experiments if self.task(name).data == data]

    def layout(self, experiment: str) -> str:
        """The report layout that renders an experiment's table and figure: the experiment's
        own ``layout`` (e.g. "lockin"), else "grid" for an experiment with a grid, else the one
        its task declares ("bars", "sweep")."""
        if self.experiments[experiment].get("layout"):
            return self.experiments[experiment]["layout"]
        if self.experiments[experiment].get("grid"):
            return "grid"
        return self.task(experiment).layout

    # ------------------------------------------------------------------ data

    def _datasets(self) -> dict[str, dict[str, Any]]:
        """Every stream dataset: name -> the task block, held-out count, seeds and batch its
        oracle checks (see the module docstring)."""
        out: dict[str, dict[str, Any]] = {}
        for name, exp in self.experiments.items():
            if self.task(name).data != "stream":
                continue
            for run_arm in run_arms(exp):
                dataset = self.dataset(name, run_arm)
                out.setdefault(
                    dataset,
                    {
                        "task": task_settings(exp, run_arm),
                        "examples": exp["eval"]["examples"],
                        "seeds": exp["seeds"],
                        "batch": train_settings(exp, run_arm)["batch"],
                    },
                )
        return out

    def dataset(self, experiment: str, run_arm: str) -> str:
        """The stream dataset a run arm reads (named once for every run arm, `_dataset_names`)."""
        return self._dataset_of[(experiment, run_arm)]

    def _dataset_names(self) -> dict[tuple[str, str], str]:
        """(experiment, run arm) -> its dataset: one per distinct task block of an experiment,
        named by the first run arm that trains on it: the experiment's own name, plus
        ``-<arm>`` when that arm changes the task (`config.BLOCKS`) and ``-<leaf><value>`` at
        each value of a grid over a task setting."""
        out: dict[tuple[str, str], str] = {}
        for experiment, exp in self.experiments.items():
            grid = exp.get("grid")
            on_task = grid is not None and grid["key"].startswith("task.")
            first: dict[str, str] = {}  # task block -> the dataset its first run arm names
            for run_arm, (arm, value) in grid_points(exp).items():
                name = experiment
                if exp["arms"][arm].get("task"):
                    name += f"-{arm}"
                if on_task:
                    name += f"-{point_label(exp, value)}"
                block = json.dumps(task_settings(exp, run_arm), sort_keys=True)
                out[(experiment, run_arm)] = first.setdefault(block, name)
        return out

    def task_settings(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return task_settings(self.experiments[experiment], run_arm)

    def train_settings(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return train_settings(self.experiments[experiment], run_arm)

    def data_dir(self, experiment: str, run_arm: str) -> str:
        """The folder of a run arm's validated data: its stream dataset's, or the named
        release for a release task."""
        if self.task(experiment).data == "release":
            return self.release_dir(self.experiments[experiment]["task"]["release"])
        return f"{self.root}/datasets/{self.dataset(experiment, run_arm)}"

    def release_dir(self, release: str) -> str:
        return f"{self.root}/datasets/{release}"

    def gate(self, experiment: str, run_arm: str) -> str:
        """The validation report that must exist before the run arm trains."""
        if self.task(experiment).data == "release":
            return f"{self.data_dir(experiment, run_arm)}/oracle_report.json"
        return f"{self.data_dir(experiment, run_arm)}/oracle.json"

    def gates(self, experiment: str) -> dict[str, str]:
        """Each run arm's validation report: what its data's oracle and self-tests found
        (the stats job reads the counts the self-tests report, never recomputing them)."""
        return {arm: self.gate(experiment, arm) for arm in run_arms(self.experiments[experiment])}

    def eval_inputs(self, experiment: str, run_arm: str) -> list[str]:
        """The data files evaluation reads (besides the run), with the gate that validated
        them: a shared run is scored on a held-out set its own training never gated."""
        gate = self.gate(experiment, run_arm)
        if self.task(experiment).data == "release":
            return [gate]
        return [f"{self.data_dir(experiment, run_arm)}/eval.npz", gate]

    def _release(self, release: str) -> tuple[Release, dict[str, Any]]:
        """A release's writer/validator (its task's `Release`) and its config block."""
        settings = self.releases[release]
        return task_class(settings["task"]).release, settings

    def release_splits(self, release: str) -> list[tuple[str, str]]:
        """(subset, split) of every split of a release."""
        writer, settings = self._release(release)
        return writer.splits(settings)

    def release_sidecars(self, release: str) -> list[str]:
        """Each split's completion marker: written last by its generation job."""
        root = self.release_dir(release)
        return [f"{root}/stats/{sub}/{split}.json" for sub, split in self.release_splits(release)]

    def release_split_settings(self, release: str, subset: str, split: str) -> dict[str, Any]:
        writer, settings = self._release(release)
        return writer.split_settings(settings, subset, split)

    def release_validate_settings(self, release: str) -> dict[str, Any]:
        writer, settings = self._release(release)
        return writer.validate_settings(settings)

    def release_runtime(self, release: str, subset: str, split: str) -> int:
        writer, settings = self._release(release)
        return writer.runtime_minutes(settings, subset, split)

    def _release_layout(self, attr: str) -> tuple[str, ...]:
        """One file-layout attribute of the releases' writers (``split_files``,
        ``index_files``), which the generic rules declare as output patterns: every configured
        release must share it."""
        found = {getattr(self._release(r)[0], attr) for r in self.releases}
        if len(found) > 1:
            raise ValueError(
                f"releases: the writers' {attr} differ ({sorted(found)}); "
                "rules/datasets.smk declares one layout, so a second needs its own rules"
            )
        return next(iter(found), ())

    def release_split_patterns(self) -> list[str]:
        """Output patterns (over {release}, {subset}, {split}) of the files one split job
        writes besides its sidecar: its shards, so the DAG sees one truncated or replaced."""
        root = f"{self.root}/datasets/{{release}}"
        return [f"{root}/{p}" for p in self._release_layout("split_files")]

    def release_index_patterns(self) -> list[str]:
        """Output patterns (over {release}) of the index job: card, vocabulary, statistics."""
        root = f"{self.root}/datasets/{{release}}"
        return [f"{root}/{p}" for p in self._release_layout("index_files")]

    def release_shards(self, release: str) -> list[str]:
        """Every shard path of a release (what its validation reads)."""
        writer, _ = self._release(release)
        root = self.release_dir(release)
        return [
            f"{root}/{p.format(subset=sub, split=split)}"
            for sub, split in self.release_splits(release)
            for p in writer.split_files
        ]

    def release_index_files(self, release: str) -> list[str]:
        writer, _ = self._release(release)
        return [f"{self.release_dir(release)}/{p}" for p in writer.index_files]

    # ------------------------------------------------------------------ runs

    def _shared_runs(self) -> dict[tuple[str, str, int], tuple[str, str]]:
        """(experiment, run arm, seed) -> the (experiment, run arm) whose identical run trains
        it: the first in config order with the same task, model and train blocks."""
        first: dict[tuple[str, int], tuple[str, str]] = {}
        out: dict[tuple[str, str, int], tuple[str, str]] = {}
        for name, exp in self.experiments.items():
            for run_arm in run_arms(exp):
                ident = json.dumps(
                    [
                        task_settings(exp, run_arm),
                        model_settings(exp, run_arm),
                        train_settings(exp, run_arm),
                    ],
                    sort_keys=True,
                )
                for seed in range(exp["seeds"]):
                    out[(name, run_arm, seed)] = first.setdefault((ident, seed), (name, run_arm))
        return out

    def run_dir(self, experiment: str, run_arm: str, seed: int) -> str:
        """Where the run an (experiment, run arm, seed) evaluates is trained: its shared
        run's folder (its own unless an earlier experiment trains the identical run)."""
        owner, arm = self._runs.get((experiment, run_arm, int(seed)), (experiment, run_arm))
        return f"{self.root}/runs/{owner}/{arm}/seed{seed}"

    def run_files(self, experiment: str, name: str) -> list[str]:
        """One file per (run arm, seed) of an experiment, e.g. every final.json."""
        exp = self.experiments[experiment]
        return [
            f"{self.run_dir(experiment, arm, seed)}/{name}"
            for arm in run_arms(exp)
            for seed in range(exp["seeds"])
        ]

    def eval_files(self, experiment: str) -> list[str]:
        exp = self.experiments[experiment]
        return [
            f"{self.root}/evals/{experiment}/{arm}/seed{seed}.json"
            for arm in run_arms(exp)
            for seed in range(exp["seeds"])
        ]

    def trainings(self) -> list[tuple[str, str, int]]:
        """Every distinct run the whole config trains, as (experiment, run arm, seed) of its
        owner (shared runs counted once), in config order."""
        return list(dict.fromkeys((*owner, seed) for (_, _, seed), owner in self._runs.items()))

    def model(self, experiment: str, run_arm: str) -> dict[str, Any]:
        """What a training job needs to build a run arm's model (the task sets the vocabulary)."""
        return model_settings(self.experiments[experiment], run_arm)

    def eval_options(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return eval_options(self.experiments[experiment], run_arm)

    def train_minutes(self, experiment: str, run_arm: str) -> int:
        """Minutes to ask a scheduler for: generous for the CPU, far more than a GPU needs."""
        return max(10, self.train_settings(experiment, run_arm)["steps"] // 20)

    def eval_tokens(self, experiment: str, run_arm: str) -> int:
        """Tokens a run arm's evaluation job reads (`Task.eval_tokens`: the held-out count
        times the sequence length, or a task's whole streaming sweep)."""
        task = build_task(self.task_settings(experiment, run_arm))
        examples = self.experiments[experiment]["eval"]["examples"]
        return task.eval_tokens(examples, **self.eval_options(experiment, run_arm))

    def eval_minutes(self, experiment: str, run_arm: str) -> int:
        """Minutes to ask a scheduler for one evaluation: 10 to start, plus its token count
        at `EVAL_TOKENS_PER_S` (a long streaming sweep gets its hour, a held-out set 10)."""
        return 10 + int(self.eval_tokens(experiment, run_arm) / EVAL_TOKENS_PER_S / 60)

    # ------------------------------------------------------------------ the zoo and the bench

    def reference(self, pointer: dict[str, str]) -> dict[str, Any]:
        """The task settings and model of an {experiment, arm} pointer (zoo, bench)."""
        exp = self.experiments[pointer["experiment"]]
        arm = pointer["arm"]
        return {"task": task_settings(exp, arm), "model": model_settings(exp, arm)}

    def task_blocks(self) -> list[dict[str, Any]]:
        """Every (experiment, task block) the config trains on, one per grid point: what the
        floors table reads."""
        out = []
        for name, exp in self.experiments.items():
            seen: list[dict[str, Any]] = []
            for run_arm in run_arms(exp):
                task = task_settings(exp, run_arm)
                if task not in seen:
                    seen.append(task)
                    out.append({"experiment": name, "task": task})
        return out

    def targets(self) -> list[str]:
        """Everything `rule all` builds: every experiment's table and figure, the cell table,
        the benchmark, the interference study, the score-variance study, the claim-by-claim
        report (claims.md and its table) and, where the config holds its three studies, the
        lattice-memory table and figure (`arbench.report.lattice`)."""
        from arbench.report.lattice import STUDIES as LATTICE

        out = [f"{self.root}/tables/{name}.tex" for name in ("cells", "floors")]
        out += [f"{self.root}/bench/cells.{ext}" for ext in ("json", "png")]
        out += [f"{self.root}/figures/interference.{ext}" for ext in ("pdf", "png", "html")]
        out += [f"{self.root}/figures/score_variance.{ext}" for ext in ("pdf", "png")]
        for name in self.experiments:
            out += [f"{self.root}/tables/{name}.tex"]
            out += [f"{self.root}/figures/{name}.{ext}" for ext in ("pdf", "png")]
        out += [f"{self.root}/claims.md", f"{self.root}/tables/claims.tex"]
        if set(LATTICE.values()) <= set(self.experiments):
            out += [f"{self.root}/tables/lattice.tex"]
            out += [f"{self.root}/figures/lattice.{ext}" for ext in ("pdf", "png")]
        return out
