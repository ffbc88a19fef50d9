"""Diagonal-transition kernels: gated linear attention and the delta rule's diagonal ablation.

General form: S_t = Diag(exp(d_t)) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t, with a per-channel
log-decay d_t <= 0 of shape (B,H,T,dk). The diagonal ablation of the delta rule keeps only the
diagonal of (I - b k k^T): d_{t,i} = log a_t + log(1 - b_t k_{t,i}^2), written with key b_t k_t.

Chunked derivation (chunk of length C, G_t = sum_{r<=t} d_r per channel, S0 the carried state):
    S_t = Diag(e^{G_t}) S0 + sum_{s<=t} Diag(e^{G_t-G_s}) k_s v_s^T,
    o_t = S0^T (q_t * e^{G_t}) + sum_{s<=t} (sum_i q_{t,i} k_{s,i} e^{G_{t,i}-G_{s,i}}) v_s.
No (C,C,dk) tensor is formed for the decayed scores sum_i q_{t,i} k_{s,i} e^{G_{t,i}-G_{s,i}}:
when `dplr.factorisable` allows, they are one masked matmul of q e^{G-r} and k e^{r-G} (r the
chunk middle); otherwise they are built over a binary tree of blocks (`dplr._tree_pairwise`),
each off-diagonal block factorising through the log-decay at a position between s and t, so
only non-positive numbers are exponentiated.
"""

from __future__ import annotations

import math

import torch

from arbench.cells.delta_rule import _check_shapes, _pad_time
from arbench.cells.dplr import _check_chunk, _tree_pairwise, factorisable
from arbench.cells.gla_chunks import GLAChunks
from arbench.cells.scan import diagonal_scan

LOG_DECAY_FLOOR = -30.0  # per-step per-channel log-decay floor of the diagonal ablation


def diagonal_log_decay(
    k: torch.Tensor, beta: torch.Tensor, log_alpha: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-channel log-decay log(a_t (1 - b_t k_{t,i}^2)), floored at LOG_DECAY_FLOOR.

    Shared by both forms so they clamp identically; the clamp sits before the log so gradients
    stay finite even when b_t k_{t,i}^2 rounds to 1.
    """
    keep = (1.0 - beta[..., None] * k * k).clamp_min(math.exp(LOG_DECAY_FLOOR))
    log_decay = keep.log()
    if log_alpha is not None:
        log_decay = log_decay + log_alpha[..., None]
    return log_decay


def _check_gla(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, log_decay: torch.Tensor
) -> tuple[int, int, int, int, int]:
    if log_decay.shape != k.shape:
        raise ValueError(f"log_decay must match k {tuple(k.shape)}, got {tuple(log_decay.shape)}")
    return _check_shapes(q, k, v, log_decay[..., 0])


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
    b, h, t, dk, dv = _check_gla(q, k, v, log_decay)
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

    Intra-chunk scores come from one masked matmul when the decays allow the factorisation
    (`dplr.factorisable`), else from the tree of decayed blocks; chunks are batched and only
    the state carry loops over chunks. chunk_size must be a power of two.
    """
    b, h, t, dk, dv = _check_gla(q, k, v, log_decay)
    c = chunk_size
    _check_chunk(c)
    n = -(-t // c) if t > 0 else 0
    if n == 0:
        s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
        return v.new_zeros(b, h, 0, dv), s0
    pad = n * c - t
    # Padded steps have k=0 and log-decay 0: identities on the state.
    q, k, v, log_decay = (
        _pad_time(x, pad, -2).reshape(b, h, n, c, x.shape[-1]).contiguous()
        for x in (q, k, v, log_decay)
    )
    g = log_decay.cumsum(-2)  # (B,H,N,C,dk)
    s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    if factorisable(g, dim=-2):  # the usual case: masked matmuls, hand-written backward
        o, s = GLAChunks.apply(q, k, v, g, s0.contiguous())
        return o.reshape(b, h, n * c, dv)[:, :, :t], s

    g_end = g[..., -1:, :]
    gy = g[..., None, :]
    scores = _tree_pairwise(q[..., None, :], gy, k[..., None, :], gy, 1)[..., 0, 0, :, :]
    intra = scores @ v
    k_end = k * (g_end - g).exp()
    q_in = q * g.exp()

    # State carry: S_{n+1} = Diag(e^{G_C}) S_n + (k * e^{G_C - G})^T v.
    r_mat = k_end.transpose(-1, -2) @ v  # (B,H,N,dk,dv)
    a_end = g_end.exp().transpose(-1, -2)  # (B,H,N,dk,1)
    s_start, s = diagonal_scan(a_end, r_mat, s0)

    o = q_in @ s_start + intra
    o = o.reshape(b, h, n * c, dv)[:, :, :t]
    return o, s


def diagonal_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step diagonal ablation S_t = a_t (I - b_t Diag(k_t^2)) S_{t-1} + b_t k_t v_t^T."""
    _check_shapes(q, k, v, beta)
    log_decay = diagonal_log_decay(k, beta, log_alpha)
    return gated_linear_attention_recurrent(q, beta[..., None] * k, v, log_decay, initial_state)


def diagonal_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel diagonal ablation; same result as `diagonal_recurrent`."""
    _check_shapes(q, k, v, beta)
    log_decay = diagonal_log_decay(k, beta, log_alpha)
    return gated_linear_attention_chunked(
        q, beta[..., None] * k, v, log_decay, initial_state, chunk_size=chunk_size
    )
