"""One training or evaluation job's prediction, from its run-table row (`arbench.resources`).

A row (`arbench.experiment.Run`) gives the task, model and train blocks; the task gives the
row's shape (`Task.train_shape`, `Task.eval_shape`); the probe table gives memory and work,
or a family's own memory model where the family names one
(`arbench.models.families.MEMORY_MODELS`, e.g. the key-value benchmark's transformer's
`arbench.models.kvbench_memory`); the device gives time. Nothing here runs a model.

Time is priced as the job will run. A training whose load schedule stops early
(``train.load.stop``, accuracy-gated rungs) runs until its last rung passes its gate, a step
no setting fixes: it is priced at the config's expected stop (``resources.expected_steps``,
the source's own run length), spread evenly over its rungs in whole gate windows, each rung at
its own shape; ``train.steps``, every step at the last rung, is kept apart as its bound
(`Estimate.bound_seconds`). An evaluation that sweeps several lengths is priced length by
length (a long row's attention costs more per token than a short one's).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from arbench.evaluate.recall import EVAL_BATCH_TOKENS, eval_rows
from arbench.experiment import Run
from arbench.resources import (
    CUDA_HOST_BYTES,
    HOST_BASE_BYTES,
    Device,
    Estimate,
    ProbeTable,
    Shape,
    predict,
    probe_specs,
)
from arbench.tasks import build_task

FORWARD_SHARE = 1 / 3  # a forward pass's share of a training step's work
F32, INT64 = 4, 8
CHECKPOINT_EVERY = 500  # train.checkpoint_every when a train block leaves it out (TrainConfig)


_SHAPES: dict[str, tuple[int, int]] = {}  # (task, settings) -> a task's row shape, per process


def _shape_of(run: Run, kind: str, settings: Any) -> tuple[int, int]:
    """``Task.train_shape(settings)`` or ``Task.eval_shape(**settings)`` of ``run``'s task,
    computed once per process for each task block and settings (planning asks thousands)."""
    key = json.dumps([kind, run.task, settings], sort_keys=True, default=str)
    if key not in _SHAPES:
        task = build_task(run.task)
        _SHAPES[key] = (
            task.train_shape(settings) if kind == "train" else task.eval_shape(**settings)
        )
    return _SHAPES[key]


def _eval_settings(run: Run) -> dict[str, Any]:
    """The evaluation options of ``run`` its task's `evaluate` takes."""
    names = build_task(run.task).eval_option_names()
    return {k: v for k, v in run.eval_options.items() if k in names}


def train_shape(run: Run) -> Shape:
    """Rows, length and answers of one training step of ``run`` at its longest row:
    ``train.batch`` rows, or under ``train.tokens_per_step`` that budget's worth of the row
    (at least one, at most ``batch``: `arbench.train.settings.batch_size`)."""
    length, supervised = _shape_of(run, "train", run.train)
    budget, rows = run.train.get("tokens_per_step"), int(run.train["batch"])
    if budget:
        rows = max(1, min(rows, int(budget) // length))
    micro = run.train.get("micro_batch_tokens")
    per_part = max(1, int(micro) // length) if micro else rows
    return Shape(rows=rows, length=length, supervised=supervised, parts=-(-rows // per_part))


def eval_shape(run: Run) -> Shape:
    """Rows, length and answers of one evaluation batch of ``run``: its longest sequence
    (`Task.eval_shape`) in batches of its ``batch_tokens`` option (`recall.eval_rows`)."""
    options = _eval_settings(run)
    length, supervised = _shape_of(run, "eval", options)
    batch_tokens = int(options.get("batch_tokens", EVAL_BATCH_TOKENS))
    rows = min(eval_rows(length, batch_tokens), max(1, run.examples))
    return Shape(rows=rows, length=length, supervised=supervised)


def _vocab_positions(run: Run) -> tuple[int, int | None]:
    task = build_task(run.task)
    return task.vocab_size, task.positions()


def _memory_model(run: Run) -> Any | None:
    """The own memory and work model of ``run``'s model family
    (`arbench.models.families.memory_model`); None where the probe table prices it."""
    from arbench.models import families

    return families.memory_model(run.model)


def _model_config(run: Run) -> Any:
    """The configuration ``run``'s model block builds, with its task's vocabulary and length."""
    from arbench.models import families

    vocab, positions = _vocab_positions(run)
    return families.model_config(run.model, vocab, positions=positions)


def specs(run: Run) -> list[Any]:
    """The probes ``run``'s training and evaluation are predicted from (none for a family
    with its own memory model)."""
    if _memory_model(run) is not None:
        return []
    vocab, positions = _vocab_positions(run)
    tr, ev = train_shape(run), eval_shape(run)
    rungs = [s.length for s in rung_shapes(run)] if stopping(run) else []  # priced per rung
    return probe_specs(
        run.model, vocab, positions, [tr.length, ev.length, *rungs], tr.supervised / tr.length
    )


def _own_work(run: Run, shape: Shape, *, train: bool) -> dict[str, float]:
    """Peak device bytes, FLOPs and operators of one training step of ``shape`` (``train``)
    or of evaluating one sequence of its length (its forward share of a step's work), from
    the own memory model of ``run``'s family (`_memory_model`)."""
    model, cfg = _memory_model(run), _model_config(run)
    if train:
        return model.train_work(cfg, shape.rows, shape.length)
    work = model.eval_work(cfg, shape.length, run.eval_options)
    return {
        "bytes": work["bytes"],
        "flops": work["flops"] * FORWARD_SHARE,
        "ops": work["ops"] * FORWARD_SHARE,
    }


def rung_shapes(run: Run) -> list[Shape]:
    """One step's shape at each rung of ``run``'s load schedule, in order (`train_shape` of
    a schedule of that rung alone); the one shape of a run without a schedule."""
    load = run.train.get("load")
    if not load:
        return [train_shape(run)]
    return [
        train_shape(dataclasses.replace(run, train={**run.train, "load": {**load, "values": [v]}}))
        for v in load["values"]
    ]


def stopping(run: Run) -> bool:
    """Whether ``run``'s load schedule can end training early (gated rungs with ``stop``)."""
    load = run.train.get("load") or {}
    return bool(load.get("stop")) and load.get("threshold") is not None


def rung_steps(run: Run, expected: int) -> list[int]:
    """Steps of each rung when a stopping schedule (`stopping`) ends training after about
    ``expected`` steps: ``expected`` in whole windows of ``every`` steps (at least one per
    rung, the least a gate can take; at most ``train.steps``), spread evenly over the rungs,
    the windows left over given to the last (costliest) rungs."""
    load = run.train["load"]
    every, rungs = int(load.get("every", 50)), len(load["values"])
    windows = max(rungs, min(round(expected / every), int(run.train["steps"]) // every))
    each, extra = divmod(windows, rungs)
    return [every * (each + (i >= rungs - extra)) for i in range(rungs)]


def _train_step(
    run: Run, shape: Shape, job: str, device: Device, table: ProbeTable
) -> tuple[float, float]:
    """Peak device bytes and seconds on ``device`` of one training step of ``shape``: a
    step's rows in ``shape.parts`` passes of at most ``shape.part_rows`` rows
    (``train.micro_batch_tokens``), so memory is one pass's and work the whole step's."""
    if _memory_model(run) is not None:
        k = _own_work(run, shape, train=True)
        part = _own_work(run, Shape(shape.part_rows, shape.length, shape.supervised), train=True)
        device_bytes, flops, ops = part["bytes"], k["flops"], shape.parts * k["ops"]
    else:
        p = predict(table, specs(run), Shape(shape.part_rows, shape.length, shape.supervised), job)
        device_bytes = p["peak_bytes"]
        flops = p["flops_fixed"] + shape.rows * p["flops_per_row"]
        ops = shape.parts * p["ops"]
    return device_bytes, device.seconds(flops, ops)


def train_estimate(
    run: Run, job: str, device: Device, table: ProbeTable, expected_steps: int | None = None
) -> Estimate:
    """Peak memory and time of training ``run`` on ``device`` (any seed), named ``job``:
    ``train.steps`` at the longest row; for a schedule that stops early (`stopping`) with
    ``expected_steps``, those steps at each rung's own shape (`rung_steps`), the former kept
    as the bound (module docstring)."""
    shape = train_shape(run)
    steps = int(run.train["steps"])
    device_bytes, step_seconds = _train_step(run, shape, job, device, table)
    seconds, bound = steps * step_seconds, None
    slowest = step_seconds
    if expected_steps is not None and stopping(run):
        rungs = [_train_step(run, s, job, device, table) for s in rung_shapes(run)]
        device_bytes = max(device_bytes, *(b for b, _ in rungs))
        slowest = max(slowest, *(t for _, t in rungs))
        bound = seconds
        per_rung = rung_steps(run, expected_steps)
        seconds = sum(n * t for n, (_, t) in zip(per_rung, rungs, strict=True))
    every = int(run.train.get("checkpoint_every", CHECKPOINT_EVERY))
    host = _host_bytes(device, device_bytes, _parameters(run, table, job), shape, train=True)
    return Estimate(
        job,
        device.name,
        device_bytes,
        host,
        seconds,
        shape,
        bound_seconds=bound,
        checkpoint_seconds=min(every, steps) * slowest,
    )


def eval_estimate(run: Run, job: str, device: Device, table: ProbeTable) -> Estimate:
    """Peak memory and time of evaluating ``run`` on ``device`` (any seed), named ``job``:
    its longest evaluation batch, and its tokens (`Task.eval_tokens`) at that batch's cost
    per row."""
    shape = eval_shape(run)
    tokens = build_task(run.task).eval_tokens(run.examples, **_eval_settings(run))
    rows_total = max(1, tokens // shape.length)
    batches = -(-rows_total // shape.rows)
    # the sequences the host holds at once: the held-out set, or one sweep length's
    held = min(tokens, max(1, run.examples) * shape.length)
    if _memory_model(run) is not None:  # priced length by length (`_eval_rows_by_length`)
        k = _own_work(run, Shape(1, shape.length, shape.supervised), train=False)
        device_bytes = k["bytes"]
        pieces = _eval_rows_by_length(run)
        seconds = sum(
            n * device.seconds(p["flops"], p["ops"])
            for n, p in (
                (n, _own_work(run, Shape(1, length, 1), train=False)) for length, n in pieces
            )
        )
        held = max(n * length for length, n in pieces)
    else:
        p = predict(table, specs(run), shape, job)
        device_bytes = p["eval_peak_bytes"]
        per_row_flops = p["flops_per_row"] * FORWARD_SHARE
        seconds = batches * device.seconds(0.0, p["ops"] * FORWARD_SHARE) + rows_total * (
            device.seconds(per_row_flops, 0.0)
        )
    host = _host_bytes(
        device, device_bytes, _parameters(run, table, job), shape, train=False, held=held
    )
    return Estimate(job, device.name, device_bytes, host, seconds, shape)


def _eval_rows_by_length(run: Run) -> list[tuple[int, int]]:
    """(sequence length, sequences) of everything an evaluation priced by its family's own
    memory model (the key-value benchmark's) reads: its held-out
    set, then each sweep length (``n`` keys or ``lengths`` tokens) by itself, from the task's
    own count (`Task.eval_tokens` of that length alone, less the held-out set's)."""
    task, options = build_task(run.task), _eval_settings(run)
    alone = {**options, "n": [], "lengths": []}
    held = task.eval_tokens(run.examples, **alone)
    length = _shape_of(run, "eval", alone)[0]
    out = [(length, max(1, held // length))]
    for key in ("n", "lengths"):
        for value in options.get(key) or []:
            one = {**alone, key: [value]}
            length = _shape_of(run, "eval", one)[0]
            tokens = task.eval_tokens(run.examples, **one) - held
            out.append((length, max(1, tokens // length)))
    return out


def _parameters(run: Run, table: ProbeTable, job: str) -> float:
    """Parameters of ``run``'s model: counted from its shapes by its family's own memory model
    where it has one (the key-value transformer), every other model's as its probe measured
    it."""
    model = _memory_model(run)
    if model is not None:
        return float(model.n_parameters(_model_config(run)))
    spec = specs(run)[0]
    return float(table.get(spec, job)["parameters"])


def _host_bytes(
    device: Device,
    device_bytes: float,
    parameters: float,
    shape: Shape,
    *,
    train: bool,
    held: int = 0,
) -> float:
    """Host memory of a job whose peak device memory is ``device_bytes``. A CPU job holds its
    tensors in host memory beside the process's base (`HOST_BASE_BYTES`). A GPU job holds
    them on the device; on the host it keeps the base, the CUDA runtime's share
    (`CUDA_HOST_BYTES`) and what passes through the host: a training's checkpoint (weights
    and AdamW's two moments copied off the device, serialised into a buffer and copied once
    more to be written) and each batch's token ids and targets (int64, drawn on the host and
    copied into tensors); an evaluation's weights (the loaded file and the model built on the
    host before it moves), the ``held`` tokens of the sequences it holds at once (the held-out
    set, or one sweep length's: ids, targets and predictions, int64) and one batch's tensors
    before they move."""
    if not device.gpu:
        return HOST_BASE_BYTES + device_bytes
    batch = shape.rows * shape.length
    if train:
        passing = 2 * 3 * parameters * F32 + 2 * 2 * INT64 * batch
    else:
        passing = 2 * parameters * F32 + 3 * INT64 * max(held, batch) + 2 * INT64 * batch
    return HOST_BASE_BYTES + CUDA_HOST_BYTES + passing
