"""Gated linear attention's chunk form with per-channel decays folded in; hand-written backward.

Per chunk (C steps, G the inclusive cumulative per-channel log-decay, r = G at the chunk
middle): with q~ = q e^{G-r} and k~ = k e^{r-G},
    P = (q~ k~^T) * L,   O = (q e^G) S_n + P V,   S_{n+1} = Diag(e^{G_C}) S_n + (k e^{G_C-G})^T V,
which is `diagonal.gated_linear_attention_chunked`'s factorised path. The backward runs it in
reverse by hand (the diagonal scan's reverse loop included); as in `kda_chunks`, r cancels
from every product and is held constant.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.cells.relative_decays import causal_mask, middle_relative
from arbench.cells.scan import diagonal_scan_backward, diagonal_scan_forward


class GLAChunks(torch.autograd.Function):
    """GLA on (B,H,N,C,.) chunks: q, k, g (.., C, dk), v (.., C, dv), s0 (B,H,dk,dv).

    g must satisfy `dplr.factorisable` (the caller checks); returns (O chunks, final state).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        s0: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        _, e_q, e_k, e_ref, e_end = middle_relative(g)  # e^{G-r}, e^{r-G}, e^r, e^{G_C-r}
        q_rel, k_rel = q * e_q, k * e_k
        p = (q_rel @ k_rel.transpose(-1, -2)).mul_(causal_mask(q.shape[-2], q))
        k_end = k_rel * e_end  # k e^{G_C - G}
        q_in = q_rel * e_ref  # q e^G
        a_end = (e_end * e_ref).transpose(-1, -2)  # e^{G_C} per row, (.., dk, 1)
        starts, s_final = diagonal_scan_forward(a_end, k_end.transpose(-1, -2) @ v, s0)
        o = (q_in @ starts).add_(p @ v)
        ctx.save_for_backward(q_rel, k_rel, p, v, e_q, e_k, e_ref, e_end, a_end, starts)
        return o, s_final

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_o: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        q_rel, k_rel, p, v, e_q, e_k, e_ref, e_end, a_end, starts = ctx.saved_tensors
        q_in, k_end = q_rel * e_ref, k_rel * e_end
        d_a_end, d_r, d_s0 = diagonal_scan_backward(
            a_end, starts, q_in.transpose(-1, -2) @ d_o, d_final
        )
        d_p = (d_o @ v.transpose(-1, -2)).mul_(causal_mask(q_rel.shape[-2], v))
        d_v = (p.transpose(-1, -2) @ d_o).add_(k_end @ d_r)
        d_k_end = v @ d_r.transpose(-1, -2)
        d_q_rel = torch.addcmul(d_p @ k_rel, d_o @ starts.transpose(-1, -2), e_ref)
        d_k_rel = torch.addcmul(d_p.transpose(-1, -2) @ q_rel, d_k_end, e_end)
        d_q, d_k = d_q_rel * e_q, d_k_rel * e_k
        # G enters q~ as e^{+G} (and q e^G), k~ as e^{-G} (and k e^{G_C-G}), G_C the carry
        d_g = d_q_rel.mul_(q_rel).sub_(d_k_rel.mul_(k_rel))
        d_g[..., -1, :] += (d_k_end * k_end).sum(-2) + (d_a_end * a_end)[..., 0]
        return d_q, d_k, d_v, d_g, d_s0
