"""Training-step speed of the paper recipe's arms, beside today's causal cells and, given a
checkout of the paper's repository, beside the paper's own code at the same shapes.

The paper's code (JIBSIL/dualgoose @824f4b73) runs its reference cells as a Python loop over
time steps; at its factorial shapes (one thread, batch 256, K = 32, L = 72) issue 30 measured
406-660 ms a training step (28k-45k tokens/s) on this machine. This script times what the
pipeline runs: each arm of `experiments.paper_mqar` (and of `experiments.factorial`, the causal
recipe) built from the resolved config, one full training step (the loop's `train_step`:
forward, masked loss, backward, clip, AdamW) on the task's own batches, a warm-up and then
the median of several steps, arms timed in turns so that machine drift hits all alike.

    .venv/bin/python benchmarks/paper_recipe_speed.py [--steps 7] [--paper-code DIR]

``--paper-code DIR`` (a checkout of JIBSIL/dualgoose) also times the paper's own models
(its `build_tiny_denoiser`, `make_mqar_batch` and `masked_nll_loss`) the same way and prints
our tokens/s over theirs, arm for arm. Nothing of that code is copied here.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from arbench import config as arbench_config  # noqa: E402
from arbench.experiment import runs_of  # noqa: E402
from arbench.models import families  # noqa: E402
from arbench.tasks.base import build_task  # noqa: E402
from arbench.train.settings import TrainConfig  # noqa: E402
from arbench.train.step import make_optimizer, train_step  # noqa: E402

CPU = torch.device("cpu")

# the paper's labels and their mqar_probe.py model names (the same, for these arms)
PAPER_ARMS = (
    "armed_gdn",
    "gated_deltanet",
    "deltanet",
    "dg_rank_ref",
    "dg_diag_ref",
    "dg_rank_conv_ref",
    "dg_diag_conv",
    "mamba2_ref",
    "mamba2_ref_noconv",
)


def _ours(experiment: str, batch: int | None) -> dict[str, Any]:
    """A step function per arm of one experiment, built as its training job builds it."""
    cfg = arbench_config.load(scale="paper")
    exp = cfg["experiments"][experiment]
    steps = {}
    for run in runs_of(experiment, exp):
        task = build_task(run.task)
        train = TrainConfig.from_dict(run.train)
        model_cfg = families.model_config(run.model, task.vocab_size, positions=task.positions())
        model = families.build(model_cfg, 0)
        opt = make_optimizer(model, train)
        b = batch or train.batch
        excluded = task.never_predicted()

        def step(i: int, model=model, opt=opt, task=task, train=train, b=b, ex=excluded):
            drawn = task.train_batch(0, i, b)
            train_step(model, opt, drawn, [], i, CPU, ex, train, seed=0)  # the loop's own step
            return drawn.tokens.size

        steps[run.name] = step
    return steps


def _paper(code: Path, batch: int, k: int = 32) -> dict[str, Any]:
    """A step function per Table 1 arm of the paper's own code (its mqar_probe trial loop)."""
    sys.path.insert(0, str(code))
    sys.path.insert(0, str(code / "scripts"))
    probe = importlib.import_module("mqar_probe")
    diffusion = importlib.import_module("dualgoose.diffusion")
    toy = importlib.import_module("dualgoose.toy_data")
    vocab, seq_len = 64, 2 * k + 8
    steps = {}
    for label in PAPER_ARMS:
        torch.manual_seed(0)
        model = probe.build(label, vocab, seq_len, 32, 1, 8, mamba2_d_state=16)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        gen = torch.Generator().manual_seed(0)

        def step(i: int, model=model, opt=opt, gen=gen):
            b = toy.make_mqar_batch(
                batch,
                seq_len,
                vocab,
                vocab - 1,
                pairs=k,
                query_layout="after_table",
                generator=gen,
            )
            logits = model(b.corrupted, b.t)
            loss = diffusion.masked_nll_loss(logits, b.clean, b.corrupted, vocab - 1, t=b.t)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return b.corrupted.numel()

        steps[label] = step
    return steps


def time_in_turns(fns: dict[str, Any], steps: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per step of each function, one step of each in turn (after warm-up)."""
    for fn in fns.values():
        for i in range(warmup):
            fn(i)
    times: dict[str, list[float]] = {name: [] for name in fns}
    tokens: dict[str, int] = {}
    for i in range(steps):
        for name, fn in fns.items():
            start = time.perf_counter()
            tokens[name] = fn(warmup + i)
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(t), tokens[name]) for name, t in times.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=7, help="timed steps per arm")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--paper-code", type=Path, default=None, help="a JIBSIL/dualgoose checkout")
    parser.add_argument("--causal", action="store_true", help="also time the factorial's arms")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    fns = {f"paper_mqar/{k}": v for k, v in _ours("paper_mqar", None).items()}
    if args.causal:
        fns |= {f"factorial/{k}": v for k, v in _ours("factorial", None).items()}
    if args.paper_code is not None:
        fns |= {f"paper code/{k}": v for k, v in _paper(args.paper_code, 256).items()}
    result = time_in_turns(fns, args.steps)
    print(f"{'arm':34} {'ms/step':>9} {'tokens/s':>10} {'vs paper':>9}")
    for name, (sec, tok) in result.items():
        arm = name.split("/", 1)[1]
        theirs = result.get(f"paper code/{arm}")
        ratio = f"{theirs[0] / sec:8.1f}x" if theirs and not name.startswith("paper code") else ""
        print(f"{name:34} {sec * 1e3:9.1f} {tok / sec:10.0f} {ratio:>9}")
    if args.paper_code is None:
        print(
            "the paper's code at these shapes on this machine (issue 30): 406-660 ms/step, "
            "28k-45k tokens/s; pass --paper-code DIR to time it in turns"
        )


if __name__ == "__main__":
    main()
