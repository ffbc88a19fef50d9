"""Gated delta-rule cells: rank-1 or diagonal transition, optional short conv, optional decay.

S <- a (I - b k k^T) S + b k v^T (`delta_rule`, kernels in `arbench.kernels.delta_rule`) or its
diagonal ablation S <- a (I - b Diag(k * k)) S + b k v^T (`diagonal`, `arbench.kernels.diagonal`),
with `gated_deltanet` the delta rule with decay and short convolution on. Every variant shares one
state shape (H, d_k, d_v), so state size is matched by construction; only the transition (rank-1
vs diagonal), the short convolution and the decay gate are toggled (the factorial's arms).
"""

from __future__ import annotations

from typing import Any, ClassVar

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
from arbench.kernels.delta_rule import delta_rule_chunked, delta_rule_recurrent
from arbench.kernels.diagonal import diagonal_chunked, diagonal_recurrent

DECAY_BIAS_INIT = 5.0  # alpha = sigmoid(.. + 5) starts near 0.993: a 100-token half-life
# Tuned at B=32, T=1024, d_k=d_v=32 on 2 CPU threads (forward+backward); the diagonal's tree of
# decayed blocks costs log2(C) levels, so it favours smaller chunks than the rank-1 WY form.
DEFAULT_CHUNK = {"delta": 32, "diagonal": 16}


def _elu1(x: torch.Tensor) -> torch.Tensor:
    return F.elu(x) + 1.0


# q/k feature maps applied after the projection (and convolution), before normalisation
FEATURE_MAPS = {"identity": lambda x: x, "silu": F.silu, "relu": F.relu, "elu1": _elu1}
KEY_NORMS = ("l2", "max")


class GatedDeltaCell(SequenceMixer):
    """Gated delta-rule family cell; `transition` picks the rank-1 or diagonal state update.

    Parameterisation knobs (docs/PROTOCOL.md records the pilots behind each default):
    `qk_bias` adds a bias to the q and k projections initialised to that value in every
    coordinate (or only the first of each head with `qk_bias_axis`), a shared component
    that lets a convolution-free cell read back its recent writes at initialisation;
    `key_bias` a bias on k alone (default init); `feature_map` a map on q and k
    (`FEATURE_MAPS`); `qk_norm` L2-normalises q and k (`key_norm` "max" scales k by its
    largest entry instead); beta = `beta_range` * sigmoid(linear + `beta_bias`);
    `decay_bias` initialises the decay gate's bias; `decay_init` the initial retentions of
    `decay: constant` (a float, or one per head; default sigmoid(3) or sigmoid(linspace(2, 7))).
    """

    transition: ClassVar[str] = "delta"

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        d_k: int | None = None,
        d_v: int | None = None,
        conv: bool = False,
        conv_kernel: int = 4,
        decay: bool | str = False,
        chunk_size: int | None = None,
        qk_bias: float | None = None,
        qk_bias_axis: bool = False,
        key_bias: bool = False,
        feature_map: str = "identity",
        qk_norm: bool = True,
        key_norm: str = "l2",
        beta_range: float = 1.0,
        beta_bias: float | None = None,
        decay_bias: float = DECAY_BIAS_INIT,
        decay_init: float | list[float] | None = None,
    ) -> None:
        super().__init__()
        if decay_init is not None and decay != "constant":
            raise ValueError("decay_init needs decay: constant")
        if decay not in (False, True, "constant"):
            raise ValueError(f"decay must be false, true or 'constant', got {decay!r}")
        if d_model % heads and (d_k is None or d_v is None):
            raise ValueError(f"d_model={d_model} not divisible by heads={heads}")
        if feature_map not in FEATURE_MAPS:
            raise ValueError(
                f"feature_map must be one of {sorted(FEATURE_MAPS)}, got {feature_map!r}"
            )
        if key_norm not in KEY_NORMS:
            raise ValueError(f"key_norm must be one of {KEY_NORMS}, got {key_norm!r}")
        if not 0.0 < beta_range <= 2.0:
            raise ValueError(
                f"beta_range must be in (0, 2] (a contractive update), got {beta_range}"
            )
        if qk_bias_axis and qk_bias is None:
            raise ValueError("qk_bias_axis needs qk_bias (the initial value to place on the axis)")
        self.d_model = d_model
        self.heads = heads
        self.d_k = d_k if d_k is not None else d_model // heads
        self.d_v = d_v if d_v is not None else d_model // heads
        self.use_conv = conv
        self.use_decay = decay
        if chunk_size is None:
            chunk_size = DEFAULT_CHUNK[self.transition]
        self.chunk_size = chunk_size
        self.feature_map, self.qk_norm, self.key_norm = feature_map, qk_norm, key_norm
        self.beta_range = beta_range
        hk, hv = heads * self.d_k, heads * self.d_v
        self.q_proj = nn.Linear(d_model, hk, bias=qk_bias is not None)
        self.k_proj = nn.Linear(d_model, hk, bias=key_bias or qk_bias is not None)
        if qk_bias is not None:
            init = torch.zeros(heads, self.d_k)
            init[:, : 1 if qk_bias_axis else self.d_k] = qk_bias
            with torch.no_grad():
                self.q_proj.bias.copy_(init.flatten())
                self.k_proj.bias.copy_(init.flatten())
        self.v_proj = nn.Linear(d_model, hv, bias=False)
        if conv:
            self.q_conv = ShortConv(hk, conv_kernel)
            self.k_conv = ShortConv(hk, conv_kernel)
            self.v_conv = ShortConv(hv, conv_kernel)
        self.beta_proj = nn.Linear(d_model, heads)
        if beta_bias is not None:
            nn.init.constant_(self.beta_proj.bias, beta_bias)
        if decay == "constant":
            # one learned, input-independent decay per head; initial values spread from
            # fast forgetting to near-retention so heads can specialise
            self.decay_logit = nn.Parameter(initial_logits(heads, decay_init))
        elif decay:
            self.decay_proj = nn.Linear(d_model, heads)
            nn.init.constant_(self.decay_proj.bias, decay_bias)
        self.out_proj = nn.Linear(hv, d_model, bias=False)

    def state_size(self) -> int:
        """H * d_k * d_v: the matrix memory only (conv tails and parameters excluded)."""
        return self.heads * self.d_k * self.d_v

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (q, k, v, beta, log_alpha, S0); state dict(S=(B,H,dk,dv), conv=tails)."""
        s0 = None if state is None else state["S"]
        tails = None if state is None else state.get("conv")
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        new_tails = None
        if self.use_conv:
            tq, tk, tv = tails if tails is not None else (None, None, None)
            q, tq = self.q_conv(q, tq)
            k, tk = self.k_conv(k, tk)
            v, tv = self.v_conv(v, tv)
            new_tails = (tq, tk, tv)
        phi = FEATURE_MAPS[self.feature_map]
        q, k = split_heads(phi(q), self.heads), split_heads(phi(k), self.heads)
        if self.qk_norm:
            q = l2_normalize(q)
            if self.key_norm == "max":
                k = k / k.abs().amax(-1, keepdim=True).clamp_min(1e-6)
            else:
                k = l2_normalize(k)
        v = split_heads(v, self.heads)
        beta = (self.beta_range * torch.sigmoid(self.beta_proj(x))).transpose(1, 2)
        log_alpha = None
        if self.use_decay == "constant":
            b, t, _ = x.shape
            log_alpha = F.logsigmoid(self.decay_logit)[None, :, None].expand(b, -1, t)
        elif self.use_decay:
            log_alpha = F.logsigmoid(self.decay_proj(x)).transpose(1, 2)
        return (q, k, v, beta, log_alpha, s0), {"conv": new_tails}

    def kernel(self, form: Form) -> Kernel:
        if self.transition == "delta":
            return pick_form(form, delta_rule_chunked, delta_rule_recurrent, self.chunk_size)
        return pick_form(form, diagonal_chunked, diagonal_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        return self.out_proj(merge_heads(o)), {"S": s, "conv": ctx["conv"]}


@register("delta_rule")
class DeltaRuleCell(GatedDeltaCell):
    """Rank-1 transition S <- a (I - b k k^T) S + b k v^T."""

    transition: ClassVar[str] = "delta"


@register("diagonal")
class DiagonalCell(GatedDeltaCell):
    """Diagonal ablation S <- a (I - b Diag(k * k)) S + b k v^T (same state, same gates)."""

    transition: ClassVar[str] = "diagonal"


@register("gated_deltanet")
class GatedDeltaNetCell(DeltaRuleCell):
    """Delta-rule preset with decay and short convolution on by default."""

    def __init__(self, d_model: int, **options: Any) -> None:
        options.setdefault("decay", True)
        options.setdefault("conv", True)
        super().__init__(d_model, **options)
