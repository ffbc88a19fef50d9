"""One training step, as the loop (`arbench.train.loop`) and the benchmarks take it: the
masked cross-entropy (`masked_loss`), the step's rows in micro-batches (`micro_batches`) with
their gradients accumulated (`forward_backward`), the clipped optimiser step (`train_step`) and
the AdamW the run trains with (`make_optimizer`).

Nothing in a step draws from torch's global RNG: dropout's masks come from generators of
(seed, step, row) (`forward_backward`, `arbench.models.dropout`), the spread regulariser's
subsample from one of (seed, step) (`arbench.train.spread.generator`).
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from arbench.batch import IGNORE, Batch
from arbench.evaluate.recall import hidden_at
from arbench.models import LanguageModel, dropout
from arbench.train.adamw import make_adamw
from arbench.train.hooks import TrainHook
from arbench.train.settings import TrainConfig


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
