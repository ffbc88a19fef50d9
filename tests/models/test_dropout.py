"""Seeded dropout (`arbench.models.dropout`): masks are a pure function of (seed, step, row),
drawn from the generators handed in and never from torch's global RNG, and a model that
would drop without generators raises instead of falling back to global state."""

from __future__ import annotations

import pytest
import torch

from arbench.models.dropout import SeededDropout, drawing_from, draws, row_generators
from arbench.models.kvbench import KVModelConfig, KVTransformer

X = torch.ones(3, 50, 8)


def _mask(seed: int, step: int, p: float = 0.25) -> torch.Tensor:
    layer = SeededDropout(p)
    with drawing_from(layer, row_generators(seed, step, range(len(X)))):
        return layer(X) != 0


def test_a_mask_is_a_pure_function_of_seed_step_and_row() -> None:
    before = torch.get_rng_state()
    a = _mask(0, 0)
    assert torch.equal(a, _mask(0, 0))
    assert not torch.equal(a, _mask(1, 0)) and not torch.equal(a, _mask(0, 1))
    assert not torch.equal(a[0], a[1])  # each row its own draw
    assert torch.equal(torch.get_rng_state(), before)  # the global RNG is never drawn


def test_it_is_dropout_kept_elements_scaled_and_gradients_masked() -> None:
    layer = SeededDropout(0.25)
    x = torch.randn(4, 400, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with drawing_from(layer, row_generators(3, 5, range(4))):
        y = layer(x)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.75) < 0.02
    torch.testing.assert_close(y[kept], x[kept] / 0.75)
    y.sum().backward()
    torch.testing.assert_close(x.grad, kept.float() / 0.75)
    assert layer.generators is None  # set for the block only


def test_without_generators_training_raises_and_evaluation_needs_none() -> None:
    cfg = KVModelConfig(d_model=16, layers=2, heads=2, kv_heads=2, head_dim=8, ffn_hidden=32,
                        dropout=0.1)  # fmt: skip
    model = KVTransformer(cfg)
    tokens = torch.randint(0, 12, (2, 24), generator=torch.Generator().manual_seed(0))
    assert draws(model) and not draws(KVTransformer(KVModelConfig(d_model=16, dropout=0.0)))
    with pytest.raises(RuntimeError, match="drawing_from"):
        model(tokens)
    with pytest.raises(ValueError, match="3 generators for a batch of 2 rows"):
        with drawing_from(model, row_generators(0, 0, range(3))):
            model(tokens)
    with torch.no_grad():
        ev = model.eval()(tokens)
        assert torch.equal(ev, model(tokens))  # evaluation: no masks, nothing drawn
