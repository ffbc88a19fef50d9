"""The DPLR chunk form with per-channel decays folded into its operands; hand-written backward.

Per chunk (C steps, G / E the inclusive / exclusive cumulative per-channel log-decays, r = G at
the chunk middle), the stacked rows X = [q e^{G-r}; a e^{E-r}] and columns Y = [k e^{r-G};
b e^{r-G}] give all four pairwise matrices of `dplr.dplr_chunked` as one masked product
    P = (X Y^T) * [[L, L], [L-, L-]] = [[A_qk, A_qb], [A_ak, A_ab]],
then T = (I - A_ab)^{-1}, [W | U] = T [a e^E | A_ak V],
    M = Diag(e^{G_C}) + B~^T W,  R = K~^T V + B~^T U,  Q_eff = q e^G + A_qb W,
    O_intra = A_qk V + A_qb U,   (K~, B~ = k, b e^{G_C - G}),
the carry S_{n+1} = M_n S_n + R_n, and O = Q_eff S_n + O_intra.

The backward is the same computation run in reverse by hand (see `DPLRChunks.backward`): the
gradients of the four blocks are written into one (2C, 2C) matrix, so the rows' and columns'
gradients are again one product each. As in `kda_chunks`, the middle reference r cancels from
every product and is held constant (its total derivative is exactly zero).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from arbench.cells.delta_rule import unit_lower_inverse
from arbench.cells.relative_decays import causal_mask, middle_relative
from arbench.cells.scan import matrix_scan_backward, matrix_scan_forward


def _block_mask(c: int, like: torch.Tensor) -> torch.Tensor:
    """[[L, L], [L-, L-]]: inclusive causal rows for q, strictly causal rows for a."""
    return torch.cat([causal_mask(c, like), causal_mask(c, like, strict=True)]).repeat(1, 2)


class DPLRChunks(torch.autograd.Function):
    """DPLR on (B,H,N,C,.) chunks: q, k, a, b, g (.., C, dk), v (.., C, dv), s0 (B,H,dk,dv).

    g is the inclusive in-chunk cumulative log-decay and must satisfy `dplr.factorisable`
    (the caller checks); returns (O chunks, final state).
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
