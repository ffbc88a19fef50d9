"""The workflow's view of a resolved config: where each scale's results go, what each job
reads, and what each task declares (its data kind and report layout).

Every per-job setting is read from the config's run table (`arbench.experiment.RunTable`),
expanded once here: its rows give each run arm's task, model, train and evaluation settings,
its stream **dataset** (a held-out set and oracle report in ``datasets/<dataset>/``) and the
**owner** of each seed's run (the first identical run in config order, so the transition
table's K = 32 rows and the factorial's are the same trained models, trained once).

`rules/common.smk` calls these so that the rules stay generic over experiments and never
branch on a task or cell name; each function here is plain Python, tested without Snakemake.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from arbench.experiment import Run, RunTable
from arbench.resources import (
    PARTITION_MINUTES,
    Device,
    Estimate,
    ProbeSpec,
    ProbeTable,
    check,
    declared_device,
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
        self.studies: dict[str, list[str]] = cfg.get("studies") or {}
        self.table = RunTable(self.experiments, set(self.experiments_with("stream")))
        self.datasets = self.table.datasets
        self._estimates: dict[tuple[str, str, str], Estimate] = {}
        self._probes: ProbeTable | None = None
        self.measured_probes = 0  # probes measured in this process (missing from the table)

    def run(self, experiment: str, run_arm: str) -> Run:
        """One row of the run table."""
        return self.table.row(experiment, run_arm)

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
        from arbench.report.layouts import layout_of

        exp = self.experiments[experiment]
        name = exp.get("layout") or ("grid" if exp.get("grid") else self.task(experiment).layout)
        return layout_of(name).name

    # ------------------------------------------------------------------ data

    def dataset(self, experiment: str, run_arm: str) -> str:
        """The stream dataset a run arm reads (`RunTable.dataset`)."""
        return self.table.dataset(experiment, run_arm)

    def task_settings(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return self.run(experiment, run_arm).task

    def train_settings(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return self.run(experiment, run_arm).train

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
        return {run.name: self.gate(experiment, run.name) for run in self.table.of(experiment)}

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

    def run_dir(self, experiment: str, run_arm: str, seed: int) -> str:
        """Where the run an (experiment, run arm, seed) evaluates is trained: its shared
        run's folder (its own unless an earlier experiment trains the identical run)."""
        owner, arm = self.table.owner(experiment, run_arm, int(seed))
        return f"{self.root}/runs/{owner}/{arm}/seed{seed}"

    def warm_start_model(self, experiment: str, run_arm: str, seed: int) -> list[str]:
        """The trained model a run starts from (its train block's ``warm_start``: the base
        run arm's ``model.pt`` of the same seed, `arbench.experiment.RunTable.warm_base`), as
        the training job's extra input; [] for a run trained from scratch."""
        base = self.table.warm_base(self.run(experiment, run_arm))
        if base is None:
            return []
        return [f"{self.run_dir(base.experiment, base.name, int(seed))}/model.pt"]

    def run_files(self, experiment: str, name: str) -> list[str]:
        """One file per (run arm, seed) of an experiment, e.g. every final.json."""
        return [
            f"{self.run_dir(experiment, run.name, seed)}/{name}"
            for run in self.table.of(experiment)
            for seed in range(run.seeds)
        ]

    def reference_files(self, experiment: str) -> list[str]:
        """The sources' per-seed results an experiment is shown beside (its ``reference``
        block's file), as the stats job's input; none for most experiments."""
        ref = self.experiments[experiment].get("reference")
        return [ref["file"]] if ref else []

    def eval_files(self, experiment: str) -> list[str]:
        return [
            f"{self.root}/evals/{experiment}/{run.name}/seed{seed}.json"
            for run in self.table.of(experiment)
            for seed in range(run.seeds)
        ]

    def trainings(self) -> list[tuple[str, str, int]]:
        """Every distinct run the whole config trains, as (experiment, run arm, seed) of its
        owner (shared runs counted once), in config order."""
        return self.table.trainings()

    def model(self, experiment: str, run_arm: str) -> dict[str, Any]:
        """What a training job needs to build a run arm's model (the task sets the vocabulary)."""
        return self.run(experiment, run_arm).model

    def eval_options(self, experiment: str, run_arm: str) -> dict[str, Any]:
        return self.run(experiment, run_arm).eval_options

    def eval_examples(self, experiment: str, run_arm: str) -> int:
        """How many held-out examples a run arm's evaluation scores (its row's)."""
        return self.run(experiment, run_arm).examples

    def run_arms(self) -> list[str]:
        """Every run arm name the table holds, sorted: what the rules' ``arm`` wildcard may
        be, so the naming rule (`arbench.experiment.run_arm_name`) lives in one place."""
        return sorted({run.name for run in self.table})

    def train_minutes(self, experiment: str, run_arm: str) -> int:
        """Minutes a first submission asks a scheduler for: at paper scale the resource
        model's prediction on the declared device (`resource_estimate`), at most
        `partition_minutes`; below it, generous for the CPU."""
        if self.models_resources:
            est = self.resource_estimate("train", experiment, run_arm)
            return est.request_minutes(self.partition_minutes)
        return max(10, self.train_settings(experiment, run_arm)["steps"] // 20)

    def eval_tokens(self, experiment: str, run_arm: str) -> int:
        """Tokens a run arm's evaluation job reads (`Task.eval_tokens`: the held-out count
        times the sequence length, or a task's whole streaming sweep)."""
        run = self.run(experiment, run_arm)
        return build_task(run.task).eval_tokens(run.examples, **run.eval_options)

    def eval_minutes(self, experiment: str, run_arm: str) -> int:
        """Minutes to ask a scheduler for one evaluation: at paper scale the resource model's
        prediction; below it 10 to start, plus its token count at `EVAL_TOKENS_PER_S` (a
        long streaming sweep gets its hour, a held-out set 10)."""
        if self.models_resources:
            est = self.resource_estimate("evaluate", experiment, run_arm)
            return est.request_minutes(self.partition_minutes)
        return 10 + int(self.eval_tokens(experiment, run_arm) / EVAL_TOKENS_PER_S / 60)

    # ------------------------------------------------------------------ resources

    @property
    def models_resources(self) -> bool:
        """Whether jobs are sized by the resource model: at paper scale, the GPU jobs (every
        smaller scale is a CPU job of `threads_per_run` cores and a fixed 2 GB)."""
        return self.scale == PAPER and "resources" in self.cfg

    def device(self) -> Device:
        """The device paper-scale training and evaluation jobs are declared to run on."""
        return declared_device(self.cfg["resources"])

    @property
    def partition_minutes(self) -> int:
        """The longest job a partition takes (``resources.partition_minutes``, else
        `arbench.resources.PARTITION_MINUTES`): no submission asks for more; a longer
        training is chained through its checkpoints."""
        return int(self.cfg.get("resources", {}).get("partition_minutes", PARTITION_MINUTES))

    def expected_steps(self, experiment: str) -> int | None:
        """Steps a training of ``experiment`` whose load schedule stops early is expected to
        run (``resources.expected_steps``; None: priced at its ``train.steps``)."""
        return (self.cfg.get("resources", {}).get("expected_steps") or {}).get(experiment)

    def resource_estimate(
        self, kind: str, experiment: str, run_arm: str, seed: int = 0
    ) -> Estimate:
        """One job's prediction (`arbench.resources.jobs`), ``kind`` "train" or "evaluate",
        named ``<kind> <experiment>/<run arm>/seed<seed>``; computed once for all seeds.
        Probes missing from the table are measured here, once per process."""
        key = (kind, experiment, run_arm)
        job = f"{kind} {experiment}/{run_arm}/seed{seed}"
        if key not in self._estimates:
            from arbench.resources import jobs

            run = self.run(experiment, run_arm)
            self.measure_missing(jobs.specs(run))
            if kind == "train":
                est = jobs.train_estimate(
                    run, job, self.device(), self.probes, self.expected_steps(experiment)
                )
            else:
                est = jobs.eval_estimate(run, job, self.device(), self.probes)
            self._estimates[key] = est
        est = self._estimates[key]
        return est if est.job == job else dataclasses.replace(est, job=job)

    @property
    def probes(self) -> ProbeTable:
        if self._probes is None:
            self._probes = ProbeTable()
        return self._probes

    def measure_missing(self, specs: Iterable[ProbeSpec], progress: Any = None) -> None:
        """Measure the probes the table lacks (torch, a second to a minute each) into the
        table in memory, calling ``progress(done, total, spec)`` after each;
        `tools/paper_plan.py --probe` stores them."""
        missing = self.probes.missing(specs)
        if not missing:
            return
        from arbench.resources.probe import measure

        for i, spec in enumerate(missing, 1):
            self.probes.add(
                spec,
                measure(
                    dict(spec.model),
                    spec.vocab,
                    spec.positions,
                    spec.length,
                    spec.supervised,
                    spec.rows,
                ),
            )
            self.measured_probes += 1
            if progress is not None:
                progress(i, len(missing), spec)

    def resource_estimates(self) -> list[Estimate]:
        """Every paper-scale training and evaluation job's prediction (one per seed)."""
        out = [self.resource_estimate("train", *job) for job in self.trainings()]
        for exp in self.experiments:
            for run in self.table.of(exp):
                out += [
                    self.resource_estimate("evaluate", exp, run.name, seed)
                    for seed in range(run.seeds)
                ]
        return out

    def check_resources(self) -> list[Estimate]:
        """Every job's prediction, after checking each fits its device and the partition
        limit (`partition_minutes`): a `ResourceError` names the first job that does not
        (memory beyond the device's; an evaluation longer than the limit; a chained
        training whose checkpoints lie further apart than it: `arbench.resources.check`)."""
        device = self.device()
        estimates = self.resource_estimates()
        for est in estimates:
            check(est, device, self.partition_minutes)
        return estimates

    def job_resources(
        self, kind: str, experiment: str, run_arm: str, attempt: int = 1
    ) -> dict[str, int]:
        """What a job asks a scheduler for at its ``attempt``-th submission: host ``mem_mb``,
        ``runtime`` minutes (at paper scale the prediction, doubled on each retry, at most
        `partition_minutes`: `Estimate.request_minutes`), ``gpu_mem_mb`` and ``gpu`` (0 for a
        CPU job)."""
        if not self.models_resources:
            minutes = (self.train_minutes if kind == "train" else self.eval_minutes)(
                experiment, run_arm
            )
            return {"mem_mb": 2000, "runtime": minutes, "gpu_mem_mb": 0, "gpu": 0}
        est = self.resource_estimate(kind, experiment, run_arm)
        gpu = self.device().gpu
        return {
            "mem_mb": est.mem_mb,
            "runtime": est.request_minutes(self.partition_minutes, attempt),
            "gpu_mem_mb": est.device_mem_mb if gpu else 0,
            "gpu": 1 if gpu else 0,
        }

    # ------------------------------------------------------------------ the zoo and the bench

    def reference(self, pointer: dict[str, str]) -> dict[str, Any]:
        """The task settings and model of an {experiment, arm} pointer (zoo, bench)."""
        run = self.run(pointer["experiment"], pointer["arm"])
        return {"task": run.task, "model": run.model}

    def task_blocks(self) -> list[dict[str, Any]]:
        """Every (experiment, task block) the config trains on, one per grid point: what the
        floors table reads."""
        out = []
        for name in self.experiments:
            seen: list[dict[str, Any]] = []
            for run in self.table.of(name):
                if run.task not in seen:
                    seen.append(run.task)
                    out.append({"experiment": name, "task": run.task})
        return out

    def experiment_targets(self, name: str) -> list[str]:
        """An experiment's table and figure."""
        return [f"{self.root}/tables/{name}.tex"] + [
            f"{self.root}/figures/{name}.{ext}" for ext in ("pdf", "png")
        ]

    def _lattice_targets(self, experiments: list[str] | dict[str, Any]) -> list[str]:
        """The lattice-memory table and figure (`arbench.report.lattice`), where the config
        declares the report (``lattice:``) and ``experiments`` hold its three studies."""
        from arbench.report.lattice import lattice_studies

        studies = lattice_studies(self.cfg)
        if not studies or not set(studies.values()) <= set(experiments):
            return []
        return [f"{self.root}/tables/lattice.tex"] + [
            f"{self.root}/figures/lattice.{ext}" for ext in ("pdf", "png")
        ]

    def targets(self) -> list[str]:
        """Everything `rule all` builds: every experiment's table and figure, the cell table,
        the benchmark, the interference study, the score-variance study, the claim-by-claim
        report (claims.md and its table) and, where the config holds its three studies, the
        lattice-memory table and figure (`arbench.report.lattice`)."""
        out = [f"{self.root}/tables/{name}.tex" for name in ("cells", "floors")]
        out += [f"{self.root}/bench/cells.{ext}" for ext in ("json", "png")]
        out += [f"{self.root}/figures/interference.{ext}" for ext in ("pdf", "png", "html")]
        out += [f"{self.root}/figures/score_variance.{ext}" for ext in ("pdf", "png")]
        for name in self.experiments:
            out += self.experiment_targets(name)
        out += [f"{self.root}/claims.md", f"{self.root}/tables/claims.tex"]
        out += self._lattice_targets(self.experiments)
        return out

    def study_targets(self, study: str) -> list[str]:
        """The tables and figures of one study (`studies:` in the config): its experiments',
        and the lattice report's where the study holds the lattice experiments."""
        if study not in self.studies:
            raise KeyError(f"study {study!r} is not one of {sorted(self.studies)}")
        names = self.studies[study]
        return [t for name in names for t in self.experiment_targets(name)] + (
            self._lattice_targets(names)
        )
