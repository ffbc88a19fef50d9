"""The paper recipe's training knobs: which parameters AdamW decays, the 1/t loss weight,
the ids a task never predicts kept out of the loss and the argmax, and a paper-recipe run
training end to end on the paper's MQAR."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from arbench.models import families
from arbench.tasks import build_task
from arbench.tasks.base import IGNORE
from arbench.train.loop import train
from arbench.train.settings import TrainConfig
from arbench.train.step import make_optimizer, masked_loss

MODEL = {
    "family": "denoiser",
    "d_model": 16,
    "layers": 1,
    "cell": "deltanet_ref",
    "cell_options": {"decay": True, "conv": True},
}
TASK = {"name": "paper_mqar", "pairs": 4}


def _model(**over):
    task = build_task(TASK)
    cfg = families.model_config({**MODEL, **over}, task.vocab_size, positions=task.positions())
    return task, families.build(cfg, 0)


def _decayed(opt: torch.optim.Optimizer) -> set[int]:
    return {id(p) for g in opt.param_groups if g["weight_decay"] > 0 for p in g["params"]}


def test_decay_params_all_decays_every_parameter_matrices_only_2d_non_embeddings() -> None:
    _, model = _model()
    every = {id(p) for p in model.parameters()}
    opt = make_optimizer(
        model, TrainConfig.from_dict({"decay_params": "all", "weight_decay": 0.01})
    )
    assert _decayed(opt) == every and len(opt.param_groups) == 1
    opt = make_optimizer(model, TrainConfig())
    decayed = _decayed(opt)
    named = dict(model.named_parameters())
    assert id(named["embed.weight"]) not in decayed and id(named["norm.bias"]) not in decayed
    assert all(p.ndim >= 2 for n, p in named.items() if id(p) in decayed)


def test_a_bad_decay_params_or_loss_weight_fails_naming_the_key() -> None:
    with pytest.raises(ValueError, match="train.decay_params"):
        TrainConfig.from_dict({"decay_params": "bias"})
    with pytest.raises(ValueError, match="train.loss_weight"):
        TrainConfig.from_dict({"loss_weight": 0})


def test_loss_weight_scales_the_loss_and_excluded_ids_leave_the_softmax() -> None:
    task, model = _model()
    tokens, targets = task.train_batch(0, 0, 8).tensors()
    plain, acc = masked_loss(model, tokens, targets)
    doubled, acc2 = masked_loss(model, tokens, targets, weight=2.0)
    assert torch.allclose(doubled, 2 * plain) and acc == acc2
    mask = task.never_predicted()
    assert mask == (task.vocab_size - 1,)
    # with the MASK logit driven to the top, only the exclusion keeps it out of the argmax
    with torch.no_grad():
        model.embed.weight[mask[0]] *= 50
    sel = targets != IGNORE
    h = model.hidden(tokens)[0][sel]
    assert (model.logits(h).argmax(-1) == mask[0]).any()
    kept, _ = masked_loss(model, tokens, targets, exclude=mask)
    logits = model.logits(h)
    logits[:, mask[0]] = torch.finfo(logits.dtype).min
    ref = torch.nn.functional.cross_entropy(logits, targets[sel])
    assert torch.allclose(kept, ref)


def test_a_paper_recipe_run_trains_end_to_end(tmp_path: Path) -> None:
    task = build_task(TASK)
    cfg = families.model_config(MODEL, task.vocab_size, positions=task.positions())
    training = {
        "steps": 30,
        "batch": 32,
        "lr": 3e-3,
        "warmup": 0,
        "betas": [0.9, 0.999],
        "weight_decay": 0.01,
        "decay_params": "all",
        "loss_weight": 2.0,
        "recipe": "paper",
        "checkpoint_every": 15,
        "log_every": 10,
    }
    out = train(
        task, cfg, TrainConfig.from_dict(training), 0, tmp_path, threads=1, task_settings=TASK
    )
    assert out["train"]["recipe"] == "paper" and out["train"]["loss_weight"] == 2.0
    assert out["n_parameters"] == sum(p.numel() for p in families.build(cfg, 0).parameters())
    assert 0.0 <= out["scores"]["final_train_acc"] <= 1.0
