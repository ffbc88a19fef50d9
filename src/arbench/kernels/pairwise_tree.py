"""Decayed pairwise products over a binary tree of blocks: the per-channel kernels' safe path.

GLA, KDA and DPLR chunk forms need, per chunk of C steps, lower-triangular matrices
[A_xy]_{ts} = sum_i x_{t,i} y_{s,i} e^{gx_{t,i} - gy_{s,i}} for s < t (or s <= t), with gx, gy
in-chunk cumulative per-channel log-decays. Forming the (C,C,dk) decay tensor is too costly, and
e^{gx_t} e^{-gy_s} separately can overflow. `tree_pairwise` builds them over a binary tree of
sub-blocks instead: the block pairing rows t in an upper half with columns s in the lower half
factorises through the log-decay r at the last position of the lower half,
e^{gx_t-gy_s} = e^{gx_t-r} e^{r-gy_s}, and both exponents are non-positive (decays are relative
to a position between s and t). So no (C,C,dk) tensor is ever formed and no positive number is
ever exponentiated (the differences are also clamped at 0 before exp as a guard; G is an exact
running sum of non-positive terms, so the clamp never binds and the hand-written backward of the
tree ignores it). The diagonal (s = t) is a plain product for the first rd rows.

When the decays are mild, one reference for the whole chunk (its middle, `common.middle_relative`)
keeps every exponent in range and the products become masked matmuls; `factorisable` says when
(FACTOR_REACH per dtype), and the kernels take that faster path.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch


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


def tree_pairwise(
    x: torch.Tensor, gx: torch.Tensor, y: torch.Tensor, gy: torch.Tensor, rd: int
) -> torch.Tensor:
    """Lower-triangular [i,j,t,s] = sum_c x_tic y_sjc e^{gx_tic - gy_sc} for s < t (and for
    s = t in the first rd rows, where gx = gy), zero above.

    x, gx (..., C, R, dk); y (..., C, S, dk); gy (..., C, 1, dk) the inclusive cumulative
    log-decay, with gx_t <= gy_{t-1}. C is a power of two. Returns (..., R, S, C, C), built
    over a binary tree of blocks (see the module docstring), with a hand-written backward.
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
    5 over 16 steps); otherwise the kernels build the products over `tree_pairwise`, which
    never exponentiates a positive number.
    """
    c = g.shape[dim]
    if g.numel() == 0:
        return True
    with torch.no_grad():
        mid, end = g.select(dim, c // 2), g.select(dim, c - 1)
        reach = torch.maximum(-mid, mid - end).max()
    return float(reach) <= FACTOR_REACH.get(g.dtype, 0.0)
