"""Zoo cells: chunked == recurrent, streaming == one pass, causality, bidirectional wiring."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from arbench.cells.additive import AdditiveCell
from arbench.cells.attention import AttentionCell
from arbench.cells.base import SequenceMixer, build_cell
from arbench.cells.bidirectional import Bidirectional
from arbench.cells.mamba2 import Mamba2Cell, mamba2_state_matched
from arbench.cells.scalar_decay import scalar_decay_chunked, scalar_decay_recurrent

D = 16
torch.set_num_threads(1)


def seeded(make: Callable[[], SequenceMixer], seed: int = 0) -> SequenceMixer:
    """Build a module with a fixed seed without touching the caller's global RNG state."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make()


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def kernel_inputs(dtype: torch.dtype, decay: bool) -> list[torch.Tensor]:
    b, h, t, dk, dv = 2, 2, 21, 5, 3
    q, k = randn(b, h, t, dk, seed=1, dtype=dtype), randn(b, h, t, dk, seed=2, dtype=dtype)
    v = randn(b, h, t, dv, seed=3, dtype=dtype)
    s0 = randn(b, h, dk, dv, seed=4, dtype=dtype)
    ins = [q, k, v, s0]
    if decay:  # strong and weak decays, including some near zero
        ins.append(-torch.nn.functional.softplus(randn(b, h, t, seed=5, dtype=dtype) * 3))
    return [x.requires_grad_() for x in ins]


@pytest.mark.parametrize("decay", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_scalar_decay_chunked_matches_recurrent(decay: bool, dtype: torch.dtype, tol: float):
    ins = kernel_inputs(dtype, decay)
    q, k, v, s0 = ins[:4]
    ld = ins[4] if decay else None
    o_r, s_r = scalar_decay_recurrent(q, k, v, ld, s0)
    o_c, s_c = scalar_decay_chunked(q, k, v, ld, s0, chunk_size=8)  # T=21: ragged last chunk
    assert rel_err(o_c, o_r) < tol and rel_err(s_c, s_r) < tol
    w_o, w_s = randn(*o_r.shape, seed=9, dtype=dtype), randn(*s_r.shape, seed=10, dtype=dtype)
    g_r = torch.autograd.grad((o_r * w_o).sum() + (s_r * w_s).sum(), ins)
    g_c = torch.autograd.grad((o_c * w_o).sum() + (s_c * w_s).sum(), ins)
    for a, b in zip(g_c, g_r, strict=True):
        assert rel_err(a, b) < tol


def test_scalar_decay_shared_qk_heads_broadcast():
    q, k, v, s0, ld = kernel_inputs(torch.float64, True)
    q1, k1 = q[:, :1], k[:, :1]
    qe, ke = (x.expand(-1, v.shape[1], -1, -1) for x in (q1, k1))
    for kernel in (scalar_decay_recurrent, scalar_decay_chunked):
        o1, s1 = kernel(q1, k1, v, ld, s0)
        oe, se = kernel(qe, ke, v, ld, s0)
        assert rel_err(o1, oe) < 1e-12 and rel_err(s1, se) < 1e-12
    o_r, _ = scalar_decay_recurrent(q1, k1, v, ld, s0)
    o_c, _ = scalar_decay_chunked(q1, k1, v, ld, s0, chunk_size=8)
    assert rel_err(o_c, o_r) < 1e-10


def test_scalar_decay_extreme_decay_is_finite():
    q, k, v, _, _ = kernel_inputs(torch.float32, True)
    ld = torch.full(q.shape[:3], -200.0, requires_grad=True)
    o, s = scalar_decay_chunked(q, k, v, ld, chunk_size=8)
    (o.sum() + s.sum()).backward()
    assert torch.isfinite(o).all() and torch.isfinite(ld.grad).all()
    o_r, _ = scalar_decay_recurrent(q, k, v, ld)
    assert rel_err(o, o_r) < 1e-5


CELL_MAKERS: dict[str, Callable[[], SequenceMixer]] = {
    "additive": lambda: AdditiveCell(D, heads=2, chunk_size=8),
    "additive_conv": lambda: AdditiveCell(D, heads=2, conv=True, chunk_size=8),
    "mamba2": lambda: Mamba2Cell(D, heads=2, d_state=4, head_dim=8, chunk_size=8),
}


def initial_state(cell: SequenceMixer, x: torch.Tensor) -> dict:
    """A nonzero state: the state after a random prefix (conv tails included)."""
    _, st = cell(randn(x.shape[0], 5, D, seed=7, dtype=x.dtype), form="recurrent")
    return {key: val.detach() if val is not None else None for key, val in st.items()}


@pytest.mark.parametrize("name", list(CELL_MAKERS))
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(name: str, dtype: torch.dtype, tol: float):
    cell = seeded(CELL_MAKERS[name]).to(dtype)
    x = randn(2, 19, D, seed=3, dtype=dtype).requires_grad_()
    st = initial_state(cell, x)
    st["S"].requires_grad_()
    y_r, s_r = cell(x, st, form="recurrent")
    y_c, s_c = cell(x, st, form="chunked")
    assert rel_err(y_c, y_r) < tol and rel_err(s_c["S"], s_r["S"]) < tol
    w = randn(*y_r.shape, seed=11, dtype=dtype)
    g_r = torch.autograd.grad((y_r * w).sum() + s_r["S"].sum(), [x, st["S"]])
    g_c = torch.autograd.grad((y_c * w).sum() + s_c["S"].sum(), [x, st["S"]])
    for a, b in zip(g_c, g_r, strict=True):
        assert rel_err(a, b) < tol


@pytest.mark.parametrize("name", list(CELL_MAKERS))
def test_cell_streaming_matches_one_pass(name: str):
    cell = seeded(CELL_MAKERS[name]).double()
    x = randn(2, 30, D, seed=4, dtype=torch.float64)
    y_full, s_full = cell(x)
    pieces, st = [], None
    for a, b in [(0, 1), (1, 4), (4, 13), (13, 14), (14, 30)]:
        y, st = cell(x[:, a:b], st)
        pieces.append(y)
    assert rel_err(torch.cat(pieces, 1), y_full) < 1e-10
    assert rel_err(st["S"], s_full["S"]) < 1e-10


def test_mamba2_kernel_one_conv_is_per_channel_affine():
    cell = seeded(lambda: Mamba2Cell(D, heads=2, d_state=4, head_dim=8, conv_kernel=1))
    xbc = randn(2, 7, cell.conv.channels, seed=5)
    y, tail = cell.conv(xbc)
    assert tail.shape[1] == 0
    torch.testing.assert_close(y, xbc * cell.conv.conv.weight[:, 0, 0])
    _, st = cell(randn(2, 7, D, seed=6))
    y1, _ = cell(randn(2, 5, D, seed=8), st)
    y2, _ = cell(randn(2, 5, D, seed=8), {"S": st["S"], "conv": None})
    torch.testing.assert_close(y1, y2)  # kernel 1: no history in the conv


def test_mamba2_state_matched():
    cell = seeded(lambda: mamba2_state_matched(32))
    assert cell.state_size() == 1024
    assert build_cell("mamba2", 32, heads=4, d_state=16, head_dim=16).state_size() == 1024
    y, st = cell(randn(2, 9, 32, seed=1))
    assert y.shape == (2, 9, 32) and st["S"][0].numel() == 1024


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_attention_streaming_and_forms(positions: str):
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
def test_attention_is_causal(positions: str):
    cell = seeded(lambda: AttentionCell(D, heads=2, positions=positions)).double()
    x = randn(1, 12, D, seed=2, dtype=torch.float64)
    x2 = x.clone()
    x2[:, 8] += 1.0
    y1, _ = cell(x)
    y2, _ = cell(x2)
    assert torch.equal(y1[:, :8], y2[:, :8])
    assert not torch.allclose(y1[:, 8:], y2[:, 8:])


@pytest.mark.parametrize("combine", ["sum", "concat"])
def test_bidirectional(combine: str):
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


def test_bidirectional_default_inner_by_name():
    cell = seeded(lambda: build_cell("bidirectional", D, inner="delta_rule", chunk_size=8))
    x = randn(1, 10, D, seed=3)
    y, _ = cell(x)
    assert y.shape == x.shape
    assert cell.state_size() == 2 * D * D
