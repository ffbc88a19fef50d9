"""A pure-torch Mamba-2 (SSD) mixer: the scalar-decay selective SSM baseline.

Per token: in-projection to (z, x, B, C, dt); a causal depthwise short conv (with bias) + SiLU
over (x, B, C); per head h, with A_h = -exp(A_log_h) and dt = softplus(dt_raw + dt_bias):
    S_t = exp(dt_t A_h) S_{t-1} + B_t (dt_t x_t)^T,   y_t = S_t^T C_t + D_h x_t,
i.e. scalar-decay linear attention with q = C, k = B (one group, shared by all heads),
v = dt x. Then y is gated by SiLU(z), RMS-normalised (gate before norm, as in Mamba-2) and
out-projected. State per layer: heads * d_state * head_dim. conv_kernel=1 neutralises the
short conv (it becomes a per-channel scale plus the conv bias).

State-matched setting (`STATE_MATCHED_1024`): heads=4, d_state=16, head_dim=16 (expand 2) at
d_model=32 gives exactly 1,024 state elements and 7,852 parameters (conv_kernel=4).

`mamba2_ref` (`Mamba2Ref`) is the paper's pure-PyTorch state-matched Mamba-2 reference
(JIBSIL/dualgoose, dualgoose/mixers.py and model.py at 824f4b73) built on this cell through
the variant knobs only it declares (`Mamba2Variant`): biased in/out projections, no RMSNorm,
and A = -1, dt_bias = 0 at initialisation (a decay of about 0.5 per token).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import Form, Kernel, SequenceMixer, State, pick_form, register
from arbench.cells.short_conv import ShortConv, conv1d_bias
from arbench.kernels.scalar_decay import scalar_decay_chunked, scalar_decay_recurrent

DT_MIN, DT_MAX, DT_FLOOR = 1e-3, 1e-1, 1e-4  # standard Mamba dt initialisation range
A_INIT_RANGE = (1.0, 16.0)  # A = -U(1, 16) per head, as in Mamba-2

STATE_MATCHED_1024: dict[str, int] = {"heads": 4, "d_state": 16, "head_dim": 16}
INITS = ("standard", "half")


@dataclass(frozen=True)
class Mamba2Variant:
    """How a Mamba-2 cell departs from `mamba2` (whose values are these defaults).

    bias: biases on in_proj and out_proj. gated_norm: RMSNorm after the SiLU(z) gate (off:
    y * SiLU(z) goes straight to out_proj). init: "standard" draws A = -U(1, 16) and dt in
    [1e-3, 1e-1] per head (Mamba-2's); "half" sets A_log = 0 (A = -1) and dt_bias = 0, so
    dt = softplus(projection) is about ln 2 and the decay exp(dt A) about 0.5 per token.
    """

    bias: bool = False
    gated_norm: bool = True
    init: str = "standard"

    def check(self, cell: str) -> None:
        """Fail early, naming the option, on a value it cannot take."""
        for name in ("bias", "gated_norm"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"{cell}: {name} must be true or false, got {getattr(self, name)!r}"
                )
        if self.init not in INITS:
            raise ValueError(f"{cell}: init must be one of {INITS}, got {self.init!r}")


def mamba2_state_matched(d_model: int = 32, **overrides: Any) -> Mamba2Cell:
    """Mamba-2 with exactly 1,024 state elements (4 heads x 16 state x 16 head_dim)."""
    return Mamba2Cell(d_model, **{**STATE_MATCHED_1024, **overrides})


def resolve_head_dim(d_model: int, heads: int, expand: int, head_dim: int | None) -> int:
    """The head width: as given, or expand * d_model split over the heads (shared with the
    fused cell, so the same options give both the same state)."""
    if head_dim is not None:
        return head_dim
    if (expand * d_model) % heads:
        raise ValueError(f"expand*d_model={expand * d_model} not divisible by {heads}")
    return expand * d_model // heads


@register("mamba2")
class Mamba2Cell(SequenceMixer):
    """Mamba-2 (SSD) mixer; head_dim defaults to expand * d_model / heads.

    ``variant`` takes the `Mamba2Variant` knobs (bias, gated_norm, init), but only those a
    subclass declares as its own constructor options (as `Mamba2Ref` does): `mamba2` itself
    declares none, so its options stay those of `mamba2_fused` and it is built as always.
    """

    def __init__(
        self,
        d_model: int,
        heads: int = 4,
        d_state: int = 16,
        head_dim: int | None = None,
        expand: int = 2,
        conv_kernel: int = 4,
        chunk_size: int = 32,
        **variant: Any,
    ) -> None:
        super().__init__()
        undeclared = sorted(set(variant) - self.option_names())
        if undeclared:
            raise TypeError(f"{type(self).__name__} got unexpected options {undeclared}")
        spec = Mamba2Variant(**variant)
        spec.check(type(self).__name__)
        head_dim = resolve_head_dim(d_model, heads, expand, head_dim)
        self.d_model = d_model
        self.heads = heads
        self.d_state = d_state
        self.head_dim = head_dim
        self.d_inner = heads * head_dim
        self.chunk_size = chunk_size
        conv_ch = self.d_inner + 2 * d_state
        self._in_widths = [self.d_inner, conv_ch, heads]  # z, (x, B, C), dt
        self.in_proj = nn.Linear(d_model, sum(self._in_widths), bias=spec.bias)
        self.conv = ShortConv(conv_ch, conv_kernel)
        self.conv_bias = nn.Parameter(torch.zeros(conv_ch))
        if spec.init == "standard":
            a = torch.empty(heads).uniform_(*A_INIT_RANGE)
            self.A_log = nn.Parameter(a.log())
            dt = torch.empty(heads).uniform_(math.log(DT_MIN), math.log(DT_MAX)).exp()
            dt = dt.clamp_min(DT_FLOOR)
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^{-1}(dt)
        else:  # "half": A = -1, dt = softplus(projection)
            self.A_log = nn.Parameter(torch.zeros(heads))
            self.dt_bias = nn.Parameter(torch.zeros(heads))
        self.D = nn.Parameter(torch.ones(heads))
        self.norm = nn.RMSNorm(self.d_inner, eps=1e-5) if spec.gated_norm else None
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=spec.bias)

    def state_size(self) -> int:
        """heads * d_state * head_dim: the SSM state only (conv tail and parameters excluded)."""
        return self.heads * self.d_state * self.head_dim

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (C, B, dt*x, dt*A, S0) with C, B shared by all heads (head axis 1)."""
        s0 = None if state is None else state["S"]
        tail = None if state is None else state["conv"]
        b, t, _ = x.shape
        h, p, n = self.heads, self.head_dim, self.d_state
        # Three products with slices of one weight: same values as one in_proj(x).split, but
        # no odd-width GEMM (d_inner + conv channels + heads is odd; about 1.5x slower on CPU)
        # and no concatenation of the three gradients in the backward.
        widths, bias = self._in_widths, self.in_proj.bias
        biases = [None] * 3 if bias is None else bias.split(widths)
        z, xbc, dt_raw = (
            F.linear(x, w, b)
            for w, b in zip(self.in_proj.weight.split(widths), biases, strict=True)
        )
        xbc, new_tail = self.conv(xbc, tail)  # the bias outside: see ShortConv.forward
        xs, bmat, cmat = F.silu(xbc + self.conv_bias).split([self.d_inner, n, n], dim=-1)
        dt = F.softplus(dt_raw + self.dt_bias)  # (B,T,H)
        log_decay = (dt * -self.A_log.exp()).transpose(1, 2)  # (B,H,T): dt * A, A < 0
        # v = dt x with dt repeated over each head's P columns: a product with a full tensor,
        # not one broadcast along the short innermost axis (several times slower on CPU)
        dt_cols = dt[..., None].expand(b, t, h, p).reshape(b, t, h * p)
        v = (xs * dt_cols).view(b, t, h, p).transpose(1, 2)  # (B,H,T,P), (B,T,H,P) in memory
        q, k = cmat[:, None], bmat[:, None]  # (B,1,T,N): one group shared by all heads
        return (q, k, v, log_decay, s0), {"xs": xs, "z": z, "conv": new_tail}

    def kernel(self, form: Form) -> Kernel:
        return pick_form(form, scalar_decay_chunked, scalar_decay_recurrent, self.chunk_size)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        """D skip, SiLU(z) gate, RMSNorm (unless off), out-projection; state dict(S=(B,H,N,P),
        conv=tail)."""
        xs = ctx["xs"]  # (B,T,H*P)
        b, t, _ = xs.shape
        d_cols = self.D[:, None].expand(self.heads, self.head_dim).reshape(self.d_inner)
        y = torch.addcmul(o.transpose(1, 2).reshape(b, t, self.d_inner), xs, d_cols)
        y = y * F.silu(ctx["z"])
        if self.norm is not None:
            y = self.norm(y)
        return self.out_proj(y), {"S": s, "conv": ctx["conv"]}


@register("mamba2_ref")
class Mamba2Ref(Mamba2Cell):
    """The paper's state-matched Mamba-2 reference: biased maps, no RMSNorm, decay ~0.5.

    Follows the pure-PyTorch Mamba-2 of the paper (JIBSIL/dualgoose, dualgoose/mixers.py and
    model.py at 824f4b73): 8 heads of head_dim expand * d_model / 8 (8 at d_model=32) and
    d_state 16 (1,024 state elements at d_model=32); in_proj and out_proj with biases; the
    conv over (x, B, C) with a bias, then SiLU; A_log = 0 and dt_bias = 0 at initialisation
    (decay exp(dt A) about 0.5 per token); D = 1 skip; y * SiLU(z) with no RMSNorm. The
    paper's "no conv" variant is conv_kernel=1. Where ours differs from the paper's: the scan
    runs on this project's chunkwise-parallel scalar-decay kernel (with the step-by-step loop
    kept as the "recurrent" form), and the three knobs above stay options (`Mamba2Variant`).
    """

    def __init__(
        self,
        d_model: int,
        heads: int = 8,
        d_state: int = 16,
        head_dim: int | None = None,
        expand: int = 2,
        conv_kernel: int = 4,
        chunk_size: int = 32,
        bias: bool = True,
        gated_norm: bool = False,
        init: str = "half",
    ) -> None:
        super().__init__(
            d_model,
            heads,
            d_state,
            head_dim,
            expand,
            conv_kernel,
            chunk_size,
            bias=bias,
            gated_norm=gated_norm,
            init=init,
        )
        if init == "half":  # the paper's conv is an nn.Conv1d with its default bias, U(±1/sqrt(k))
            with torch.no_grad():
                self.conv_bias.copy_(conv1d_bias(self.conv_bias.numel(), conv_kernel))
