"""The paper's RWKV-7 reference cell: decay, then an in-context rank-1 erase, then a write.

Follows the reference RWKV-7 of the paper (JIBSIL/dualgoose, dualgoose/rwkv7_ref.py, mixers.py
and model.py at 824f4b73), a stripped-down RWKV-7 time mix, so its arms can be compared against
ours on the same state. One biased linear map gives v, k, r, w, kappa and a (d each); with
``conv`` a causal depthwise convolution with a bias, then SiLU, acts on the raw v, k, r. Then
w = sigmoid(.) (about 0.5 at the default initialisation), a = sigmoid(.) * w, and
k, r, kappa = tanh(.) / sqrt(dk); v stays raw. The paper updates a (dv x dk) state P as
    P <- P Diag(w);  P <- P - (P (a * kappa)) kappa^T  (``rank`` on);  P <- P + v k^T;  o = P r.
In this project's (dk x dv) orientation S = P^T that is
    S_t = (Diag(w_t) - kappa_t (a_t * kappa_t * w_t)^T) S_{t-1} + k_t v_t^T,   o_t = S_t^T r_t,
a DPLR transition (b = -kappa, a' = a * kappa * w: the erase reads the already decayed state,
so w folds into its read vector). Without ``rank`` it is gated linear attention,
S_t = Diag(w_t) S_{t-1} + k_t v_t^T. A biased linear map projects the read-out.

Where ours differs from the paper's: the recurrence runs on this project's chunkwise-parallel
kernels (`dplr`, or `gla` without rank) instead of a Python loop over time, with the loop
kept as the "recurrent" form; and ``heads`` (default 1, the paper's single head) may split the
width, so the budget can shape the cell to smaller states. None of RWKV-7's token shift,
GroupNorm, bonus term or output gate (see `rwkv7` for those): the paper's reference has none.
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
    merge_heads,
    pick_form,
    register,
    split_heads,
)
from arbench.cells.deltanet_ref import check_flag, check_shape_options
from arbench.cells.short_conv import SiluConv
from arbench.kernels.dplr import dplr_chunked, dplr_recurrent
from arbench.kernels.gla import gated_linear_attention_chunked, gated_linear_attention_recurrent

NAME = "rwkv7_ref"


@register(NAME)
class RWKV7Ref(SequenceMixer):
    """The paper's RWKV-7 reference: per-channel decay, optional rank-1 erase and short conv.

    State dict {"S": (B,H,dk,dk)}, plus "conv" (the v/k/r conv tail, (B, conv_kernel-1, 3d))
    when ``conv`` is on; carried between calls, it streams exactly.
    """

    def __init__(
        self,
        d_model: int,
        rank: bool = True,
        conv: bool = False,
        conv_kernel: int = 4,
        chunk_size: int = 16,
        heads: int = 1,
    ) -> None:
        super().__init__()
        check_flag(NAME, "rank", rank)
        check_flag(NAME, "conv", conv)
        check_shape_options(NAME, d_model, heads, conv_kernel, chunk_size)
        self.d_model, self.heads, self.d_k = d_model, heads, d_model // heads
        self.use_rank, self.use_conv, self.chunk_size = rank, conv, chunk_size
        # v, then k, r, w, kappa, a (d each): one biased map
        self.in_proj = nn.Linear(d_model, 6 * d_model)
        if conv:
            self.conv = SiluConv(3 * d_model, conv_kernel)  # over [v | k | r]
        self.out_proj = nn.Linear(d_model, d_model)

    def state_size(self) -> int:
        """heads * dk * dk (d_model^2 with one head): the matrix memory only."""
        return self.heads * self.d_k * self.d_k

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (r, k, v, log w, a', b, S0) with rank, (r, k, v, log w, S0) without."""
        s0 = None if state is None else state["S"]
        vkr, w, kappa, a = self.in_proj(x).split([3 * self.d_model] + [self.d_model] * 3, -1)
        new_state: dict[str, torch.Tensor] = {}
        if self.use_conv:
            tail = None if state is None else state.get("conv")
            vkr, new_state["conv"] = self.conv(vkr, tail)
        v, k, r = (split_heads(y, self.heads) for y in vkr.chunk(3, dim=-1))
        scale = self.d_k**-0.5
        k, r = torch.tanh(k) * scale, torch.tanh(r) * scale
        log_w = split_heads(F.logsigmoid(w), self.heads)
        if not self.use_rank:
            return (r, k, v, log_w, s0), new_state
        w = log_w.exp()
        kappa = split_heads(torch.tanh(kappa), self.heads) * scale
        a = split_heads(torch.sigmoid(a), self.heads) * w  # the paper's a, already times w
        # erase after decay: S <- (I - kappa (a kappa)^T) Diag(w) S, so the read vector is
        # a * kappa * w and the write direction -kappa
        return (r, k, v, log_w, a * kappa * w, -kappa, s0), new_state

    def kernel(self, form: Form) -> Kernel:
        if self.use_rank:
            return pick_form(form, dplr_chunked, dplr_recurrent, self.chunk_size)
        return pick_form(
            form,
            gated_linear_attention_chunked,
            gated_linear_attention_recurrent,
            self.chunk_size,
        )

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        """Biased out-projection of the merged heads; state dict(S, and conv when on)."""
        return self.out_proj(merge_heads(o)), {**ctx, "S": s}
