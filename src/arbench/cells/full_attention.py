"""Full softmax attention: every position attends to every position (no causal mask).

The mixer of the paper's attention control (JIBSIL/dualgoose @824f4b73, ``dualgoose/model.py``
``TinyAttentionBlock``): one fused projection with bias to (q, k, v), in that order, split into
``heads`` heads of d / heads channels; scaled dot-product softmax attention over the whole
sequence (scale head_dim^-1/2); the heads concatenated and a biased output projection. The
model supplies the positions (the denoiser's learned table), so the cell has none of its own.

Being non-causal it carries no state between calls: it reads the whole sequence at once and
refuses a carried state. In the denoiser it runs as ``direction: full``, one cell over the
sequence (`arbench.models.denoiser`), inside the adaLN-Zero block of ``block: adaln_zero``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import FORMS, Form, SequenceMixer, State, merge_heads, register, split_heads


@register("full_attention")
class FullAttention(SequenceMixer):
    """Non-causal multi-head softmax attention with biased projections (no carried state)."""

    single_form = True  # no recurrence: its "recurrent" form is the same attention
    causal = False

    def __init__(self, d_model: int, heads: int = 1) -> None:
        super().__init__()
        if heads < 1 or d_model % heads:
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        self.d_model = d_model
        self.heads = heads
        self.head_dim = d_model // heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def state_size(self, seq_len: int | None = None) -> int:
        """The keys and values it attends over, 2 * d_model per token (0 without a length:
        there is no fixed-size state to report)."""
        return 0 if seq_len is None else 2 * self.d_model * seq_len

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        """Map (B,T,d_model) to (B,T,d_model), every output reading every input; (y, None)."""
        if state is not None:
            raise ValueError("full attention is non-causal: it cannot stream with a carried state")
        if form not in FORMS:
            raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")
        q, k, v = (split_heads(y, self.heads) for y in self.qkv(x).chunk(3, dim=-1))
        return self.out(merge_heads(F.scaled_dot_product_attention(q, k, v))), None
