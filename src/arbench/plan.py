"""The workflow's view of a resolved config: where each scale's results go, what each job
reads, and what each task declares (its data kind and report layout).

`rules/common.smk` calls these so that the rules stay generic over experiments and never
branch on a task or cell name; each function here is plain Python, tested without Snakemake.
"""

from __future__ import annotations

from typing import Any

from arbench.config import eval_options, model_settings
from arbench.tasks import Task, task_class
from arbench.tasks.base import Release

PAPER = "paper"


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

    # ------------------------------------------------------------------ what tasks declare

    def task(self, experiment: str) -> type[Task]:
        """The adapter class of an experiment's task (its declaration to the workflow)."""
        return task_class(self.experiments[experiment]["task"]["name"])

    def experiments_with(self, data: str) -> list[str]:
        """Experiments whose task's data is of kind ``data`` ("stream" or "release")."""
        return [name for name in self.experiments if self.task(name).data == data]

    def layout(self, experiment: str) -> str:
        """The report layout ("bars", "sweep") that renders an experiment's table and figure."""
        return self.task(experiment).layout

    # ------------------------------------------------------------------ data

    def data_dir(self, experiment: str) -> str:
        """The folder of an experiment's validated data: its own held-out set for a stream
        task, the named release for a release task."""
        if self.task(experiment).data == "release":
            return self.release_dir(self.experiments[experiment]["task"]["release"])
        return f"{self.root}/datasets/{experiment}"

    def release_dir(self, release: str) -> str:
        return f"{self.root}/datasets/{release}"

    def gate(self, experiment: str) -> str:
        """The validation report that must exist before any run of the experiment trains."""
        if self.task(experiment).data == "release":
            return f"{self.data_dir(experiment)}/oracle_report.json"
        return f"{self.data_dir(experiment)}/oracle.json"

    def eval_inputs(self, experiment: str) -> list[str]:
        """The data files evaluation reads (besides the run): the held-out set, or the gate of
        the validated release."""
        if self.task(experiment).data == "release":
            return [self.gate(experiment)]
        return [f"{self.data_dir(experiment)}/eval.npz"]

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

    # ------------------------------------------------------------------ runs

    def run_dir(self, experiment: str, arm: str, seed: int) -> str:
        return f"{self.root}/runs/{experiment}/{arm}/seed{seed}"

    def run_files(self, experiment: str, name: str) -> list[str]:
        """One file per (arm, seed) of an experiment, e.g. every final.json."""
        exp = self.experiments[experiment]
        return [
            f"{self.run_dir(experiment, arm, seed)}/{name}"
            for arm in exp["arms"]
            for seed in range(exp["seeds"])
        ]

    def eval_files(self, experiment: str) -> list[str]:
        exp = self.experiments[experiment]
        return [
            f"{self.root}/evals/{experiment}/{arm}/seed{seed}.json"
            for arm in exp["arms"]
            for seed in range(exp["seeds"])
        ]

    def model(self, experiment: str, arm: str) -> dict[str, Any]:
        """What a training job needs to build an arm's model (the task sets the vocabulary)."""
        return model_settings(self.experiments[experiment], arm)

    def eval_options(self, experiment: str, arm: str) -> dict[str, Any]:
        return eval_options(self.experiments[experiment], arm)

    def train_minutes(self, experiment: str) -> int:
        """Minutes to ask a scheduler for: generous for the CPU, far more than a GPU needs."""
        return max(10, self.experiments[experiment]["train"]["steps"] // 20)

    # ------------------------------------------------------------------ the zoo and the bench

    def reference(self, pointer: dict[str, str]) -> dict[str, Any]:
        """The task settings and model of an {experiment, arm} pointer (zoo, bench)."""
        exp = self.experiments[pointer["experiment"]]
        return {"task": exp["task"], "model": model_settings(exp, pointer["arm"])}

    def targets(self) -> list[str]:
        """Everything `rule all` builds: every experiment's table and figure, the cell table
        and the benchmark."""
        out = [f"{self.root}/tables/cells.tex"]
        out += [f"{self.root}/bench/cells.{ext}" for ext in ("json", "png")]
        for name in self.experiments:
            out += [f"{self.root}/tables/{name}.tex"]
            out += [f"{self.root}/figures/{name}.{ext}" for ext in ("pdf", "png")]
        return out
