"""Rank-1 delta-rule kernels with an optional scalar per-step decay.

Recurrence (per batch and head): S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T and
o_t = S_t^T q_t. `delta_rule_recurrent` is the step-by-step reference; `delta_rule_chunked`
is the chunkwise-parallel WY/UT form that must agree with it to numerical precision.

Chunked derivation (within one chunk of length C, positions t, s in 1..C, S0 the carried state,
g_t = sum_{r<=t} log a_r, gamma_t = e^{g_t}): guess S_t = gamma_t S0 + sum_{s<=t} e^{g_t-g_s}
k_s u_s^T. Substituting into the recurrence gives
    u_t = b_t v_t - b_t gamma_t S0^T k_t - sum_{s<t} b_t e^{g_t-g_s} (k_t^T k_s) u_s,
i.e. (I + A) u = diag(b) V - diag(b gamma) K S0 with A strictly lower triangular, so
u = U - W S0 where U = T diag(b) V, W = T diag(b gamma) K, T = (I + A)^{-1}. Then
    O = diag(gamma) Q S0 + (tril(Q K^T) * e^{g_t-g_s}) u,
    S_C = gamma_C S0 + sum_s e^{g_C-g_s} k_s u_s^T.
Everything except the S0 dependence is computed for all chunks at once; S0 is carried by a
short loop S_{n+1} = M_n S_n + R_n with M_n = gamma_C I - K_d^T W and R_n = K_d^T U.
T is formed explicitly by blocked halving (`unit_lower_inverse`, with a two-matmul backward):
on CPU that is several times faster than a batched triangular solve, which loops per matrix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from arbench.cells.scan import matrix_scan


def _check_shapes(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor
) -> tuple[int, int, int, int, int]:
    if q.dim() != 4 or k.shape != q.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"bad shapes q={tuple(q.shape)} k={tuple(k.shape)} v={tuple(v.shape)}")
    if beta.shape != q.shape[:3]:
        raise ValueError(f"beta must be (B,H,T)={tuple(q.shape[:3])}, got {tuple(beta.shape)}")
    b, h, t, dk = q.shape
    return b, h, t, dk, v.shape[-1]


def delta_rule_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step delta rule: the slow, obviously-correct reference for the chunked form.

    Shapes: q,k (B,H,T,dk); v (B,H,T,dv); beta, log_alpha (B,H,T); state (B,H,dk,dv).
    """
    b, h, t, dk, dv = _check_shapes(q, k, v, beta)
    if initial_state is None:
        s = q.new_zeros(b, h, dk, dv)
    else:
        s = initial_state
    # unbind once: indexing x[:, :, i] per step would make the backward allocate a full-length
    # zero gradient per step (quadratic in T) and turn the reference into a strawman.
    alphas = [None] * t if log_alpha is None else log_alpha.exp().unbind(2)
    outs = []
    for q_t, k_t, v_t, b_t, a_t in zip(
        q.unbind(2), k.unbind(2), v.unbind(2), beta.unbind(2), alphas, strict=True
    ):
        bk = (b_t[..., None] * k_t)[..., :, None]  # (B,H,dk,1)
        s = s - bk * (k_t[..., None, :] @ s)  # (I - b k k^T) S
        if a_t is not None:
            s = a_t[..., None, None] * s
        s = s + bk * v_t[..., None, :]
        outs.append((q_t[..., None, :] @ s)[..., 0, :])
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(b, h, 0, dv)
    return o, s


def _pad_time(x: torch.Tensor, pad: int, dim: int) -> torch.Tensor:
    """Zero-pad `pad` steps at the end of time dimension `dim` (negative index)."""
    if pad == 0:
        return x
    spec = [0, 0] * (-dim - 1) + [0, pad]
    return F.pad(x, spec)


def unit_lower_inverse(a: torch.Tensor) -> torch.Tensor:
    """(I + tril(a, -1))^{-1} for (..., C, C) by blocked halving (C padded to a power of two).

    Level m inverts 2m-blocks from their m-blocks: T21 = -T22 L21 T11, all blocks batched.
    Much faster on CPU than a batched triangular solve, which loops over matrices.
    """
    c = a.shape[-1]
    p2 = 1 << max(0, c - 1).bit_length()
    if p2 != c:  # a zero-padded block is its own (identity) inverse block
        return unit_lower_inverse(F.pad(a, (0, p2 - c, 0, p2 - c)))[..., :c, :c]
    lower = a.tril(-1)
    t = torch.eye(c, dtype=a.dtype, device=a.device).expand(a.shape).clone()
    m = 1
    while m < c:
        nb = c // (2 * m)
        shape = (*a.shape[:-2], nb, 2 * m, nb, 2 * m)
        tb = t.view(shape).diagonal(dim1=-4, dim2=-2).movedim(-1, -3)  # (..., nb, 2m, 2m) view
        lb = lower.view(shape).diagonal(dim1=-4, dim2=-2).movedim(-1, -3)
        tb[..., m:, :m] = -(tb[..., m:, m:] @ (lb[..., m:, :m] @ tb[..., :m, :m]))
        m *= 2
    return t


class _UnitLowerInverse(torch.autograd.Function):
    """T = (I + tril(A, -1))^{-1} with backward dA = -tril(T^T dT T^T, -1)."""

    @staticmethod
    def forward(ctx, a: torch.Tensor) -> torch.Tensor:
        t = unit_lower_inverse(a)
        ctx.save_for_backward(t)
        return t

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_t: torch.Tensor) -> torch.Tensor:
        (t,) = ctx.saved_tensors
        t_t = t.transpose(-1, -2)
        return -(t_t @ d_t @ t_t).tril_(-1)


def delta_rule_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel (WY/UT) delta rule; same result as `delta_rule_recurrent`, far faster.

    Intra-chunk work is batched over all chunks and fused into few matmuls (q and k share one
    score product; U and W share T and the products with it); only the (dk x dv) carry loops.
    """
    b, h, t, dk, dv = _check_shapes(q, k, v, beta)
    c = chunk_size
    n = -(-t // c) if t > 0 else 0
    if n == 0:
        s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
        return v.new_zeros(b, h, 0, dv), s0
    pad = n * c - t
    # Padding with beta=0 and log_alpha=0 makes the padded steps identities on the state.
    q, k, v = (
        _pad_time(x, pad, -2).reshape(b, h, n, c, x.shape[-1]).contiguous() for x in (q, k, v)
    )
    beta = _pad_time(beta, pad, -1).reshape(b, h, n, c)

    scores = torch.cat([k, q], dim=-2) @ k.transpose(-1, -2)  # (B,H,N,2C,C): [K K^T; Q K^T]
    lower = torch.ones(c, c, dtype=q.dtype, device=q.device).tril()
    if log_alpha is not None:
        g = _pad_time(log_alpha, pad, -1).reshape(b, h, n, c).cumsum(-1)
        # Zero the s>t entries before exponentiating so that nothing overflows, and after.
        decay = (g[..., :, None] - g[..., None, :]).mul_(lower).exp() * lower
        scores = scores * decay.repeat(1, 1, 1, 2, 1)
        gamma = g.exp()
        gamma_end = gamma[..., -1]
        k_end = k * (g[..., -1:] - g).exp()[..., None]
        rhs = torch.cat([v, k * gamma[..., None]], dim=-1)
    else:
        scores = scores * lower.repeat(2, 1)
        gamma = gamma_end = None
        k_end = k
        rhs = torch.cat([v, k], dim=-1)
    kk, qk = scores.split(c, dim=-2)  # split, not slicing: its backward needs no zero fill
    # (I + A)^{-1} diag(beta) [V, gamma K] = [U, W]; A = tril(diag(beta) K K^T, -1).
    t_inv = _UnitLowerInverse.apply(beta[..., :, None] * kk)
    sol = t_inv @ (beta[..., None] * rhs)  # [U, W]

    # State carry S_{n+1} = M_n S_n + R_n with M = gamma_C I - K_e^T W and R = K_e^T U.
    ks = k_end.transpose(-1, -2) @ sol
    r_mat, m_mat = ks.split([dv, dk], dim=-1)
    eye = torch.eye(dk, dtype=q.dtype, device=q.device)
    m_mat = (eye if gamma_end is None else gamma_end[..., None, None] * eye) - m_mat

    s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    s_start, s = matrix_scan(m_mat, r_mat, s0)  # (B,H,N,dk,dv): state entering each chunk

    qu, qw = (qk @ sol).split([dv, dk], dim=-1)  # QK^T [U, W], causal (and decay) mask in qk
    q_eff = (q if gamma is None else q * gamma[..., None]) - qw
    o = torch.baddbmm(qu.reshape(-1, c, dv), q_eff.reshape(-1, c, dk), s_start.reshape(-1, dk, dv))
    o = o.reshape(b, h, n * c, dv)[:, :, :t]
    return o, s
