"""Bidirectional wrapper: wiring, non-causality, forms, and the options it accepts."""

from __future__ import annotations

import pytest
import torch

from arbench.cells.base import CELLS, build_cell
from arbench.cells.bidirectional import Bidirectional

D = 16


@pytest.mark.parametrize("combine", ["sum", "concat"])
def test_bidirectional(combine: str, seeded, randn):
    cell = seeded(lambda: Bidirectional(D, inner="additive", combine=combine, chunk_size=8))
    cell = cell.double()
    assert cell.state_size() == 2 * cell.forward_cell.state_size()
    x = randn(2, 13, D, seed=3, dtype=torch.float64)
    y, st = cell(x)
    assert st is None
    x2 = x.clone()
    x2[:, 10] += 1.0
    y2, _ = cell(x2)
    assert not torch.allclose(y[:, :10], y2[:, :10])  # early outputs see the future
    y_f, _ = cell.forward_cell(x)
    y_b, _ = cell.backward_cell(x.flip(1))
    expected = torch.cat([y_f, y_b.flip(1)], -1)
    if combine == "sum":
        torch.testing.assert_close(y, y_f + y_b.flip(1))
    else:
        torch.testing.assert_close(y, cell.proj(expected))
    y_rec, _ = cell(x, form="recurrent")
    torch.testing.assert_close(y_rec, y)
    with pytest.raises(ValueError, match="state"):
        cell(x, state={"S": None})


def test_bidirectional_default_inner_by_name(seeded, randn):
    cell = seeded(lambda: build_cell("bidirectional", D, inner="delta_rule", chunk_size=8))
    x = randn(1, 10, D, seed=3)
    y, _ = cell(x)
    assert y.shape == x.shape
    assert cell.state_size() == 2 * D * D


def test_bidirectional_accepts_its_own_and_its_inner_cells_options():
    default = CELLS["bidirectional"].option_names()
    assert {"inner", "combine"} <= default
    assert default - {"inner", "combine"} == CELLS["delta_rule"].option_names()
    mamba = Bidirectional.option_names({"inner": "mamba2", "d_state": 8})
    assert {"inner", "combine", "d_state", "head_dim", "expand"} <= mamba
    assert "decay" not in mamba and "d_k" not in mamba
    with pytest.raises(KeyError, match="unknown cell"):
        Bidirectional.option_names({"inner": "nope"})
