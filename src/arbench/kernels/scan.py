"""Chunk-to-chunk state carries with hand-written backward passes.

Every chunked kernel ends in a short sequential scan over the N chunks of a sequence:
    S_{n+1} = A_n S_n + R_n,   n = 0..N-1,
with A_n a scalar or per-row decay (`diagonal_scan`), a full (dk x dk) matrix
(`matrix_scan`), or a diagonal minus a rank-C product kept factored (`lowrank_scan_*`). The
scan returns the state entering every chunk (B,H,N,dk,dv) and the final state. Written with
autograd, each step of the loop records a graph node whose backward allocates and accumulates
per step; here the forward writes into one preallocated tensor and the backward is the reverse
scan G_n = dStarts_n + A_n^T G_{n+1}, with dR_n = G_{n+1}, and dA_n = G_{n+1} S_n^T formed for
all chunks at once after the loop.

Output gradients reach these backward passes (and the chunk kernels' that call them) as
tensors, never None: autograd Functions materialise an unused output's gradient as zeros.

`carry_and_read` is the end of a chunked kernel whose backward autograd derives (the DPLR and
KDA tree paths): the matrix carry, then each chunk's read of the state entering it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from arbench.kernels.common import from_chunks


def _reduce_to(grad: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """Sum a broadcast gradient back to `shape` (same rank, size-1 axes summed)."""
    axes = tuple(i for i, (g, s) in enumerate(zip(grad.shape, shape, strict=True)) if s == 1 < g)
    return grad.sum(axes, keepdim=True) if axes else grad


def diagonal_scan_forward(
    decay: torch.Tensor, writes: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """No-autograd loop S_{n+1} = a_n * S_n + R_n: (states entering each chunk, final state).

    The loop runs chunk-major ((N, B, H, dk, dv) buffers), so every step writes its result in
    place into a contiguous slice instead of copying the state into a strided one.
    """
    n = writes.shape[2]
    a, w = decay.movedim(2, 0), writes.movedim(2, 0)
    buf = writes.new_empty((n + 1, *s0.shape))  # buf[i] = S_i, the state entering chunk i
    buf[0] = s0
    for i in range(n):
        torch.addcmul(w[i], a[i], buf[i], out=buf[i + 1])
    return buf[:n].movedim(0, 2).contiguous(), buf[n]  # batch-major for the matmuls that read it


def diagonal_scan_backward(
    decay: torch.Tensor,
    starts: torch.Tensor,
    d_starts: torch.Tensor,
    d_final: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reverse scan of `diagonal_scan_forward`: (d decay, d writes, d s0)."""
    n = starts.shape[2]
    a = decay.movedim(2, 0)
    d_st = d_starts.movedim(2, 0)
    g = starts.new_empty((n + 1, *starts[:, :, 0].shape))  # g[i] = dL/dS_i in total
    g[n] = d_final
    for i in range(n - 1, -1, -1):
        torch.addcmul(d_st[i], a[i], g[i + 1], out=g[i])
    d_writes = g[1:].movedim(0, 2).contiguous()  # dR_n = dL/dS_{n+1}
    d_decay = _reduce_to(d_writes * starts, decay.shape)
    return d_decay, d_writes, g[0]


class _PrefixScan(torch.autograd.Function):
    """S_{n+1} = S_n + R_n: the undecayed carry, as the same chunk-major loop of adds.

    torch.cumsum along the chunk axis of a (B,H,N,dk,dv) tensor is a strided scan, and its
    backward flips, scans and flips again; the loop touches each state once each way.
    """

    @staticmethod
    def forward(
        ctx: Any, writes: torch.Tensor, s0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = writes.shape[2]
        w = writes.movedim(2, 0)
        buf = writes.new_empty((n + 1, *s0.shape))  # buf[i] = S_i, the state entering chunk i
        buf[0] = s0
        for i in range(n):
            torch.add(buf[i], w[i], out=buf[i + 1])
        ctx.n = n
        return buf[:n].movedim(0, 2).contiguous(), buf[n]

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_starts: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        n = ctx.n
        g = d_final.new_empty((n + 1, *d_final.shape))  # g[i] = dL/dS_i in total
        g[n] = d_final
        d_st = d_starts.movedim(2, 0)
        for i in range(n - 1, -1, -1):
            torch.add(d_st[i], g[i + 1], out=g[i])
        return g[1:].movedim(0, 2).contiguous(), g[0]


def matrix_scan_forward(
    m: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """No-autograd loop S_{n+1} = M_n S_n + R_n: (states entering each chunk, final state).

    Chunk-major buffers: each step's baddbmm writes straight into a contiguous slice.
    """
    b, h, n, dk, dv = r.shape
    m3, r3 = m.flatten(0, 1), r.flatten(0, 1)  # (B*H, N, ., .) views of contiguous inputs
    buf = r.new_empty(n + 1, b * h, dk, dv)  # buf[i] = S_i
    buf[0] = s0.reshape(b * h, dk, dv)
    for i in range(n):
        torch.baddbmm(r3[:, i], m3[:, i], buf[i], out=buf[i + 1])
    # batch-major copy: a matmul reading the strided chunk-major view would copy it each time
    starts = buf[:n].view(n, b, h, dk, dv).movedim(0, 2).contiguous()
    return starts, buf[n].view(b, h, dk, dv)


def matrix_scan_backward(
    m: torch.Tensor,
    starts: torch.Tensor,
    d_starts: torch.Tensor,
    d_final: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Reverse scan of `matrix_scan_forward`: (dM, dR, dS0) from the state gradients."""
    b, h, n, dk, dv = starts.shape
    m3 = m.flatten(0, 1).transpose(-1, -2)
    d_st = d_starts.reshape(b * h, n, dk, dv)
    g = starts.new_empty(n + 1, b * h, dk, dv)  # g[i] = dL/dS_i in total
    g[n] = d_final.reshape(b * h, dk, dv)
    for i in range(n - 1, -1, -1):
        torch.baddbmm(d_st[:, i], m3[:, i], g[i + 1], out=g[i])
    d_r = g[1:].view(n, b, h, dk, dv).movedim(0, 2).contiguous()  # dR_n = dL/dS_{n+1}
    d_m = d_r @ starts.transpose(-1, -2)
    return d_m, d_r, g[0].view(b, h, dk, dv)


def lowrank_scan_forward(
    decay: torch.Tensor, a: torch.Tensor, b: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """`matrix_scan_forward` for M_n = Diag(decay_n) - a_n^T b_n, never forming M_n.

    decay (B,H,N,dk); a, b (B,H,N,C,dk); r (B,H,N,dk,dv). A step costs O(C dk dv) instead of
    O(dk^2 dv): the carry of a chunk form whose chunks are shorter than half the key width
    (a 128-wide key in chunks of 4 to 16 steps) is a few small matmuls, not a dk x dk one.
    """
    n = r.shape[2]
    d, at, bb, rr = (
        decay.movedim(2, 0),
        a.movedim(2, 0).transpose(-1, -2),
        b.movedim(2, 0),
        r.movedim(2, 0),
    )
    buf = r.new_empty((n + 1, *s0.shape))  # buf[i] = S_i, the state entering chunk i
    buf[0] = s0
    for i in range(n):
        torch.addcmul(rr[i], d[i][..., None], buf[i], out=buf[i + 1])
        buf[i + 1].sub_(at[i] @ (bb[i] @ buf[i]))
    return buf[:n].movedim(0, 2).contiguous(), buf[n]


def lowrank_scan_backward(
    decay: torch.Tensor,
    a: torch.Tensor,
    b: torch.Tensor,
    d_starts: torch.Tensor,
    d_final: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reverse loop of `lowrank_scan_forward`: (dR, dS0), with G_n = dStarts_n + M_n^T G_{n+1}.

    M's own gradient G_{n+1} S_n^T is left to the caller, which needs it only through
    products with a and b (and its diagonal), all cheap once dR is known.
    """
    n = d_starts.shape[2]
    d, bt, aa = decay.movedim(2, 0), b.movedim(2, 0).transpose(-1, -2), a.movedim(2, 0)
    d_st = d_starts.movedim(2, 0)
    g = d_starts.new_empty((n + 1, *d_final.shape))  # g[i] = dL/dS_i in total
    g[n] = d_final
    for i in range(n - 1, -1, -1):
        torch.addcmul(d_st[i], d[i][..., None], g[i + 1], out=g[i])
        g[i].sub_(bt[i] @ (aa[i] @ g[i + 1]))
    return g[1:].movedim(0, 2).contiguous(), g[0]


class _Scan(torch.autograd.Function):
    """S_{n+1} = A_n S_n + R_n run by a (forward loop, reverse loop) pair of functions:
    `diagonal_scan_forward/_backward` (A scalar or per row) or `matrix_scan_forward/_backward`."""

    @staticmethod
    def forward(
        ctx: Any, loops: tuple[Any, Any], a: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        starts, final = loops[0](a, r, s0)
        ctx.backward_loop = loops[1]
        ctx.save_for_backward(a, starts)
        return starts, final

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any, d_starts: torch.Tensor, d_final: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        a, starts = ctx.saved_tensors
        return (None, *ctx.backward_loop(a, starts, d_starts, d_final))


_DIAGONAL = (diagonal_scan_forward, diagonal_scan_backward)
_MATRIX = (matrix_scan_forward, matrix_scan_backward)


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
        return _PrefixScan.apply(writes, s0.expand(writes[:, :, 0].shape))
    return _Scan.apply(_DIAGONAL, decay, writes, s0)


def matrix_scan(
    m: torch.Tensor, r: torch.Tensor, s0: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """States entering each chunk and the final state of S_{n+1} = M_n S_n + R_n.

    m (B,H,N,dk,dk); r (B,H,N,dk,dv); s0 (B,H,dk,dv).
    """
    if r.shape[2] == 0:
        return r, s0
    return _Scan.apply(_MATRIX, m.contiguous(), r.contiguous(), s0.contiguous())


def carry_and_read(
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
    return from_chunks(o, t), s
