"""Per-channel decays taken relative to the chunk middle: the factorised chunk forms' factors.

With G the inclusive in-chunk cumulative log-decay (.., C, dk) and r = G at position C/2,
e^{G_t - G_s} = e^{G_t - r} e^{r - G_s}, so decayed pairwise products become masked matmuls
of rows scaled by e^{G-r} and columns scaled by e^{r-G} (`dplr.factorisable` says when the
exponents stay in range). Shared by `gla_chunks`, `kda_chunks` and `dplr_chunks`.
"""

from __future__ import annotations

import torch


def middle_relative(g: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """(r, e^{G-r}, e^{r-G}, e^r, e^{G_C-r}) for g (.., C, dk); r and e^r are (.., 1, dk)."""
    c = g.shape[-2]
    ref = g[..., c // 2 : c // 2 + 1, :]
    e_pos = (g - ref).exp_()
    return ref, e_pos, e_pos.reciprocal(), ref.exp(), (g[..., -1:, :] - ref).exp_()


def causal_mask(c: int, like: torch.Tensor, strict: bool = False) -> torch.Tensor:
    """The (C, C) lower-triangular 0/1 mask in `like`'s dtype (strictly lower if `strict`)."""
    lower = torch.ones(c, c, dtype=like.dtype, device=like.device)
    return lower.tril_(-1 if strict else 0)
