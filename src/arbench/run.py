"""The run layer: everything a job does, so each Snakemake script is a few lines of glue.

* `train_run` trains (or resumes) one (experiment, arm, seed) run and writes its record,
  ``final.json``, which holds the model's exact shape;
* `evaluate_run` rebuilds the model from that record and scores it with its task, after
  checking that the model file, the record and the task asked for describe the same run;
* `write_eval_set` / `validate_stream` write and check a stream task's held-out data;
* `write_release_split` / `write_release_index` / `validate_release` write and check a release
  task's file set.

Every output goes through a temporary file and a rename (`arbench.io`).
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

from arbench.batch import Batch, Signal
from arbench.io import atomic_write_json, read_json, sha256_file
from arbench.mismatch import SettingsMismatch, differences
from arbench.runtime import Log
from arbench.tasks import build_task, task_class
from arbench.tasks.base import Release, Task, load_eval_set, save_eval_set

FINAL = "final.json"


class DataRejected(RuntimeError):
    """The oracle found problems in data that a run would have trained or been scored on."""


def _quiet(_: str) -> None:
    return None


def train_run(
    task: dict[str, Any],
    model: dict[str, Any],
    training: dict[str, Any],
    seed: int,
    run_dir: str | Path,
    *,
    data_dir: str | Path | None = None,
    warm_start: str | Path | None = None,
    threads: int = 1,
    record: dict[str, Any] | None = None,
    log: Log = _quiet,
) -> dict[str, Any]:
    """Train one run in ``run_dir`` (resuming from its checkpoint) and write ``final.json``.

    ``task`` and ``training`` are the experiment's task and train blocks, ``model`` the arm's
    model settings (`arbench.experiment.Run.model`); ``record`` adds fields to the record
    (experiment, arm, scale). A train block with ``warm_start`` needs ``warm_start``, the base
    run's model file: the run starts from it, vocabulary grown (`warm_start_weights`), and
    the base's fingerprint joins the run's settings, so a retrained base restarts it. Returns
    the record.
    """
    from arbench.models import families  # torch: imported by the jobs that train, only
    from arbench.train.loop import train
    from arbench.train.settings import TrainConfig

    adapter = build_task(task, data_dir)
    positions = getattr(adapter, "positions", lambda: None)()  # sizes learned positions
    model_cfg = families.model_config(model, adapter.vocab_size, positions=positions)
    warm = training.get("warm_start")
    if bool(warm) != (warm_start is not None):
        raise ValueError(
            "train.warm_start and the base model file go together: "
            f"train.warm_start={warm!r}, base model file {warm_start!r}"
        )
    initial = None
    if warm:
        initial, base_fp = warm_start_weights(warm_start, model_cfg, warm["noise"], seed)
        training = {**training, "warm_start": {**warm, "base": base_fp}}
        log(f"warm start from {warm_start} (noise {warm['noise']})")
    payload = train(
        adapter,
        model_cfg,
        TrainConfig.from_dict(training),
        seed,
        run_dir,
        threads=threads,
        progress=log,
        task_settings=task,
        initial_weights=initial,
    )
    payload.update(record or {})
    payload["task"] = task
    atomic_write_json(Path(run_dir) / FINAL, payload)
    log(f"done in {payload['wall_time_s']:.1f}s: {payload['scores']}")
    return payload


def warm_start_weights(
    base_model: str | Path, model_cfg: Any, noise: float, seed: int
) -> tuple[dict[str, Any], str]:
    """The initial weights of a run warm-started from ``base_model`` (a model file), and the
    base's fingerprint: every parameter of the base copied, the vocabulary rows grown from
    the base's keys to ``model_cfg``'s by `arbench.models.vocab_extension.extend_vocabulary`
    (donor ``j mod old_keys``, noise ``noise`` x the tensor's std from a generator seeded by
    ``seed``), as the lattice protocol module continues its 1,024-key model. A base whose
    model differs from ``model_cfg`` other than in its vocabulary, or whose vocabulary is not
    smaller, is a `SettingsMismatch` naming the file and the field."""
    import dataclasses

    import torch

    from arbench.models.vocab_extension import extend_vocabulary
    from arbench.train.run_files import load_model_file, model_identity

    blob = load_model_file(base_model)
    base = dict(blob["settings"]["model"])
    ours = model_identity(dataclasses.asdict(model_cfg))
    shape = {k: v for k, v in ours.items() if k != "vocab_size"}
    theirs = {k: v for k, v in base.items() if k != "vocab_size"}
    if shape != theirs:
        raise SettingsMismatch(
            f"{base_model}: a warm start needs the base's model shape "
            f"(base vs this run: {differences({'model': theirs}, {'model': shape})})"
        )
    old_vocab, new_vocab = int(base["vocab_size"]), int(ours["vocab_size"])
    if old_vocab >= new_vocab or old_vocab % 2 or new_vocab % 2:
        raise SettingsMismatch(
            f"{base_model}: a warm start grows a vocabulary of 2 keys + 2 ids to a larger one; "
            f"base vocab_size {old_vocab}, this run's {new_vocab}"
        )
    weights = extend_vocabulary(
        blob["weights"],
        (old_vocab - 2) // 2,
        (new_vocab - 2) // 2,
        noise,
        torch.Generator().manual_seed(int(seed)),
    )
    return weights, blob["fingerprint"]


def evaluate_run(
    run_dir: str | Path,
    task: dict[str, Any],
    *,
    data_dir: str | Path | None = None,
    examples: int | None = None,
    options: dict[str, Any] | None = None,
    progress: Any = None,
    device: str = "cpu",
) -> dict[str, Any]:
    """Score a finished run with its task's evaluator. The model's shape comes from the run's
    own record, never from the config, so it is the model that was trained. ``progress`` (a
    callable taking a line) reaches an evaluator that reports as it goes (a long sweep).
    ``device`` (`arbench.device.resolve_device`: "cpu", "cuda", or "auto", CUDA where visible)
    is where the model is scored: every evaluator draws its batches onto the model's device.

    A model file trained under other settings than its record (copied from another run or
    config), or a record of a run on other task settings than ``task``, is a
    `SettingsMismatch` naming the file and what differs: never a score of the wrong model.
    """
    from arbench.device import resolve_device
    from arbench.models import families  # torch: imported by the jobs that score, only
    from arbench.train.run_files import load_trained, record_settings

    final_path = Path(run_dir) / FINAL
    final = read_json(final_path)
    _check_task(final_path, final, task)
    model = load_trained(
        run_dir,
        families.config_from_record(final["model"]),
        settings=record_settings(final),
        expected_from=f"its record {final_path}",
    ).to(resolve_device(device))
    evaluator = build_task(task, data_dir)
    options = dict(options or {})
    if progress is not None and "progress" in inspect.signature(evaluator.evaluate).parameters:
        options["progress"] = progress
    scores = evaluator.evaluate(model, examples=examples, **options)
    return {
        "scores": scores,
        "n_parameters": final["n_parameters"],
        "state_size_per_layer": final["state_size_per_layer"],
        # the bytes scored: what ties this eval JSON to its training, and the same after a
        # resume (the training's wall time, which is not, is the final.json's alone)
        "model_sha256": sha256_file(Path(run_dir) / "model.pt"),
    }


def _check_task(final_path: Path, final: dict[str, Any], task: dict[str, Any]) -> None:
    """The run was trained on the task settings the evaluation asks for."""
    ran, asked = json.loads(json.dumps(final.get("task"))), json.loads(json.dumps(task))
    if ran != asked:
        raise SettingsMismatch(
            f"{final_path}: the run was trained on other task settings than this evaluation's "
            f"(run vs evaluation: {differences({'task': ran}, {'task': asked})})"
        )


def write_eval_set(task: dict[str, Any], examples: int, out: str | Path) -> Batch:
    """Write a stream task's held-out set (int16, compressed) and return it."""
    held_out = build_task(task).eval_set(examples)
    save_eval_set(held_out, out)
    return held_out


def validate_stream(
    task: dict[str, Any], data_dir: str | Path, seeds: int, batch: int, log: Log = _quiet
) -> dict[str, Any]:
    """The oracle over a stream task's held-out set and over the first batch of every seed's
    training stream, and the task's self-tests of its controls (`Task.self_tests`); raises
    DataRejected (the report in its message) on any problem."""
    adapter = build_task(task)
    held_out = load_eval_set(data_dir)
    problems = adapter.oracle(held_out)
    tests = adapter.self_tests(held_out)
    problems += [f"self-test {name} failed: {t}" for name, t in tests.items() if not t["ok"]]
    report: dict[str, Any] = {
        "eval_set": {"sequences": len(held_out), "problems": problems[:20]},
        "self_tests": tests,
        "train_stream": {},
    }
    for seed in range(seeds):
        found = adapter.oracle(adapter.train_batch(seed, 0, batch))
        report["train_stream"][f"seed{seed}"] = {"sequences": batch, "problems": found[:20]}
        problems += found
    for i, signal in enumerate(_signal_samples(adapter)):  # what training options make of it
        found = adapter.oracle(adapter.train_batch(0, i, batch, signal))
        report["train_stream"][f"signal{i}"] = {"signal": str(signal), "problems": found[:20]}
        problems += found
    report["valid"] = not problems
    if problems:
        raise DataRejected(f"oracle rejected the data: {problems[:5]}")
    log("oracle: every target re-derived from the token stream")
    return report


def _signal_samples(adapter: Task) -> list[Signal]:
    """Training signals to check a task's batches under: the curriculum's ends and middle,
    sparse and dense, for the signal fields the task honours."""
    if not adapter.signals:
        return []
    gaps = [0.0, 0.5, 1.0] if "gap" in adapter.signals else [None]
    denses = [False, True] if "dense" in adapter.signals else [False]
    return [Signal(gap=g, dense=d) for g in gaps for d in denses]


def _release(task: str) -> Release:
    release = task_class(task).release
    if release is None:
        raise ValueError(f"task {task!r} has no release")
    return release


def write_release_split(
    task: str,
    settings: dict[str, Any],
    subset: str,
    split: str,
    out_dir: str | Path,
    log: Log = _quiet,
) -> dict[str, Any]:
    """Write one (subset, split) of a release with its task's writer."""
    return _release(task).write_split(Path(out_dir), subset, split, settings, progress=log)


def write_release_index(
    task: str, settings: dict[str, Any], out_dir: str | Path, log: Log = _quiet
) -> Any:
    """Write a release's index files (card, vocabulary, statistics) from its splits."""
    return _release(task).write_index(Path(out_dir), settings, progress=log)


def _first_problem(report: dict[str, Any]) -> str:
    """The report's first problem as one line: a file-level error, else a failing row."""
    if report.get("errors"):
        return str(report["errors"][0])
    for f in report.get("failures", []):
        where = f.get("file", f"{f.get('config')}/{f.get('split')}")
        return f"{where} row {f['row']} (seed {f['seed']}): {'; '.join(f['reasons'])}"
    return "no examples checked"


def validate_release(
    task: str,
    settings: dict[str, Any],
    out_dir: str | Path,
    log: Log = _quiet,
    report_copy: str | Path | None = None,
) -> dict[str, Any]:
    """Run a release's oracle over every file and return its report; the release is left as
    it is. The report also goes to ``report_copy`` whatever the outcome (a failed job's
    declared outputs are deleted, so that is where a rejection is recorded). Raises
    DataRejected, one line naming the first problem and the report, when any check fails."""
    try:
        report = _release(task).validate(Path(out_dir), settings, progress=log)
    except Exception as err:
        if report_copy is not None:
            crash = {"ok": False, "errors": [f"validation crashed: {type(err).__name__}: {err}"]}
            atomic_write_json(report_copy, crash)
        raise
    if report_copy is not None:
        atomic_write_json(report_copy, report)
    summary = {k: report[k] for k in ("ok", "examples_checked", "failed_examples") if k in report}
    log(json.dumps(summary))
    if not report["ok"]:
        problems = len(report.get("errors", [])) + int(report.get("failed_examples", 0))
        where = f"; report: {report_copy}" if report_copy is not None else ""
        raise DataRejected(
            f"{task} release {out_dir} rejected: {_first_problem(report)} "
            f"({problems} problem(s) in all{where})"
        )
    return report
