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


# ------------------------------------------------------------------ armed: short conv on r, k, v


def make_armed(dtype: torch.dtype, token_shift: bool = True, kernel: int = 4) -> RWKV7TimeMix:
    torch.manual_seed(0)
    cell = RWKV7TimeMix(
        32, heads=2, chunk_size=CHUNK, token_shift=token_shift, conv=True, conv_kernel=kernel
    )
    return cell.to(dtype)


@pytest.mark.parametrize("token_shift", [True, False])
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_armed_chunked_matches_recurrent(
    dtype: torch.dtype, tol: float, token_shift: bool, dplr_forms_agree
):
    dplr_forms_agree(make_armed(dtype, token_shift), dtype, tol)


@pytest.mark.parametrize(("token_shift", "kernel"), [(True, 4), (False, 4), (True, 2)])
def test_armed_streams_in_uneven_pieces(token_shift: bool, kernel: int, dplr_streams_exactly):
    dplr_streams_exactly(make_armed(torch.float64, token_shift, kernel))


def test_armed_state_carries_the_conv_tail_and_changes_the_output():
    cell = make_armed(torch.float64)
    plain = make(torch.float64)
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    y, state = cell(x)
    assert set(state) == {"S", "shift", "conv"}
    assert state["conv"].shape == (2, 3, 3 * 32)
    y_plain, plain_state = plain(x)
    assert set(plain_state) == {"S", "shift"} and not hasattr(plain, "conv")
    assert not torch.allclose(y, y_plain)


def test_armed_is_causal():
    cell = make_armed(torch.float64)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(1, 20, 32, generator=gen, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 12:] = torch.randn(1, 8, 32, generator=gen, dtype=torch.float64)
    y, _ = cell(x)
    y2, _ = cell(x2)
    assert torch.equal(y[:, :12], y2[:, :12]) and not torch.allclose(y[:, 12:], y2[:, 12:])


@pytest.mark.parametrize("kernel", [2, 4])
def test_armed_parameter_count_grows_by_exactly_the_conv_weights(kernel: int):
    plain, armed = (
        RWKV7TimeMix(32, heads=2),
        RWKV7TimeMix(32, heads=2, conv=True, conv_kernel=kernel),
    )
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(armed) - count(plain) == 3 * 32 * kernel  # r, k, v: one filter per channel
    assert armed.state_size() == plain.state_size()  # conv tails are not the matrix state
    # off (the default) is the unarmed cell: 6 mixes, r/k/v/g and o maps, w/a maps with biases,
    # k_k, k_a, r_k and the GroupNorm's affine pair, nothing more
    d = 32
    assert count(plain) == 6 * d + 5 * d * d + 2 * (d * d + d) + 3 * d + 2 * d
