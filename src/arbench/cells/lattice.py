"""Lattice memory cell: values stored in a fixed grid of slots at learned 2-D addresses.

Per head, each token's address a_t = s * tanh(W_a conv(LN(x_t))) in [-s, s]^2 (s = addr_scale;
the short causal depthwise convolution, optional, lets the address depend on the few previous
tokens, as a value token's write must land where its key will later be read) both writes the
token's value v_t = W_v x_t and reads the memory; a quadratic B-spline kernel spreads the write
and the read over the 3x3 cells around the address (`arbench.kernels.lattice`). The write is an
overwrite gated by beta_t = sigmoid(W_b x_t), and the whole grid fades by a retention
r_t = sigmoid(W_r x_t + b_r) with b_r initialised to `retention_init` (9: r starts near 1). Each
position reads before it writes, so a query token's own write cannot destroy what it reads.
The state is the grid, (heads, (2s+3)^2 cells, d_v), independent of the sequence length: a
memory whose addressing is a learned continuous map rather than a key-value outer product.

`read_tie` (default true) reads at the write address. With ``read_tie=False`` (the lattice
protocol module's setting, which the lattice studies use) each token also has a read address
s * tanh(W_q conv(LN(x_t))) from a projection of its own, so a query token can read the cell
its key's value was written to without writing there itself; the kernel then takes the read
addresses beside the write ones (`arbench.kernels.lattice`, untied reads).
"""

from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from arbench.cells.base import (
    FORMS,
    Form,
    Kernel,
    SequenceMixer,
    State,
    merge_heads,
    register,
    split_heads,
)
from arbench.cells.short_conv import ShortConv
from arbench.kernels.lattice import (
    GAINS,
    grid_side,
    lattice_chunked,
    lattice_recurrent,
    spread_loss,
)
from arbench.settings import whole_number

ADDR_SCALE = 64.0  # a 131 x 131 grid (17,161 cells) per head
RETENTION_INIT = 9.0  # sigmoid(9) = 0.99988: a ~5,600-token half-life at initialisation


@register("lattice")
class LatticeCell(SequenceMixer):
    """Multi-head lattice memory: addresses from a projection of conv(LayerNorm(x)), values W_v x,
    overwrite gate beta, retention gate r, output projection W_o.

    `write_gain` "peak" (default) fully overwrites the cell nearest the address at beta = 1;
    "kernel" writes each cell in proportion to its kernel weight (see `arbench.kernels.lattice`).
    """

    def __init__(
        self,
        d_model: int,
        heads: int = 1,
        d_v: int | None = None,
        addr_scale: float = ADDR_SCALE,
        retention_init: float = RETENTION_INIT,
        conv: bool = True,
        conv_size: int = 4,
        write_gain: str = "peak",
        read_tie: bool = True,
    ) -> None:
        super().__init__()
        heads = whole_number(heads, "heads")
        d_v = whole_number(d_v if d_v is not None else max(1, d_model // heads), "d_v")
        side = grid_side(addr_scale)
        if isinstance(retention_init, bool) or not isinstance(retention_init, int | float):
            raise ValueError(f"retention_init must be a finite number, got {retention_init!r}")
        if not math.isfinite(retention_init):
            raise ValueError(f"retention_init must be a finite number, got {retention_init!r}")
        if not isinstance(conv, bool):
            raise ValueError(f"conv must be true or false, got {conv!r}")
        conv_size = whole_number(conv_size, "conv_size")
        if write_gain not in GAINS:
            raise ValueError(f"write_gain must be one of {GAINS}, got {write_gain!r}")
        if not isinstance(read_tie, bool):
            raise ValueError(f"read_tie must be true or false, got {read_tie!r}")
        self.d_model, self.heads, self.d_v = d_model, heads, d_v
        self.addr_scale, self.side, self.write_gain = float(addr_scale), side, write_gain
        self.use_conv = conv
        self.norm = nn.LayerNorm(d_model)
        if conv:
            self.conv = ShortConv(d_model, conv_size)
        self.addr_proj = nn.Linear(d_model, 2 * heads)
        self.v_proj = nn.Linear(d_model, heads * d_v, bias=False)
        self.beta_proj = nn.Linear(d_model, heads)
        self.retention_proj = nn.Linear(d_model, heads)
        nn.init.constant_(self.retention_proj.bias, float(retention_init))
        self.out_proj = nn.Linear(heads * d_v, d_model, bias=False)
        self.read_tie = read_tie
        if not read_tie:  # created last, so a tied cell's initial weights are unchanged
            self.read_proj = nn.Linear(d_model, 2 * heads)

    def state_size(self) -> int:
        """heads * (2s+3)^2 * d_v: the grid of value slots (conv tail and parameters excluded)."""
        return self.heads * self.side * self.side * self.d_v

    def _features(
        self, x: torch.Tensor, tail: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """conv(LayerNorm(x)) (B,T,d_model), what the addresses project, and the conv tail."""
        z = self.norm(x)
        if self.use_conv:
            z, tail = self.conv(z, tail)
        return z, tail

    def _address(self, proj: nn.Linear, z: torch.Tensor) -> torch.Tensor:
        """Addresses (B,H,T,2) in [-s, s]^2 from the features through ``proj``."""
        a = self.addr_scale * torch.tanh(proj(z))
        b, t, _ = z.shape
        return a.view(b, t, self.heads, 2).transpose(1, 2)

    def _addresses(
        self, x: torch.Tensor, tail: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Write addresses (B,H,T,2) of every position, and the new conv tail."""
        z, tail = self._features(x, tail)
        return self._address(self.addr_proj, z), tail

    def write_addresses(
        self,
        x: torch.Tensor,
        positions: torch.Tensor | None = None,
        state: State | None = None,
    ) -> torch.Tensor:
        """Write addresses (B,H,N,2) of the tokens at `positions` (B,N) of input x (B,T,d_model)
        (all T positions when None), continuing from a carried state's conv tail if given:
        what `arbench.kernels.lattice.spread_loss` takes (flattened to rows)."""
        tail = None if state is None else state.get("conv")
        a, _ = self._addresses(x, tail)
        if positions is None:
            return a
        index = positions[:, None, :, None].expand(-1, self.heads, -1, 2)
        return a.gather(2, index)

    def spread_penalty(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        subsample: int,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """`spread_loss` of the write addresses at `positions` (B,N) of input x: what the
        address-spread regulariser (`arbench.train.spread`) adds for this layer, a scalar."""
        addresses = self.write_addresses(x, positions)  # (B, H, N, 2)
        return spread_loss(addresses, self.addr_scale, subsample, generator)

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple, dict]:
        """Kernel args (addr, beta, v, log_retention, S0), addr (B,H,T,2), or (B,H,T,4) with
        the read addresses after the write ones when reads are untied; state
        dict(S=(B,H,cells,dv), conv)."""
        s0 = None if state is None else state["S"]
        z, tail = self._features(x, None if state is None else state.get("conv"))
        addr = self._address(self.addr_proj, z)
        if not self.read_tie:  # write and read addresses side by side: (B,H,T,4)
            addr = torch.cat([addr, self._address(self.read_proj, z)], dim=-1)
        v = split_heads(self.v_proj(x), self.heads)
        beta = torch.sigmoid(self.beta_proj(x)).transpose(1, 2)
        log_retention = F.logsigmoid(self.retention_proj(x)).transpose(1, 2)
        return (addr, beta, v, log_retention, s0), {"conv": tail}

    def kernel(self, form: Form) -> Kernel:
        if form == "chunked":
            fn = lattice_chunked
        elif form == "recurrent":
            fn = lattice_recurrent
        else:
            raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")
        if self.read_tie:
            return partial(fn, scale=self.addr_scale, gain=self.write_gain)
        return partial(_untied, fn, scale=self.addr_scale, gain=self.write_gain)

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: dict) -> tuple[torch.Tensor, State]:
        return self.out_proj(merge_heads(o)), {"S": s, "conv": ctx["conv"]}


def _untied(
    fn: Kernel,
    addr: torch.Tensor,
    beta: torch.Tensor,
    v: torch.Tensor,
    log_retention: torch.Tensor | None,
    s0: torch.Tensor | None,
    *,
    scale: float,
    gain: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A lattice kernel on (B,H,T,4) addresses: write addresses, then read addresses."""
    return fn(
        addr[..., :2], beta, v, log_retention, s0, scale=scale, gain=gain, read_addr=addr[..., 2:]
    )
