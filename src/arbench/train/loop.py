"""Seed-pinned, resumable training with AdamW and warmup+cosine.

Every batch is a pure function of (seed, step), the model's initial weights a pure
function of the seed, and every random draw inside a step (dropout's masks,
`arbench.models.dropout`; the spread regulariser's subsample) comes from a generator
derived from (seed, step), never from torch's global RNG: two processes training one seed
write the same bytes, and a run that is killed and resumed from its last checkpoint
reproduces an uninterrupted run bit for bit (same thread count), with no generator state
to carry in the checkpoint.

A run's settings (model, training, task, seed: `run_settings`) are fingerprinted
(`fingerprint`) into its checkpoint and its model file. A checkpoint written under
other settings is discarded, with a log line, instead of resumed; a model file is
loaded only against the settings it was trained with (`load_trained`), so weights
from another config give an error naming what differs, never a wrong score. A checkpoint
torch cannot read, or one that does not fit the run, is set aside (``checkpoint.pt.corrupt``)
with a warning and the run starts afresh, so it never fails every rerun; a model file torch
cannot read is `UnreadableFile`, one line naming it and what to do. One
process trains a run folder at a time (a lock on the folder, where the file system
has locks): a job started while a killed workflow's orphan still trains that run
waits for it instead of mixing their files.

The train block's optional features (curriculum, load schedule, dense supervision, the
spread regulariser) run as hooks (`arbench.train.hooks`), built from `HOOKS` in that order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import json
import os
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
from arbench.batch import IGNORE, Batch
from arbench.device import resolve_device
from arbench.evaluate.recall import hidden_at
from arbench.io import atomic_write_bytes
from arbench.mismatch import SettingsMismatch, differences
from arbench.models import LanguageModel, ModelConfig, dropout, families
from arbench.settings import whole_number
from arbench.tasks.base import Task
from arbench.train import hooks as train_hooks
from arbench.train.adamw import make_adamw
from arbench.train.curriculum import CurriculumConfig, CurriculumHook
from arbench.train.hooks import DenseHook, TrainHook
from arbench.train.load_schedule import LoadConfig, LoadHook
from arbench.train.schedule import lr_at
from arbench.train.spread import SpreadConfig, SpreadHook, check_spread

MODEL_FORMAT = "arbench-model/1"  # model.pt: {"format", "fingerprint", "settings", "weights"}
# training options that change how a run is recorded, never what it computes: resuming
# across a change of these reproduces the same run
NOT_IDENTITY = frozenset({"checkpoint_every"})
# training options added after runs were recorded without them: unset (None), they are left
# out of a run's settings, so the fingerprints of the runs that do not use them stay as they were
UNSET_NOT_IDENTITY = frozenset({"warm_start", "tokens_per_step", "micro_batch_tokens"})
# model settings added after runs were recorded without them, left out the same way while unset
UNSET_MODEL_NOT_IDENTITY = frozenset({"block"})
# the training features, each a `TrainHook`; this order is that of their fields in a metrics
# line and of their states in a checkpoint
HOOKS: tuple[type[TrainHook], ...] = (CurriculumHook, LoadHook, DenseHook, SpreadHook)


@dataclass
class TrainConfig:
    """Optimisation settings of one run."""

    steps: int = 4000
    batch: int = 64
    # a token budget per step: each step draws max(1, min(batch, tokens_per_step // the
    # sequence length at its load)) sequences (the task's `sequence_length`), so ``batch``
    # caps short rungs and a load schedule's long rungs take fewer sequences. None: ``batch``
    # sequences every step
    tokens_per_step: int | None = None
    # rows per forward and backward: the step's rows in parts of this many tokens' worth
    # (at least one row), their gradients accumulated (`forward_backward`), so a step whose
    # activations exceed a device's memory still runs; None: the whole step at once
    micro_batch_tokens: int | None = None
    lr: float = 3e-3
    warmup: int = 200
    weight_decay: float = 0.1
    min_lr_ratio: float = 0.1
    grad_clip: float = 1.0
    checkpoint_every: int = 500
    log_every: int = 50
    device: str = "cpu"  # cpu | cuda | auto (cuda when available); bitwise claims hold on cpu
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW's
    # which parameters AdamW decays: "matrices" (2-D weights but the embeddings) or "all"
    # (every parameter, as torch.optim.AdamW(model.parameters()) does: the paper recipe)
    decay_params: str = "matrices"
    # a constant factor on the cross-entropy: the paper's masked-diffusion 1/t at t = 0.5 is 2
    loss_weight: float = 1.0
    # the recipe (config `recipes:`) these settings were expanded from; recorded so that the
    # fingerprint of a run names its recipe
    recipe: str = "causal"
    # training-signal options (the task must honour them, `Task.signals`): a distance
    # curriculum (`arbench.train.curriculum`), dense supervision of every query, and a load
    # schedule (`arbench.train.load_schedule`: bindings per batch, rung by rung)
    curriculum: CurriculumConfig | None = None
    dense: bool = False
    load: LoadConfig | None = None
    # the address-spread regulariser on a lattice layer's key write addresses
    # (`arbench.train.spread`); None: off
    spread: SpreadConfig | None = None
    # the run another run continues, its vocabulary grown ({experiment, arm, noise, base: the
    # base model's fingerprint}; `arbench.run.warm_start_weights`); None: from scratch
    warm_start: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrainConfig:
        d = dict(d)
        if d.get("curriculum") is not None and not isinstance(d["curriculum"], CurriculumConfig):
            d["curriculum"] = CurriculumConfig.from_dict(d["curriculum"])
        if d.get("load") is not None and not isinstance(d["load"], LoadConfig):
            d["load"] = LoadConfig.from_dict(d["load"])
        if d.get("spread") is not None and not isinstance(d["spread"], SpreadConfig):
            d["spread"] = SpreadConfig.from_dict(d["spread"])
        if "betas" in d:
            d["betas"] = tuple(float(b) for b in d["betas"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Checks a schema cannot express; a ValueError naming the key."""
        if self.decay_params not in DECAY_PARAMS:
            raise ValueError(
                f"train.decay_params must be one of {DECAY_PARAMS}, got {self.decay_params!r}"
            )
        if not self.loss_weight > 0:
            raise ValueError(f"train.loss_weight must be > 0, got {self.loss_weight}")
        for key in ("tokens_per_step", "micro_batch_tokens"):  # token budgets: None or >= 1
            value = getattr(self, key)
            if value is not None:
                whole_number(value, f"train.{key}")


DECAY_PARAMS = ("matrices", "all")

# each training-signal option of `TrainConfig` and the `Signal` field it sets
SIGNAL_FIELDS = {"dense": "dense", "curriculum": "gap", "load": "load"}


def check_signals(task: Task, cfg: TrainConfig) -> None:
    """Fail early, naming the option, when the task ignores a training-signal option."""
    for option, field in SIGNAL_FIELDS.items():
        if getattr(cfg, option) and field not in task.signals:
            raise ValueError(
                f"train.{option}: task {task.name!r} has no {field!r} signal "
                f"(it honours {sorted(task.signals) or 'none'})"
            )
    if cfg.tokens_per_step is not None and not hasattr(task, "sequence_length"):
        raise ValueError(
            f"train.tokens_per_step: task {task.name!r} gives no sequence length per batch "
            "(use train.batch)"
        )


def batch_size(task: Task, cfg: TrainConfig, signal: Any) -> int:
    """Sequences in one step: ``train.batch``, or under a token budget
    max(1, min(batch, tokens_per_step // the task's sequence length under this step's
    signal)). The loss stays a mean over the step's supervised tokens whatever the batch. A
    pure function of the signal, so a resumed run (whose schedule state the checkpoint
    holds) draws the same batches."""
    if cfg.tokens_per_step is None:
        return cfg.batch
    return max(1, min(cfg.batch, cfg.tokens_per_step // task.sequence_length(signal)))


def versions() -> dict[str, str]:
    """Library versions recorded in every run's JSON."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "arbench": arbench.__version__,
    }


def masked_loss(
    model: LanguageModel,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    *,
    exclude: tuple[int, ...] = (),
    weight: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight`` x cross-entropy and accuracy at supervised positions only. The ids in
    ``exclude`` (a task's `never_predicted`, e.g. the paper's MASK) get the most negative
    logit, out of both the softmax and the argmax, as the paper's masked loss suppresses MASK."""
    sel = targets != IGNORE
    logits = model.logits(hidden_at(model, tokens, sel))
    if exclude:
        logits = logits.index_fill(
            -1, logits.new_tensor(exclude, dtype=torch.long), torch.finfo(logits.dtype).min
        )
    gold = targets[sel]
    loss = F.cross_entropy(logits, gold)
    if weight != 1.0:
        loss = loss * weight
    correct = (logits.argmax(-1) == gold).sum()
    return loss, correct / gold.numel()


def micro_batches(drawn: Batch, cfg: TrainConfig) -> list[Batch]:
    """The step's rows in parts of ``train.micro_batch_tokens`` tokens' worth (at least one
    row each), or all of them at once when unset: what one forward and backward holds."""
    if cfg.micro_batch_tokens is None:
        return [drawn]
    rows = max(1, cfg.micro_batch_tokens // drawn.tokens.shape[1])
    if rows >= len(drawn):
        return [drawn]

    def part(a: np.ndarray | None, lo: int) -> np.ndarray | None:
        return None if a is None else a[lo : lo + rows]

    return [
        Batch(
            drawn.tokens[lo : lo + rows],
            drawn.targets[lo : lo + rows],
            part(drawn.lengths, lo),
            part(drawn.key_positions, lo),
        )
        for lo in range(0, len(drawn), rows)
    ]


def forward_backward(
    model: Any,
    drawn: Batch,
    hooks: list[TrainHook],
    step: int,
    device: torch.device,
    excluded: tuple[int, ...],
    cfg: TrainConfig,
    *,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's loss and accuracy, its gradients accumulated into the model. In parts
    (`micro_batches`) each part's loss is weighted by its share of the step's supervised
    positions and each hook's extra loss by its share of the rows, so the summed gradient is
    the whole batch's; in one part the computation is exactly the unsplit one. A model whose
    dropout draws takes row r's masks from `arbench.models.dropout.row_generators` of
    (``seed``, ``step``, r), in whichever part row r falls (no seed: such a model raises)."""
    parts = micro_batches(drawn, cfg)
    total = int((drawn.targets != IGNORE).sum())
    loss_sum: torch.Tensor | float = 0.0
    correct: torch.Tensor | float = 0.0
    randomised = seed is not None and dropout.draws(model)
    first = 0  # the part's first row in the step's batch
    for part in parts:
        tokens, targets = part.tensors(device)
        rows, first = range(first, first + len(part)), first + len(part)
        with contextlib.ExitStack() as around:
            if randomised:
                gens = dropout.row_generators(seed, step, rows, device)
                around.enter_context(dropout.drawing_from(model, gens))
            for h in hooks:
                around.enter_context(h.around_forward(step, part, device))
            loss, acc = masked_loss(
                model, tokens, targets, exclude=excluded, weight=cfg.loss_weight
            )
        if len(parts) > 1:
            share = int((part.targets != IGNORE).sum())
            loss = loss * (share / total)
            acc = acc * (share / total)
        for h in hooks:
            term = h.extra_loss(step)
            if term is not None:
                loss = loss + (term if len(parts) == 1 else term * (len(part) / len(drawn)))
        loss.backward()
        if len(parts) == 1:
            return loss, acc
        loss_sum = loss_sum + loss.detach()
        correct = correct + acc.detach()
    return loss_sum, correct  # type: ignore[return-value]


def train_step(
    model: Any,
    opt: Any,
    drawn: Batch,
    hooks: list[TrainHook],
    step: int,
    device: torch.device,
    excluded: tuple[int, ...],
    cfg: TrainConfig,
    *,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One optimiser step on ``drawn`` as training takes it: gradients zeroed, forward and
    backward (`forward_backward`, dropout's masks drawn from ``seed`` and ``step``), clipped
    to ``grad_clip``, the optimiser stepped; returns the loss, the accuracy and the gradient
    norm before clipping."""
    opt.zero_grad(set_to_none=True)
    loss, acc = forward_backward(model, drawn, hooks, step, device, excluded, cfg, seed=seed)
    gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    opt.step()
    return loss, acc, gnorm


def _decays(name: str, p: torch.nn.Parameter, which: str) -> bool:
    """Whether AdamW decays this parameter under ``train.decay_params``."""
    return which == "all" or (p.ndim >= 2 and "embed" not in name)


def make_optimizer(model: LanguageModel, cfg: TrainConfig) -> Any:
    """AdamW over the decayed and the undecayed parameters, on the model's device
    (`arbench.train.adamw.make_adamw`: the CPU's skips importing torch._dynamo): the
    optimiser a run trains with, for `train_step` (benchmarks build theirs here too)."""
    named = list(model.named_parameters())
    decay = [p for n, p in named if _decays(n, p, cfg.decay_params)]
    rest = [p for n, p in named if not _decays(n, p, cfg.decay_params)]
    groups = [
        {"params": decay, "weight_decay": cfg.weight_decay},
        {"params": rest, "weight_decay": 0.0},
    ]
    groups = [g for g in groups if g["params"]]
    device = named[0][1].device if named else torch.device("cpu")
    return make_adamw(groups, lr=cfg.lr, betas=tuple(cfg.betas), device=device)


def _unset_load_stop(train: dict[str, Any]) -> dict[str, Any]:
    """``train.load.stop`` came after runs were recorded without it: left out while off, so
    the fingerprints of load-schedule runs that do not stop early stay as they were."""
    load = train.get("load")
    if isinstance(load, dict) and not load.get("stop", False):
        train = {**train, "load": {k: v for k, v in load.items() if k != "stop"}}
    return train


def model_identity(model: dict[str, Any]) -> dict[str, Any]:
    """A model's settings as a run's identity holds them: less `UNSET_MODEL_NOT_IDENTITY`
    while unset."""
    return {k: v for k, v in model.items() if not (k in UNSET_MODEL_NOT_IDENTITY and v is None)}


def run_settings(
    model: dict[str, Any], train: dict[str, Any], task: dict[str, Any], seed: int
) -> dict[str, Any]:
    """What a run's result depends on: its model, training (less `NOT_IDENTITY`) and task
    settings and its seed, as plain JSON data (a final.json's fields give the same). Settings
    added after runs were recorded without them (`UNSET_NOT_IDENTITY`,
    `UNSET_MODEL_NOT_IDENTITY`) are left out while unset."""
    return json.loads(
        json.dumps(
            {
                "model": model_identity(model),
                "train": _unset_load_stop(
                    {
                        k: v
                        for k, v in train.items()
                        if k not in NOT_IDENTITY and not (k in UNSET_NOT_IDENTITY and v is None)
                    }
                ),
                "task": task,
                "seed": int(seed),
            }
        )
    )


def fingerprint(settings: dict[str, Any]) -> str:
    """A stable hash of the settings' canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def record_settings(record: dict[str, Any]) -> dict[str, Any]:
    """`run_settings` of a run's final.json record."""
    return run_settings(record["model"], record["train"], record["task"], record["seed"])


def _task_identity(task: Task) -> dict[str, Any]:
    """The task's settings when the caller gives none: its name and settings dataclass."""
    cfg = getattr(task, "cfg", None)
    settings = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
    return {"name": task.name, **settings}


@contextlib.contextmanager
def _exclusive(run_dir: Path, say: Any):
    """Hold an exclusive lock on the run folder; wait (saying so) while another process holds
    it. Where the file system has no locks (some network mounts) the run goes on without."""
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process is training {run_dir}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:
            say(f"cannot lock {run_dir} ({err}); training without a lock")
        _remove_stale_temps(run_dir, say)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_stale_temps(run_dir: Path, say: Any) -> None:
    """Delete the temp files (`arbench.io`'s ``.<name>.<hex>.tmp``) a killed writer left in
    the run folder: with the folder's lock held no other process is writing them."""
    for tmp in run_dir.glob(".*.tmp"):
        say(f"removing {tmp.name}, left by a process killed while writing it")
        tmp.unlink(missing_ok=True)


# what says nothing about a file's bytes: a checkpoint that met these is kept, not set aside
OUT_OF_MEMORY = (MemoryError, torch.OutOfMemoryError)


class UnreadableFile(RuntimeError):
    """A checkpoint or model file torch cannot read: truncated, overwritten or not torch's.
    Its message is one line naming the file, torch's error and (``advice``) what to do."""

    def __init__(self, path: Path, cause: str, advice: str = "") -> None:
        self.path, self.cause = path, cause
        super().__init__(f"{path}: unreadable ({cause})" + (f"; {advice}" if advice else ""))


def _one_line(err: BaseException) -> str:
    """An exception as one short line: its type and its message's first line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__


def _torch_file(path: Path, map_location: Any) -> Any:
    """``torch.load`` of ``path`` (weights only); `UnreadableFile` naming the file when torch
    cannot read it (it raises EOFError, OSError, RuntimeError or UnpicklingError, naming no
    file). A missing file stays a FileNotFoundError."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, *OUT_OF_MEMORY):
        raise
    except Exception as err:
        raise UnreadableFile(path, _one_line(err)) from None


def _set_aside(path: Path, why: str, note: Any) -> None:
    """Rename a checkpoint that cannot be resumed to ``<name>.corrupt`` (replacing an earlier
    one), saying so: the run starts afresh, and the next attempt does not meet it again."""
    aside = path.with_name(path.name + ".corrupt")
    path.replace(aside)
    note(f"warning: {path} {why}; set aside as {aside.name}, training starts afresh at step 0")


def _read_checkpoint(path: Path, device: torch.device, note: Any) -> dict[str, Any] | None:
    """The run's checkpoint, or None where there is none or it is unreadable (set aside)."""
    if not path.exists():
        return None
    try:
        ck = _torch_file(path, device)
    except UnreadableFile as err:
        _set_aside(path, f"is unreadable ({err.cause})", note)
        return None
    if not isinstance(ck, dict):
        _set_aside(path, f"is not a checkpoint (a {type(ck).__name__})", note)
        return None
    return ck


def _save_checkpoint(
    path: Path,
    model,
    opt,
    step: int,
    metrics: list[str],
    settings: dict[str, Any],
    hooks: list[TrainHook],
) -> None:
    """Model, optimizer, step, the metric lines so far, each stateful hook's state (under its
    `state_key`) and the run's settings with their fingerprint, written atomically."""
    buf = io.BytesIO()
    state = {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "step": step,
        "fingerprint": fingerprint(settings),
        "settings": json.dumps(settings, sort_keys=True),
    }
    for h in hooks:
        if h.state_key is not None:
            state[h.state_key] = h.state()
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
    with _exclusive(run_dir, progress or _stderr):
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
        asdict(model_cfg), asdict(cfg), task_settings or _task_identity(task), seed
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
    ck = _read_checkpoint(ckpt_path, device, note)
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
            _set_aside(ckpt_path, f"cannot be resumed ({_one_line(err)})", note)
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
                _save_checkpoint(ckpt_path, model, opt, done, lines, settings, hooks)
            if ending:
                break
            if stop_after is not None and done >= stop_after and done < cfg.steps:
                return {"stopped_at": done}
    wall = time.perf_counter() - t0
    buf = io.BytesIO()
    weights = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save(
        {
            "format": MODEL_FORMAT,
            "fingerprint": fp,
            "settings": json.dumps(settings, sort_keys=True),
            "weights": weights,
        },
        buf,
    )
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
        "stopped_early_at": stopped_early,
        "fingerprint": fp,
        "task": settings["task"],
        "scores": {f"final_train_{k}": v for k, v in last.items()},
        "argv": sys.argv[1:],
    }


def load_model_file(path: str | Path) -> dict[str, Any]:
    """A model file's contents: "weights" (the state dict), "settings" (the run settings it
    was trained with, a dict) and "fingerprint"; `SettingsMismatch` for a file without them,
    `UnreadableFile` (one line: the file and what to do) for one torch cannot read."""
    path = Path(path)
    try:
        blob = _torch_file(path, "cpu")
    except UnreadableFile as err:
        advice = (
            "the file is truncated or overwritten: delete it and rerun the workflow, which "
            "retrains the run that writes it"
        )
        raise UnreadableFile(path, err.cause, advice) from None
    if not (isinstance(blob, dict) and blob.get("format") == MODEL_FORMAT):
        raise SettingsMismatch(
            f"{path}: not an {MODEL_FORMAT} file (no record of the settings it was trained "
            "with, e.g. written by an older arbench); retrain the run"
        )
    return {**blob, "settings": json.loads(blob["settings"])}


def load_trained(
    run_dir: str | Path,
    model_cfg: ModelConfig,
    settings: dict[str, Any] | None = None,
    expected_from: str = "the expected run settings",
) -> LanguageModel:
    """Rebuild a trained model (on the CPU) from its run directory's final weights.

    With ``settings`` (`run_settings` of the run asked for, e.g. `record_settings` of its
    final.json), a model file trained under other settings is a `SettingsMismatch` naming the
    file and the fields that differ, instead of a model that would score the wrong run.
    """
    path = Path(run_dir) / "model.pt"
    blob = load_model_file(path)
    if settings is not None and blob["fingerprint"] != fingerprint(settings):
        raise SettingsMismatch(
            f"{path} was trained with other settings than {expected_from} "
            f"(model file vs expected: {differences(blob['settings'], settings)})"
        )
    model = families.instantiate(model_cfg)
    model.load_state_dict(blob["weights"])
    model.eval()
    return model
