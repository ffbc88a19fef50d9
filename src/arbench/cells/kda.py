"""Kimi Delta Attention (KDA): the per-channel gated delta rule of Kimi Linear / Kimi K3.

Per head: S_t = (I - beta_t k_t k_t^T) Diag(alpha_t) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t,
with log alpha_t = g_min * sigmoid(e^A * z_t) in [g_min, 0] (g_min = -5), z_t a linear projection
of x_t plus a bias. q, k, v pass a short causal conv and SiLU; q and k are L2-normalised (q also
scaled by dk^-1/2); beta_t = sigmoid(linear). Output: per-head RMSNorm times a full-rank sigmoid
gate, then an output projection. At this tiny width the low-rank gate projections of the
reference implementation are replaced by full linear maps.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import Form, Kernel, SequenceMixer, State, l2_normalize, pick_form, register
from arbench.cells.short_conv import ShortConv
from arbench.kernels.kda import kda_chunked, kda_recurrent

G_MIN = -5.0  # lower bound of the per-step per-channel log-decay


def kda_log_decay(z: torch.Tensor, a_log: torch.Tensor) -> torch.Tensor:
    """Lower-bounded log-decay g_min * sigmoid(e^A * z), in [g_min, 0]; A broadcasts over z."""
    return G_MIN * torch.sigmoid(a_log.exp() * z)


@register("kda")
class KimiDeltaAttention(SequenceMixer):
    """KDA cell; state dict {"S": (B,H,dk,dv), "conv": short-conv tail} streams exactly."""

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        d_k: int | None = None,
        d_v: int | None = None,
        conv_kernel: int = 4,
        chunk_size: int = 16,
    ) -> None:
        super().__init__()
        if d_model % heads and (d_k is None or d_v is None):
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        self.heads = heads
        self.d_k = d_k or d_model // heads
        self.d_v = d_v or d_model // heads
        self.chunk_size = chunk_size
        hk, hv = heads * self.d_k, heads * self.d_v
        self.q_proj = nn.Linear(d_model, hk, bias=False)
        self.k_proj = nn.Linear(d_model, hk, bias=False)
        self.v_proj = nn.Linear(d_model, hv, bias=False)
        self.conv = ShortConv(2 * hk + hv, conv_kernel)
        self.f_proj = nn.Linear(d_model, hk)  # z: decay pre-activation
        self.a_log = nn.Parameter(torch.zeros(heads, self.d_k))
        self.b_proj = nn.Linear(d_model, heads)
        self.g_proj = nn.Linear(d_model, hv)  # full-rank output gate
        self.o_norm = nn.RMSNorm(self.d_v, eps=1e-5)
        self.o_proj = nn.Linear(hv, d_model, bias=False)
        with torch.no_grad():
            # Initial per-step decays -g spread log-uniformly over [1e-3, 0.5] across channels.
            target = torch.logspace(math.log10(1e-3), math.log10(0.5), self.d_k)
            self.f_proj.bias.copy_(torch.logit(target / -G_MIN).repeat(heads))

    def state_size(self) -> int:
        """Recurrent state elements: heads * dk * dv."""
        return self.heads * self.d_k * self.d_v

    def log_decay(self, x: torch.Tensor) -> torch.Tensor:
        """Per-channel log-decay (B,H,T,dk) for input x (B,T,d_model)."""
        return self._log_decay_of(self.f_proj(x))

    def _log_decay_of(self, z: torch.Tensor) -> torch.Tensor:
        """Log-decay (B,H,T,dk) from the decay projection's output z (B,T,H*dk)."""
        return kda_log_decay(
            z.unflatten(-1, (self.heads, self.d_k)).transpose(1, 2), self.a_log[:, None]
        )

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (q, k, v, beta, log_alpha, S0) after the short conv, SiLU and L2 norms."""
        h, dk, dv = self.heads, self.d_k, self.d_v
        s0 = None if state is None else state["S"]
        tail = None if state is None else state["conv"]
        # Projections sharing an input run as one product of stacked weights (same values):
        # q, k, v straight into the conv, and the decay with the output gate.
        qkv_weight = torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight])
        qkv, tail = self.conv(F.linear(x, qkv_weight), tail)
        q, k, v = F.silu(qkv).split([h * dk, h * dk, h * dv], dim=-1)
        q, k, v = (y.unflatten(-1, (h, -1)).transpose(1, 2) for y in (q, k, v))  # (B,H,T,d)
        q = l2_normalize(q, scale=dk**-0.5)
        k = l2_normalize(k)
        beta = torch.sigmoid(self.b_proj(x)).transpose(1, 2)  # (B,H,T)
        z, gate = F.linear(
            x,
            torch.cat([self.f_proj.weight, self.g_proj.weight]),
            torch.cat([self.f_proj.bias, self.g_proj.bias]),
        ).split([h * dk, h * dv], dim=-1)
        return (q, k, v, beta, self._log_decay_of(z), s0), {"gate": gate, "conv": tail}

    def kernel(self, form: Form) -> Kernel:
        return pick_form(form, kda_chunked, kda_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        """Per-head RMSNorm, sigmoid output gate, out-projection; state dict(S, conv)."""
        o = self.o_norm(o.transpose(1, 2))  # (B,T,H,dv), normalised per head
        o = o.flatten(-2) * torch.sigmoid(ctx["gate"])
        return self.o_proj(o), {"S": s, "conv": ctx["conv"]}
