"""DPLR kernels: chunked == recurrent on both paths, and the RWKV-7 mapping's orientation."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import arbench.kernels.pairwise_tree as pairwise_tree
from arbench.kernels.dplr import dplr_chunked, dplr_recurrent, rwkv7_to_dplr

B, H, T, DK, DV, CHUNK = 2, 2, 45, 8, 6, 16  # T is not a multiple of CHUNK


def dplr_inputs(gen: torch.Generator, dtype: torch.dtype, decay_scale: float = 2.0):
    def r(*shape: int, scale: float = 1.0) -> torch.Tensor:
        return (scale * torch.randn(*shape, generator=gen, dtype=dtype)).requires_grad_()

    q, k, a, b = (r(B, H, T, DK, scale=0.4) for _ in range(4))
    v = r(B, H, T, DV)
    log_w = (-decay_scale * torch.rand(B, H, T, DK, generator=gen, dtype=dtype)).requires_grad_()
    s0 = r(B, H, DK, DV)
    return [q, k, v, log_w, a, b, s0]


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
@pytest.mark.parametrize("decay_scale", [2.0, 20.0])
@pytest.mark.parametrize("path", ["auto", "tree"])
def test_dplr_chunked_matches_recurrent(
    dtype: torch.dtype,
    tol: float,
    decay_scale: float,
    path: str,
    monkeypatch,
    max_rel_err,
    outputs_and_grads,
):
    if path == "tree":  # no decay counts as factorisable: the tree builds every pairwise block
        monkeypatch.setitem(pairwise_tree.FACTOR_REACH, dtype, -1.0)
    gen = torch.Generator().manual_seed(0)
    inputs = dplr_inputs(gen, dtype, decay_scale)
    o1, s1, g1 = outputs_and_grads(dplr_recurrent, inputs, torch.Generator().manual_seed(1))
    o2, s2, g2 = outputs_and_grads(
        dplr_chunked, inputs, torch.Generator().manual_seed(1), chunk_size=CHUNK
    )
    assert torch.isfinite(o2).all() and torch.isfinite(s2).all()
    assert max_rel_err(o2, o1) <= tol and max_rel_err(s2, s1) <= tol
    for a, b in zip(g2, g1, strict=True):
        assert torch.isfinite(a).all() and max_rel_err(a, b) <= tol


def _order(mapped: tuple[torch.Tensor, ...], v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    kw, log_w, a, b = mapped
    return kw, v, log_w, a, b


def test_rwkv7_mapping_matches_rwkv_orientation(max_rel_err):
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
        assert max_rel_err((wkv @ r[:, :, t, :, None])[..., 0], o[:, :, t]) <= 1e-12
    assert max_rel_err(wkv.transpose(-1, -2), s) <= 1e-12


def test_kernel_gradients_from_the_final_state_alone(final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree("rwkv7")
