"""When the factorised fast path is allowed, and the tree of decayed blocks for the rest."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arbench.kernels.pairwise_tree import factorisable, tree_pairwise

F64 = torch.float64


def pairwise_inputs(decay_scale: float, seed: int = 14):
    """x (rows: inclusive then exclusive decay), y, and the inclusive cumulative log-decay g."""
    gen = torch.Generator().manual_seed(seed)
    c, dk = 16, 4
    x = torch.randn(3, c, 2, dk, generator=gen, dtype=F64)
    y = torch.randn(3, c, 1, dk, generator=gen, dtype=F64)
    g = (-decay_scale * torch.rand(3, c, 1, dk, generator=gen, dtype=F64)).cumsum(-3)
    return x, y, g


def row_decays(g: torch.Tensor) -> torch.Tensor:
    return torch.cat([g, F.pad(g[:, :-1], (0, 0, 0, 0, 1, 0))], dim=-2)  # inclusive, exclusive


def test_factorisable_admits_mild_decays_only_and_the_tree_takes_strong_ones() -> None:
    """The kernels' fast path is allowed only when no exponent can pass the float32 reach;
    strong decays go to the tree, which stays finite. (Both paths are compared with the
    recurrent forms, values and gradients, in the GLA, KDA and DPLR kernel tests.)"""
    _, _, g = (t.float() for t in pairwise_inputs(0.5))
    assert factorisable(g, dim=-3)
    x, y, g = (t.float() for t in pairwise_inputs(30.0))
    assert not factorisable(g, dim=-3)
    assert torch.isfinite(tree_pairwise(x, row_decays(g), y, g, 1)).all()
