"""The paper's DeltaNet reference cell: a plain delta rule, optionally with a per-channel decay.

Follows the reference DeltaNet of the paper (JIBSIL/dualgoose, dualgoose/mixers.py and
model.py at 824f4b73), so its arms can be compared against ours on the same state. Per head,
in this project's (dk x dv) orientation:
    S_t = (I - beta_t k_t k_t^T) Diag(w_t) S_{t-1} + beta_t k_t v_t^T,   o_t = S_t^T q_t,
with Diag(w_t) = I unless ``decay`` is on. One biased linear map gives q, k, v, beta (one
per token and head) and, with ``decay``, the per-key-channel retention w = sigmoid(.) (about
0.5 at the default initialisation); with ``conv`` a causal depthwise convolution with a bias,
then SiLU, acts on the raw q, k, v projections. Then q = tanh(q) / sqrt(dk) (not normalised),
k is L2-normalised, v stays raw, beta = sigmoid(.). A biased linear map projects the read-out.

Where ours differs from the paper's: the recurrence runs on this project's chunkwise-parallel
kernels (`delta_rule` without decay, `kda` with it: decay before erase is exactly KDA's
transition) instead of a Python loop over time, with the loop kept as the "recurrent" form;
and ``heads`` (default 1, the paper's single head) may split the width, so the budget can
shape the cell to smaller states.
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
from arbench.cells.short_conv import SiluConv
from arbench.kernels.delta_rule import delta_rule_chunked, delta_rule_recurrent
from arbench.kernels.kda import kda_chunked, kda_recurrent
from arbench.settings import whole_number

NAME = "deltanet_ref"
# chunk sizes of the kernels' own cells: the WY delta rule (`delta_rule`) and KDA (`kda`)
DEFAULT_CHUNK = {False: 32, True: 16}


def check_flag(cell: str, name: str, value: object) -> None:
    """Fail early, naming the option, when a on/off option is not a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{cell}: {name} must be true or false, got {value!r}")


def check_shape_options(
    cell: str, d_model: int, heads: int, conv_kernel: int, chunk_size: int
) -> None:
    """Fail early, naming the option, on a head count, conv kernel or chunk size that cannot
    work (the chunked kernels take power-of-two chunks)."""
    if not isinstance(heads, int) or heads < 1 or d_model % heads:
        raise ValueError(
            f"{cell}: heads must be a positive divisor of d_model={d_model}, got {heads!r}"
        )
    whole_number(conv_kernel, f"{cell}: conv_kernel")
    if not isinstance(chunk_size, int) or chunk_size < 1 or chunk_size & (chunk_size - 1):
        raise ValueError(f"{cell}: chunk_size must be a power of two, got {chunk_size!r}")


@register(NAME)
class DeltaNetRef(SequenceMixer):
    """The paper's DeltaNet reference: delta rule, optional per-channel decay and short conv.

    State dict {"S": (B,H,dk,dv)}, plus "conv" (the q/k/v conv tail, (B, conv_kernel-1, 3d))
    when ``conv`` is on; carried between calls, it streams exactly.
    """

    def __init__(
        self,
        d_model: int,
        decay: bool = False,
        conv: bool = False,
        conv_kernel: int = 4,
        chunk_size: int | None = None,
        heads: int = 1,
    ) -> None:
        super().__init__()
        check_flag(NAME, "decay", decay)
        check_flag(NAME, "conv", conv)
        chunk_size = DEFAULT_CHUNK[decay] if chunk_size is None else chunk_size
        check_shape_options(NAME, d_model, heads, conv_kernel, chunk_size)
        self.d_model, self.heads, self.d_k = d_model, heads, d_model // heads
        self.use_decay, self.use_conv, self.chunk_size = decay, conv, chunk_size
        # q, k, v (d each), beta (one per head), then w (d) with decay: one biased map
        self._widths = [3 * d_model, heads] + ([d_model] if decay else [])
        self.in_proj = nn.Linear(d_model, sum(self._widths))
        if conv:
            self.conv = SiluConv(3 * d_model, conv_kernel)
        self.out_proj = nn.Linear(d_model, d_model)

    def state_size(self) -> int:
        """heads * dk * dv (d_model^2 with one head): the matrix memory only."""
        return self.heads * self.d_k * self.d_k

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (q, k, v, beta, log w or None, S0); the conv tail goes to the context."""
        s0 = None if state is None else state["S"]
        qkv, beta, *w = self.in_proj(x).split(self._widths, dim=-1)
        new_state: dict[str, torch.Tensor] = {}
        if self.use_conv:
            tail = None if state is None else state.get("conv")
            qkv, new_state["conv"] = self.conv(qkv, tail)
        q, k, v = (split_heads(y, self.heads) for y in qkv.chunk(3, dim=-1))
        q = torch.tanh(q) * self.d_k**-0.5
        k = l2_normalize(k)
        beta = torch.sigmoid(beta).transpose(1, 2)  # (B,H,T)
        log_w = split_heads(F.logsigmoid(w[0]), self.heads) if self.use_decay else None
        return (q, k, v, beta, log_w, s0), new_state

    def kernel(self, form: Form) -> Kernel:
        if self.use_decay:
            return pick_form(form, kda_chunked, kda_recurrent, self.chunk_size)
        return pick_form(form, delta_rule_chunked, delta_rule_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        """Biased out-projection of the merged heads; state dict(S, and conv when on)."""
        return self.out_proj(merge_heads(o)), {**ctx, "S": s}
