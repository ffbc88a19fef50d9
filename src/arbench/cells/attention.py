"""Causal softmax multi-head attention: the growing-state (KV cache) baseline.

The carried state is the KV cache dict(k=(B,H,L,dh), v=(B,H,L,dh)) of every token seen so far,
so its size grows linearly with the sequence length (2 * d_model floats per token per layer),
unlike the fixed-size matrix memories of the recurrent cells. Positions are either "absolute"
(learned embedding added to the input, up to `max_len`) or "rotary" (applied to q and k); when
streaming, both are offset by the number of cached tokens, so pieces reproduce one pass.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import Form, SequenceMixer, State, register

Positions = Literal["absolute", "rotary"]


def rotary(x: torch.Tensor, offset: int, base: float = 10000.0) -> torch.Tensor:
    """Rotate channel pairs (i, i + dh/2) of (B,H,T,dh) by angle pos * base^(-2i/dh)."""
    t, dh = x.shape[-2], x.shape[-1]
    half = dh // 2
    inv_freq = base ** (-torch.arange(half, dtype=x.dtype, device=x.device) * 2.0 / dh)
    pos = torch.arange(offset, offset + t, dtype=x.dtype, device=x.device)
    ang = pos[:, None] * inv_freq
    cos, sin = ang.cos(), ang.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


@register("attention")
class AttentionCell(SequenceMixer):
    """One causal multi-head softmax attention layer (the model stacks layers)."""

    single_form = True  # its "recurrent" form is the same attention, not a state recurrence

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        positions: Positions = "rotary",
        max_len: int = 2048,
        rope_base: float = 10000.0,
    ) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        if positions not in ("absolute", "rotary"):
            raise ValueError(f"positions must be 'absolute' or 'rotary', got {positions!r}")
        self.d_model = d_model
        self.heads = heads
        self.head_dim = d_model // heads
        if positions == "rotary" and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head_dim, got {self.head_dim}")
        self.positions = positions
        self.max_len = max_len
        self.rope_base = rope_base
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        if positions == "absolute":
            self.pos_emb = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def state_size(self, seq_len: int | None = None) -> int:
        """KV-cache elements after `seq_len` tokens: 2 * d_model * seq_len (grows with length).

        With seq_len None there is no fixed-size state to report, so 0 is returned.
        """
        return 0 if seq_len is None else 2 * self.d_model * seq_len

    def _attend(
        self, x: torch.Tensor, cache: dict[str, torch.Tensor] | None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Attend the T new tokens to the cache plus themselves, causally; return the new cache."""
        b, t, d = x.shape
        offset = 0 if cache is None else cache["k"].shape[2]
        if self.positions == "absolute":
            if offset + t > self.max_len:
                raise ValueError(f"position {offset + t} exceeds max_len={self.max_len}")
            x = x + self.pos_emb[offset : offset + t]
        q, k, v = (
            y.reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
            for y in self.qkv_proj(x).chunk(3, dim=-1)
        )
        if self.positions == "rotary":
            q = rotary(q, offset, self.rope_base)
            k = rotary(k, offset, self.rope_base)
        if cache is not None:
            k = torch.cat([cache["k"], k], dim=2)
            v = torch.cat([cache["v"], v], dim=2)
        # Query i sits at absolute position offset + i and may see keys j <= offset + i.
        allowed = torch.ones(t, offset + t, dtype=torch.bool, device=x.device).tril(offset)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        o = o.transpose(1, 2).reshape(b, t, d)
        return self.out_proj(o), {"k": k, "v": v}

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        """Map (B,T,d_model) to (B,T,d_model), carrying the KV cache dict(k=..., v=...)."""
        if form == "chunked":
            return self._attend(x, state)
        if form != "recurrent":
            raise ValueError(f"unknown form {form!r}")
        outs = []
        cache = state
        for i in range(x.shape[1]):
            y, cache = self._attend(x[:, i : i + 1], cache)
            outs.append(y)
        if not outs:
            return self._attend(x, state)
        return torch.cat(outs, dim=1), cache
