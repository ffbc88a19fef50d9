"""Causal softmax attention in forms whose memory stays linear in the sequence length, with
gradients.

`attention_plain` is the reference: it forms the (T, S) score matrix, so its memory (and,
with gradients, the memory autograd keeps for the backward pass) is quadratic in T. Two exact
forms avoid that, both differentiable:

* `attention_banded`, for a ``window`` of W keys: the scores of each query against its W most
  recent keys only, a (T, W) band built from W shifted dot products, so forward, saved
  tensors and backward are all O(T x W);
* `attention_tiled`, for any mask: a flash-attention style `torch.autograd.Function`. The
  forward walks (query tile, key tile) blocks with the online-softmax recurrence (running
  maximum, normaliser and weighted sum) and saves only the inputs, the output and each
  query's log-sum-exp; the backward recomputes each block's probabilities from that
  log-sum-exp. It never holds more than ``tile x tile`` scores per head, so memory is
  O(T x tile) in training as in evaluation.

Both take the two options the key-value benchmark's variants need:

* ``window``: each query sees only the ``window`` most recent keys (itself included);
* ``square``: softmax over squared scores, softmax((q . k / sqrt(d))^2), instead of the scores.

Queries may be more heads than keys and values: grouped query attention repeats each
key/value head over ``q_heads / kv_heads`` query heads. ``offset`` places the queries after
``offset`` earlier keys (the query at row i is at absolute position offset + i), so a chunk of
queries can attend a cache of earlier keys.
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


def _check(q: torch.Tensor, k: torch.Tensor, offset: int, tile: int | None = None) -> None:
    if tile is not None and tile < 1:
        raise ValueError(f"tile must be >= 1, got {tile}")
    if k.shape[2] < offset + q.shape[2]:
        last = offset + q.shape[2] - 1
        raise ValueError(f"{k.shape[2]} keys cannot cover queries at positions {offset}..{last}")


def _key_range(t_first: int, t_last: int, window: int | None) -> tuple[int, int]:
    """Keys [lo, hi) some query at absolute positions t_first..t_last may attend."""
    return (0 if window is None else max(0, t_first - window + 1)), t_last + 1


def _block(
    qt: torch.Tensor,
    ks: torch.Tensor,
    t_pos: torch.Tensor,
    s0: int,
    window: int | None,
    square: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Masked scores of one (query tile, key tile) block from pre-scaled queries
    (q / sqrt(d)), and for squared scores the pre-square scores z (None otherwise). A block
    every query of which sees every key (below the diagonal, inside the window) skips the
    mask, the common case, so most blocks cost a matmul and one elementwise pass."""
    z = torch.matmul(qt, ks.transpose(-1, -2))
    s = z * z if square else z
    s1 = s0 + ks.shape[2]
    t_first, t_last = int(t_pos[0]), int(t_pos[-1])
    if not (s1 - 1 <= t_first and (window is None or s0 > t_last - window)):
        s_pos = torch.arange(s0, s1, device=qt.device)
        s.masked_fill_(~_mask(t_pos, s_pos, window), float("-inf"))
    return s, (z if square else None)


def _flash_forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    square: bool,
    offset: int,
    tile: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Output and per-query log-sum-exp (B, H, T) by the online softmax, (tile x tile)
    blocks; key tiles wholly outside a query tile's causal window are skipped, so with a
    window the work is linear in T as well as the memory."""
    B, H, T, _ = q.shape
    q = q / math.sqrt(q.shape[-1])
    out = torch.empty_like(q)
    lse = torch.empty(B, H, T, dtype=q.dtype, device=q.device)
    for t0 in range(0, T, tile):
        qt = q[:, :, t0 : t0 + tile]
        n = qt.shape[2]
        t_pos = offset + torch.arange(t0, t0 + n, device=q.device)
        lo, hi = _key_range(offset + t0, offset + t0 + n - 1, window)
        m = torch.full((B, H, n, 1), float("-inf"), dtype=q.dtype, device=q.device)
        den = torch.zeros_like(m)
        acc = torch.zeros_like(qt)
        for s0 in range(lo - lo % tile, hi, tile):
            s1 = min(s0 + tile, hi)
            s = _block(qt, k[:, :, s0:s1], t_pos, s0, window, square)[0]
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = s.sub_(safe).exp_()  # in place: one block of scores alive
            scale = torch.exp(m - safe)
            den = den * scale + p.sum(dim=-1, keepdim=True)
            acc = acc * scale + torch.matmul(p, v[:, :, s0:s1])
            m = m_new
            del s, p  # before the next block's scores: one block alive at a time
        out[:, :, t0 : t0 + n] = acc / den
        lse[:, :, t0 : t0 + n] = (m + torch.log(den)).squeeze(-1)
    return out, lse


class _FlashAttention(torch.autograd.Function):
    """Exact attention with O(T x tile) memory in both passes: the backward recomputes each
    block's probabilities exp(s - lse) from the saved log-sum-exp instead of storing them."""

    @staticmethod
    def forward(ctx, q, k, v, window, square, offset, tile):  # noqa: ANN001, ANN205
        out, lse = _flash_forward(q, k, v, window, square, offset, tile)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.opts = (window, square, offset, tile)
        return out

    @staticmethod
    def backward(ctx, d_out):  # noqa: ANN001, ANN205
        q, k, v, out, lse = ctx.saved_tensors
        window, square, offset, tile = ctx.opts
        scale = 1.0 / math.sqrt(q.shape[-1])
        qs = q * scale
        d_out = d_out.contiguous()
        delta = (d_out * out).sum(-1, keepdim=True)  # (B, H, T, 1): rowsum(dO * O)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        T = q.shape[2]
        for t0 in range(0, T, tile):
            qt, dot = qs[:, :, t0 : t0 + tile], d_out[:, :, t0 : t0 + tile]
            n = qt.shape[2]
            t_pos = offset + torch.arange(t0, t0 + n, device=q.device)
            lse_t, delta_t = lse[:, :, t0 : t0 + n, None], delta[:, :, t0 : t0 + n]
            lo, hi = _key_range(offset + t0, offset + t0 + n - 1, window)
            dq_t = torch.zeros_like(qt)
            for s0 in range(lo - lo % tile, hi, tile):
                s1 = min(s0 + tile, hi)
                ks, vs = k[:, :, s0:s1], v[:, :, s0:s1]
                s, z = _block(qt, ks, t_pos, s0, window, square)
                p = s.sub_(lse_t).exp_()  # masked scores are -inf: p = 0 there
                dv[:, :, s0:s1] += torch.matmul(p.transpose(-1, -2), dot)
                ds = torch.matmul(dot, vs.transpose(-1, -2)).sub_(delta_t).mul_(p)
                dz = ds.mul_(z).mul_(2.0) if square else ds  # d(z^2)/dz = 2z
                dq_t += torch.matmul(dz, ks)
                dk[:, :, s0:s1] += torch.matmul(dz.transpose(-1, -2), qt)
                del s, z, p, ds, dz  # before the next block's: one block alive at a time
            dq[:, :, t0 : t0 + n] = dq_t * scale
        return dq, dk, dv, None, None, None, None


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
    """`attention_plain`'s output (and gradients), computed in (tile x tile) blocks by
    `_FlashAttention`: memory O(T x tile) with or without gradients."""
    _check(q, k, offset, tile)
    H = q.shape[1]
    return _FlashAttention.apply(
        q, _expand_kv(k, H), _expand_kv(v, H), window, square, offset, tile
    )


def attention_banded(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    window: int,
    square: bool = False,
    offset: int = 0,
) -> torch.Tensor:
    """`attention_plain` with a ``window``, as a (T, window) band of scores: the query at
    absolute position t scores keys t, t-1, .., t-window+1 (lag j = 0 .. window-1) by one
    shifted dot product per lag. Plain autograd ops, each saving views of q, k, v or the
    (T, window) scores, so training memory is O(T x window), never T x T."""
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    _check(q, k, offset)
    B, H, T, D = q.shape
    k, v = _expand_kv(k, H), _expand_kv(v, H)
    lo = offset - (window - 1)  # absolute position of band row 0's oldest key
    keep_k, keep_v = k[:, :, max(lo, 0) : offset + T], v[:, :, max(lo, 0) : offset + T]
    if lo < 0:  # positions before 0: zero keys, masked below
        pad = q.new_zeros(B, H, -lo, D)
        keep_k, keep_v = torch.cat([pad, keep_k], dim=2), torch.cat([pad, keep_v], dim=2)
    lag = lambda x, j: x[:, :, window - 1 - j : window - 1 - j + T]  # noqa: E731
    z = torch.stack([(q * lag(keep_k, j)).sum(-1) for j in range(window)], dim=-1)
    z = z / math.sqrt(D)
    s = z * z if square else z
    t_pos = offset + torch.arange(T, device=q.device)
    valid = t_pos[:, None] >= torch.arange(window, device=q.device)[None, :]  # key t - j >= 0
    p = torch.softmax(s.masked_fill(~valid, float("-inf")), dim=-1)
    out = p[..., 0, None] * lag(keep_v, 0)
    for j in range(1, window):
        out = out + p[..., j, None] * lag(keep_v, j)
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
    offset: int = 0,
) -> torch.Tensor:
    """Causal attention by an exact path whose memory is linear in the length, with or
    without gradients: PyTorch's fused kernel where it applies (`sdpa_applies`); a window
    shorter than the keys by the (T, window) band (`attention_banded`); otherwise, without
    gradients, the plain form while queries and keys both fit in one ``tile``, and the
    flash-style tiled form (`attention_tiled`) beyond it and whenever gradients are needed
    (the plain form would keep its T x T scores for the backward pass, in every layer at
    once). No path holds more than ``tile x tile`` scores per head."""
    if sdpa_applies(window, square, offset):
        k, v = _expand_kv(k, q.shape[1]), _expand_kv(v, q.shape[1])
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    if window is not None and window < k.shape[2]:
        return attention_banded(q, k, v, window=window, square=square, offset=offset)
    if q.shape[2] <= tile and k.shape[2] <= tile and not torch.is_grad_enabled():
        return attention_plain(q, k, v, window=window, square=square, offset=offset)
    return attention_tiled(q, k, v, window=window, square=square, offset=offset, tile=tile)
