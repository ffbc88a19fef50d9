"""Chunk-to-chunk state carries with hand-written backward passes.

Every chunked kernel ends in a short sequential scan over the N chunks of a sequence:
    S_{n+1} = A_n S_n + R_n,   n = 0..N-1,
with A_n a scalar or per-row decay (`diagonal_scan`) or a full (dk x dk) matrix
(`matrix_scan`). The scan returns the state entering every chunk (B,H,N,dk,dv) and the final
state. Written with autograd, each step of the loop records a graph node whose backward
allocates and accumulates per step; here the forward writes into one preallocated tensor and
the backward is the reverse scan G_n = dStarts_n + A_n^T G_{n+1}, with dR_n = G_{n+1}, and
dA_n = G_{n+1} S_n^T formed for all chunks at once after the loop.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable


def _grad_or_zeros(g: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like) if g is None else g


def _reduce_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sum a broadcast gradient back to `shape` (same rank, size-1 axes summed)."""
    axes = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape, strict=True)) if s == 1 < g)
    return grad.sum(axes, keepdim=True) if axes else grad


class _DiagonalScan(torch.autograd.Function):
    """S_{n+1} = a_n * S_n + R_n with a_n broadcast over (dk, dv) (per row or scalar)."""

    @staticmethod
    def forward(
        ctx: Any, decay: torch.Tensor, writes: torch.Tensor, s0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = writes.shape[2]
        starts = torch.empty_like(writes)
        s = s0
        for i in range(n):
            starts[:, :, i] = s
            s = torch.addcmul(writes[:, :, i], decay[:, :, i], s)
        ctx.save_for_backward(decay, starts)
        return starts, s

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_starts: torch.Tensor | None, d_final: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        decay, starts = ctx.saved_tensors
        d_starts = _grad_or_zeros(d_starts, starts)
        d_writes = torch.empty_like(starts)  # d_writes[n] = G_{n+1}, the gradient of S_{n+1}
        g = _grad_or_zeros(d_final, starts[:, :, 0])
        for i in range(starts.shape[2] - 1, -1, -1):
            d_writes[:, :, i] = g
            g = torch.addcmul(d_starts[:, :, i], decay[:, :, i], g)
        d_decay = _reduce_to(d_writes * starts, decay.shape)
        return d_decay, d_writes, g


class _MatrixScan(torch.autograd.Function):
    """S_{n+1} = M_n S_n + R_n with M_n (dk x dk)."""

    @staticmethod
    def forward(
        ctx: Any, m: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, h, n, dk, dv = r.shape
        starts = torch.empty_like(r)
        s = s0.reshape(b * h, dk, dv)
        for i in range(n):
            starts[:, :, i] = s.view(b, h, dk, dv)
            s = torch.baddbmm(
                r[:, :, i].reshape(b * h, dk, dv), m[:, :, i].reshape(b * h, dk, dk), s
            )
        ctx.save_for_backward(m, starts)
        return starts, s.view(b, h, dk, dv)

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_starts: torch.Tensor | None, d_final: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        m, starts = ctx.saved_tensors
        b, h, n, dk, dv = starts.shape
        d_starts = _grad_or_zeros(d_starts, starts)
        d_r = torch.empty_like(starts)
        g = _grad_or_zeros(d_final, starts[:, :, 0]).reshape(b * h, dk, dv)
        for i in range(n - 1, -1, -1):
            d_r[:, :, i] = g.view(b, h, dk, dv)
            m_t = m[:, :, i].reshape(b * h, dk, dk).transpose(-1, -2)
            g = torch.baddbmm(d_starts[:, :, i].reshape(b * h, dk, dv), m_t, g)
        d_m = d_r @ starts.transpose(-1, -2)
        return d_m, d_r, g.view(b, h, dk, dv)


def diagonal_scan(
    decay: torch.Tensor | None, writes: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """States entering each chunk and the final state of S_{n+1} = a_n S_n + R_n.

    writes (B,H,N,dk,dv); decay (B,H,N,dk,1) per row, (B,H,N,1,1) scalar, or None (a_n = 1,
    an exclusive prefix sum); s0 (B,H,dk,dv).
    """
    if writes.shape[2] == 0:
        return writes, s0
    if decay is None:
        totals = writes.cumsum(2) + s0[:, :, None]
        return totals - writes, totals[:, :, -1]
    return _DiagonalScan.apply(decay, writes, s0)


def matrix_scan(
    m: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """States entering each chunk and the final state of S_{n+1} = M_n S_n + R_n.

    m (B,H,N,dk,dk); r (B,H,N,dk,dv); s0 (B,H,dk,dv).
    """
    if r.shape[2] == 0:
        return r, s0
    return _MatrixScan.apply(m.contiguous(), r.contiguous(), s0.contiguous())
