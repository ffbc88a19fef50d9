"""What the recurrence kernels share: argument checks, time chunking, masks, relative decays.

Every kernel takes per-head tensors with time on axis 2: q, k (B,H,T,dk), v (B,H,T,dv), per-step
gates (B,H,T), per-channel decays (B,H,T,dk), and a state (B,H,dk,dv); `check_shapes` validates
them. A chunked form splits time into N chunks of C steps (`to_chunks`), zero-padding the last
one: in every kernel a padded step (k = v = 0, beta = 0, log-decay 0) is an identity on the
state, and zero padding is exact, so padding changes no number; `from_chunks` undoes it.

Per-channel decays taken relative to the chunk middle (`middle_relative`): with G the inclusive
in-chunk cumulative log-decay (.., C, dk) and r = G at position C/2,
e^{G_t - G_s} = e^{G_t - r} e^{r - G_s}, so decayed pairwise products become masked matmuls of
rows scaled by e^{G-r} and columns scaled by e^{r-G} (`pairwise_tree.factorisable` says when the
exponents stay in range). Shared by `gla.GLAChunks`, `kda.KDAChunks` and `dplr.DPLRChunks`.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
import torch.nn.functional as F


def check_shapes(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    per_step: Mapping[str, torch.Tensor | None] | None = None,
    per_channel: Mapping[str, torch.Tensor | None] | None = None,
    shared_heads: bool = False,
) -> tuple[int, int, int, int, int]:
    """Validate a kernel's arguments and return (B, H, T, dk, dv).

    v must be (B,H,T,dv) and fixes B, H and T; q must be (B,H,T,dk), or (B,1,T,dk) (one head
    shared by all, as Mamba-2's B and C) when `shared_heads`; k must match q. Each named
    `per_step` tensor must be (B,H,T) and each `per_channel` one (B,H,T,dk); None entries (an
    absent optional gate) are skipped. Raises ValueError naming the first bad argument.
    """
    if v.dim() != 4:
        raise ValueError(f"v must be (B,H,T,dv), got {tuple(v.shape)}")
    b, h, t, dv = v.shape
    heads = (1, h) if shared_heads else (h,)
    if q.dim() != 4 or q.shape[0] != b or q.shape[1] not in heads or q.shape[2] != t:
        want = "(B,1 or H,T,dk)" if shared_heads else "(B,H,T,dk)"
        raise ValueError(f"q must be {want} with (B,H,T)={(b, h, t)} from v, got {tuple(q.shape)}")
    if k.shape != q.shape:
        raise ValueError(f"k must match q {tuple(q.shape)}, got {tuple(k.shape)}")
    dk = q.shape[-1]
    for name, x in (per_step or {}).items():
        if x is not None and x.shape != (b, h, t):
            raise ValueError(f"{name} must be (B,H,T)={(b, h, t)}, got {tuple(x.shape)}")
    for name, x in (per_channel or {}).items():
        if x is not None and x.shape != (b, h, t, dk):
            raise ValueError(f"{name} must be (B,H,T,dk)={(b, h, t, dk)}, got {tuple(x.shape)}")
    return b, h, t, dk, dv


def check_chunk_size(c: int) -> None:
    """Reject chunk sizes that are not a power of two (the tree of decayed blocks halves C)."""
    if c < 1 or c & (c - 1):
        raise ValueError(f"chunk_size must be a power of two, got {c}")


def fit_chunk(c: int, t: int) -> int:
    """The chunk a sequence of ``t`` steps runs in: ``c``, or the smallest power of two that
    holds the whole sequence when that is smaller (a 7-step sequence in one chunk of 8, not
    zero-padded to 32; the values do not depend on the chunk, the work does)."""
    return min(c, 1 << max(0, t - 1).bit_length())


def to_chunks(x: torch.Tensor, n: int, c: int) -> torch.Tensor:
    """Zero-pad the time axis (dim 2) of (B,H,T,...) to n*c steps and split it into (n, c).

    Without padding the result is a view of x (its strides split, never copied).
    """
    t = x.shape[2]
    if n * c != t:
        spec = [0, 0] * (x.dim() - 3) + [0, n * c - t]
        x = F.pad(x, spec)
    return x.reshape(*x.shape[:2], n, c, *x.shape[3:])


def from_chunks(x: torch.Tensor, t: int) -> torch.Tensor:
    """(B,H,N,C,...) -> (B,H,T,...): merge the chunks and drop the padded steps past t."""
    return x.flatten(2, 3)[:, :, :t]


def causal_mask(c: int, like: torch.Tensor, strict: bool = False) -> torch.Tensor:
    """The (C, C) lower-triangular 0/1 mask in `like`'s dtype (strictly lower if `strict`).

    A float mask multiplied in, because masked_fill is slow on CPU.
    """
    lower = torch.ones(c, c, dtype=like.dtype, device=like.device)
    return lower.tril_(-1 if strict else 0)


def middle_relative(g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(r, e^{G-r}, e^{r-G}, e^r, e^{G_C-r}) for g (.., C, dk); r and e^r are (.., 1, dk)."""
    c = g.shape[-2]
    ref = g[..., c // 2 : c // 2 + 1, :]
    e_pos = (g - ref).exp_()
    return ref, e_pos, e_pos.reciprocal(), ref.exp(), (g[..., -1:, :] - ref).exp_()
