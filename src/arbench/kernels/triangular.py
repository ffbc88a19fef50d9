"""The inverse of a unit lower-triangular matrix, (I + tril(A, -1))^{-1}: the WY/UT forms' T.

The delta rule, KDA and DPLR chunk forms all solve (I + A) X = B per chunk with A strictly lower
triangular. T = (I + A)^{-1} is formed explicitly by blocked halving (`unit_lower_inverse`): on
CPU that is several times faster than a batched triangular solve, which loops per matrix.
`UnitLowerInverse` is the same with a two-matmul backward, for the paths autograd differentiates;
the hand-written chunk Functions call `unit_lower_inverse` directly and differentiate T themselves.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# bmm on CPU multiplies batches whose m*k*n is below this in a plain loop (any strides, the
# same sums whatever the layout) and hands larger ones to BLAS
_BMM_LOOP_LIMIT = 400


def halving_buffer(shape: torch.Size | tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """An uninitialised (..., C, C) tensor in the layout that `unit_lower_inverse` works in.

    Every C x C matrix is followed by one unused row (matrix stride C(C+1)); then the diagonal
    blocks of each halving level lie at one uniform stride 2m(C+1) across the whole batch.
    """
    *batch, c, _ = shape
    return like.new_empty(math.prod(batch), c + 1, c)[:, :c].view(*batch, c, c)


def _as_halving(x: torch.Tensor) -> torch.Tensor | None:
    """x as an (N, C, C) view in the `halving_buffer` layout, or None when it is laid out
    otherwise."""
    c = x.shape[-1]
    if x.stride()[-2:] != (c, 1):
        return None
    try:
        flat = x.view(-1, c, c)
    except RuntimeError:  # batch axes that do not merge into one stride
        return None
    return flat if flat.shape[0] <= 1 or flat.stride(0) == c * (c + 1) else None


def _blocks(x: torch.Tensor, m: int, row: int, col: int) -> torch.Tensor:
    """The (row, col) m-block of every diagonal 2m-block of a `halving_buffer` (N, C, C) view,
    as one (N C / 2m, m, m) view."""
    c = x.shape[-1]
    count = x.shape[0] * (c // (2 * m))
    return x.as_strided((count, m, m), (2 * m * (c + 1), c, 1), x.storage_offset() + row * c + col)


def unit_lower_inverse(a: torch.Tensor, keep_layout: bool = False) -> torch.Tensor:
    """(I + tril(a, -1))^{-1} for (..., C, C) by blocked halving (C padded to a power of two).

    Level m inverts 2m-blocks from their m-blocks: T21 = -T22 L21 T11, all blocks batched.
    Much faster on CPU than a batched triangular solve, which loops over matrices. The levels
    run on `halving_buffer` views (a is copied into one unless it already is one), so each
    product is one bmm on strided blocks. The operands reach bmm as matmul on the (..., C, C)
    blocks would pass them, so that every level sums as before: the levels small enough for
    bmm's plain loop (which reads any strides alike) and the last (one block per matrix) as
    views, the BLAS ones in between as contiguous copies. The result is contiguous, or with
    `keep_layout` the `halving_buffer` view itself.
    """
    c = a.shape[-1]
    p2 = 1 << max(0, c - 1).bit_length()
    if p2 != c:  # a zero-padded block is its own (identity) inverse block
        return unit_lower_inverse(F.pad(a, (0, p2 - c, 0, p2 - c)))[..., :c, :c]
    if a.numel() == 0:
        return a.new_zeros(a.shape)
    lower = _as_halving(a)  # only the blocks strictly below the diagonal are read
    if lower is None:
        lower = halving_buffer(a.shape, a).copy_(a).view(-1, c, c)
    t = a.new_zeros(lower.shape[0], c + 1, c)[:, :c]  # halving_buffer's layout, zeroed whole
    t.diagonal(dim1=-2, dim2=-1).fill_(1.0)
    m = 1
    while m < c:
        l21, t11, t22 = _blocks(lower, m, m, 0), _blocks(t, m, 0, 0), _blocks(t, m, m, m)
        if m**3 >= _BMM_LOOP_LIMIT and 2 * m < c:  # to BLAS as matmul hands strided blocks
            l21, t11, t22 = l21.contiguous(), t11.contiguous(), t22.contiguous()
        torch.neg(torch.bmm(t22, torch.bmm(l21, t11)), out=_blocks(t, m, m, 0))
        m *= 2
    t = t.view(a.shape)
    return t if keep_layout else t.contiguous()


class UnitLowerInverse(torch.autograd.Function):
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
