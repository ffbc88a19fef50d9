"""Diagonal-plus-low-rank (DPLR) kernels: recurrent reference and chunkwise-parallel form.

Recurrence (per batch and head, S in R^{dk x dv}):
    S_t = (Diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T,   o_t = S_t^T q_t,
with w_t = exp(log_w_t) in (0, 1]^dk. KDA and RWKV-7 are special cases (`kda_to_dplr`,
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
The four pairwise matrices are built over a binary tree of sub-blocks: the block pairing rows
t in an upper half with columns s in the lower half factorises through the log-decay r at the
last position of the lower half, e^{G_t-G_s} = e^{G_t-r} e^{r-G_s}, and both exponents are
non-positive (decays are relative to a position between s and t). So no (C,C,dk) tensor is ever
formed and no positive number is ever exponentiated (the differences are also clamped at 0 before
exp as a guard; G is an exact running sum of non-positive terms, so the clamp never binds and the
hand-written backward of the tree ignores it). Intra-chunk work is batched over all chunks; only
the (dk x dk) state carry S_{n+1} = M_n S_n + R_n loops over chunks.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from arbench.cells.delta_rule import _UnitLowerInverse
from arbench.cells.dplr_chunks import DPLRChunks
from arbench.cells.kda_chunks import KDAChunks
from arbench.cells.scan import matrix_scan


def _check(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    log_w: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
) -> tuple[int, int, int, int, int]:
    if q.dim() != 4 or v.dim() != 4 or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"bad shapes q={tuple(q.shape)} v={tuple(v.shape)}")
    for name, x in (("k", k), ("log_w", log_w), ("a", a), ("b", b)):
        if x.shape != q.shape:
            raise ValueError(f"{name} must match q {tuple(q.shape)}, got {tuple(x.shape)}")
    bsz, h, t, dk = q.shape
    return bsz, h, t, dk, v.shape[-1]


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
    bsz, h, t, dk, dv = _check(q, k, v, log_w, a, b)
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


def _tree_levels(c: int) -> Iterator[tuple[int, int]]:
    """Yield (h, P) for the tree levels of a chunk of length c."""
    h = 1
    while h < c:
        yield h, c // (2 * h)
        h *= 2


def _level_factors(
    x: torch.Tensor, gx: torch.Tensor, y: torch.Tensor, gy: torch.Tensor, h: int, p: int
) -> tuple[torch.Tensor, ...]:
    """(ex, x_upper * ex, ey, y_lower * ey): upper-half rows and lower-half columns rescaled
    relative to the log-decay at the boundary between the halves."""
    xu = x.unflatten(-3, (p, 2, h))[..., 1, :, :, :]  # (..., P, h, R, dk)
    gxu = gx.unflatten(-3, (p, 2, h))[..., 1, :, :, :]
    yl = y.unflatten(-3, (p, 2, h))[..., 0, :, :, :]  # (..., P, h, S, dk)
    gyl = gy.unflatten(-3, (p, 2, h))[..., 0, :, :, :]
    ref = gyl[..., -1:, :, :]  # log-decay at the last position of each lower half
    ex = (gxu - ref).clamp_(max=0.0).exp_()  # in place: no autograd here, fewer allocations
    ey = (ref - gyl).clamp_(max=0.0).exp_()
    return ex, xu * ex, ey, yl * ey


def _small_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b; for a contraction of length <= 2 a broadcast product beats many tiny matmuls."""
    if a.shape[-1] <= 2:
        return (a[..., :, :, None] * b[..., None, :, :]).sum(-2)
    return a @ b


def _block_view(m: torch.Tensor, h: int, p: int) -> torch.Tensor:
    """View of the (upper-half rows, lower-half columns) blocks of m (..., R, S, C, C) at tree
    level h, shaped (..., R, S, h, h, P)."""
    m = m.unflatten(-1, (p, 2, h)).unflatten(-4, (p, 2, h))  # (..., R,S, P,2,h, P,2,h)
    return torch.diagonal(m.select(-5, 1).select(-2, 0), dim1=-4, dim2=-2)


class _TreePairwise(torch.autograd.Function):
    """Decayed pairwise products over a binary tree of blocks, with a hand-written backward.

    Blocks are written into (and gradients read from) strided views of the (C, C) matrices;
    the backward accumulates into preallocated gradients in place, which on CPU is far cheaper
    than autograd's per-level select/cat bookkeeping.
    """

    @staticmethod
    def forward(ctx, x, gx, y, gy, rd: int):  # type: ignore[override]
        c, r, _ = x.shape[-3:]
        s = y.shape[-2]
        out = x.new_zeros(*x.shape[:-3], r, s, c, c)
        if rd:
            diag = (x[..., :rd, None, :] * y[..., None, :, :]).sum(-1)  # (..., C, rd, S)
            torch.diagonal(out[..., :rd, :, :, :], dim1=-2, dim2=-1).copy_(diag.movedim(-3, -1))
        factors = []
        for h, p in _tree_levels(c):
            ex, xs, ey, ys = _level_factors(x, gx, y, gy, h, p)
            factors += [ex, xs, ey, ys]  # kept for the backward rather than recomputed
            off = _small_mm(xs.flatten(-3, -2), ys.flatten(-3, -2).transpose(-1, -2))  # P,hR,hS
            off = off.unflatten(-1, (h, s)).unflatten(-3, (h, r))  # (..., P, h, R, h, S)
            _block_view(out, h, p).copy_(off.permute(*range(off.dim() - 5), -3, -1, -4, -2, -5))
        ctx.save_for_backward(x, y, *factors)
        ctx.rd, ctx.g_shapes = rd, (gx.shape, gy.shape)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):  # type: ignore[override]
        x, y, *factors = ctx.saved_tensors
        rd = ctx.rd
        c, r, _ = x.shape[-3:]
        s = y.shape[-2]
        dx, dy = torch.zeros_like(x), torch.zeros_like(y)
        dgx, dgy = (x.new_zeros(shape) for shape in ctx.g_shapes)
        if rd:
            dd = torch.diagonal(grad[..., :rd, :, :, :], dim1=-2, dim2=-1).movedim(-1, -3)
            dx[..., :rd, :] += _small_mm(dd, y)  # dd (..., C, rd, S)
            dy += _small_mm(dd.transpose(-1, -2), x[..., :rd, :])
        for level, (h, p) in enumerate(_tree_levels(c)):
            blk = _block_view(grad, h, p)  # (..., R, S, h, h, P)
            nb = blk.dim() - 5
            doff = blk.permute(*range(nb), -1, -3, -5, -2, -4).reshape(
                *blk.shape[:nb], p, h * r, h * s
            )
            ex, xs, ey, ys = factors[4 * level : 4 * level + 4]
            dxs = _small_mm(doff, ys.flatten(-3, -2)).unflatten(-2, (h, r))  # (..., P, h, R, dk)
            dys = _small_mm(doff.transpose(-1, -2), xs.flatten(-3, -2)).unflatten(-2, (h, s))
            dx.unflatten(-3, (p, 2, h))[..., 1, :, :, :].addcmul_(dxs, ex)
            dgx.unflatten(-3, (p, 2, h))[..., 1, :, :, :].addcmul_(dxs, xs)
            dy.unflatten(-3, (p, 2, h))[..., 0, :, :, :].addcmul_(dys, ey)
            tx, ty = dxs.mul_(xs), dys.mul_(ys)  # d/d(ref) of the rescaled rows and columns
            dgy_low = dgy.unflatten(-3, (p, 2, h))[..., 0, :, :, :]
            dgy_low.sub_(ty.sum(-2, keepdim=True))
            dgy_low[..., -1:, :, :].add_(ty.sum((-3, -2), keepdim=True))
            dgy_low[..., -1:, :, :].sub_(tx.sum((-3, -2), keepdim=True))
        return dx, dgx, dy, dgy, None


def _tree_pairwise(
    x: torch.Tensor, gx: torch.Tensor, y: torch.Tensor, gy: torch.Tensor, rd: int
) -> torch.Tensor:
    """Lower-triangular [i,j,t,s] = sum_c x_tic y_sjc e^{gx_tic - gy_sc} for s < t (and for
    s = t in the first rd rows, where gx = gy), zero above.

    x, gx (..., C, R, dk); y (..., C, S, dk); gy (..., C, 1, dk) the inclusive cumulative
    log-decay, with gx_t <= gy_{t-1}. C is a power of two. Returns (..., R, S, C, C), built
    over a binary tree of blocks (see module docstring).
    """
    return _TreePairwise.apply(x, gx.expand_as(x), y, gy, rd)


# Largest exponent the factorised pairwise products may meet, per dtype: e^40 ~ 2e17 leaves
# float32 (max ~3e38) ample headroom for the x and y magnitudes it multiplies.
FACTOR_REACH = {torch.float32: 40.0, torch.float64: 300.0}


def factorisable(g: torch.Tensor, dim: int) -> bool:
    """Whether decays relative to the chunk middle keep every exponent within FACTOR_REACH.

    g holds in-chunk inclusive cumulative log-decays (non-increasing from 0) along `dim`.
    With r = g at position C/2, e^{G_t - G_s} = e^{G_t - r} e^{r - G_s} turns the decayed
    pairwise products into masked matmuls, and the exponents reach max(-r, r - g_C). That is
    the usual case (KDA's log-decay >= -5 and RWKV-7's >= -0.61 per step reach at most 40 and
    5 over 16 steps); otherwise the kernels build the products over `_tree_pairwise`, which
    never exponentiates a positive number.
    """
    c = g.shape[dim]
    if g.numel() == 0:
        return True
    with torch.no_grad():
        mid, end = g.select(dim, c // 2), g.select(dim, c - 1)
        reach = torch.maximum(-mid, mid - end).max()
    return float(reach) <= FACTOR_REACH.get(g.dtype, 0.0)


def _chunks(x: torch.Tensor, n: int, c: int) -> torch.Tensor:
    """(B,H,T,d) -> (B,H,N,C,d), zero-padding time to N*C."""
    pad = n * c - x.shape[2]
    return (F.pad(x, (0, 0, 0, pad)) if pad else x).unflatten(2, (n, c))


def _carry_and_read(
    q_eff: torch.Tensor,
    o_intra: torch.Tensor,
    m_mat: torch.Tensor,
    r_mat: torch.Tensor,
    s0: torch.Tensor,
    t: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loop S_{n+1} = M_n S_n + R_n over chunks, then O = q_eff S_n + o_intra, cut to T."""
    s_start, s = matrix_scan(m_mat, r_mat, s0)  # (B,H,N,dk,dv): state entering each chunk
    o = q_eff @ s_start + o_intra
    return o.flatten(2, 3)[:, :, :t], s


def _check_chunk(c: int) -> None:
    if c < 1 or c & (c - 1):
        raise ValueError(f"chunk_size must be a power of two, got {c}")


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
    bsz, h, t, dk, dv = _check(q, k, v, log_w, a, b)
    c = chunk_size
    _check_chunk(c)
    s0 = q.new_zeros(bsz, h, dk, dv) if initial_state is None else initial_state
    if t == 0:
        return v.new_zeros(bsz, h, 0, dv), s0
    n = -(-t // c)
    # Zero padding: log_w = 0, a = b = k = 0 makes padded steps identities on the state.
    q, k, v, log_w, a, b = (_chunks(x, n, c) for x in (q, k, v, log_w, a, b))
    g = log_w.cumsum(-2)  # inclusive G_t, non-increasing along time
    if factorisable(g, dim=-2):
        o, s = DPLRChunks.apply(q, k, v, a, b, g, s0.contiguous())
        return o.flatten(2, 3)[:, :, :t], s

    # The tree: rows x in {q (inclusive, G), a (strict, E)}, cols y in {k, b}.
    ge = F.pad(g[..., :-1, :], (0, 0, 1, 0))  # exclusive E_t = G_{t-1}, shifted exactly
    g_end = g[..., -1:, :]  # (B,H,N,1,dk)
    pw = _tree_pairwise(
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
    sol = _UnitLowerInverse.apply(-a_ab) @ rhs  # [W | U] = (I - A_ab)^{-1} rhs

    b_w, b_u = (b_end.transpose(-1, -2) @ sol).split([dk, dv], dim=-1)  # B~^T [W | U]
    m_mat = torch.diag_embed(g_end[..., 0, :].exp()) + b_w
    r_mat = k_end.transpose(-1, -2) @ v + b_u
    qb_w, qb_u = (a_qb @ sol).split([dk, dv], dim=-1)  # A_qb [W | U]
    q_eff = q_dec + qb_w
    o_intra = a_qk @ v + qb_u
    return _carry_and_read(q_eff, o_intra, m_mat, r_mat, s0, t)


def kda_to_dplr(
    k: torch.Tensor, beta: torch.Tensor, log_alpha: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """KDA S_t = (I - b k k^T) Diag(alpha) S + b k v^T as DPLR: returns (k_write, log_w, a, b).

    Diag(alpha) - b k (alpha k)^T: a = alpha * k, b = -beta k, write key beta k.
    """
    bk = beta[..., None] * k
    return bk, log_alpha, log_alpha.exp() * k, -bk


def rwkv7_to_dplr(
    k_tilde: torch.Tensor, log_w: torch.Tensor, kappa: torch.Tensor, icl_rate: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """RWKV-7 transition as DPLR: returns (k_write, log_w, a, b).

    RWKV-7 right-multiplies its (dv x dk) state by Diag(w) - kappa^T (icl * kappa); in this
    project's (dk x dv) orientation that is Diag(w) - (icl * kappa) kappa^T acting on the left:
    read with a = -kappa, write the removal along b = icl * kappa.
    """
    return k_tilde, log_w, -kappa, icl_rate * kappa


def kda_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step KDA (per-channel gated delta rule); beta (B,H,T), log_alpha (B,H,T,dk)."""
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
    `factorisable` allows (the usual case), `KDAChunks` runs it with a hand-written backward;
    otherwise P and Q come from the tree and autograd differentiates.
    """
    bsz, h, t, dk, dv = _check(q, k, v, log_alpha, k, k)
    if beta.shape != q.shape[:3]:
        raise ValueError(f"beta must be (B,H,T)={tuple(q.shape[:3])}, got {tuple(beta.shape)}")
    c = chunk_size
    _check_chunk(c)
    s0 = q.new_zeros(bsz, h, dk, dv) if initial_state is None else initial_state
    if t == 0:
        return v.new_zeros(bsz, h, 0, dv), s0
    n = -(-t // c)
    q, k, v, log_alpha = (_chunks(x, n, c) for x in (q, k, v, log_alpha))
    beta = _chunks(beta[..., None], n, c)[..., 0]  # (B,H,N,C); zero-padded steps write nothing
    g = log_alpha.cumsum(-2)

    if factorisable(g, dim=-2):
        o, s = KDAChunks.apply(q, k, v, beta, g, s0.contiguous())
        return o.flatten(2, 3)[:, :, :t], s
    g_end = g[..., -1:, :]
    gy = g[..., None, :]
    pw = _tree_pairwise(torch.stack([q, k], dim=-2), gy, k[..., None, :], gy, 1)
    q_beta, p_beta = (m[..., 0, :, :] * beta[..., None, :] for m in pw.unbind(-4))
    k_dec, q_dec = k * g.exp(), q * g.exp()
    k_end = k * (g_end - g).clamp(max=0.0).exp()

    # [W | V - U] with V - U = V - T P diag(beta) V = T V, T = (I + P diag(beta))^{-1}
    wv = _UnitLowerInverse.apply(p_beta) @ torch.cat([k_dec, v], dim=-1)

    k_end_t = (beta[..., None] * k_end).transpose(-1, -2)
    k_w, k_r = (k_end_t @ wv).split([dk, dv], dim=-1)
    m_mat = torch.diag_embed(g_end[..., 0, :].exp()) - k_w
    q_w, o_intra = (q_beta @ wv).split([dk, dv], dim=-1)
    return _carry_and_read(q_dec - q_w, o_intra, m_mat, k_r, s0, t)
