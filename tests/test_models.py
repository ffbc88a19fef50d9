"""Models from a cell name and a state/parameter budget; state matching across the zoo."""

from __future__ import annotations

import pytest
import torch

from arbench.cells import CELLS
from arbench.models import ModelConfig, build_model
from arbench.models.budget import build_for_budget, fit


@pytest.mark.parametrize("cell", sorted(CELLS))
def test_every_cell_fits_the_factorial_budget(cell: str) -> None:
    chosen = fit(cell, 130, state_per_layer=1024, parameters=29_282)
    model = build_for_budget(cell, 130, state_per_layer=1024, parameters=29_282)
    assert model.n_parameters() == chosen.model_parameters
    if cell == "attention":
        assert chosen.state_per_layer == 0  # a KV cache, no fixed state
    else:
        assert model.state_size_per_layer() == chosen.state_per_layer == 1024
    logits, _ = model(torch.randint(0, 130, (2, 9)))
    assert logits.shape == (2, 9, 130)


def test_parameter_budget_picks_the_closest_shape() -> None:
    small = fit("mamba2", 130, state_per_layer=1024, parameters=29_000)
    large = fit("mamba2", 130, state_per_layer=1024, parameters=60_000)
    assert small.model_parameters < large.model_parameters


def test_impossible_budget_is_an_error() -> None:
    with pytest.raises(ValueError, match="state elements"):
        fit("delta_rule", 130, state_per_layer=1000)
    with pytest.raises(KeyError, match="unknown cell"):
        fit("lstm", 130)


def test_initial_weights_are_a_function_of_the_seed_only() -> None:
    cfg = ModelConfig(vocab_size=20, d_model=16, cell="delta_rule", cell_options={"conv": True})
    torch.manual_seed(123)
    a, b, c = build_model(cfg, 1), build_model(cfg, 1), build_model(cfg, 2)
    after = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(1))  # building consumed none of the caller's RNG
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
