"""One training or evaluation job's prediction, from its run-table row (`arbench.resources`).

A row (`arbench.experiment.Run`) gives the task, model and train blocks; the task gives the
row's shape (`Task.train_shape`, `Task.eval_shape`); the probe table or, for the key-value
benchmark's transformer, `arbench.models.kvbench_memory` gives memory and work; the device
gives time. Nothing here runs a model.
"""

from __future__ import annotations

import json
from typing import Any

from arbench.evaluate.recall import EVAL_BATCH_TOKENS, eval_rows
from arbench.experiment import Run
from arbench.resources import (
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
    (at least one, at most ``batch``: `arbench.train.loop.batch_size`)."""
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


def specs(run: Run) -> list[Any]:
    """The probes ``run``'s training and evaluation are predicted from (none for a family
    with its own memory model)."""
    if run.model.get("family") == "kvbench":
        return []
    vocab, positions = _vocab_positions(run)
    tr, ev = train_shape(run), eval_shape(run)
    return probe_specs(
        run.model, vocab, positions, [tr.length, ev.length], tr.supervised / tr.length
    )


def _kv_ops(cfg: Any, length: int, tile: int) -> float:
    """Operators one training step of the key-value transformer dispatches: about 200 per
    block (projections, norms, FFN, their backward), and a global layer's tiled attention
    about 60 per (query tile, key tile) pair beyond ``tile`` tokens (its forward, recompute
    and backward). An order of magnitude, for a step's launch cost."""
    tiles = -(-length // tile)
    pairs = tiles * (tiles + 1) / 2 if length > tile else 0
    global_layers = sum(1 for s in cfg.specs() if s.window is None)
    return 200.0 * cfg.layers + 60.0 * pairs * global_layers


def _kvbench(run: Run, shape: Shape, *, train: bool) -> dict[str, float]:
    """The key-value transformer's own model (`arbench.models.kvbench_memory`)."""
    from arbench.models import families
    from arbench.models import kvbench_memory as km

    vocab, positions = _vocab_positions(run)
    cfg = families.model_config(run.model, vocab, positions=positions)
    if train:  # training attends in tiles of TRAIN_TILE, evaluation in its own ``tile``
        from arbench.models.kvbench import TRAIN_TILE

        ops = _kv_ops(cfg, shape.length, TRAIN_TILE)
        return {
            "bytes": float(km.train_step_bytes(cfg, shape.rows, shape.length, TRAIN_TILE)),
            "flops": float(km.step_flops(cfg, shape.rows, shape.length)),
            "ops": ops,
        }
    tile = int(run.eval_options.get("tile", 4096))
    ops = _kv_ops(cfg, shape.length, tile)
    chunk = run.eval_options.get("chunk")
    return {
        "bytes": float(
            km.eval_bytes(
                cfg,
                shape.length,
                tile=tile,
                dtype_bytes=4,
                chunk=None if chunk is None else int(chunk),
            )
        ),
        "flops": float(km.step_flops(cfg, 1, shape.length) * FORWARD_SHARE),
        "ops": ops * FORWARD_SHARE,
    }


def train_estimate(run: Run, job: str, device: Device, table: ProbeTable) -> Estimate:
    """Peak memory and time of training ``run`` on ``device`` (any seed), named ``job``."""
    shape = train_shape(run)
    steps = int(run.train["steps"])
    if run.model.get("family") == "kvbench":
        k = _kvbench(run, shape, train=True)
        device_bytes, flops, ops = k["bytes"], k["flops"], k["ops"]
    else:
        p = predict(table, specs(run), Shape(shape.part_rows, shape.length, shape.supervised), job)
        device_bytes = p["peak_bytes"]
        flops = p["flops_fixed"] + shape.rows * p["flops_per_row"]
        ops = shape.parts * p["ops"]
    return _estimate(job, device, device_bytes, steps * device.seconds(flops, ops), shape)


def eval_estimate(run: Run, job: str, device: Device, table: ProbeTable) -> Estimate:
    """Peak memory and time of evaluating ``run`` on ``device`` (any seed), named ``job``:
    its longest evaluation batch, and its tokens (`Task.eval_tokens`) at that batch's cost
    per row."""
    shape = eval_shape(run)
    tokens = build_task(run.task).eval_tokens(run.examples, **_eval_settings(run))
    rows_total = max(1, tokens // shape.length)
    batches = -(-rows_total // shape.rows)
    if run.model.get("family") == "kvbench":
        k = _kvbench(run, Shape(1, shape.length, shape.supervised), train=False)
        device_bytes = k["bytes"]
        seconds = rows_total * device.seconds(k["flops"], k["ops"])
    else:
        p = predict(table, specs(run), shape, job)
        device_bytes = p["eval_peak_bytes"]
        per_row_flops = p["flops_per_row"] * FORWARD_SHARE
        seconds = batches * device.seconds(0.0, p["ops"] * FORWARD_SHARE) + rows_total * (
            device.seconds(per_row_flops, 0.0)
        )
    return _estimate(job, device, device_bytes, seconds, shape)


def _estimate(
    job: str, device: Device, device_bytes: float, seconds: float, shape: Shape
) -> Estimate:
    """An estimate on ``device``: a GPU job holds its tensors on the device and its host
    memory is the process's base; a CPU job holds both in host memory."""
    host = HOST_BASE_BYTES + (0 if device.gpu else device_bytes)
    return Estimate(job, device.name, device_bytes, host, seconds, shape)
