"""Kimi Delta Attention (KDA) kernels: the per-channel gated delta rule as a DPLR special case.

Recurrence (per batch and head): S_t = (I - b_t k_t k_t^T) Diag(alpha_t) S_{t-1} + b_t k_t v_t^T,
o_t = S_t^T q_t, with beta_t (B,H,T) and per-channel log alpha_t (B,H,T,dk). Written as DPLR
(`kda_to_dplr`), `kda_recurrent` is `dplr.dplr_recurrent` on the mapped inputs; `kda_chunked` is
the DPLR chunk form specialised to a = alpha k, b = -beta k, so only two pairwise matrices are
built (see its docstring).

`KDAChunks` is its factorised path, with per-channel decays folded into the operands and a
hand-written backward. Per chunk (C steps, G the inclusive cumulative per-channel log-decay,
r = G at the chunk middle, E+ = e^{G-r}, E- = e^{r-G}, L / L- the inclusive / strict lower masks,
beta on columns):
    S_q = ((q E+)(k E-)^T) * L,   S_p = ((k E+)(k E-)^T) * L-,
    T = (I + S_p diag(beta))^{-1},   Y = T [k e^G | V] = [W | V - U],
    Z = S_q diag(beta) Y = [Q_w | O_intra],   Q_eff = q e^G - Q_w,
    K_b = beta * k e^{G_C - G},   [K_w | R] = K_b^T Y,   M = Diag(e^{G_C}) - K_w,
then the carry S_{n+1} = M_n S_n + R_n and O = Q_eff S_n + O_intra. When a chunk is shorter than
half the key width (`low_rank_carry`: S5's 128-wide keys in chunks of 4 to 16) M is never
formed: S_{n+1} = e^{G_C} S_n - K_b^T (W S_n) + R_n, and its gradient dR S^T reaches K_b, W and
the decays only as products with them (`scan.lowrank_scan_*`). This is `kda_chunked`'s
factorised path with the U-side product simplified (V - T S_p diag(beta) V = T V).

The backward mirrors `delta_rule._DeltaChunks`: dZ = [-dQ_eff, dO], dG = [-dM, dR],
dY = (S_q diag(beta))^T dZ + K_b dG, dX = T^T dY, d(S_p diag(beta)) = -tril(dX Y^T, -1).
The reference r cancels from every product (e^{G_t-r} e^{r-G_s} = e^{G_t-G_s}), so it is held
constant: its total derivative is exactly zero, and the gradients differ from autograd's only by
rounding. One pass of fused matmuls replaces autograd's graph through the cats, splits and
rescalings (about 15% of the kernel's time on CPU).
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
from arbench.kernels.dplr import dplr_recurrent
from arbench.kernels.pairwise_tree import factorisable, tree_pairwise
from arbench.kernels.scan import (
    carry_and_read,
    lowrank_scan_backward,
    lowrank_scan_forward,
    matrix_scan_backward,
    matrix_scan_forward,
)
from arbench.kernels.triangular import UnitLowerInverse, unit_lower_inverse


def kda_to_dplr(
    k: torch.Tensor, beta: torch.Tensor, log_alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """KDA S_t = (I - b k k^T) Diag(alpha) S + b k v^T as DPLR: returns (k_write, log_w, a, b).

    Diag(alpha) - b k (alpha k)^T: a = alpha * k, b = -beta k, write key beta k.
    """
    bk = beta[..., None] * k
    return bk, log_alpha, log_alpha.exp() * k, -bk


def low_rank_carry(c: int, dk: int) -> bool:
    """Whether a chunk of ``c`` steps carries its state through the factored M = D - K_b^T W
    (2 c dk dv per step) rather than the formed dk x dk matrix (dk^2 dv): when 2c < dk."""
    return 2 * c < dk


class KDAChunks(torch.autograd.Function):
    """KDA on (B,H,N,C,.) chunks: q, k, g (.., C, dk), v (.., C, dv), beta (.., C), s0.

    g must satisfy `pairwise_tree.factorisable` (the caller checks); returns (O chunks, final
    state). s0 None starts from zero and takes no gradient; a single chunk from zero then
    reads no carry at all, and an output nothing reads (a denoiser's final state) costs no
    backward work (its gradient stays None).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        beta: torch.Tensor,
        g: torch.Tensor,
        s0: torch.Tensor | None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        c, dk = q.shape[-2], q.shape[-1]
        _, e_pos, e_neg, e_ref, e_end = middle_relative(g)  # e^{G-r}, e^{r-G}, e^r, e^{G_C-r}
        q_rel, k_rel, k_from = q * e_pos, k * e_pos, k * e_neg
        s_q = (q_rel @ k_from.transpose(-1, -2)).mul_(causal_mask(c, q))
        s_p = (k_rel @ k_from.transpose(-1, -2)).mul_(causal_mask(c, q, strict=True))
        beta_col = beta[..., None, :]
        x = torch.cat([k_rel * e_ref, v], dim=-1)  # [k e^G | V]
        t = unit_lower_inverse(s_p * beta_col)
        y = t @ x
        k_end = k_from * e_end  # k e^{G_C - G}
        kb = k_end * beta[..., None]
        ctx.low_rank = low_rank_carry(c, dk)
        ctx.carry_free = s0 is None and q.shape[2] == 1
        ctx.start_given = s0 is not None
        if s0 is None:
            s0 = q.new_zeros(*q.shape[:2], dk, v.shape[-1])
        if ctx.carry_free:  # one chunk from a zero state: nothing is read from a carry
            ctx.set_materialize_grads(False)  # and an unused output's gradient stays None
            s_final = (kb.transpose(-1, -2) @ y[..., dk:])[:, :, 0]  # R_0, as M_0 0 = 0
            m = starts = q.new_empty(0)
        elif ctx.low_rank:  # M = Diag(e^{G_C}) - K_b^T W, kept factored
            r = kb.transpose(-1, -2) @ y[..., dk:]
            m = (e_end * e_ref)[..., 0, :].contiguous()
            starts, s_final = lowrank_scan_forward(m, kb, y[..., :dk], r, s0)
        else:
            gm = kb.transpose(-1, -2) @ y  # [K_w | R]
            m = gm[..., :dk].neg()
            m.diagonal(dim1=-2, dim2=-1).add_((e_end * e_ref)[..., 0, :])  # e^{G_C}
            r = gm[..., dk:].contiguous()
            starts, s_final = matrix_scan_forward(m, r, s0)
        z = (s_q * beta_col) @ y  # [Q_w | O_intra]
        q_eff = torch.sub(q_rel * e_ref, z[..., :dk])
        o = z[..., dk:].contiguous() if ctx.carry_free else (q_eff @ starts).add_(z[..., dk:])
        ctx.save_for_backward(
            q_rel, k_rel, k_from, beta, s_q, s_p, t, y, k_end, m, starts, q_eff, e_pos, e_ref, e_end
        )
        return o, s_final

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_o: torch.Tensor | None, d_final: torch.Tensor | None
    ) -> tuple[torch.Tensor | None, ...]:
        (
            q_rel,
            k_rel,
            k_from,
            beta,
            s_q,
            s_p,
            t,
            y,
            k_end,
            m,
            starts,
            q_eff,
            e_pos,
            e_ref,
            e_end,
        ) = ctx.saved_tensors
        dk = q_rel.shape[-1]
        beta_col = beta[..., None, :]
        kb = k_end * beta[..., None]
        if ctx.carry_free:  # the state entering the chunk is 0: only R_0 = K_b^T U reaches S
            d_o = torch.zeros_like(y[..., dk:]) if d_o is None else d_o
            d_qeff, d_s0 = torch.zeros_like(q_eff), None
            d_m_diag = torch.zeros_like(q_eff[..., 0, :])
            if d_final is None:
                d_gm_y, d_kb = torch.zeros_like(y), torch.zeros_like(kb)
            else:
                d_r = d_final[:, :, None]
                d_gm_y = torch.cat([torch.zeros_like(kb), kb @ d_r], dim=-1)
                d_kb = y[..., dk:] @ d_r.transpose(-1, -2)
        elif ctx.low_rank:  # dM = dR S^T, used only through K_b, W and its diagonal
            d_starts = q_eff.transpose(-1, -2) @ d_o
            d_r, d_s0 = lowrank_scan_backward(m, kb, y[..., :dk], d_starts, d_final)
            kb_dr = kb @ d_r
            d_gm_y = torch.cat([(kb_dr @ starts.transpose(-1, -2)).neg_(), kb_dr], dim=-1)
            d_kb = (y[..., dk:] - y[..., :dk] @ starts) @ d_r.transpose(-1, -2)
            d_m_diag = (d_r * starts).sum(-1)
        else:
            d_starts = q_eff.transpose(-1, -2) @ d_o
            d_m, d_r, d_s0 = matrix_scan_backward(m, starts, d_starts, d_final)
            d_gm = torch.cat([d_m.neg(), d_r], dim=-1)
            d_gm_y = kb @ d_gm
            d_kb = y @ d_gm.transpose(-1, -2)
            d_m_diag = d_m.diagonal(dim1=-2, dim2=-1)
        if not ctx.carry_free:
            d_qeff = d_o @ starts.transpose(-1, -2)
        d_z = torch.cat([d_qeff.neg(), d_o], dim=-1)
        d_y = ((s_q * beta_col).transpose(-1, -2) @ d_z).add_(d_gm_y)
        d_qb = d_z @ y.transpose(-1, -2)
        d_x = t.transpose(-1, -2) @ d_y
        d_pb = (d_x @ y.transpose(-1, -2)).tril_(-1).neg_()
        d_beta = (d_qb * s_q).sum(-2) + (d_pb * s_p).sum(-2) + torch.linalg.vecdot(d_kb, k_end)
        d_s_q = d_qb.mul_(beta_col).tril_()
        d_s_p = d_pb.mul_(beta_col)
        d_k_end = d_kb.mul_(beta[..., None])
        d_v = d_x[..., dk:]
        # q e^G = q_rel e^r and k e^G = k_rel e^r feed Q_eff and X
        d_q_rel = torch.addcmul(d_s_q @ k_from, d_qeff, e_ref)
        d_k_rel = torch.addcmul(d_s_p @ k_from, d_x[..., :dk], e_ref)
        d_k_from = torch.addcmul(d_s_q.transpose(-1, -2) @ q_rel, d_k_end, e_end)
        d_k_from += d_s_p.transpose(-1, -2) @ k_rel
        d_q = d_q_rel * e_pos
        d_k = torch.addcmul(d_k_rel * e_pos, d_k_from, e_pos.reciprocal())
        # G enters as e^{+G} in q_rel, k_rel, as e^{-G} in k_from, and G_C in k_end and M's diag
        d_g = (d_q_rel.mul_(q_rel)).add_(d_k_rel.mul_(k_rel)).sub_(d_k_from.mul_(k_from))
        e_g_end = (e_end * e_ref)[..., 0, :]
        d_g[..., -1, :] += (d_k_end * k_end).sum(-2) + d_m_diag * e_g_end
        return d_q, d_k, d_v, d_beta, d_g, d_s0 if ctx.start_given else None


def kda_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step KDA (per-channel gated delta rule); beta (B,H,T), log_alpha (B,H,T,dk)."""
    check_shapes(q, k, v, per_step={"beta": beta}, per_channel={"log_alpha": log_alpha})
    kw, log_w, a, b = kda_to_dplr(k, beta, log_alpha)
    return dplr_recurrent(q, kw, v, log_w, a, b, initial_state)


def kda_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel KDA: the DPLR chunk form specialised to a = alpha k, b = -beta k.

    Then A_ak = P diag(beta) = -A_ab and A_qk = Q diag(beta) = -A_qb with P, Q the decayed
    k-k (strict) and q-k (inclusive) products, so only two pairwise matrices are built. When
    `pairwise_tree.factorisable` allows (the usual case), `KDAChunks` runs it with a hand-written
    backward; otherwise P and Q come from `pairwise_tree.tree_pairwise` and autograd
    differentiates.
    """
    bsz, h, t, dk, dv = check_shapes(
        q, k, v, per_step={"beta": beta}, per_channel={"log_alpha": log_alpha}
    )
    check_chunk_size(chunk_size)
    c = fit_chunk(chunk_size, t)
    s0 = q.new_zeros(bsz, h, dk, dv) if initial_state is None else initial_state
    if t == 0:
        return v.new_zeros(bsz, h, 0, dv), s0
    n = -(-t // c)
    q, k, v, log_alpha = (to_chunks(x, n, c) for x in (q, k, v, log_alpha))
    beta = to_chunks(beta, n, c)  # (B,H,N,C); zero-padded steps write nothing
    g = log_alpha.cumsum(-2)

    if factorisable(g, dim=-2):  # no initial state: KDAChunks starts from zero itself
        start = None if initial_state is None else s0.contiguous()
        o, s = KDAChunks.apply(q, k, v, beta, g, start)
        return from_chunks(o, t), s
    g_end = g[..., -1:, :]
    gy = g[..., None, :]
    pw = tree_pairwise(torch.stack([q, k], dim=-2), gy, k[..., None, :], gy, 1)
    q_beta, p_beta = (m[..., 0, :, :] * beta[..., None, :] for m in pw.unbind(-4))
    k_dec, q_dec = k * g.exp(), q * g.exp()
    k_end = k * (g_end - g).clamp(max=0.0).exp()

    # [W | V - U] with V - U = V - T P diag(beta) V = T V, T = (I + P diag(beta))^{-1}
    wv = UnitLowerInverse.apply(p_beta) @ torch.cat([k_dec, v], dim=-1)

    k_end_t = (beta[..., None] * k_end).transpose(-1, -2)
    k_w, k_r = (k_end_t @ wv).split([dk, dv], dim=-1)
    m_mat = torch.diag_embed(g_end[..., 0, :].exp()) - k_w
    q_w, o_intra = (q_beta @ wv).split([dk, dv], dim=-1)
    return carry_and_read(q_dec - q_w, o_intra, m_mat, k_r, s0, t)
