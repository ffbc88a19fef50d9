"""KDA cell: chunked == recurrent, streaming in uneven pieces, the bounded decay, state size."""

from __future__ import annotations

import pytest
import torch

from arbench.cells.base import CELLS
from arbench.cells.kda import G_MIN, KimiDeltaAttention

B, T, CHUNK = 2, 45, 16  # T is not a multiple of CHUNK


def make(dtype: torch.dtype) -> KimiDeltaAttention:
    torch.manual_seed(0)  # parameter init only; inputs use explicit generators
    return KimiDeltaAttention(32, heads=2, chunk_size=CHUNK).to(dtype)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(dtype: torch.dtype, tol: float, dplr_forms_agree):
    dplr_forms_agree(make(dtype), dtype, tol)


def test_cell_streams_in_uneven_pieces(dplr_streams_exactly):
    dplr_streams_exactly(make(torch.float64))


def test_kda_log_decay_bounded():
    gen = torch.Generator().manual_seed(7)
    cell = KimiDeltaAttention(32)
    x = 100.0 * torch.randn(B, T, 32, generator=gen)
    with torch.no_grad():
        cell.a_log.normal_(0.0, 3.0, generator=gen)
        g = cell.log_decay(x)
    assert g.shape == (B, 1, T, 32)
    assert (g >= G_MIN).all() and (g <= 0).all()
    assert g.min() < 0.99 * G_MIN and g.max() > 0.01 * G_MIN  # both ends are reachable


def test_state_size_and_registry():
    assert CELLS["kda"] is KimiDeltaAttention
    assert KimiDeltaAttention(32).state_size() == 1024
    assert KimiDeltaAttention(32, heads=2).state_size() == 512
