"""RWKV-7 time-mix cell: chunked == recurrent, streaming in uneven pieces, state size."""

from __future__ import annotations

import pytest
import torch

from arbench.cells.base import CELLS
from arbench.cells.rwkv7 import RWKV7TimeMix

CHUNK = 16  # the checks' T = 45 is not a multiple of it


def make(dtype: torch.dtype) -> RWKV7TimeMix:
    torch.manual_seed(0)  # parameter init only; inputs use explicit generators
    return RWKV7TimeMix(32, heads=2, chunk_size=CHUNK).to(dtype)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(dtype: torch.dtype, tol: float, dplr_forms_agree):
    dplr_forms_agree(make(dtype), dtype, tol)


def test_cell_streams_in_uneven_pieces(dplr_streams_exactly):
    dplr_streams_exactly(make(torch.float64))


def test_state_size_and_registry():
    assert CELLS["rwkv7"] is RWKV7TimeMix
    assert RWKV7TimeMix(32).state_size() == 1024
    assert RWKV7TimeMix(32, heads=2).state_size() == 512
