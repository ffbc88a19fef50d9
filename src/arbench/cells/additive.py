"""Additive (undecayed) linear attention: the simplest fixed-state associative memory.

S_t = S_{t-1} + k_t v_t^T, o_t = S_t^T q_t per head, with S of shape (d_k, d_v). Feature map:
q and k are L2-normalised per head (so q . k_s is a cosine similarity and S grows by unit-norm
keys); optionally a causal depthwise short convolution + SiLU is applied to the projected q, k, v
first. The per-head output is RMS-normalised (learned gain) before the output projection,
because the unforgetting sum grows with sequence length.

`decay: constant` adds one learned, input-independent decay per head, S_t = a_h S_{t-1} +
k_t v_t^T with a_h = sigmoid(logit_h) (no delta-rule erase: the state only decays and adds);
`decay_init` sets the initial a_h (a float for every head, or one per head; None: sigmoid(3)
for one head, sigmoid(linspace(2, 7)) for several, as delta_rule's `decay: constant`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import (
    Form,
    Kernel,
    SequenceMixer,
    State,
    l2_normalize,
    merge_heads,
    pick_form,
    register,
    split_heads,
)
from arbench.cells.constant_decay import initial_logits
from arbench.cells.short_conv import ShortConv
from arbench.kernels.scalar_decay import scalar_decay_chunked, scalar_decay_recurrent


@register("additive")
class AdditiveCell(SequenceMixer):
    """Multi-head additive linear attention with L2-normalised q, k and per-head output RMSNorm."""

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        d_k: int | None = None,
        d_v: int | None = None,
        conv: bool = False,
        conv_kernel: int = 4,
        chunk_size: int = 32,
        decay: bool | str = False,
        decay_init: float | list[float] | None = None,
    ) -> None:
        super().__init__()
        if decay not in (False, "constant"):
            raise ValueError(f"decay must be false or 'constant', got {decay!r}")
        if decay_init is not None and decay != "constant":
            raise ValueError("decay_init needs decay: constant")
        if d_model % heads and (d_k is None or d_v is None):
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        self.d_model = d_model
        self.heads = heads
        self.d_k = d_k if d_k is not None else d_model // heads
        self.d_v = d_v if d_v is not None else d_model // heads
        self.use_conv = conv
        self.chunk_size = chunk_size
        hk, hv = heads * self.d_k, heads * self.d_v
        self.q_proj = nn.Linear(d_model, hk, bias=False)
        self.k_proj = nn.Linear(d_model, hk, bias=False)
        self.v_proj = nn.Linear(d_model, hv, bias=False)
        if conv:
            self.conv = ShortConv(2 * hk + hv, conv_kernel)
        self.use_decay = decay
        if decay == "constant":
            self.decay_logit = nn.Parameter(initial_logits(heads, decay_init))
        self.out_norm = nn.RMSNorm(self.d_v, eps=1e-6)
        self.out_proj = nn.Linear(hv, d_model, bias=False)

    def state_size(self) -> int:
        """H * d_k * d_v: the matrix memory only (conv tail and parameters excluded)."""
        return self.heads * self.d_k * self.d_v

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Project, (convolve,) normalise: kernel args (q, k, v, log_decay, S0), log_decay None
        without decay; state dict(S, conv)."""
        s0 = None if state is None else state["S"]
        tail = None if state is None else state["conv"]
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        new_tail = None
        if self.use_conv:
            qkv, new_tail = self.conv(torch.cat([q, k, v], dim=-1), tail)
            hk = self.heads * self.d_k
            q, k, v = F.silu(qkv).split([hk, hk, self.heads * self.d_v], dim=-1)
        q = l2_normalize(split_heads(q, self.heads))
        k = l2_normalize(split_heads(k, self.heads))
        v = split_heads(v, self.heads)
        log_decay = None
        if self.use_decay:
            b, t, _ = x.shape
            log_decay = F.logsigmoid(self.decay_logit)[None, :, None].expand(b, -1, t)
        return (q, k, v, log_decay, s0), {"conv": new_tail}

    def kernel(self, form: Form) -> Kernel:
        return pick_form(form, scalar_decay_chunked, scalar_decay_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        o = merge_heads(self.out_norm(o))
        return self.out_proj(o), {"S": s, "conv": ctx["conv"]}
