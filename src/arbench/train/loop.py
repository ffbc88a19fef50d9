"""Seed-pinned, resumable training with AdamW and warmup+cosine.

Every batch is a pure function of (seed, step), the model's initial weights a pure
function of the seed, and every random draw inside a step (dropout's masks,
`arbench.models.dropout`; the spread regulariser's subsample) comes from a generator
derived from (seed, step), never from torch's global RNG: two processes training one seed
write the same bytes, and a run that is killed and resumed from its last checkpoint
reproduces an uninterrupted run bit for bit (same thread count), with no generator state
to carry in the checkpoint.

The loop holds the run folder's lock while it trains, resumes from a checkpoint of the same
settings and writes the model file (`arbench.train.run_files`: identity, fingerprint,
checkpoints, model files, lock); each step is `arbench.train.step.train_step` on the batch
the task draws, the step's size from `arbench.train.settings.batch_size`.

The train block's optional features (curriculum, load schedule, dense supervision, the
spread regulariser) run as hooks (`arbench.train.hooks`), built from `HOOKS` in that order.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from arbench.device import resolve_device
from arbench.mismatch import differences
from arbench.models import ModelConfig, families
from arbench.tasks.base import Task
from arbench.train import hooks as train_hooks
from arbench.train.curriculum import CurriculumHook
from arbench.train.hooks import DenseHook, TrainHook
from arbench.train.load_schedule import LoadHook
from arbench.train.run_files import (
    OUT_OF_MEMORY,
    exclusive,
    fingerprint,
    one_line,
    read_checkpoint,
    run_settings,
    save_checkpoint,
    save_model_file,
    set_aside,
    task_identity,
    versions,
)
from arbench.train.schedule import lr_at
from arbench.train.settings import TrainConfig, batch_size, check_signals
from arbench.train.spread import SpreadHook, check_spread
from arbench.train.step import make_optimizer, train_step

# the training features, each a `TrainHook`; this order is that of their fields in a metrics
# line and of their states in a checkpoint
HOOKS: tuple[type[TrainHook], ...] = (CurriculumHook, LoadHook, DenseHook, SpreadHook)


def train(
    task: Task,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    seed: int,
    run_dir: str | Path,
    *,
    threads: int = 1,
    stop_after: int | None = None,
    progress: Any = None,
    task_settings: dict[str, Any] | None = None,
    initial_weights: dict[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """Train (or resume) one run in ``run_dir``; return the final-JSON payload.

    ``stop_after`` ends the process-free run early after that many steps (used
    by tests to emulate a kill); ``progress`` is a callable taking a string;
    ``task_settings`` is the task's config block, part of the run's fingerprint
    (default: the task's name and settings dataclass); ``initial_weights`` (a warm
    start, `arbench.run.warm_start_weights`) replace the seed's initial weights before
    step 0; the run's own checkpoint, when there is one, wins.
    """
    torch.set_num_threads(threads)
    check_signals(task, cfg)
    check_spread(task, cfg.spread, getattr(model_cfg, "cell", None))
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    with exclusive(run_dir, progress or _stderr):
        return _train(
            task,
            model_cfg,
            cfg,
            seed,
            run_dir,
            stop_after,
            progress,
            task_settings,
            initial_weights,
        )


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def _train(
    task: Task,
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    seed: int,
    run_dir: Path,
    stop_after: int | None,
    progress: Any,
    task_settings: dict[str, Any] | None,
    initial_weights: dict[str, torch.Tensor] | None = None,
) -> dict[str, Any]:
    """The body of `train`, run while holding the run folder's lock."""
    say = progress or (lambda _: None)  # step lines; what the caller must know goes to `note`
    note = progress or _stderr
    settings = run_settings(
        asdict(model_cfg), asdict(cfg), task_settings or task_identity(task), seed
    )
    fp = fingerprint(settings)
    ckpt_path, metrics_path = run_dir / "checkpoint.pt", run_dir / "metrics.jsonl"
    device = resolve_device(cfg.device)

    def fresh() -> tuple[Any, list[TrainHook], Any]:
        """The model, hooks and optimizer at step 0."""
        model = families.build(model_cfg, seed).to(device)
        if initial_weights is not None:  # before the optimizer and hooks see the parameters
            model.load_state_dict(initial_weights)
        run = train_hooks.HookRun(steps=cfg.steps, model=model, seed=seed)
        return model, train_hooks.build(HOOKS, cfg, run), make_optimizer(model, cfg)

    model, hooks, opt = fresh()
    excluded = tuple(getattr(task, "never_predicted", tuple)())
    start, lines = 0, []
    ck = read_checkpoint(ckpt_path, device, note)
    if ck is not None and ck.get("fingerprint") != fp:
        theirs = json.loads(ck["settings"]) if "settings" in ck else None
        why = "no settings record" if theirs is None else differences(settings, theirs)
        note(
            f"{ckpt_path} (step {ck.get('step')}) was written by other run settings "
            f"(now vs checkpoint: {why}); starting afresh"
        )
        ckpt_path.unlink()
        ck = None
    if ck is not None:
        try:
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optim"])
            start, lines = int(ck["step"]), list(ck["metrics"])
            for h in hooks:
                if h.state_key is not None:
                    h.load_state(ck[h.state_key])
        except OUT_OF_MEMORY:
            raise
        except Exception as err:  # a checkpoint of these settings that does not fit the run
            set_aside(ckpt_path, f"cannot be resumed ({one_line(err)})", note)
            (model, hooks, opt), start, lines = fresh(), 0, []
        else:
            say(f"resumed from checkpoint at step {start}")
    # the metrics file always restarts from what the checkpoint vouches for
    metrics_path.write_text("".join(ln + "\n" for ln in lines))
    last = {k: json.loads(lines[-1])[k] for k in ("loss", "acc", "grad_norm")} if lines else {}

    t0 = time.perf_counter()
    model.train()
    # a run resumed after its schedule ended training (killed before model.pt) ends at once
    finished = [h for h in hooks if h.finished]
    stopped_early: int | None = start if finished else None
    with metrics_path.open("a") as metrics:
        for step in range(start, cfg.steps if stopped_early is None else start):
            lr = lr_at(
                step, lr=cfg.lr, warmup=cfg.warmup, total=cfg.steps, min_ratio=cfg.min_lr_ratio
            )
            for g in opt.param_groups:
                g["lr"] = lr
            signal = train_hooks.signal_of(hooks, step)
            batch = batch_size(task, cfg, signal)
            if signal is None:  # a task without signals need not take one
                drawn = task.train_batch(seed, step, batch)
            else:
                drawn = task.train_batch(seed, step, batch, signal)
            loss, acc, gnorm = train_step(
                model, opt, drawn, hooks, step, device, excluded, cfg, seed=seed
            )
            for h in hooks:
                h.observe(step, acc)
            done = step + 1
            # a schedule that ends training (train.load.stop) ends it after this step
            ending = any(h.finished for h in hooks)
            if ending:
                stopped_early = done
            if done % cfg.log_every == 0 or done == cfg.steps or ending:
                last = {"loss": loss.item(), "acc": acc.item(), "grad_norm": gnorm.item()}
                extra = {k: v for h in hooks for k, v in h.metrics().items()}
                lines.append(json.dumps({"step": done, "lr": lr, **last, **extra}))
                metrics.write(lines[-1] + "\n")
                metrics.flush()
                say(
                    f"step {done}/{cfg.steps} loss {last['loss']:.4f} acc {last['acc']:.3f} "
                    f"({time.perf_counter() - t0:.0f}s)"
                )
            if done % cfg.checkpoint_every == 0 or done == cfg.steps or ending:
                save_checkpoint(ckpt_path, model, opt, done, lines, settings, hooks)
            if ending:
                break
            if stop_after is not None and done >= stop_after and done < cfg.steps:
                return {"stopped_at": done}
    wall = time.perf_counter() - t0
    save_model_file(run_dir / "model.pt", model, fp, settings)
    ckpt_path.unlink(missing_ok=True)  # a forced rerun starts afresh and reproduces this run
    return {
        "seed": seed,
        "model": asdict(model_cfg),
        "train": asdict(cfg),
        "n_parameters": model.n_parameters(),
        "state_size_per_layer": model.state_size_per_layer(),
        "versions": versions(),
        "threads": torch.get_num_threads(),
        "device": str(device),
        "wall_time_s": wall,
        "resumed_from_step": start,
        "stopped_early_at": stopped_early,
        "fingerprint": fp,
        "task": settings["task"],
        "scores": {f"final_train_{k}": v for k, v in last.items()},
        "argv": sys.argv[1:],
    }
