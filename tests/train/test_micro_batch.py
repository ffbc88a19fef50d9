"""train.micro_batch_tokens: a step in several forward-backward passes gives the gradients,
loss and accuracy of the step in one pass (up to float summation order)."""

from __future__ import annotations

import pytest
import torch

from arbench.models import ModelConfig, families
from arbench.tasks import build_task
from arbench.tasks.base import Signal
from arbench.train.settings import TrainConfig
from arbench.train.step import forward_backward, micro_batches

TASK = {"name": "mqar", "pairs": 8, "n_keys": 16, "n_values": 16, "seq_len": 0, "answer": "key"}
KV_TASK = {"name": "kvbench", "n": 8, "key_digits": 7, "value_digits": 3, "mutant_j": 7}
KV_MODEL = {"family": "kvbench", "d_model": 16, "layers": 2, "heads": 2, "kv_heads": 2,
            "head_dim": 8, "ffn_hidden": 32, "dropout": 0.1}  # fmt: skip


def _grads(micro: int | None) -> tuple[float, float, list[torch.Tensor]]:
    task = build_task(TASK)
    cfg = ModelConfig(
        vocab_size=task.vocab_size,
        d_model=16,
        layers=1,
        cell="delta_rule",
        cell_options={"heads": 1, "conv": True},
    )
    model = families.build(cfg, 0)
    drawn = task.train_batch(0, 0, 10)
    train = TrainConfig(batch=10, micro_batch_tokens=micro)
    loss, acc = forward_backward(model, drawn, [], 0, torch.device("cpu"), (), train)
    return float(loss.detach()), float(acc), [p.grad.clone() for p in model.parameters()]


def test_parts_hold_the_rows_a_token_budget_admits() -> None:
    drawn = build_task(TASK).train_batch(0, 0, 10)
    length = drawn.tokens.shape[1]
    parts = micro_batches(drawn, TrainConfig(micro_batch_tokens=3 * length + 1))
    assert [len(p) for p in parts] == [3, 3, 3, 1]
    assert (torch.from_numpy(parts[1].tokens) == torch.from_numpy(drawn.tokens[3:6])).all()
    assert micro_batches(drawn, TrainConfig(micro_batch_tokens=1)).__len__() == 10
    assert micro_batches(drawn, TrainConfig()) == [drawn]


def test_accumulated_passes_give_the_whole_steps_gradients() -> None:
    loss, acc, grads = _grads(None)
    length = build_task(TASK).train_batch(0, 0, 1).tokens.shape[1]
    loss3, acc3, grads3 = _grads(3 * length)
    assert loss3 == pytest.approx(loss, rel=1e-6) and acc3 == pytest.approx(acc, abs=1e-7)
    for g, g3 in zip(grads, grads3, strict=True):
        torch.testing.assert_close(g3, g, rtol=1e-5, atol=1e-7)


def test_a_budget_of_the_whole_batch_is_the_unsplit_step_exactly() -> None:
    loss, acc, grads = _grads(None)
    length = build_task(TASK).train_batch(0, 0, 1).tokens.shape[1]
    same_loss, same_acc, same = _grads(10 * length)
    assert (same_loss, same_acc) == (loss, acc)
    assert all(torch.equal(a, b) for a, b in zip(grads, same, strict=True))


def test_a_bad_budget_names_the_key() -> None:
    with pytest.raises(ValueError, match="train.micro_batch_tokens must be an integer >= 1"):
        TrainConfig(micro_batch_tokens=0).validate()


def test_dropouts_masks_follow_their_rows_into_the_parts() -> None:
    """With dropout each row draws its masks from (seed, step, row), whichever part it falls
    in: the split step's gradients are the whole step's (up to float summation order)."""
    task = build_task(KV_TASK)
    cfg = families.model_config(KV_MODEL, task.vocab_size)
    drawn = task.train_batch(0, 0, 6, Signal(load=2))
    length = drawn.tokens.shape[1]

    def grads(micro: int | None, seed: int = 3) -> list[torch.Tensor]:
        model = families.build(cfg, 0)
        train = TrainConfig(batch=6, micro_batch_tokens=micro)
        forward_backward(model, drawn, [], 4, torch.device("cpu"), (), train, seed=seed)
        return [p.grad.clone() for p in model.parameters()]

    whole = grads(None)
    for g, g2 in zip(whole, grads(2 * length), strict=True):
        torch.testing.assert_close(g2, g, rtol=1e-5, atol=1e-7)
    assert not all(torch.equal(a, b) for a, b in zip(whole, grads(None, seed=4), strict=True))
