"""RWKV-7 ("Goose") time-mixing as a cell: a DPLR state update with in-context learning rate.

Per head, in this project's (dk x dv) orientation:
    S_t = (Diag(w_t) - (a_t * kk_t) kk_t^T) S_{t-1} + k~_t v_t^T,   o_t = S_t^T r_t,
which is RWKV-7's wkv_t = wkv_{t-1} (Diag(w_t) - kk_t^T (a_t * kk_t)) + v_t^T k~_t transposed.

Kept from RWKV-7: token-shift interpolation with learned per-channel mixes (optional); decay
log w = -0.6065 * sigmoid(.) so w in (e^-0.6065, 1); in-context learning rate a = sigmoid(.);
removal key kk = normalize(k * k_k) per head; replacement key k~ = k * (1 + (a - 1) * k_a);
per-head GroupNorm of the read-out; the "bonus" term (sum(r * k~ * r_k) per head) * v; an
output gate; output projection. Optional (`conv`, off by default): the "armed" variant, a
depthwise short causal convolution on the r, k and v projections before they split into heads
(one `ShortConv` over their concatenation, the same per-channel filters; its tail is carried as
state["conv"]). Simplified: the low-rank (LoRA, tanh) projections for w, a and
the gate become single linear maps (gate = sigmoid(linear)); no value residual across layers
(v_first), since a cell does not know its layer index; no channel-mix (the model's MLP does it).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import Form, Kernel, SequenceMixer, State, l2_normalize, pick_form, register
from arbench.cells.short_conv import ShortConv
from arbench.kernels.dplr import dplr_chunked, dplr_recurrent, rwkv7_to_dplr

LOG_W_SCALE = -0.606531  # -e^-0.5: log w = LOG_W_SCALE * sigmoid(.)
_MIXES = ("r", "w", "k", "v", "a", "g")


@register("rwkv7")
class RWKV7TimeMix(SequenceMixer):
    """RWKV-7 time-mix cell; state dict {"S": (B,H,dk,dk), "shift": last input (B,1,d_model)},
    plus "conv" (the r/k/v short-conv tail, (B, conv_kernel-1, 3*H*dk)) when ``conv`` is on."""

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        d_k: int | None = None,
        chunk_size: int = 16,
        token_shift: bool = True,
        conv: bool = False,
        conv_kernel: int = 4,
    ) -> None:
        super().__init__()
        if d_model % heads and d_k is None:
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        self.heads = heads
        self.d_k = d_k or d_model // heads
        self.chunk_size = chunk_size
        self.token_shift = token_shift
        self.use_conv = conv
        inner = heads * self.d_k
        if token_shift:
            # Per-channel interpolation towards the previous token, one row per projection.
            ramp = torch.linspace(0.0, 1.0, d_model)
            self.mix = nn.Parameter(0.5 * (1.0 - ramp[None, :] ** 2).repeat(len(_MIXES), 1))
        self.r_proj = nn.Linear(d_model, inner, bias=False)
        self.k_proj = nn.Linear(d_model, inner, bias=False)
        self.v_proj = nn.Linear(d_model, inner, bias=False)
        self.w_proj = nn.Linear(d_model, inner)
        self.a_proj = nn.Linear(d_model, inner)
        self.g_proj = nn.Linear(d_model, inner, bias=False)
        if conv:
            # depthwise, so one conv over [r | k | v] is three independent per-channel convs
            self.conv = ShortConv(3 * inner, conv_kernel)
        self.k_k = nn.Parameter(torch.full((inner,), 0.85))
        self.k_a = nn.Parameter(torch.ones(inner))
        self.r_k = nn.Parameter(torch.zeros(heads, self.d_k))
        self.ln_x = nn.GroupNorm(heads, inner, eps=64e-5)
        self.o_proj = nn.Linear(inner, d_model, bias=False)
        with torch.no_grad():
            # Initial per-step decays -log w spread log-uniformly over [1e-3, 0.5] per head.
            target = torch.logspace(math.log10(1e-3), math.log10(0.5), self.d_k)
            self.w_proj.bias.copy_(torch.logit(target / -LOG_W_SCALE).repeat(heads))

    def _projections(self) -> tuple[nn.Linear, ...]:
        """The six input projections, in `_MIXES` order."""
        return (self.r_proj, self.w_proj, self.k_proj, self.v_proj, self.a_proj, self.g_proj)

    def _bias(self, proj: nn.Linear) -> torch.Tensor:
        return proj.bias if proj.bias is not None else proj.weight.new_zeros(proj.out_features)

    def state_size(self) -> int:
        """Recurrent state elements: heads * dk * dk (value width equals key width)."""
        return self.heads * self.d_k * self.d_k

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Token shift and projections: DPLR kernel args (r, k~, v, log w, a, b, S0)."""
        h, dk = self.heads, self.d_k
        s0 = None if state is None else state["S"]
        new_state: dict[str, torch.Tensor] = {}
        projections = self._projections()
        weight = torch.stack([p.weight for p in projections])  # (6, inner, d_model)
        bias = torch.stack([self._bias(p) for p in projections])[:, None]  # (6, 1, inner)
        if self.token_shift:
            prev = x.new_zeros(x.shape[0], 1, x.shape[2]) if state is None else state["shift"]
            new_state["shift"] = x[:, -1:] if x.shape[1] else prev
            delta = torch.cat([prev, x[:, :-1]], dim=1) - x  # previous token minus this one
            # all six interpolations x + (x_prev - x) * mix as one (6, B*T, d) tensor, and the
            # six projections as one batched product (one pass each way instead of 6 x 3)
            mixed = torch.addcmul(x.flatten(0, 1), delta.flatten(0, 1), self.mix[:, None, :])
            proj = torch.baddbmm(bias, mixed, weight.transpose(1, 2))  # (6, B*T, inner)
            proj = proj.unflatten(1, x.shape[:2])
        else:
            flat = F.linear(x, weight.flatten(0, 1), bias.flatten())  # (B, T, 6 * inner)
            proj = flat.unflatten(-1, (len(_MIXES), -1)).movedim(-2, 0)
        xr, xw, xk, xv, xa, xg = proj.unbind(0)
        if self.use_conv:
            tail = None if state is None else state.get("conv")
            rkv, new_state["conv"] = self.conv(torch.cat([xr, xk, xv], dim=-1), tail)
            xr, xk, xv = rkv.chunk(3, dim=-1)

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.unflatten(-1, (h, dk)).transpose(1, 2)  # (B,H,T,dk)

        r, k, v = heads(xr), heads(xk), heads(xv)
        log_w = heads(LOG_W_SCALE * torch.sigmoid(xw))
        a = heads(torch.sigmoid(xa))
        kk = l2_normalize(k * self.k_k.view(h, 1, dk))
        k = k * (1.0 + (a - 1.0) * self.k_a.view(h, 1, dk))
        kw, log_w, ra, rb = rwkv7_to_dplr(k, log_w, kk, a)
        ctx = {"r": r, "k": k, "v": v, "gate": xg, "state": new_state}
        return (r, kw, v, log_w, ra, rb, s0), ctx

    def kernel(self, form: Form) -> Kernel:
        return pick_form(form, dplr_chunked, dplr_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        """GroupNorm per head, bonus term, output gate and projection."""
        h, dk = self.heads, self.d_k
        r, k, v = ctx["r"], ctx["k"], ctx["v"]
        o = o.transpose(1, 2)  # (B,T,H,dk)
        # GroupNorm(heads) of the (B*T, H*dk) read-out, as a layer norm over each head's dk
        # channels (the same values; about 3x faster forward and backward on CPU)
        if h == 1:
            o = F.layer_norm(o, (dk,), self.ln_x.weight, self.ln_x.bias, self.ln_x.eps)
        else:
            o = F.layer_norm(o, (dk,), eps=self.ln_x.eps)
            o = torch.addcmul(self.ln_x.bias.view(h, dk), o, self.ln_x.weight.view(h, dk))
        bonus = (r * k * self.r_k[:, None, :]).sum(-1, keepdim=True) * v  # (B,H,T,dk)
        o = (o + bonus.transpose(1, 2)).flatten(-2) * torch.sigmoid(ctx["gate"])
        return self.o_proj(o), {**ctx["state"], "S": s}
