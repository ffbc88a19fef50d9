"""Budget fitting: a cell shaped to a state and parameter budget; state matched across the zoo."""

from __future__ import annotations

import pytest
import torch

from arbench.cells import CELLS
from arbench.models.budget import build_for_budget, fit


@pytest.mark.parametrize(
    "cell",
    [
        pytest.param(name, marks=pytest.mark.skipif(reason is not None, reason=str(reason)))
        for name, reason in sorted((n, k.unavailable_reason()) for n, k in CELLS.items())
    ],
)
def test_every_cell_fits_the_factorial_budget(cell: str) -> None:
    chosen = fit(cell, 130, state_per_layer=1024, parameters=29_282)
    model = build_for_budget(cell, 130, state_per_layer=1024, parameters=29_282)
    assert model.n_parameters() == chosen.model_parameters
    if cell in ("attention", "full_attention"):
        assert chosen.state_per_layer == 0  # keys and values per token, no fixed state
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


@pytest.mark.parametrize(("state", "width"), [(64, 16), (256, 16), (1024, 32), (4096, 64)])
def test_the_lattice_prefers_values_of_four_or_more(state: int, width: int) -> None:
    """At the frontier's smallest states the lattice is a small grid of d_v >= 4 vectors
    (state 64: 4x4 cells of 4 numbers), never a larger grid storing one number per cell."""
    chosen = fit("lattice", 130, state_per_layer=state, d_model=width, conv=True)
    assert chosen.state_per_layer == state and chosen.options["d_v"] >= 4
    if state == 64:
        assert chosen.options == {"heads": 1, "addr_scale": 0.5, "d_v": 4, "conv": True}


def test_a_wrapper_is_shaped_through_the_cell_it_declares() -> None:
    """The bidirectional wrapper declares (`SequenceMixer.wraps`) two delta-rule states, so its
    shape is the delta rule's at half the state, named by its `inner` option."""
    both = fit("bidirectional", 130, state_per_layer=1024)
    one = fit("delta_rule", 130, state_per_layer=512)
    assert both.options == {"inner": "delta_rule", **one.options}
    assert both.state_per_layer == 1024
