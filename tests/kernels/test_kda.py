"""KDA kernels: chunked == recurrent on both paths, and both == the direct KDA recurrence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import arbench.kernels.pairwise_tree as pairwise_tree
from arbench.cells.kda import kda_log_decay
from arbench.kernels.kda import kda_chunked, kda_recurrent, low_rank_carry

B, H, T, DV = 2, 2, 45, 6  # T is not a multiple of either chunk
# (key width, chunk): the formed dk x dk carry, and chunks shorter than half the key width,
# whose carry stays factored (`low_rank_carry`: S5's 128-wide keys in chunks of 4 to 16)
SHAPES = {"formed": (8, 16), "low_rank": (32, 4)}


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("path", ["factorised", "tree", "low_rank"])
def test_kda_kernel_chunked_matches_recurrent_and_direct(
    dtype: torch.dtype, tol: float, path: str, monkeypatch, max_rel_err, outputs_and_grads
):
    if path == "tree":  # no decay counts as factorisable: the tree builds every pairwise block
        monkeypatch.setitem(pairwise_tree.FACTOR_REACH, dtype, -1.0)
    DK, CHUNK = SHAPES["low_rank" if path == "low_rank" else "formed"]
    assert low_rank_carry(CHUNK, DK) == (path == "low_rank")
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(B, H, T, d, generator=gen, dtype=dtype) for d in (DK, DK, DV))
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    beta = torch.rand(B, H, T, generator=gen, dtype=dtype)
    log_alpha = kda_log_decay(torch.randn(B, H, T, DK, generator=gen, dtype=dtype), torch.zeros(DK))
    s0 = torch.randn(B, H, DK, DV, generator=gen, dtype=dtype)
    inputs = [x.requires_grad_() for x in (q, k, v, beta, log_alpha, s0)]
    o1, s1, g1 = outputs_and_grads(kda_recurrent, inputs, torch.Generator().manual_seed(3))
    o2, s2, g2 = outputs_and_grads(
        kda_chunked, inputs, torch.Generator().manual_seed(3), chunk_size=CHUNK
    )
    assert max_rel_err(o2, o1) <= tol and max_rel_err(s2, s1) <= tol
    for a, b in zip(g2, g1, strict=True):
        assert max_rel_err(a, b) <= tol
    # Direct KDA: S = (I - beta k k^T) Diag(alpha) S + beta k v^T, o = S^T q.
    s = s0.detach()
    eye = torch.eye(DK, dtype=dtype)
    for t in range(T):
        kt, bt = k[:, :, t].detach(), beta[:, :, t, None, None].detach()
        proj = eye - bt * kt[..., :, None] * kt[..., None, :]
        s = proj @ (log_alpha[:, :, t, :, None].detach().exp() * s)
        s = s + bt * kt[..., :, None] * v[:, :, t, None, :].detach()
        o_t = (s * q[:, :, t, :, None].detach()).sum(-2)
        assert max_rel_err(o_t, o1[:, :, t].detach()) <= tol
    assert max_rel_err(s, s1.detach()) <= tol


def test_kernel_gradients_from_the_final_state_alone(final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree("kda")


@pytest.mark.parametrize("dk", [8, 32])  # the formed and the factored carry
@pytest.mark.parametrize("read", ["outputs", "final state", "both"])
def test_one_chunk_from_no_initial_state_matches_recurrent(dk: int, read: str, draw) -> None:
    """A sequence inside one chunk with no initial state reads no carry (KDAChunks' carry-free
    path); whichever outputs a loss reads, values and every input's gradient agree."""
    gen = torch.Generator().manual_seed(5)
    t = 7  # one chunk of 8
    q, k, v = (torch.randn(B, H, t, d, generator=gen, dtype=torch.float64) for d in (dk, dk, DV))
    q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    beta = torch.rand(B, H, t, generator=gen, dtype=torch.float64)
    log_alpha = kda_log_decay(
        torch.randn(B, H, t, dk, generator=gen, dtype=torch.float64), torch.zeros(dk)
    )
    inputs = [x.requires_grad_() for x in (q, k, v, beta, log_alpha)]
    results = []
    for fn, kw in ((kda_recurrent, {}), (kda_chunked, {"chunk_size": 16})):
        o, s = fn(*inputs, **kw)
        loss = {
            "outputs": (o * draw(*o.shape, seed=1)).sum(),
            "final state": (s * draw(*s.shape, seed=2)).sum(),
        }
        total = sum(loss.values()) if read == "both" else loss[read]
        results.append((o, s, torch.autograd.grad(total, inputs, allow_unused=True)))
    (o1, s1, g1), (o2, s2, g2) = results
    torch.testing.assert_close(o2, o1, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(s2, s1, rtol=1e-10, atol=1e-10)
    for a, b in zip(g2, g1, strict=True):
        b = torch.zeros_like(a) if b is None else b  # q does not reach the final state
        a = torch.zeros_like(b) if a is None else a
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert any(g is not None and g.abs().max() > 1e-3 for g in g2)
