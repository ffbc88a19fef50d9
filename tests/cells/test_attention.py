"""Softmax attention cell: streaming with the KV cache == one pass == recurrent; causality."""

from __future__ import annotations

import pytest
import torch

from arbench.cells.attention import AttentionCell

D = 16


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_attention_streaming_and_forms(positions: str, seeded, randn, rel_err):
    cell = seeded(lambda: AttentionCell(D, heads=2, positions=positions, max_len=64)).double()
    x = randn(2, 23, D, seed=2, dtype=torch.float64)
    y_full, cache = cell(x)
    assert cache["k"].shape == (2, 2, 23, D // 2)
    pieces, st = [], None
    for a, b in [(0, 3), (3, 4), (4, 17), (17, 23)]:
        y, st = cell(x[:, a:b], st)
        pieces.append(y)
    assert rel_err(torch.cat(pieces, 1), y_full) < 1e-10
    y_rec, _ = cell(x, form="recurrent")
    assert rel_err(y_rec, y_full) < 1e-10
    assert cell.state_size(23) == 2 * D * 23 and cell.state_size() == 0


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_attention_is_causal(positions: str, seeded, randn):
    cell = seeded(lambda: AttentionCell(D, heads=2, positions=positions)).double()
    x = randn(1, 12, D, seed=2, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 8] += 1.0
    y1, _ = cell(x)
    y2, _ = cell(x2)
    assert torch.equal(y1[:, :8], y2[:, :8])
    assert not torch.allclose(y1[:, 8:], y2[:, 8:])
