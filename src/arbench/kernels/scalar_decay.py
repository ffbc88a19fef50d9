"""Linear attention with a scalar per-head decay (the SSD / Mamba-2 form).

Recurrence (per batch and head): S_t = a_t S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, with
a_t = e^{l_t} a scalar (l_t = log_decay[..., t] <= 0); log_decay None means a_t = 1 (purely
additive linear attention). `scalar_decay_recurrent` is the step-by-step reference;
`scalar_decay_chunked` is the chunkwise-parallel form that must agree with it.

Chunked derivation (chunk of length C, positions t, s in 1..C, S0 the state entering the chunk,
g_t = sum_{r<=t} l_r the in-chunk cumulative log-decay):
    S_t = e^{g_t} S0 + sum_{s<=t} e^{g_t-g_s} k_s v_s^T,
    o_t = e^{g_t} S0^T q_t + sum_{s<=t} e^{g_t-g_s} (q_t . k_s) v_s,
i.e. O = diag(e^g) Q S0 + ((Q K^T) * L) V with the (C,C) decay matrix L_{ts} = e^{g_t-g_s} for
s <= t and 0 otherwise. L is built from the segment sum g_t - g_s with the s > t entries zeroed
*before* exponentiating (and again after), so nothing can overflow and no inf * 0 = nan reaches
the backward pass. Chunks are carried by S_{n+1} = e^{g_C} S_n + (K * e^{g_C-g})^T V. The decayed
intra-chunk term has a hand-written backward (first derivatives only; no double backward), and
the carry is `scan.diagonal_scan` (a plain prefix sum when log_decay is None).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.kernels.common import causal_mask, check_shapes, fit_chunk, from_chunks, to_chunks
from arbench.kernels.scan import diagonal_scan


def scalar_decay_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_decay: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step scalar-decay linear attention: the slow, obviously-correct reference.

    Shapes: q,k (B,H,T,dk) or (B,1,T,dk) shared by all heads; v (B,H,T,dv); log_decay (B,H,T)
    or None; state (B,H,dk,dv).
    """
    b, h, t, dk, dv = check_shapes(q, k, v, per_step={"log_decay": log_decay}, shared_heads=True)
    s = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    alphas = [None] * t if log_decay is None else log_decay.exp().unbind(2)
    outs = []  # unbind once (per-step indexing would make the backward quadratic in T)
    for q_t, k_t, v_t, a_t in zip(q.unbind(2), k.unbind(2), v.unbind(2), alphas, strict=True):
        if a_t is not None:
            s = a_t[..., None, None] * s
        s = s + k_t[..., :, None] * v_t[..., None, :]
        outs.append((q_t[..., None, :] @ s)[..., 0, :])
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(b, h, 0, dv)
    return o, s


def _decay_matrix(g: torch.Tensor) -> torch.Tensor:
    """L_{ts} = e^{g_t - g_s} for s <= t else 0, from in-chunk cumulative log-decays (...,C).

    The s > t entries are zeroed before exp (so nothing can overflow) and again after; a float
    mask product is used because masked_fill and exp(-inf) are slow on CPU.
    """
    lower = causal_mask(g.shape[-1], g)
    seg = g[..., :, None] - g[..., None, :]
    return seg.mul_(lower).exp_().mul_(lower)


BLOCK_ELEMENTS = 1 << 18  # (C,C) decay entries per batch slice: keeps temporaries cache-sized


def _batch_slices(g: torch.Tensor) -> list[slice]:
    """Split the batch axis so each slice's (H,N,C,C) temporaries stay around BLOCK_ELEMENTS."""
    per_item = g[0].numel() * g.shape[-1]
    step = max(1, BLOCK_ELEMENTS // max(per_item, 1))
    return [slice(i, i + step) for i in range(0, g.shape[0], step)]


class _IntraChunk(torch.autograd.Function):
    """Within-chunk output ((Q K^T) * L) V with a hand-written, batch-blocked backward.

    Autograd through the elementwise chain would stream the (B,H,N,C,C) tensors through memory
    many times; here L (saved) and P (rebuilt) are handled per batch slice, and the backward needs
    dP = dO V^T, dS = dP * L and dseg = dP * P, with dg_t = sum_s dseg_ts - sum_s dseg_st.
    q and k may have a head axis of 1 (shared by all heads).
    """

    @staticmethod
    def forward(
        ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor
    ) -> torch.Tensor:
        out = v.new_empty(v.shape)
        decays = []
        for sl in _batch_slices(g):
            decays.append(_decay_matrix(g[sl]))
            torch.matmul(decays[-1] * (q[sl] @ k[sl].transpose(-1, -2)), v[sl], out=out[sl])
        ctx.save_for_backward(q, k, v, *decays)
        return out

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v, *decays = ctx.saved_tensors
        d_q, d_k, d_v = (x.new_empty(x.shape) for x in (q, k, v))
        d_g = v.new_empty(v.shape[:-1])
        shared = q.shape[1] != v.shape[1]
        start = 0
        for decay in decays:
            sl = slice(start, start + decay.shape[0])
            start = sl.stop
            qs, ks, do = q[sl], k[sl], d_out[sl]
            p = decay * (qs @ ks.transpose(-1, -2))
            torch.matmul(p.transpose(-1, -2), do, out=d_v[sl])
            d_p = do @ v[sl].transpose(-1, -2)
            d_seg = p.mul_(d_p)
            torch.sub(d_seg.sum(-1), d_seg.sum(-2), out=d_g[sl])
            d_scores = d_p.mul_(decay)
            if shared:
                d_scores = d_scores.sum(1, keepdim=True)
            torch.matmul(d_scores, ks, out=d_q[sl])
            torch.matmul(d_scores.transpose(-1, -2), qs, out=d_k[sl])
        return d_q, d_k, d_v, d_g


def _shared_heads_carry(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The carried-state terms when q and k (B,N,C,dk) are shared by all H heads (Mamba-2's
    one group): (each chunk's read of the state entering it, (B,H,N,C,dv); the final state).

    The heads' states sit side by side as one (dk, H*dv) state whose columns decay at their
    head's rate, so every product is one matmul over all heads, (C x dk) by (dk x H dv),
    instead of H small ones (at Mamba-2's 8 heads of 16 x 8 blocks the small batched
    products were most of a training step). The per-head factors e^{g_t} (read) and
    e^{g_C - g_t} (write) scale rows of V and of the read, which k and q do not depend on.
    """
    b, h, n, c, dv = v.shape
    dk = q.shape[-1]

    def packed(x: torch.Tensor) -> torch.Tensor:  # (B,H,N,C,dv) -> (B,N,C,H*dv)
        return x.permute(0, 2, 3, 1, 4).reshape(b, n, c, h * dv)

    writes = k.transpose(-1, -2) @ packed(v * (g[..., -1:] - g).exp()[..., None])  # (B,N,dk,H dv)
    decay = g[..., -1].exp().transpose(1, 2)[:, None, :, None, :, None]  # (B,1,N,1,H,1)
    decay = decay.expand(b, 1, n, 1, h, dv).reshape(b, 1, n, 1, h * dv)
    start = s0.transpose(1, 2).reshape(b, 1, dk, h * dv)
    starts, final = diagonal_scan(decay, writes[:, None], start)  # (B,1,N,dk,H dv)
    read = (q @ starts[:, 0]).view(b, n, c, h, dv).permute(0, 3, 1, 2, 4)
    return read * g.exp()[..., None], final.view(b, dk, h, dv).transpose(1, 2)


def scalar_decay_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_decay: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel scalar-decay linear attention; same result as the recurrent form.

    Intra-chunk work is batched over all chunks; only the cheap (dk x dv) state carry loops.
    """
    b, h, t, dk, dv = check_shapes(q, k, v, per_step={"log_decay": log_decay}, shared_heads=True)
    s = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    if t == 0:
        return v.new_zeros(b, h, 0, dv), s
    c = fit_chunk(chunk_size, t)
    n = -(-t // c)
    # Zero padding (k = v = 0, log-decay 0) makes the padded steps identities on the state.
    qc, kc, vc = (to_chunks(x, n, c) for x in (q, k, v))
    if log_decay is not None and q.shape[1] == 1 < h:  # one B and C for every head
        g = to_chunks(log_decay, n, c).cumsum(-1)  # (B,H,N,C)
        read, s = _shared_heads_carry(qc[:, 0], kc[:, 0], vc, g, s)
        return from_chunks(read + _IntraChunk.apply(qc, kc, vc, g), t), s
    if log_decay is not None:
        g = to_chunks(log_decay, n, c).cumsum(-1)  # (B,H,N,C)
        intra = _IntraChunk.apply(qc, kc, vc, g)  # (B,H,N,C,dv)
        q_in = qc * g.exp()[..., None]  # reads the carried state, decayed to position t
        k_out = kc * (g[..., -1:] - g).exp()[..., None]  # writes, decayed to the chunk end
        chunk_decay = g[..., -1].exp()  # (B,H,N)
    else:
        intra = ((qc @ kc.transpose(-1, -2)).mul_(causal_mask(c, q))) @ vc
        q_in, k_out, chunk_decay = qc, kc, None
    writes = k_out.transpose(-1, -2) @ vc  # (B,H,N,dk,dv): each chunk's own contribution

    decay = None if chunk_decay is None else chunk_decay[..., None, None]
    s_start, s = diagonal_scan(decay, writes, s)  # (B,H,N,dk,dv): state entering each chunk
    o = q_in @ s_start + intra
    return from_chunks(o, t), s
