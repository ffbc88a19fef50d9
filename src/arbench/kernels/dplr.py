"""Diagonal-plus-low-rank (DPLR) kernels: recurrent reference and chunkwise-parallel form.

Recurrence (per batch and head, S in R^{dk x dv}):
    S_t = (Diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T,   o_t = S_t^T q_t,
with w_t = exp(log_w_t) in (0, 1]^dk. KDA and RWKV-7 are special cases (`kda.kda_to_dplr`,
`rwkv7_to_dplr`).

Chunked derivation (one chunk of length C, S0 the carried state, per-channel cumulative
log-decays G_t = sum_{r<=t} log w_r and E_t = G_{t-1}): with u_t = S_{t-1}^T a_t,
    S_t = Diag(e^{G_t}) S0 + sum_{s<=t} Diag(e^{G_t-G_s}) (k_s v_s^T + b_s u_s^T),
    u_t = S0^T (a_t e^{E_t}) + sum_{s<t} [A_ak]_{ts} v_s + [A_ab]_{ts} u_s,
where [A_xy]_{ts} = sum_i x_{t,i} y_{s,i} e^{E_{t,i}-G_{s,i}} (strict, rows a) or with G_t in
place of E_t (inclusive, rows q). Hence (I - A_ab) u = (a e^E) S0 + A_ak V, i.e. the WY/UT form
u = W S0 + U with [W | U] = (I - A_ab)^{-1} [a e^E | A_ak V], and
    O = (q e^G + A_qb W) S0 + A_qk V + A_qb U,
    S_C = (Diag(e^{G_C}) + B~^T W) S0 + K~^T V + B~^T U,   K~ = k e^{G_C-G}, B~ = b e^{G_C-G}.
The four pairwise matrices need no (C,C,dk) tensor: when the decays allow
(`pairwise_tree.factorisable`, the usual case) they come from one masked product of rows and
columns rescaled relative to the chunk middle (`DPLRChunks`, below); otherwise they are built over
a binary tree of sub-blocks (`pairwise_tree.tree_pairwise`), each block factorising through the
log-decay at a position between s and t, so no positive number is ever exponentiated. Intra-chunk
work is batched over all chunks; only the (dk x dk) state carry S_{n+1} = M_n S_n + R_n loops
over chunks (`scan.matrix_scan`).

`DPLRChunks` is the factorised path, with the per-channel decays folded into its operands and a
hand-written backward. Per chunk (C steps, G / E the inclusive / exclusive cumulative
per-channel log-decays, r = G at the chunk middle), the stacked rows X = [q e^{G-r}; a e^{E-r}]
and columns Y = [k e^{r-G}; b e^{r-G}] give all four pairwise matrices of `dplr_chunked` as one
masked product
    P = (X Y^T) * [[L, L], [L-, L-]] = [[A_qk, A_qb], [A_ak, A_ab]],
then T = (I - A_ab)^{-1}, [W | U] = T [a e^E | A_ak V],
    M = Diag(e^{G_C}) + B~^T W,  R = K~^T V + B~^T U,  Q_eff = q e^G + A_qb W,
    O_intra = A_qk V + A_qb U,   (K~, B~ = k, b e^{G_C - G}),
the carry S_{n+1} = M_n S_n + R_n, and O = Q_eff S_n + O_intra.

The backward is the same computation run in reverse by hand (see `DPLRChunks.backward`): the
gradients of the four blocks are written into one (2C, 2C) matrix, so the rows' and columns'
gradients are again one product each. As in `kda.KDAChunks`, the middle reference r cancels from
every product and is held constant (its total derivative is exactly zero).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
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
from arbench.kernels.scan import carry_and_read, matrix_scan_backward, matrix_scan_forward
from arbench.kernels.triangular import UnitLowerInverse, unit_lower_inverse


def dplr_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_w: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step S_t = (Diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T: the reference form.

    Shapes: q, k, log_w, a, b (B,H,T,dk); v (B,H,T,dv); state (B,H,dk,dv).
    """
    bsz, h, t, dk, dv = check_shapes(q, k, v, per_channel={"log_w": log_w, "a": a, "b": b})
    s = q.new_zeros(bsz, h, dk, dv) if initial_state is None else initial_state
    w = log_w.exp()
    outs = []
    # split over time once: per-step indexing would make the backward quadratic in T
    steps = zip(*(x.unbind(2) for x in (q, k, v, w, a, b)), strict=True)
    for q_t, k_t, v_t, w_t, a_t, b_t in steps:
        sa = (a_t.unsqueeze(-2) @ s).squeeze(-2)  # u_t = S_{t-1}^T a_t
        s = w_t.unsqueeze(-1) * s + b_t.unsqueeze(-1) * sa.unsqueeze(-2)
        s = s + k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
        outs.append((q_t.unsqueeze(-2) @ s).squeeze(-2))
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(bsz, h, 0, dv)
    return o, s


def _block_mask(c: int, like: torch.Tensor) -> torch.Tensor:
    """[[L, L], [L-, L-]]: inclusive causal rows for q, strictly causal rows for a."""
    return torch.cat([causal_mask(c, like), causal_mask(c, like, strict=True)]).repeat(1, 2)


class DPLRChunks(torch.autograd.Function):
    """DPLR on (B,H,N,C,.) chunks: q, k, a, b, g (.., C, dk), v (.., C, dv), s0 (B,H,dk,dv).

    g is the inclusive in-chunk cumulative log-decay and must satisfy
    `pairwise_tree.factorisable` (the caller checks); returns (O chunks, final state).
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        a: torch.Tensor,
        b: torch.Tensor,
        g: torch.Tensor,
        s0: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        c, dk = q.shape[-2], q.shape[-1]
        ref, e_q, e_c, e_ref, e_end = middle_relative(g)  # r, e^{G-r}, e^{r-G}, e^r, e^{G_C-r}
        e_a = (F.pad(g[..., :-1, :], (0, 0, 1, 0)) - ref).exp_()  # e^{E-r}
        rows = torch.cat([q * e_q, a * e_a], dim=-2)  # (.., 2C, dk)
        cols = torch.cat([k * e_c, b * e_c], dim=-2)
        p = (rows @ cols.transpose(-1, -2)).mul_(_block_mask(c, q))
        # contiguous blocks: CPU bmm loops matrix by matrix over strided (C, C) views
        a_qk, a_qb, a_ak, a_ab = (
            p[..., i : i + c, j : j + c].contiguous() for i in (0, c) for j in (0, c)
        )
        dec = rows * e_ref  # [q e^G; a e^E]
        x = torch.cat([dec[..., c:, :], a_ak @ v], dim=-1)
        t = unit_lower_inverse(a_ab.neg())
        y = t @ x  # [W | U]
        ends = cols * e_end  # [K~; B~]
        k_end, b_end = ends[..., :c, :], ends[..., c:, :]
        mr = b_end.transpose(-1, -2) @ y  # [B~^T W | B~^T U]
        m = mr[..., :dk].contiguous()
        m.diagonal(dim1=-2, dim2=-1).add_((e_end * e_ref)[..., 0, :])
        r = (k_end.transpose(-1, -2) @ v).add_(mr[..., dk:])
        z = a_qb @ y
        q_eff = dec[..., :c, :] + z[..., :dk]
        starts, s_final = matrix_scan_forward(m, r, s0)
        o = (q_eff @ starts).add_(z[..., dk:]).add_(a_qk @ v)
        ctx.save_for_backward(
            rows, cols, a_qk, a_qb, a_ak, v, t, y, ends, m, starts, q_eff, e_q, e_a, e_ref, e_end
        )
        return o, s_final

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_o: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        (rows, cols, a_qk, a_qb, a_ak, v, t, y, ends, m, starts, q_eff, e_q, e_a, e_ref, e_end) = (
            ctx.saved_tensors
        )
        c, dk = rows.shape[-2] // 2, rows.shape[-1]
        k_end, b_end = ends[..., :c, :], ends[..., c:, :]
        d_starts = q_eff.transpose(-1, -2) @ d_o
        d_m, d_r, d_s0 = matrix_scan_backward(m, starts, d_starts, d_final)
        d_qeff = d_o @ starts.transpose(-1, -2)
        d_z = torch.cat([d_qeff, d_o], dim=-1)
        d_mr = torch.cat([d_m, d_r], dim=-1)
        d_top = torch.cat([d_o @ v.transpose(-1, -2), d_z @ y.transpose(-1, -2)], dim=-1)
        d_y = (a_qb.transpose(-1, -2) @ d_z).add_(b_end @ d_mr)
        d_ends = torch.cat([v @ d_r.transpose(-1, -2), y @ d_mr.transpose(-1, -2)], dim=-2)
        d_x = t.transpose(-1, -2) @ d_y
        d_xu = d_x[..., dk:]
        d_bottom = torch.cat([d_xu @ v.transpose(-1, -2), d_x @ y.transpose(-1, -2)], dim=-1)
        d_v = (a_qk.transpose(-1, -2) @ d_o).add_(k_end @ d_r).add_(a_ak.transpose(-1, -2) @ d_xu)
        d_p = torch.cat([d_top, d_bottom], dim=-2).mul_(_block_mask(c, rows))
        d_rows = d_p @ cols
        d_cols = d_p.transpose(-1, -2) @ rows
        d_rows[..., :c, :].addcmul_(d_qeff, e_ref)  # q e^G = rows_q e^r
        d_rows[..., c:, :].addcmul_(d_x[..., :dk], e_ref)  # a e^E = rows_a e^r
        d_cols.addcmul_(d_ends, e_end)  # [K~; B~] = cols e^{G_C - r}
        d_q, d_a = d_rows[..., :c, :] * e_q, d_rows[..., c:, :] * e_a
        e_c = e_q.reciprocal()
        d_k, d_b = d_cols[..., :c, :] * e_c, d_cols[..., c:, :] * e_c
        # G enters rows_q as e^{+G}, rows_a as e^{+E} (E_t = G_{t-1}), both columns as e^{-G},
        # and G_C the ends and M's diagonal.
        d_rows.mul_(rows)
        d_cols.mul_(cols)
        d_g = d_rows[..., :c, :] - d_cols[..., :c, :] - d_cols[..., c:, :]
        d_g[..., :-1, :] += d_rows[..., c + 1 :, :]
        e_g_end = (e_end * e_ref)[..., 0, :]
        d_g[..., -1, :] += (d_ends * ends).sum(-2) + d_m.diagonal(dim1=-2, dim2=-1) * e_g_end
        return d_q, d_k, d_v, d_a, d_b, d_g, d_s0


def dplr_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_w: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel DPLR (WY/UT form); same result as `dplr_recurrent`, far faster.

    chunk_size must be a power of two; T need not be a multiple of it (padding is identity).
    """
    bsz, h, t, dk, dv = check_shapes(q, k, v, per_channel={"log_w": log_w, "a": a, "b": b})
    check_chunk_size(chunk_size)
    c = fit_chunk(chunk_size, t)
    s0 = q.new_zeros(bsz, h, dk, dv) if initial_state is None else initial_state
    if t == 0:
        return v.new_zeros(bsz, h, 0, dv), s0
    n = -(-t // c)
    # Zero padding: log_w = 0, a = b = k = 0 makes padded steps identities on the state.
    q, k, v, log_w, a, b = (to_chunks(x, n, c) for x in (q, k, v, log_w, a, b))
    g = log_w.cumsum(-2)  # inclusive G_t, non-increasing along time
    if factorisable(g, dim=-2):
        o, s = DPLRChunks.apply(q, k, v, a, b, g, s0.contiguous())
        return from_chunks(o, t), s

    # The tree: rows x in {q (inclusive, G), a (strict, E)}, cols y in {k, b}.
    ge = F.pad(g[..., :-1, :], (0, 0, 1, 0))  # exclusive E_t = G_{t-1}, shifted exactly
    g_end = g[..., -1:, :]  # (B,H,N,1,dk)
    pw = tree_pairwise(
        torch.stack([q, a], dim=-2),
        torch.stack([g, ge], dim=-2),
        torch.stack([k, b], dim=-2),
        g[..., None, :],
        1,
    )
    (a_qk, a_qb), (a_ak, a_ab) = (row.unbind(-3) for row in pw.unbind(-4))
    q_dec, a_dec = q * g.exp(), a * ge.exp()
    to_end = (g_end - g).clamp(max=0.0).exp()
    k_end, b_end = k * to_end, b * to_end

    rhs = torch.cat([a_dec, a_ak @ v], dim=-1)
    sol = UnitLowerInverse.apply(-a_ab) @ rhs  # [W | U] = (I - A_ab)^{-1} rhs

    b_w, b_u = (b_end.transpose(-1, -2) @ sol).split([dk, dv], dim=-1)  # B~^T [W | U]
    m_mat = torch.diag_embed(g_end[..., 0, :].exp()) + b_w
    r_mat = k_end.transpose(-1, -2) @ v + b_u
    qb_w, qb_u = (a_qb @ sol).split([dk, dv], dim=-1)  # A_qb [W | U]
    q_eff = q_dec + qb_w
    o_intra = a_qk @ v + qb_u
    return carry_and_read(q_eff, o_intra, m_mat, r_mat, s0, t)


def rwkv7_to_dplr(
    k_tilde: torch.Tensor, log_w: torch.Tensor, kappa: torch.Tensor, icl_rate: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """RWKV-7 transition as DPLR: returns (k_write, log_w, a, b).

    RWKV-7 right-multiplies its (dv x dk) state by Diag(w) - kappa^T (icl * kappa); in this
    project's (dk x dv) orientation that is Diag(w) - (icl * kappa) kappa^T acting on the left:
    read with a = -kappa, write the removal along b = icl * kappa.
    """
    return k_tilde, log_w, -kappa, icl_rate * kappa
