"""DPLR kernels and the KDA / RWKV-7 cells: chunked == recurrent, streaming, bounds, sizes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.cells.base import CELLS, SequenceMixer
from arbench.cells.dplr import (
    dplr_chunked,
    dplr_recurrent,
    kda_chunked,
    kda_recurrent,
    rwkv7_to_dplr,
)
from arbench.cells.kda import G_MIN, KimiDeltaAttention, kda_log_decay
from arbench.cells.rwkv7 import RWKV7TimeMix

B, H, T, DK, DV, CHUNK = 2, 2, 45, 8, 6, 16  # T is not a multiple of CHUNK


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def _dplr_inputs(gen: torch.Generator, dtype: torch.dtype, decay_scale: float = 2.0):
    def r(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, generator=gen, dtype=dtype)).requires_grad_()

    q, k, a, b = (r(B, H, T, DK, scale=0.4) for _ in range(4))
    v = r(B, H, T, DV)
    log_w = (-decay_scale * torch.rand(B, H, T, DK, generator=gen, dtype=dtype)).requires_grad_()
    s0 = r(B, H, DK, DV)
    return [q, k, v, log_w, a, b, s0]


def _outputs_and_grads(fn, inputs: list[torch.Tensor], gen: torch.Generator, **kw):
    o, s = fn(*inputs, **kw)
    wo = torch.randn(o.shape, generator=gen, dtype=o.dtype)
    ws = torch.randn(s.shape, generator=gen, dtype=s.dtype)
    grads = torch.autograd.grad((o * wo).sum() + (s * ws).sum(), inputs)
    return o, s, grads


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("decay_scale", [2.0, 20.0])
@pytest.mark.parametrize("path", ["auto", "tree"])
def test_dplr_chunked_matches_recurrent(
    dtype: torch.dtype, tol: float, decay_scale: float, path: str, monkeypatch
):
    import arbench.cells.dplr as dplr

    if path == "tree":  # no decay counts as factorisable: the tree builds every pairwise block
        monkeypatch.setitem(dplr.FACTOR_REACH, dtype, -1.0)
    gen = torch.Generator().manual_seed(0)
    inputs = _dplr_inputs(gen, dtype, decay_scale)
    o1, s1, g1 = _outputs_and_grads(dplr_recurrent, inputs, torch.Generator().manual_seed(1))
    o2, s2, g2 = _outputs_and_grads(
        dplr_chunked, inputs, torch.Generator().manual_seed(1), chunk_size=CHUNK
    )
    assert torch.isfinite(o2).all() and torch.isfinite(s2).all()
    assert _rel(o2, o1) <= tol and _rel(s2, s1) <= tol
    for a, b in zip(g2, g1, strict=True):
        assert torch.isfinite(a).all() and _rel(a, b) <= tol


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("path", ["factorised", "tree"])
def test_kda_kernel_chunked_matches_recurrent_and_direct(
    dtype: torch.dtype, tol: float, path: str, monkeypatch
):
    import arbench.cells.dplr as dplr

    if path == "tree":  # no decay counts as factorisable: the tree builds every pairwise block
        monkeypatch.setitem(dplr.FACTOR_REACH, dtype, -1.0)
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, H, T, d, generator=gen, dtype=dtype) for d in (DK, DK, DV))
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    log_alpha = kda_log_decay(torch.randn(B, H, T, DK, generator=gen, dtype=dtype), torch.zeros(DK))
    s0 = torch.randn(B, H, DK, DV, generator=gen, dtype=dtype)
    inputs = [x.requires_grad_() for x in (q, k, v, beta, log_alpha, s0)]
    o1, s1, g1 = _outputs_and_grads(kda_recurrent, inputs, torch.Generator().manual_seed(3))
    o2, s2, g2 = _outputs_and_grads(
        kda_chunked, inputs, torch.Generator().manual_seed(3), chunk_size=CHUNK
    )
    assert _rel(o2, o1) <= tol and _rel(s2, s1) <= tol
    for a, b in zip(g2, g1, strict=True):
        assert _rel(a, b) <= tol
    # Direct KDA: S = (I - beta k k^T) Diag(alpha) S + beta k v^T, o = S^T q.
    s = s0.detach()
    eye = torch.eye(DK, dtype=dtype)
    for t in range(T):
        kt, bt = k[:, :, t].detach(), beta[:, :, t, None, None].detach()
        proj = eye - bt * kt[..., :, None] * kt[..., None, :]
        s = proj @ (log_alpha[:, :, t, :, None].detach().exp() * s)
        s = s + bt * kt[..., :, None] * v[:, :, t, None, :].detach()
        o_t = (s * q[:, :, t, :, None].detach()).sum(-2)
        assert _rel(o_t, o1[:, :, t].detach()) <= tol
    assert _rel(s, s1.detach()) <= tol


def test_rwkv7_mapping_matches_rwkv_orientation():
    gen = torch.Generator().manual_seed(4)
    dt = torch.float64
    r, k = (torch.randn(B, H, T, DK, generator=gen, dtype=dt) for _ in range(2))
    v = torch.randn(B, H, T, DK, generator=gen, dtype=dt)
    kk = F.normalize(torch.randn(B, H, T, DK, generator=gen, dtype=dt), dim=-1)
    icl = torch.rand(B, H, T, DK, generator=gen, dtype=dt)
    log_w = -0.6065 * torch.rand(B, H, T, DK, generator=gen, dtype=dt)
    o, s = dplr_recurrent(r, *_order(rwkv7_to_dplr(k, log_w, kk, icl), v))
    # RWKV-7 (value x key) state: wkv = wkv (Diag(w) - kk^T (a kk)) + v^T k, out = wkv r.
    wkv = torch.zeros(B, H, DK, DK, dtype=dt)
    for t in range(T):
        trans = (
            torch.diag_embed(log_w[:, :, t].exp())
            - kk[:, :, t, :, None] * (icl[:, :, t] * kk[:, :, t])[..., None, :]
        )
        wkv = wkv @ trans + v[:, :, t, :, None] * k[:, :, t, None, :]
        assert _rel((wkv @ r[:, :, t, :, None])[..., 0], o[:, :, t]) <= 1e-12
    assert _rel(wkv.transpose(-1, -2), s) <= 1e-12


def _order(mapped: tuple[torch.Tensor, ...], v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    kw, log_w, a, b = mapped
    return kw, v, log_w, a, b


def _cells(dtype: torch.dtype) -> list[SequenceMixer]:
    torch.manual_seed(0)  # parameter init only; inputs use explicit generators
    cells = [
        KimiDeltaAttention(32, heads=2, chunk_size=CHUNK),
        RWKV7TimeMix(32, heads=2, chunk_size=CHUNK),
    ]
    return [c.to(dtype) for c in cells]


def _random_state(cell: SequenceMixer, gen: torch.Generator, dtype: torch.dtype) -> dict:
    """A realistic nonzero state: the state after a random prefix, detached."""
    x = torch.randn(B, 7, 32, generator=gen, dtype=dtype)
    with torch.no_grad():
        _, state = cell(x, form="recurrent")
    return {k: v.detach() for k, v in state.items()}


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cells_chunked_match_recurrent(dtype: torch.dtype, tol: float):
    for cell in _cells(dtype):
        gen = torch.Generator().manual_seed(5)
        state = _random_state(cell, gen, dtype)
        s_in = state["S"].clone().requires_grad_()
        x = torch.randn(B, T, 32, generator=gen, dtype=dtype, requires_grad=True)
        wy = torch.randn(B, T, 32, generator=gen, dtype=dtype)
        results = []
        for form in ("recurrent", "chunked"):
            y, new = cell(x, {**state, "S": s_in}, form=form)
            loss = (y * wy).sum() + new["S"].square().sum()
            gx, gs = torch.autograd.grad(loss, [x, s_in])
            results.append((y, new["S"], gx, gs))
        for a, b in zip(results[1], results[0], strict=True):
            assert _rel(a, b) <= tol, type(cell).__name__


def test_cells_stream_in_uneven_pieces():
    for cell in _cells(torch.float64):
        gen = torch.Generator().manual_seed(6)
        x = torch.randn(B, 70, 32, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            y_full, s_full = cell(x)
            pieces, state = [], None
            for lo, hi in ((0, 1), (1, 20), (20, 53), (53, 70)):
                y, state = cell(x[:, lo:hi], state)
                pieces.append(y)
        assert _rel(torch.cat(pieces, dim=1), y_full) <= 1e-10
        for key in s_full:
            assert _rel(state[key], s_full[key]) <= 1e-10


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
    for name, cls in (("kda", KimiDeltaAttention), ("rwkv7", RWKV7TimeMix)):
        assert CELLS[name] is cls
        assert cls(32).state_size() == 1024
        assert cls(32, heads=2).state_size() == 512
