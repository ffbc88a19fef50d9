"""Seed-pinned, resumable training with AdamW and warmup+cosine.

Every batch is a pure function of (seed, step) and the model's initial weights
a pure function of the seed, so a run that is killed and resumed from its last
checkpoint reproduces an uninterrupted run bit for bit (same thread count).
"""

from __future__ import annotations

import io
import json
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import arbench
from arbench.io import atomic_write_bytes
from arbench.models import LanguageModel, ModelConfig, build_model
from arbench.tasks.base import IGNORE, Signal, Task
from arbench.train.curriculum import Curriculum, CurriculumConfig
from arbench.train.schedule import lr_at


@dataclass
class TrainConfig:
    """Optimisation settings of one run."""

    steps: int = 4000
    batch: int = 64
    lr: float = 3e-3
    warmup: int = 200
    weight_decay: float = 0.1
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    checkpoint_every: int = 500
    log_every: int = 50
    device: str = "cpu"  # cpu | cuda | auto (cuda when available); bitwise claims hold on cpu
    # training-signal options (the task must honour them, `Task.signals`): a distance
    # curriculum (`arbench.train.curriculum`) and dense supervision of every query
    curriculum: CurriculumConfig | None = None
    dense: bool = False

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        if d.get("curriculum") is not None and not isinstance(d["curriculum"], CurriculumConfig):
            d["curriculum"] = CurriculumConfig.from_dict(d["curriculum"])
        return cls(**d)


# each training-signal option of `TrainConfig` and the `Signal` field it sets
SIGNAL_FIELDS = {"dense": "dense", "curriculum": "gap"}


def check_signals(task: Task, cfg: TrainConfig) -> None:
    """Fail early, naming the option, when the task ignores a training-signal option."""
    for option, field in SIGNAL_FIELDS.items():
        if getattr(cfg, option) and field not in task.signals:
            raise ValueError(
                f"train.{option}: task {task.name!r} has no {field!r} signal "
                f"(it honours {sorted(task.signals) or 'none'})"
            )


def resolve_device(name: str) -> torch.device:
    """'auto' picks CUDA when present; an explicit 'cuda' without a GPU is an error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device is 'cuda' but no CUDA device is visible")
    return torch.device(name)


def versions() -> dict[str, str]:
    """Library versions recorded in every run's JSON."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "arbench": arbench.__version__,
    }


def masked_loss(
    model: LanguageModel, tokens: torch.Tensor, targets: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy and correct-count at supervised positions only."""
    h, _ = model.hidden(tokens)
    sel = targets != IGNORE
    logits = model.logits(h[sel])
    gold = targets[sel]
    loss = F.cross_entropy(logits, gold)
    correct = (logits.argmax(-1) == gold).sum()
    return loss, correct / gold.numel()


def _optimizer(model: LanguageModel, cfg: TrainConfig) -> torch.optim.AdamW:
    decay = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.ndim >= 2 and "embed" not in n)]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def _save_checkpoint(
    path: Path, model, opt, step: int, metrics: list[str], ramp: Curriculum | None
) -> None:
    """Model, optimizer, step, the metric lines so far and the curriculum's state, written
    atomically."""
    buf = io.BytesIO()
    state = {"model": model.state_dict(), "optim": opt.state_dict(), "step": step}
    if ramp is not None:
        state["curriculum"] = ramp.state()
    torch.save({**state, "metrics": metrics}, buf)
    atomic_write_bytes(path, buf.getvalue())


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
) -> dict[str, Any]:
    """Train (or resume) one run in ``run_dir``; return the final-JSON payload.

    ``stop_after`` ends the process-free run early after that many steps (used
    by tests to emulate a kill); ``progress`` is a callable taking a string.
    """
    torch.set_num_threads(threads)
    check_signals(task, cfg)
    ramp = None if cfg.curriculum is None else Curriculum(cfg.curriculum, cfg.steps)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path, metrics_path = run_dir / "checkpoint.pt", run_dir / "metrics.jsonl"
    device = resolve_device(cfg.device)
    model = build_model(model_cfg, seed).to(device)
    opt = _optimizer(model, cfg)
    start, lines = 0, []
    if ckpt_path.exists():
        ck = torch.load(ckpt_path, map_location=device, weights_only=True)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        start, lines = int(ck["step"]), list(ck["metrics"])
        if ramp is not None:
            ramp.load_state(ck["curriculum"])
        if progress:
            progress(f"resumed from checkpoint at step {start}")
    # the metrics file always restarts from what the checkpoint vouches for
    metrics_path.write_text("".join(ln + "\n" for ln in lines))
    last = {k: json.loads(lines[-1])[k] for k in ("loss", "acc", "grad_norm")} if lines else {}

    t0 = time.perf_counter()
    model.train()
    with metrics_path.open("a") as metrics:
        for step in range(start, cfg.steps):
            lr = lr_at(
                step, lr=cfg.lr, warmup=cfg.warmup, total=cfg.steps, min_ratio=cfg.min_lr_ratio
            )
            for g in opt.param_groups:
                g["lr"] = lr
            gap = None if ramp is None else ramp.gap(step)
            if ramp is None and not cfg.dense:  # a task without signals need not take one
                drawn = task.train_batch(seed, step, cfg.batch)
            else:
                drawn = task.train_batch(seed, step, cfg.batch, Signal(gap=gap, dense=cfg.dense))
            tokens, targets = drawn.tensors(device)
            loss, acc = masked_loss(model, tokens, targets)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
            opt.step()
            if ramp is not None:
                ramp.observe(step, acc.item())
            done = step + 1
            if done % cfg.log_every == 0 or done == cfg.steps:
                last = {"loss": loss.item(), "acc": acc.item(), "grad_norm": gnorm.item()}
                extra = {} if gap is None else {"gap": gap}
                lines.append(json.dumps({"step": done, "lr": lr, **last, **extra}))
                metrics.write(lines[-1] + "\n")
                metrics.flush()
                if progress:
                    progress(
                        f"step {done}/{cfg.steps} loss {last['loss']:.4f} acc {last['acc']:.3f} "
                        f"({time.perf_counter() - t0:.0f}s)"
                    )
            if done % cfg.checkpoint_every == 0 or done == cfg.steps:
                _save_checkpoint(ckpt_path, model, opt, done, lines, ramp)
            if stop_after is not None and done >= stop_after and done < cfg.steps:
                return {"stopped_at": done}
    wall = time.perf_counter() - t0
    buf = io.BytesIO()
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, buf)
    atomic_write_bytes(run_dir / "model.pt", buf.getvalue())
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
        "scores": {f"final_train_{k}": v for k, v in last.items()},
        "argv": sys.argv[1:],
    }


def load_trained(run_dir: str | Path, model_cfg: ModelConfig) -> LanguageModel:
    """Rebuild a trained model (on the CPU) from its run directory's final weights."""
    weights = torch.load(Path(run_dir) / "model.pt", map_location="cpu", weights_only=True)
    model = LanguageModel(model_cfg)
    model.load_state_dict(weights)
    model.eval()
    return model
