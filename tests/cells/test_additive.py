"""Additive linear attention cell: chunked == recurrent and streaming == one pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from arbench.cells.additive import AdditiveCell
from arbench.cells.base import SequenceMixer

D = 16
CELL_MAKERS: dict[str, Callable[[], SequenceMixer]] = {
    "additive": lambda: AdditiveCell(D, heads=2, chunk_size=8),
    "additive_conv": lambda: AdditiveCell(D, heads=2, conv=True, chunk_size=8),
}


@pytest.mark.parametrize("name", list(CELL_MAKERS))
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(name: str, dtype: torch.dtype, tol: float, forms_agree):
    forms_agree(CELL_MAKERS[name], dtype, tol)


@pytest.mark.parametrize("name", list(CELL_MAKERS))
def test_cell_streaming_matches_one_pass(name: str, streams_exactly):
    streams_exactly(CELL_MAKERS[name])
