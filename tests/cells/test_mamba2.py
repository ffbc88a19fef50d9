"""Mamba-2 cell: chunked == recurrent, streaming == one pass, the conv, the state-matched size."""

from __future__ import annotations

import pytest
import torch

from arbench.cells.base import build_cell
from arbench.cells.mamba2 import Mamba2Cell, mamba2_state_matched

D = 16


def make() -> Mamba2Cell:
    return Mamba2Cell(D, heads=2, d_state=4, head_dim=8, chunk_size=8)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(dtype: torch.dtype, tol: float, forms_agree):
    forms_agree(make, dtype, tol)


def test_cell_streaming_matches_one_pass(streams_exactly):
    streams_exactly(make)


def test_mamba2_kernel_one_conv_is_per_channel_affine(seeded, randn):
    cell = seeded(lambda: Mamba2Cell(D, heads=2, d_state=4, head_dim=8, conv_kernel=1))
    xbc = randn(2, 7, cell.conv.channels, seed=5)
    y, tail = cell.conv(xbc)
    assert tail.shape[1] == 0
    torch.testing.assert_close(y, xbc * cell.conv.conv.weight[:, 0, 0])
    _, st = cell(randn(2, 7, D, seed=6))
    y1, _ = cell(randn(2, 5, D, seed=8), st)
    y2, _ = cell(randn(2, 5, D, seed=8), {"S": st["S"], "conv": None})
    torch.testing.assert_close(y1, y2)  # kernel 1: no history in the conv


def test_mamba2_state_matched(seeded, randn):
    cell = seeded(lambda: mamba2_state_matched(32))
    assert cell.state_size() == 1024
    assert build_cell("mamba2", 32, heads=4, d_state=16, head_dim=16).state_size() == 1024
    y, st = cell(randn(2, 9, 32, seed=1))
    assert y.shape == (2, 9, 32) and st["S"][0].numel() == 1024
