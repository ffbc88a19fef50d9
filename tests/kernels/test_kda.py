"""KDA kernels: chunked == recurrent on both paths, and both == the direct KDA recurrence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import arbench.kernels.pairwise_tree as pairwise_tree
from arbench.cells.kda import kda_log_decay
from arbench.kernels.kda import kda_chunked, kda_recurrent

B, H, T, DK, DV, CHUNK = 2, 2, 45, 8, 6, 16  # T is not a multiple of CHUNK


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("path", ["factorised", "tree"])
def test_kda_kernel_chunked_matches_recurrent_and_direct(
    dtype: torch.dtype, tol: float, path: str, monkeypatch, max_rel_err, outputs_and_grads
):
    if path == "tree":  # no decay counts as factorisable: the tree builds every pairwise block
        monkeypatch.setitem(pairwise_tree.FACTOR_REACH, dtype, -1.0)
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
