"""The inverse of a unit lower-triangular matrix, (I + tril(A, -1))^{-1}: the WY/UT forms' T.

The delta rule, KDA and DPLR chunk forms all solve (I + A) X = B per chunk with A strictly lower
triangular. T = (I + A)^{-1} is formed explicitly by blocked halving (`unit_lower_inverse`): on
CPU that is several times faster than a batched triangular solve, which loops per matrix.
`UnitLowerInverse` is the same with a two-matmul backward, for the paths autograd differentiates;
the hand-written chunk Functions call `unit_lower_inverse` directly and differentiate T themselves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
