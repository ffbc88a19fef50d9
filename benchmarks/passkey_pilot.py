"""The passkey_swar trade-off pilots of docs/NOTEBOOK.md ("passkey_swar: the trade-off pilot").

Trains one arm of the passkey_swar study for S steps of B on sequences drawn from the
release's own generator (train split seeds, so fresh examples every step instead of the
release's 2,000 per config), with the project's model (`families.build`), loss
(`masked_loss`), optimizer groups and warmup+cosine schedule, on one thread; then scores
the validation split's first examples (the same seeds as the release's validation files)
with the task's streaming evaluator, per answer type. Prints one JSON line per run.

    .venv/bin/python benchmarks/passkey_pilot.py --arm single --steps 320 --batch 16
    .venv/bin/python benchmarks/passkey_pilot.py --arm lin_multi --steps 1200 --lr 1e-2 \
        --warmup 30 --configs 32/32/32,64/32,64,128 --decay 0.88,0.975,0.995,0.9999 --seed 1

Arms: single/multi are the study's delta_rule arms; lin_single/lin_multi the same shapes on a
pilot-only cell without the delta rule's erase (`DecayedLinearCell`).

Options beyond the study's: `--configs` (train configs, default the release's 32..256;
groups separated by "/" are used one after another, each for an equal share of the steps:
a length curriculum),
`--decay` (initial per-token retention per head, comma-separated, one value for all heads;
default the cell's own init), `--layers`, `--passkey-weight` (an extra weight on the passkey
positions' loss; 1 = the study's loss).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from arbench.cells.additive import AdditiveCell  # noqa: E402
from arbench.cells.base import CELLS, register  # noqa: E402
from arbench.models import ModelConfig, families  # noqa: E402
from arbench.tasks.base import IGNORE, Batch  # noqa: E402
from arbench.tasks.passkey_swar.generator import (  # noqa: E402
    Params,
    example_seed,
    generate_seeds,
)
from arbench.tasks.passkey_swar.task import PasskeySwarTask  # noqa: E402
from arbench.train.schedule import lr_at  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402
from arbench.train.step import make_optimizer, masked_loss  # noqa: E402


class DecayedLinearCell(AdditiveCell):
    """Pilot-only cell: additive linear attention with one learned input-independent decay per
    head, S <- a_h S + k v^T, and no delta-rule erase (the card's premise taken literally);
    decay initialised as delta_rule's `decay: constant` (sigmoid of 3, or of 2..7 spread)."""

    def __init__(self, d_model: int, **options) -> None:
        super().__init__(d_model, **options)
        h = self.heads
        init = torch.linspace(2.0, 7.0, h) if h > 1 else torch.tensor([3.0])
        self.decay_logit = torch.nn.Parameter(init)

    def prepare(self, x, state):
        (q, k, v, _, s0), ctx = super().prepare(x, state)
        b, t, _ = x.shape
        log_a = F.logsigmoid(self.decay_logit)[None, :, None].expand(b, -1, t)
        return (q, k, v, log_a, s0), ctx


if "pilot_decayed_linear" not in CELLS:
    register("pilot_decayed_linear")(DecayedLinearCell)

ARMS = {  # config.yaml: experiments.passkey_swar.arms
    "single": {"cell": "delta_rule", "heads": 1, "conv": True, "decay": "constant"},
    "multi": {
        "cell": "delta_rule",
        "heads": 4,
        "d_k": 16,
        "d_v": 16,
        "conv": True,
        "decay": "constant",
    },
    # the same two shapes without the delta rule's erase (pilot-only cell above)
    "lin_single": {"cell": "pilot_decayed_linear", "heads": 1, "conv": True},
    "lin_multi": {"cell": "pilot_decayed_linear", "heads": 4, "d_k": 16, "d_v": 16, "conv": True},
}


def as_batch(seeds: np.ndarray, N: int, params: Params) -> Batch:
    """Generated examples as the task's right-padded Batch (targets = labels shifted left)."""
    ex = generate_seeds(seeds, N, params)
    lengths = np.diff(ex.offsets)
    L = int(lengths.max())
    tokens = np.zeros((len(seeds), L), dtype=np.int64)
    labels = np.full((len(seeds), L), IGNORE, dtype=np.int64)
    for i in range(len(seeds)):
        a, b = ex.offsets[i], ex.offsets[i + 1]
        tokens[i, : b - a] = ex.input_ids[a:b]
        labels[i, : b - a] = ex.labels[a:b]
    targets = np.full_like(labels, IGNORE)
    targets[:, :-1] = labels[:, 1:]
    return Batch(tokens=tokens, targets=targets, lengths=lengths)


class GeneratedTask(PasskeySwarTask):
    """The study's task, its splits generated in memory instead of read from the release."""

    def __init__(self, eval_configs: list[int], eval_examples: int) -> None:
        super().__init__(None, [32, 64, 128, 256], eval_configs)
        self.eval_examples = eval_examples

    def _split(self, N: int, split: str) -> Batch:
        seeds = np.array([example_seed(2, N, i) for i in range(self.eval_examples)])
        return as_batch(seeds, N, self.params)


def decays(model: torch.nn.Module) -> list[list[float]]:
    """Per layer, each head's per-token retention sigmoid(decay_logit)."""
    return [
        [round(float(a), 5) for a in torch.sigmoid(b.mixer.decay_logit.detach())]
        for b in model.blocks
        if hasattr(b.mixer, "decay_logit")
    ]


def run(args: argparse.Namespace) -> dict:
    torch.set_num_threads(1)
    spec = dict(ARMS[args.arm])
    cell = spec.pop("cell")
    params = Params()
    cfg = ModelConfig(
        vocab_size=params.vocab_size,
        d_model=32,
        layers=args.layers,
        mlp_ratio=4,
        cell=cell,
        cell_options=spec,
    )
    train = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, warmup=args.warmup)
    model = families.build(cfg, args.seed)
    if args.decay:
        init = [float(x) for x in args.decay.split(",")]
        for b in model.blocks:
            p = b.mixer.decay_logit
            vals = torch.tensor(init if len(init) == p.numel() else init * p.numel())
            with torch.no_grad():
                p.copy_(torch.logit(vals.clamp(1e-6, 1 - 1e-7).double()).float())
    init_decays = decays(model)
    opt = make_optimizer(model, train)
    # "32/32,64/32,64,128,256": one group of train configs per equal share of the steps
    stages = [[int(c) for c in g.split(",")] for g in args.configs.split("/")]
    rng = np.random.default_rng(args.seed)
    model.train()
    t_model, t0 = 0.0, time.perf_counter()
    curve = []
    for step in range(args.steps):
        lr = lr_at(
            step, lr=train.lr, warmup=train.warmup, total=train.steps, min_ratio=train.min_lr_ratio
        )
        for g in opt.param_groups:
            g["lr"] = lr
        configs = stages[step * len(stages) // args.steps]
        N = configs[int(rng.integers(len(configs)))]
        idx = step * args.batch + np.arange(args.batch)
        b = as_batch(np.array([example_seed(1, N, int(i) % 10**6) for i in idx]), N, params)
        tokens, targets = b.tensors()
        t1 = time.perf_counter()
        if args.passkey_weight == 1.0:
            loss, acc = masked_loss(model, tokens, targets)
        else:  # upweight the four passkey answers (the positions after PKQ)
            h, _ = model.hidden(tokens)
            sel = targets != IGNORE
            logits = model.logits(h[sel])
            gold = targets[sel]
            kinds = task_kinds(b)
            w = torch.where(torch.from_numpy(kinds[sel.numpy()] == 3), args.passkey_weight, 1.0)
            loss = (F.cross_entropy(logits, gold, reduction="none") * w).sum() / w.sum()
            acc = (logits.argmax(-1) == gold).float().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), train.grad_clip)
        opt.step()
        t_model += time.perf_counter() - t1
        if (step + 1) % max(1, args.steps // 8) == 0:
            curve.append((step + 1, round(loss.item(), 3), round(acc.item(), 3)))
    wall = time.perf_counter() - t0
    task = GeneratedTask([int(n) for n in args.eval.split(",")], args.eval_examples)
    t2 = time.perf_counter()
    ev = task.evaluate(model)
    keep = ("ar_valid", "ar_expired_never", "ar_expired_stale", "passkey")
    scores = {
        n: {k: (None if r[k] is None else round(r[k], 3)) for k in keep}
        for n, r in ev["per_config"].items()
    }
    return {
        "arm": args.arm,
        "steps": args.steps,
        "batch": args.batch,
        "lr": args.lr,
        "warmup": args.warmup,
        "configs": args.configs,
        "layers": args.layers,
        "decay_init": init_decays,
        "passkey_weight": args.passkey_weight,
        "seed": args.seed,
        "scores": scores,
        "decays": decays(model),
        "half_life_tokens": [
            [round(math.log(0.5) / math.log(a), 1) if a < 1 else None for a in layer]
            for layer in decays(model)
        ],
        "s_per_step": round(t_model / args.steps, 4),
        "train_wall_s": round(wall, 1),
        "eval_s": round(time.perf_counter() - t2, 1),
        "curve": curve,
    }


def task_kinds(b: Batch) -> np.ndarray:
    from arbench.tasks.passkey_swar.task import answer_types

    return answer_types(b.tokens, b.targets, Params().w)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arm", choices=sorted(ARMS), default="single")
    ap.add_argument("--steps", type=int, default=320)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=6e-3)
    ap.add_argument("--warmup", type=int, default=16)
    ap.add_argument("--configs", default="32,64,128,256")
    ap.add_argument("--decay", default="")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--passkey-weight", type=float, default=1.0)
    ap.add_argument("--eval", default="256,1024")
    ap.add_argument("--eval-examples", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    print(json.dumps(run(ap.parse_args())), flush=True)
