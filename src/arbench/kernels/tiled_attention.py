"""Causal softmax attention computed in tiles, with memory linear in the sequence length.

`attention_plain` is the reference: it forms the (T, S) score matrix. `attention_tiled`
computes the same output one (query tile, key tile) block at a time with the online-softmax
recurrence (running maximum, running normaliser, running weighted sum), so it never holds
more than ``tile x tile`` scores per head: the long-context evaluation (to 10^7 tokens) runs
through it. Both take the two options the key-value benchmark's variants need:

* ``window``: each query sees only the ``window`` most recent keys (itself included);
* ``square``: softmax over squared scores, softmax((q . k / sqrt(d))^2), instead of the scores.

Queries may be fewer heads' worth than keys and values only the other way round: grouped
query attention repeats each key/value head over ``q_heads / kv_heads`` query heads.
``offset`` places the queries after ``offset`` earlier keys (the query at row i is at
absolute position offset + i), so a stream can attend a cache of earlier keys.
"""

from __future__ import annotations

import math

import torch


def _scores(q: torch.Tensor, k: torch.Tensor, square: bool) -> torch.Tensor:
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return s * s if square else s


def _expand_kv(x: torch.Tensor, q_heads: int) -> torch.Tensor:
    """(B, Hkv, S, D) -> (B, Hq, S, D), each key/value head shared by its query group."""
    groups, rem = divmod(q_heads, x.shape[1])
    if rem:
        raise ValueError(f"{q_heads} query heads are not a multiple of {x.shape[1]} kv heads")
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def _mask(t_pos: torch.Tensor, s_pos: torch.Tensor, window: int | None) -> torch.Tensor:
    """(T, S) True where query position t may attend key position s."""
    ok = s_pos[None, :] <= t_pos[:, None]
    if window is not None:
        ok &= s_pos[None, :] > t_pos[:, None] - window
    return ok


def attention_plain(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window: int | None = None,
    square: bool = False,
    offset: int = 0,
) -> torch.Tensor:
    """Reference causal attention, (B, Hq, T, D) x (B, Hkv, S, D) -> (B, Hq, T, D)."""
    k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
    t_pos = offset + torch.arange(q.shape[2], device=q.device)
    s_pos = torch.arange(k.shape[2], device=q.device)
    s = _scores(q, k, square).masked_fill(~_mask(t_pos, s_pos, window), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def attention_tiled(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window: int | None = None,
    square: bool = False,
    offset: int = 0,
    tile: int = 1024,
) -> torch.Tensor:
    """`attention_plain`'s output, computed in (tile x tile) blocks.

    Key tiles wholly outside a query tile's causal window are skipped, so with a window the
    work is linear in T as well as the memory.
    """
    if tile < 1:
        raise ValueError(f"tile must be >= 1, got {tile}")
    B, H, T, D = q.shape
    S = k.shape[2]
    if S < offset + T:
        raise ValueError(f"{S} keys cannot cover queries at positions {offset}..{offset + T - 1}")
    out = torch.empty_like(q)
    for t0 in range(0, T, tile):
        qt = q[:, :, t0 : t0 + tile]
        t_pos = offset + torch.arange(t0, t0 + qt.shape[2], device=q.device)
        lo = 0 if window is None else max(0, int(t_pos[0]) - window + 1)
        hi = int(t_pos[-1]) + 1
        m = torch.full((B, H, qt.shape[2], 1), float("-inf"), dtype=q.dtype, device=q.device)
        den = torch.zeros_like(m)
        acc = torch.zeros_like(qt)
        for s0 in range(lo - lo % tile, hi, tile):
            s1 = min(s0 + tile, hi)
            ks = _expand_kv(k[:, :, s0:s1], H)
            vs = _expand_kv(v[:, :, s0:s1], H)
            s_pos = torch.arange(s0, s1, device=q.device)
            s = _scores(qt, ks, square)
            s = s.masked_fill(~_mask(t_pos, s_pos, window), float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe)
            scale = torch.exp(m - safe)
            den = den * scale + p.sum(dim=-1, keepdim=True)
            acc = acc * scale + torch.matmul(p, vs)
            m = m_new
        out[:, :, t0 : t0 + qt.shape[2]] = acc / den
    return out


def sdpa_applies(window: int | None, square: bool, offset: int = 0) -> bool:
    """Whether `torch.nn.functional.scaled_dot_product_attention` computes this attention:
    plain causal softmax over the whole prefix (no window, no squared scores, no offset).
    Its fused kernels (flash / memory-efficient on CUDA, a flash kernel on CPU) keep memory
    linear in the length without our tiles."""
    return window is None and not square and offset == 0


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window: int | None = None,
    square: bool = False,
    tile: int = 4096,
) -> torch.Tensor:
    """Causal attention by the fastest exact path: PyTorch's fused kernel where it applies
    (`sdpa_applies`), else the plain form up to ``tile`` tokens and the tiled form beyond,
    so no path ever holds a T x T matrix above ``tile`` tokens."""
    if sdpa_applies(window, square):
        k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if q.shape[2] <= tile:
        return attention_plain(q, k, v, window=window, square=square)
    return attention_tiled(q, k, v, window=window, square=square, tile=tile)
