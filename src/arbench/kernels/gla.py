"""Gated linear attention (GLA): a diagonal transition with per-channel decays.

Recurrence (per batch and head): S_t = Diag(exp(d_t)) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, with
a per-channel log-decay d_t <= 0 of shape (B,H,T,dk). `gated_linear_attention_recurrent` is the
step-by-step reference; `gated_linear_attention_chunked` is the chunkwise-parallel form that must
agree with it. The delta rule's diagonal ablation (`diagonal`) runs on these kernels.

Chunked derivation (chunk of length C, G_t = sum_{r<=t} d_r per channel, S0 the carried state):
    S_t = Diag(e^{G_t}) S0 + sum_{s<=t} Diag(e^{G_t-G_s}) k_s v_s^T,
    o_t = S0^T (q_t * e^{G_t}) + sum_{s<=t} (sum_i q_{t,i} k_{s,i} e^{G_{t,i}-G_{s,i}}) v_s.
No (C,C,dk) tensor is formed for the decayed scores sum_i q_{t,i} k_{s,i} e^{G_{t,i}-G_{s,i}}:
when `pairwise_tree.factorisable` allows, they are one masked matmul of q e^{G-r} and k e^{r-G}
(r the chunk middle, `common.middle_relative`); otherwise they are built over a binary tree of
blocks (`pairwise_tree.tree_pairwise`), each off-diagonal block factorising through the
log-decay at a position between s and t, so only non-positive numbers are exponentiated.

The factorised path's chunk form, `GLAChunks`, with per-channel decays folded in and a
hand-written backward. Per chunk (C steps, G the inclusive cumulative per-channel log-decay,
r = G at the chunk middle): with q~ = q e^{G-r} and k~ = k e^{r-G},
    P = (q~ k~^T) * L,   O = (q e^G) S_n + P V,   S_{n+1} = Diag(e^{G_C}) S_n + (k e^{G_C-G})^T V.
The backward runs it in reverse by hand (the diagonal scan's reverse loop included); as in
`kda.KDAChunks`, r cancels from every product and is held constant.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.kernels.common import (
    causal_mask,
    check_chunk_size,
    check_shapes,
    fit_chunk,
    from_chunks,
    middle_relative,
    to_chunks,
)
from arbench.kernels.pairwise_tree import factorisable, tree_pairwise
from arbench.kernels.scan import diagonal_scan, diagonal_scan_backward, diagonal_scan_forward


class GLAChunks(torch.autograd.Function):
    """GLA on (B,H,N,C,.) chunks: q, k, g (.., C, dk), v (.., C, dv), s0 (B,H,dk,dv).

    g must satisfy `pairwise_tree.factorisable` (the caller checks); returns (O chunks, final
    state).
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


def gated_linear_attention_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_decay: torch.Tensor,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step S_t = Diag(e^{d_t}) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t (reference form).

    Shapes: q,k,log_decay (B,H,T,dk); v (B,H,T,dv); state (B,H,dk,dv).
    """
    b, h, t, dk, dv = check_shapes(q, k, v, per_channel={"log_decay": log_decay})
    s = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    outs = []  # unbind once (per-step indexing would make the backward quadratic in T)
    for q_t, k_t, v_t, a_t in zip(
        q.unbind(2), k.unbind(2), v.unbind(2), log_decay.exp().unbind(2), strict=True
    ):
        s = a_t[..., None] * s + k_t[..., :, None] * v_t[..., None, :]
        outs.append((q_t[..., None, :] @ s)[..., 0, :])
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(b, h, 0, dv)
    return o, s


def gated_linear_attention_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_decay: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel gated linear attention; equals the recurrent form, much faster.

    Intra-chunk scores come from one masked matmul (`GLAChunks`) when the decays allow the
    factorisation (`pairwise_tree.factorisable`), else from the tree of decayed blocks; chunks
    are batched and only the state carry loops over chunks. chunk_size must be a power of two.
    """
    b, h, t, dk, dv = check_shapes(q, k, v, per_channel={"log_decay": log_decay})
    check_chunk_size(chunk_size)
    c = fit_chunk(chunk_size, t)
    n = -(-t // c) if t > 0 else 0
    if n == 0:
        s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
        return v.new_zeros(b, h, 0, dv), s0
    # Padded steps have k=0 and log-decay 0: identities on the state.
    q, k, v, log_decay = (to_chunks(x, n, c).contiguous() for x in (q, k, v, log_decay))
    g = log_decay.cumsum(-2)  # (B,H,N,C,dk)
    s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    if factorisable(g, dim=-2):  # the usual case: masked matmuls, hand-written backward
        o, s = GLAChunks.apply(q, k, v, g, s0.contiguous())
        return from_chunks(o, t), s

    g_end = g[..., -1:, :]
    gy = g[..., None, :]
    scores = tree_pairwise(q[..., None, :], gy, k[..., None, :], gy, 1)[..., 0, 0, :, :]
    intra = scores @ v
    k_end = k * (g_end - g).exp()
    q_in = q * g.exp()

    # State carry: S_{n+1} = Diag(e^{G_C}) S_n + (k * e^{G_C - G})^T v.
    r_mat = k_end.transpose(-1, -2) @ v  # (B,H,N,dk,dv)
    a_end = g_end.exp().transpose(-1, -2)  # (B,H,N,dk,1)
    s_start, s = diagonal_scan(a_end, r_mat, s0)

    o = q_in @ s_start + intra
    return from_chunks(o, t), s
