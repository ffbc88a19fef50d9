"""Scalar-decay (additive / Mamba-2) kernels: chunked == recurrent, shared heads, extremes."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels import scalar_decay
from arbench.kernels.scalar_decay import (
    _factorable_chunk,
    scalar_decay_chunked,
    scalar_decay_recurrent,
)


def scalar_inputs(randn, dtype: torch.dtype, decay: bool) -> list[torch.Tensor]:
    """q, k, v, s0 (and a log-decay): B=2, H=2, T=21, dk=5, dv=3, seeded, requiring grad."""
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
def test_scalar_decay_chunked_matches_recurrent(
    decay: bool, dtype: torch.dtype, tol: float, randn, rel_err
):
    ins = scalar_inputs(randn, dtype, decay)
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


def test_scalar_decay_shared_qk_heads_broadcast(randn, rel_err):
    q, k, v, s0, ld = scalar_inputs(randn, torch.float64, True)
    q1, k1 = q[:, :1], k[:, :1]
    qe, ke = (x.expand(-1, v.shape[1], -1, -1) for x in (q1, k1))
    for kernel in (scalar_decay_recurrent, scalar_decay_chunked):
        o1, s1 = kernel(q1, k1, v, ld, s0)
        oe, se = kernel(qe, ke, v, ld, s0)
        assert rel_err(o1, oe) < 1e-12 and rel_err(s1, se) < 1e-12
    o_r, _ = scalar_decay_recurrent(q1, k1, v, ld, s0)
    o_c, _ = scalar_decay_chunked(q1, k1, v, ld, s0, chunk_size=8)
    assert rel_err(o_c, o_r) < 1e-10


def test_scalar_decay_extreme_decay_is_finite(randn, rel_err):
    q, k, v, _, _ = scalar_inputs(randn, torch.float32, True)
    ld = torch.full(q.shape[:3], -200.0, requires_grad=True)
    o, s = scalar_decay_chunked(q, k, v, ld, chunk_size=8)
    (o.sum() + s.sum()).backward()
    assert torch.isfinite(o).all() and torch.isfinite(ld.grad).all()
    o_r, _ = scalar_decay_recurrent(q, k, v, ld)
    assert rel_err(o, o_r) < 1e-5


@pytest.mark.parametrize("name", ["additive", "mamba2"])
def test_kernel_gradients_from_the_final_state_alone(name: str, final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree(name)


@pytest.mark.parametrize("heads", [2, 5])
def test_shared_qk_heads_chunked_matches_recurrent_values_and_gradients(heads: int, randn, rel_err):
    """One q, k for all heads (Mamba-2's one group) takes the packed-heads carry: the outputs,
    the final state and every input's gradient, q and k summed over heads, match the recurrent
    form; a wrong per-head decay in the carry is caught."""
    b, t, dk, dv = 2, 21, 5, 3
    q, k = (randn(b, 1, t, dk, seed=s, dtype=torch.float64) for s in (1, 2))
    v, s0 = (
        randn(b, heads, t, dv, seed=3, dtype=torch.float64),
        randn(b, heads, dk, dv, seed=4, dtype=torch.float64),
    )
    ld = -torch.nn.functional.softplus(randn(b, heads, t, seed=5, dtype=torch.float64) * 3)
    ins = [x.requires_grad_() for x in (q, k, v, ld, s0)]
    o_r, s_r = scalar_decay_recurrent(*ins)
    o_c, s_c = scalar_decay_chunked(*ins, chunk_size=8)  # T = 21: a ragged last chunk
    assert rel_err(o_c, o_r) < 1e-10 and rel_err(s_c, s_r) < 1e-10
    w_o, w_s = (
        randn(*o_r.shape, seed=9, dtype=torch.float64),
        randn(*s_r.shape, seed=10, dtype=torch.float64),
    )
    g_r = torch.autograd.grad((o_r * w_o).sum() + (s_r * w_s).sum(), ins)
    g_c = torch.autograd.grad((o_c * w_o).sum() + (s_c * w_s).sum(), ins)
    for a, want in zip(g_c, g_r, strict=True):
        assert rel_err(a, want) < 1e-10
    swapped = scalar_decay_chunked(q, k, v, ld.flip(1), s0, chunk_size=8)[1]
    assert rel_err(swapped, scalar_decay_recurrent(q, k, v, ld, s0)[1]) > 1e-3


def _shared_case(randn, dtype: torch.dtype, heads: int, t: int, scale: float):
    """One q, k (B,1,T,dk) for `heads` heads; log-decays -softplus(N(0,1) * 3) * scale, so the
    heads mix near-zero and strong decays (scale 60 reaches -600 and more per step)."""
    b, dk, dv = 2, 5, 3
    q, k = (randn(b, 1, t, dk, seed=s, dtype=dtype) for s in (11, 12))
    v = randn(b, heads, t, dv, seed=13, dtype=dtype)
    s0 = randn(b, heads, dk, dv, seed=14, dtype=dtype)
    ld = -torch.nn.functional.softplus(randn(b, heads, t, seed=15, dtype=dtype) * 3) * scale
    return [x.requires_grad_() for x in (q, k, v, ld, s0)]


@pytest.mark.parametrize("scale", [0.1, 1.0, 60.0])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("t,chunk", [(21, 8), (40, 16), (7, 16)])
def test_shared_heads_factored_path_matches_recurrent(
    scale: float, dtype: torch.dtype, tol: float, t: int, chunk: int, randn, rel_err
):
    """The shared-heads path (one masked Q K^T per chunk for all heads, decays factored about
    the chunk's middle, a hand-written backward) against the step-by-step form: outputs, final
    state and the gradient of every input, for mild, mixed and strong decays (strong ones
    shrink the chunk until the factors stay in range; nothing may overflow)."""
    ins = _shared_case(randn, dtype, 3, t, scale)
    o_r, s_r = scalar_decay_recurrent(*ins)
    o_c, s_c = scalar_decay_chunked(*ins, chunk_size=chunk)
    assert torch.isfinite(o_c).all() and torch.isfinite(s_c).all()
    assert rel_err(o_c, o_r) < tol and rel_err(s_c, s_r) < tol
    w_o, w_s = (randn(*x.shape, seed=s, dtype=dtype) for x, s in ((o_r, 16), (s_r, 17)))
    g_r = torch.autograd.grad((o_r * w_o).sum() + (s_r * w_s).sum(), ins)
    g_c = torch.autograd.grad((o_c * w_o).sum() + (s_c * w_s).sum(), ins)
    for name, a, want in zip(("q", "k", "v", "log_decay", "s0"), g_c, g_r, strict=True):
        assert torch.isfinite(a).all(), name
        assert rel_err(a, want) < tol, name


def test_shared_heads_chunk_shrinks_only_for_strong_decays(randn):
    """Mild decays keep the requested chunk; decays whose in-chunk range would overflow the
    factors halve it, down to one step (which always fits)."""
    mild = _shared_case(randn, torch.float32, 3, 40, 0.1)[3].detach()
    assert _factorable_chunk(mild, 16) == 14  # 40 steps: 3 balanced chunks of 14, not 16
    strong = _shared_case(randn, torch.float32, 3, 40, 60.0)[3].detach()
    assert 1 <= _factorable_chunk(strong, 16) < 14
    assert _factorable_chunk(torch.full((1, 2, 9), -1e4), 8) == 1


def test_shared_heads_gradients_from_outputs_or_state_alone(randn, rel_err):
    """A loss on the outputs alone, or on the final state alone (the other output's gradient
    arrives as zeros), gives the recurrent form's gradients; without an initial state too."""
    q, k, v, ld, _ = _shared_case(randn, torch.float64, 4, 21, 1.0)
    ins = [q, k, v, ld]
    for pick in (0, 1):
        got = torch.autograd.grad(scalar_decay_chunked(*ins, chunk_size=8)[pick].sum(), ins)
        want = torch.autograd.grad(scalar_decay_recurrent(*ins)[pick].sum(), ins, allow_unused=True)
        for a, b in zip(got, want, strict=True):
            assert rel_err(a, torch.zeros_like(a) if b is None else b) < 1e-10


def test_shared_heads_batch_slices_change_no_number(randn, rel_err, monkeypatch):
    """The shared-heads path runs over batch slices; slices of one item give the same values
    and gradients as one slice (a slice mixing up the items would be caught)."""
    ins = _shared_case(randn, torch.float64, 3, 21, 1.0)
    w = randn(2, 3, 21, 3, seed=18, dtype=torch.float64)
    results = []
    for block in (1 << 17, 1):
        monkeypatch.setattr(scalar_decay, "SHARED_BLOCK", block)
        o, s = scalar_decay_chunked(*ins, chunk_size=8)
        results.append([o, s, *torch.autograd.grad((o * w).sum() + s.sum(), ins)])
    assert len(scalar_decay._shared_slices(2, 24 * 9)) == 2
    for a, b in zip(*results, strict=True):
        assert rel_err(a, b) < 1e-12
    o_r, _ = scalar_decay_recurrent(*ins)
    assert rel_err(results[1][0], o_r) < 1e-10
