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

When q and k are shared by all heads (Mamba-2's one group of B and C) the chunked form takes
`_SharedHeads` instead: the heads' value columns side by side, one masked Q K^T per chunk for
all of them, and the decays factored about each chunk's middle, e^{g_t-g_s} = e^{g_t-r} e^{r-g_s},
with the chunk halved until both exponents stay within `pairwise_tree.FACTOR_REACH`
(`_factorable_chunk`: a one-step chunk always fits; chunks are balanced, not padded to c),
so the factors cannot overflow however strong the learned decay. Forward and backward are
hand-written.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.kernels.common import causal_mask, check_shapes, fit_chunk, from_chunks, to_chunks
from arbench.kernels.pairwise_tree import FACTOR_REACH
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


def _factorable_chunk(log_decay: torch.Tensor, c: int) -> int:
    """The chunk the shared-heads path runs in: at most c steps, its in-chunk decays within
    FACTOR_REACH, and balanced (the fewest steps that keep the number of chunks, so a
    66-step sequence runs in 5 chunks of 14, not 5 of 16 with 14 padded steps).

    The path writes e^{g_t - g_s} = e^{g_t - r} e^{r - g_s} with r midway between the
    chunk's first and last cumulative log-decay, so both exponents reach at most
    (g_1 - g_C) / 2 = -(l_2 + ... + l_C) / 2 (the first step's own decay does not enter).
    c halves until every chunk fits; a chunk of one step reaches 0, so the halving ends.
    """
    t = log_decay.shape[-1]
    bound = FACTOR_REACH.get(log_decay.dtype, 0.0)
    with torch.no_grad():
        while True:
            n = -(-t // c)
            c = -(-t // n)  # balanced: same number of chunks, least padding
            if c == 1:
                return c
            tail = to_chunks(log_decay[..., None], n, c)[..., 1:, 0]  # (B,H,N,C-1)
            if float(tail.sum(-1).min()) >= -2.0 * bound:
                return c
            c //= 2


def _per_column(x: torch.Tensor, dv: int) -> torch.Tensor:
    """(..., H) per-head factors repeated over each head's dv value columns: (..., H*dv),
    contiguous (a product with a factor broadcast along the innermost axis is several times
    slower on CPU than one with a full tensor)."""
    return x[..., None].expand(*x.shape, dv).reshape(*x.shape[:-1], x.shape[-1] * dv)


def _head_sums(x: torch.Tensor, h: int) -> torch.Tensor:
    """(..., H*dv) -> (..., H): each head's sum over its value columns (as a matrix-vector
    product, about twice as fast as a sum over a short innermost axis)."""
    return (x.reshape(-1, x.shape[-1] // h) @ x.new_ones(x.shape[-1] // h)).view(*x.shape[:-1], h)


def _pad_time(x: torch.Tensor, total: int) -> torch.Tensor:
    """(B,T,...) zero-padded along time (axis 1) to `total` steps, contiguous."""
    if x.shape[1] == total:
        return x.contiguous()
    out = x.new_empty(x.shape[0], total, *x.shape[2:])
    out[:, x.shape[1] :] = 0
    out[:, : x.shape[1]] = x
    return out


SHARED_BLOCK = 1 << 17  # (.., H*dv) elements per batch slice of the shared-heads path


def _shared_slices(b: int, per_item: int, cpu: bool = True) -> list[slice]:
    """Batch slices of about SHARED_BLOCK elements of a (B, ..) tensor with per_item each
    (one slice off the CPU, where more launches would cost more than the cache saves)."""
    step = max(1, SHARED_BLOCK // max(per_item, 1)) if cpu else b
    return [slice(i, i + step) for i in range(0, b, step)]


def _factors(g: torch.Tensor, dv: int) -> tuple[torch.Tensor, ...]:
    """The shared-heads path's per-head factors from in-chunk cumulative log-decays g
    (b,N,C,H), repeated over each head's columns: e^{g-r}, e^{r-g}, e^{g} (b,N,C,H dv) and
    e^{g_C-r}, e^{g_C} (b,N,1,H dv), with r midway between the chunk's first and last g."""
    ref = 0.5 * (g[:, :, :1] + g[:, :, -1:])  # (b,N,1,H)
    last = g[:, :, -1:]
    return tuple(_per_column(x.exp(), dv) for x in (g - ref, ref - g, g, last - ref, last))


class _SharedHeads(torch.autograd.Function):
    """Scalar-decay attention with one q and k (B,T,dk) for all H heads (Mamba-2's one group),
    chunked, with a hand-written backward.

    The heads' value columns sit side by side ((.., H*dv) wide), so each product is one matmul
    over all heads. With g the in-chunk cumulative log-decay per head and r_h midway between
    its first and last value in the chunk (`_factorable_chunk` keeps g - r and r - g within
    FACTOR_REACH, so nothing overflows),
        O_t = e^{g_t - r} sum_{s<=t} (q_t . k_s) Y_s + e^{g_t} q_t S_n,   Y_s = e^{r - g_s} v_s,
        S_{n+1} = e^{g_C} S_n + e^{g_C - r} K^T Y,
    i.e. one masked (C x C) Q K^T per chunk for all heads, and per-head factors that scale
    columns. r is a constant of the factorisation (the values do not depend on it), so the
    backward does not differentiate it. Backward: with dA = e^{g-r} dO, dR = e^{g} dO and the
    reverse carry G_n = e^{g_C} G_{n+1} + Q^T dR (G_N = dS_final, dW_n = G_{n+1}),
        dY = M^T dA + K (e^{g_C-r} dW),  dM = dA Y^T (masked),  dV = e^{r-g} dY,
        dg_t = sum_cols(O dO - Y dY)_t  [+ sum(dW S_{n+1}) at t = C],
    and the log-decay gradient is dg summed from t to the chunk end. Both passes run over
    slices of the batch so that the (.., H*dv) temporaries stay cache-sized (SHARED_BLOCK
    elements) and are recycled by the allocator instead of page-faulted in fresh each time.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        log_decay: torch.Tensor,
        s0: torch.Tensor,
        c: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, t, dv = v.shape
        dk, n = q.shape[-1], -(-t // c)
        hv, total = h * dv, n * c
        qc = _pad_time(q, total).view(b, n, c, dk)
        kc = _pad_time(k, total).view(b, n, c, dk)
        g = _pad_time(log_decay.transpose(1, 2), total).view(b, n, c, h).cumsum(2)
        scores = (qc @ kc.transpose(-1, -2)).mul_(causal_mask(c, q))  # (B,N,C,C)
        y = v.new_empty(b, n, c, hv)
        y.view(b, total, h, dv)[:, t:] = 0
        o = torch.empty_like(y)
        states = v.new_empty(b, n + 1, dk, hv)  # states[:, i]: the state entering chunk i
        states[:, 0] = s0.transpose(1, 2).reshape(b, dk, hv)
        for sl in _shared_slices(b, total * hv, y.device.type == "cpu"):
            e_out, e_in, e_read, e_write, e_chunk = _factors(g[sl], dv)
            ys, os_, st, qs = y[sl], o[sl], states[sl], qc[sl]
            torch.mul(
                v[sl].transpose(1, 2),
                e_in.view(-1, total, h, dv)[:, :t],
                out=ys.view(-1, total, h, dv)[:, :t],
            )
            torch.matmul(scores[sl], ys, out=os_)  # the in-chunk terms
            os_.mul_(e_out)
            writes = (kc[sl].transpose(-1, -2) @ ys).mul_(e_write)  # (b,N,dk,H dv)
            for i in range(n):
                os_[:, i].addcmul_(e_read[:, i], torch.bmm(qs[:, i], st[:, i]))
                torch.addcmul(writes[:, i], e_chunk[:, i], st[:, i], out=st[:, i + 1])
        ctx.save_for_backward(qc, kc, g, scores, y, o, states)
        ctx.shape = (b, h, t, dk, dv, n, c)
        out = o.view(b, total, h, dv)[:, :t].transpose(1, 2)
        return out, states[:, n].view(b, dk, h, dv).transpose(1, 2)

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_out: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        qc, kc, g, scores, y, o, states = ctx.saved_tensors
        b, h, t, dk, dv, n, c = ctx.shape
        hv, total = h * dv, n * c
        mask = causal_mask(c, y)
        d_q, d_k = torch.empty_like(qc), torch.empty_like(kc)
        d_v = y.new_empty(b, t, h, dv)
        d_log = g.new_empty(b, n, c, h)
        d_s0 = y.new_empty(b, dk, hv)
        d_final = d_final.transpose(1, 2).reshape(b, dk, hv)
        for sl in _shared_slices(b, total * hv, y.device.type == "cpu"):
            e_out, e_in, e_read, e_write, e_chunk = _factors(g[sl], dv)
            ys, st, qs, ks, dqs = y[sl], states[sl], qc[sl], kc[sl], d_q[sl]
            d_o = _pad_time(d_out[sl].transpose(1, 2), total).view(-1, n, c, hv)
            d_g = o[sl] * d_o  # the output factors' share of dg (before the column sums)
            d_a = d_o * e_out
            d_r = d_o.mul_(e_read)
            d_scores = (d_a @ ys.transpose(-1, -2)).mul_(mask)
            d_y = scores[sl].transpose(-1, -2) @ d_a
            torch.matmul(d_scores, ks, out=dqs)
            reads = qs.transpose(-1, -2) @ d_r  # (b,N,dk,H dv): Q^T dR per chunk
            grads = d_o.new_empty(d_o.shape[0], n + 1, dk, hv)  # dL/d(state entering chunk i)
            grads[:, n] = d_final[sl]
            for i in range(n - 1, -1, -1):
                dqs[:, i] += torch.bmm(d_r[:, i], st[:, i].transpose(-1, -2))
                torch.addcmul(reads[:, i], e_chunk[:, i], grads[:, i + 1], out=grads[:, i])
            d_s0[sl] = grads[:, 0]
            d_writes = grads[:, 1:]
            d_carry = _head_sums((d_writes * st[:, 1:]).sum(2), h)  # (b,N,H): at t = C
            d_writes = d_writes * e_write
            d_y += ks @ d_writes
            torch.matmul(d_scores.transpose(-1, -2), qs, out=d_k[sl])
            d_k[sl] += ys @ d_writes.transpose(-1, -2)
            d_g.addcmul_(ys, d_y, value=-1.0)
            d_gs = _head_sums(d_g, h)  # (b,N,C,H)
            d_gs[:, :, -1] += d_carry
            d_log[sl] = d_gs.flip(2).cumsum(2).flip(2)  # sum_{t' >= t} dg_t'
            torch.mul(
                d_y.view(-1, total, h, dv)[:, :t], e_in.view(-1, total, h, dv)[:, :t], out=d_v[sl]
            )
        d_log = d_log.view(b, total, h)[:, :t].transpose(1, 2)
        d_q, d_k = (x.view(b, total, dk)[:, :t] for x in (d_q, d_k))
        return d_q, d_k, d_v.transpose(1, 2), d_log, d_s0.view(b, dk, h, dv).transpose(1, 2), None


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
    if log_decay is not None and q.shape[1] == 1 < h:  # one B and C for every head
        c = _factorable_chunk(log_decay, c)
        return _SharedHeads.apply(q[:, 0], k[:, 0], v, log_decay, s, c)
    n = -(-t // c)
    # Zero padding (k = v = 0, log-decay 0) makes the padded steps identities on the state.
    qc, kc, vc = (to_chunks(x, n, c) for x in (q, k, v))
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
