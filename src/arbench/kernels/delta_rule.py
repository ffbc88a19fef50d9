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
T is formed explicitly by blocked halving (`triangular.unit_lower_inverse`; `_DeltaChunks`
differentiates it by hand): on CPU that is several times faster than a batched triangular
solve, which loops per matrix. The carry runs on `scan.matrix_scan_forward/_backward`.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.kernels.common import causal_mask, check_shapes, fit_chunk, from_chunks, to_chunks
from arbench.kernels.scan import matrix_scan_backward, matrix_scan_forward
from arbench.kernels.triangular import halving_buffer, unit_lower_inverse


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
    b, h, t, dk, dv = check_shapes(q, k, v, per_step={"beta": beta, "log_alpha": log_alpha})
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


def _fill_chunks(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Write src (B,H,T,...) into dst (B,H,N,C,...), time split into chunks and zero-padded.

    `common.to_chunks` without its padded copy: the chunks land straight in a slice of a fused
    buffer (k and q side by side, v beside k), and only the steps past T are zeroed.
    """
    c, t = dst.shape[3], src.shape[2]
    full = t // c
    if full:
        dst[:, :, :full].copy_(src[:, :, : full * c].unflatten(2, (full, c)))
    if full < dst.shape[2]:  # one partial chunk (N = ceil(T / C))
        rest = t - full * c
        dst[:, :, full, :rest].copy_(src[:, :, full * c :])
        dst[:, :, full, rest:].zero_()


class _DeltaChunks(torch.autograd.Function):
    """The chunked delta rule with a hand-written backward: q, k, v, beta (B,H,T,.) in, o
    (B,H,T,dv) and the final state out, chunks of `c` steps (B,H,N,C,.) inside.

    Forward as in the module docstring. Backward, per chunk (dZ = [dO, -dQ_eff], Y = [U, W],
    X_b = diag(b) [V, gamma K], G = [dR, -dM] from the reverse state scan):
        dS_start = Q_eff^T dO,   dQ_eff = dO S_start^T,   dP_qk = dZ Y^T,
        dY = P_qk^T dZ + K_e G,   dK_e = Y G^T,   dX_b = T^T dY,
        dA = -tril(dX_b Y^T, -1)   (T^T dT T^T with dT = dY X_b^T, without forming dT),
    then the products with the masks/decays. One pass of fused matmuls replaces autograd's
    graph of ~40 nodes and its copies (cat/split/repeat backward). The padding to whole chunks
    happens here too: the fused operands ([K; Q], [V, K], dZ, G) are filled in place in
    preallocated buffers, never padded and then concatenated, and the gradients leave as views
    of the padded ones.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q_in: torch.Tensor,
        k_in: torch.Tensor,
        v_in: torch.Tensor,
        beta_in: torch.Tensor,
        g: torch.Tensor | None,
        s0: torch.Tensor,
        c: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, steps, dk = q_in.shape
        dv, n = v_in.shape[-1], -(-steps // c)
        # Padding with beta=0 (and g flat) makes the padded steps identities on the state.
        kq = q_in.new_empty(b, h, n, 2 * c, dk)  # [K; Q]: one score product for both
        k, q = kq[..., :c, :], kq[..., c:, :]
        _fill_chunks(k, k_in)
        _fill_chunks(q, q_in)
        x = v_in.new_empty(b, h, n, c, dv + dk)  # [V, gamma K]: one product with T for both
        _fill_chunks(x[..., :dv], v_in)
        beta = to_chunks(beta_in, n, c)
        lower = causal_mask(c, q)
        p = kq @ k.transpose(-1, -2)  # [K K^T; Q K^T], masked (and decayed) below
        if g is not None:
            # Zero the s>t entries before exponentiating so that nothing overflows, and after.
            decay = (g[..., :, None] - g[..., None, :]).mul_(lower).exp_().mul_(lower)
            p.view(*p.shape[:-2], 2, c, c).mul_(decay.unsqueeze(-3))
            mask = decay
            gamma = g.exp()
            to_end = (g[..., -1:] - g).exp_()
            k_e = k * to_end[..., None]
            torch.mul(k, gamma[..., None], out=x[..., dv:])
        else:
            p.view(*p.shape[:-2], 2, c, c).mul_(lower)
            mask = lower
            gamma = to_end = None
            k_e = k
            x[..., dv:] = k
        p_kk, p_qk = p.split(c, dim=-2)
        a = halving_buffer(p_kk.shape, p_kk)  # T's own layout: no copy inside the inverse
        t = unit_lower_inverse(torch.mul(beta[..., :, None], p_kk, out=a), keep_layout=True)
        x_b = beta[..., None] * x
        y = t @ x_b  # [U, W]
        k_e_t = k_e.transpose(-1, -2)
        r = k_e_t @ y[..., :dv]  # R = K_e^T U
        m = (k_e_t @ y[..., dv:]).neg_()  # M = gamma_C I - K_e^T W
        diag = m.diagonal(dim1=-2, dim2=-1)
        diag += 1.0 if gamma is None else gamma[..., -1:]
        starts, s_final = matrix_scan_forward(m, r, s0)
        z = p_qk @ y  # [Q K^T U, Q K^T W], causal (and decay) mask in p_qk
        q_eff = (q if gamma is None else q * gamma[..., None]) - z[..., dv:]
        o = (q_eff @ starts).add_(z[..., :dv])
        ctx.save_for_backward(kq, k_e, x, beta, g, gamma, to_end, p, mask, t, y, m, starts, q_eff)
        ctx.steps = steps
        return from_chunks(o, steps), s_final

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_o_in: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        kq, k_e, x, beta, g, gamma, to_end, p, mask, t, y, m, starts, q_eff = ctx.saved_tensors
        c, dk = kq.shape[-2] // 2, kq.shape[-1]
        dv = x.shape[-1] - dk
        k, q = kq.split(c, dim=-2)
        p_kk, p_qk = p.split(c, dim=-2)
        d_z = d_o_in.new_empty(*q_eff.shape[:-1], dv + dk)  # [dO, -dQ_eff]
        _fill_chunks(d_z[..., :dv], d_o_in)
        d_o = d_z[..., :dv]
        d_starts = q_eff.transpose(-1, -2) @ d_o
        d_m, d_r, d_s0 = matrix_scan_backward(m, starts, d_starts, d_final)
        d_qeff = d_o @ starts.transpose(-1, -2)
        torch.neg(d_qeff, out=d_z[..., dv:])
        d_p_qk = d_z @ y.transpose(-1, -2)
        gm = d_r.new_empty(*d_r.shape[:-1], dv + dk)  # [dR, -dM]: (dk, dv+dk)
        gm[..., :dv] = d_r
        torch.neg(d_m, out=gm[..., dv:])
        d_y = (p_qk.transpose(-1, -2) @ d_z).add_(k_e @ gm)
        d_ke = y @ gm.transpose(-1, -2)
        d_xb = t.transpose(-1, -2) @ d_y
        d_a = (d_xb @ y.transpose(-1, -2)).tril_(-1).neg_()
        d_p_kk = d_a * beta[..., :, None]
        d_beta = (d_a * p_kk).sum(-1) + (d_xb * x).sum(-1)
        d_x = d_xb.mul_(beta[..., None])
        d_v = d_x[..., :dv]
        d_kg = d_x[..., dv:]  # gradient of gamma * k (of k without decay)
        d_g = None
        if g is not None:
            d_pair = d_p_kk * p_kk + d_p_qk * p_qk  # dD * D for the decays inside P
            d_g = _decay_grads(q, k, d_qeff, d_kg, d_ke, d_m, d_pair, gamma, to_end)
            # P = scores * decay (the saved mask): the scores' gradient is dP * decay
            d_k = torch.addcmul(d_ke * to_end[..., None], d_kg, gamma[..., None])
            d_q = d_qeff * gamma[..., None]
        else:
            d_q = d_qeff
            d_k = d_ke.add_(d_kg)
        d_p_kk.mul_(mask)
        d_p_qk.mul_(mask)
        d_q.add_(d_p_qk @ k)
        d_k += (d_p_kk + d_p_kk.transpose(-1, -2)) @ k
        d_k += d_p_qk.transpose(-1, -2) @ q
        grads = (from_chunks(d, ctx.steps) for d in (d_q, d_k, d_v, d_beta))
        return (*grads, d_g, d_s0, None)


def _decay_grads(
    q: torch.Tensor,
    k: torch.Tensor,
    d_qeff: torch.Tensor,
    d_kg: torch.Tensor,
    d_ke: torch.Tensor,
    d_m: torch.Tensor,
    d_pair: torch.Tensor,
    gamma: torch.Tensor,
    to_end: torch.Tensor,
) -> torch.Tensor:
    """Gradient of the in-chunk cumulative log-decay g.

    g enters through gamma = e^g (q and the written keys), to_end = e^{g_C - g} (keys to the
    chunk end), the carry's gamma_C I, and the pairwise decays D_ts = e^{g_t - g_s} inside P;
    d_pair is dD * D summed over both score blocks.
    """
    d_gamma = (q * d_qeff).sum(-1) + (k * d_kg).sum(-1)
    d_to_end = (k * d_ke).sum(-1).mul_(to_end)
    d_g = d_gamma.mul_(gamma).sub_(d_to_end)
    d_end = d_to_end.sum(-1) + d_m.diagonal(dim1=-2, dim2=-1).sum(-1) * gamma[..., -1]
    d_g[..., -1] += d_end
    return d_g.add_(d_pair.sum(-1)).sub_(d_pair.sum(-2))


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
    b, h, t, dk, dv = check_shapes(q, k, v, per_step={"beta": beta, "log_alpha": log_alpha})
    c = fit_chunk(chunk_size, t)
    n = -(-t // c) if t > 0 else 0
    s0 = q.new_zeros(b, h, dk, dv) if initial_state is None else initial_state
    if n == 0:
        return v.new_zeros(b, h, 0, dv), s0
    # log_alpha=0 on the padded steps (with beta=0 there) keeps them identities on the state.
    g = None if log_alpha is None else to_chunks(log_alpha, n, c).cumsum(-1)
    return _DeltaChunks.apply(q, k, v, beta, g, s0.contiguous(), c)
