"""A masked denoiser around any registered cell: the paper's bidirectional one-layer model.

Input: token embedding + learned absolute position embedding + a constant "timestep" offset
(sinusoidal features of a fixed t through a learned linear map, the same vector at every
position of every sequence). Each pre-norm block is ``x += mixer(LN(x))`` then
``x += FFN(LN(x))`` (Linear, SiLU, Linear, with biases). The mixer runs a forward cell over
the sequence and, when ``direction`` is bidirectional, a second cell with its own parameters
over the time-reversed sequence, whose output is flipped back and merged with the first:
``static`` is a learned Linear(2d, d) that starts as the exact average, ``average`` is the
fixed mean. ``direction: forward`` keeps only the forward cell: the causal ablation, which
can also stream with a carried state. ``direction: full`` runs one non-causal cell (full
attention) over the whole sequence. The head is a final LayerNorm and the token embedding,
tied.

``block: adaln_zero`` makes each block the DiT block of the paper's attention control
(JIBSIL/dualgoose @824f4b73, ``dualgoose/model.py`` ``TinyAttentionBlock`` and
``TinyAttentionDenoiser``): the timestep vector is no input offset but the condition c of every
block, whose SiLU + Linear(d, 6d), initialised to zero, gives (shift1, scale1, gate1, shift2,
scale2, gate2); with LayerNorms without affine parameters,
``x += gate1 * mixer(LN(x) (1 + scale1) + shift1)`` then
``x += gate2 * FFN(LN(x) (1 + scale2) + shift2)``, so every block starts as the identity.

The module offers the `LanguageModel` interface the training loop and evaluation use:
``hidden(tokens, state, form)``, ``logits(h)``, ``state_size()``, ``state_size_per_layer()``,
``n_parameters()`` and ``cfg``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import torch
from torch import nn

from arbench.cells import CELLS, build_cell
from arbench.cells.base import Form
from arbench.models.lm import BlockStack
from arbench.settings import whole_number

DIRECTIONS = ("bidirectional", "forward", "full")
MERGES = ("static", "average")
POSITIONS = ("learned", "none")
BLOCKS = (None, "adaln_zero")  # None: the pre-norm block (the recurrent arms')
FAMILY = "denoiser"


@dataclass
class DenoiserConfig:
    """Shape of a denoiser; `cell` names a registered mixer and `cell_options` its knobs.

    ``max_len`` sizes the learned position table (the task's longest sequence: the run layer
    fills it from `Task.positions` when the settings leave it out); ``timestep`` is the fixed
    t whose features feed the constant input offset (None: no such input), or under
    ``block: adaln_zero`` every block's condition. ``block`` None is the pre-norm block; it is
    left out of a run's identity while None (`arbench.train.run_files.run_settings`), so the runs
    recorded before the field existed keep their fingerprints.
    """

    vocab_size: int
    max_len: int | None = None
    d_model: int = 32
    layers: int = 1
    mlp_ratio: int = 4
    cell: str = "delta_rule"
    cell_options: dict[str, Any] = field(default_factory=dict)
    direction: str = "bidirectional"
    merge: str = "static"
    positions: str = "learned"
    timestep: float | None = 0.5
    family: str = FAMILY
    block: str | None = None

    def validate(self) -> None:
        """Raise a one-line ValueError naming the setting (``model.<key>``) that cannot be
        built."""
        if self.family != FAMILY:
            raise ValueError(f"model.family: a DenoiserConfig is family {FAMILY!r}")
        for key, least in (("vocab_size", 1), ("d_model", 1), ("layers", 1), ("mlp_ratio", 0)):
            value = getattr(self, key)
            whole_number(value, f"model.{key}", minimum=least)
        if self.cell not in CELLS:
            raise ValueError(f"model.cell: unknown {self.cell!r}; known: {sorted(CELLS)}")
        if not isinstance(self.cell_options, dict):
            raise ValueError(f"model.cell_options must be a mapping, got {self.cell_options!r}")
        for key, allowed in (
            ("direction", DIRECTIONS),
            ("merge", MERGES),
            ("positions", POSITIONS),
        ):
            if getattr(self, key) not in allowed:
                raise ValueError(
                    f"model.{key}: unknown {getattr(self, key)!r}; known: {list(allowed)}"
                )
        if self.block not in BLOCKS:
            raise ValueError(
                f"model.block: unknown {self.block!r}; known: {[b for b in BLOCKS if b]} "
                "(or null, the pre-norm block)"
            )
        if self.block == "adaln_zero" and self.timestep is None:
            raise ValueError(
                "model.block: adaln_zero conditions every block on the timestep, but "
                "model.timestep is null"
            )
        causal = CELLS[self.cell].causal
        if self.direction == "full" and causal:
            raise ValueError(
                f"model.direction: full runs one non-causal cell over the sequence; cell "
                f"{self.cell!r} is causal (direction bidirectional or forward)"
            )
        if self.direction != "full" and not causal:
            raise ValueError(
                f"model.direction: cell {self.cell!r} is non-causal and reads the whole "
                f"sequence itself; it needs direction full, not {self.direction!r}"
            )
        if self.positions == "learned":
            if self.max_len is None:
                raise ValueError(
                    "model.max_len: missing; learned positions need the longest sequence"
                )
        if self.max_len is not None:
            whole_number(self.max_len, "model.max_len")
        t = self.timestep
        if t is not None and (
            isinstance(t, bool) or not isinstance(t, Real) or not math.isfinite(t)
        ):
            raise ValueError(f"model.timestep must be a finite number or null, got {t!r}")


def timestep_features(t: float, d: int) -> torch.Tensor:
    """(d,) sinusoidal features of ``t``: sin then cos of t * f for d // 2 frequencies f
    spaced geometrically from 1 to 1000, and t itself appended when d is odd."""
    half = d // 2
    freqs = torch.exp(torch.linspace(0.0, math.log(1000.0), half, dtype=torch.float64))
    angles = float(t) * freqs
    parts = [angles.sin(), angles.cos()]
    if d % 2:
        parts.append(torch.tensor([float(t)], dtype=torch.float64))
    return torch.cat(parts).float()


class DenoiserMixer(nn.Module):
    """The forward cell, and for ``bidirectional`` a reversed-time cell and their merge; for
    ``full`` one non-causal cell over the whole sequence."""

    def __init__(self, cfg: DenoiserConfig) -> None:
        super().__init__()
        d = cfg.d_model
        self.bidirectional = cfg.direction == "bidirectional"
        self.full = cfg.direction == "full"
        self.forward_cell = build_cell(cfg.cell, d, **cfg.cell_options)
        self.backward_cell = (
            build_cell(cfg.cell, d, **cfg.cell_options) if self.bidirectional else None
        )
        self.merge = None
        if self.bidirectional and cfg.merge == "static":
            self.merge = nn.Linear(2 * d, d)
            with torch.no_grad():
                half_eye = 0.5 * torch.eye(d)
                self.merge.weight.copy_(torch.cat([half_eye, half_eye], dim=1))
                self.merge.bias.zero_()

    def forward(self, x: torch.Tensor, state: Any, form: Form) -> tuple[torch.Tensor, Any]:
        if self.full and state is not None:
            raise ValueError("a full-attention denoiser cannot stream with a carried state")
        if not self.bidirectional:
            return self.forward_cell(x, state, form=form)
        if state is not None:
            raise ValueError("a bidirectional denoiser cannot stream with a carried state")
        y_fwd, _ = self.forward_cell(x, form=form)
        y_bwd, _ = self.backward_cell(x.flip(1), form=form)
        y_bwd = y_bwd.flip(1)
        if self.merge is None:
            return 0.5 * (y_fwd + y_bwd), None
        return self.merge(torch.cat([y_fwd, y_bwd], dim=-1)), None

    def window(self, x: torch.Tensor, lo: int, hi: int, form: Form) -> torch.Tensor:
        """``forward(x)[:, lo:hi]`` from less work: the forward cell reads only x[:, :hi] and
        the backward cell only x[:, lo:] (its output at t depends on t .. T-1 alone); a full
        cell reads all of x."""
        if self.full:
            return self.forward_cell(x, form=form)[0][:, lo:hi]
        y_fwd, _ = self.forward_cell(x[:, :hi], form=form)
        y_fwd = y_fwd[:, lo:hi]
        if not self.bidirectional:
            return y_fwd
        y_bwd, _ = self.backward_cell(x[:, lo:].flip(1), form=form)
        y_bwd = y_bwd.flip(1)[:, : hi - lo]
        if self.merge is None:
            return 0.5 * (y_fwd + y_bwd)
        return self.merge(torch.cat([y_fwd, y_bwd], dim=-1))

    def state_size(self) -> int:
        """Recurrent state elements: one cell's, twice when bidirectional."""
        return (2 if self.bidirectional else 1) * self.forward_cell.state_size()


Modulation = list[torch.Tensor] | None  # an adaLN-Zero block's (shift, scale, gate) x 2


class DenoiserBlock(nn.Module):
    """Pre-norm residual block: mixer, then the SiLU FFN (none when ``mlp_ratio`` is 0); under
    ``block: adaln_zero`` the norms lose their affine parameters and a condition's
    zero-initialised modulation shifts and scales each branch's input and gates its output."""

    def __init__(self, cfg: DenoiserConfig) -> None:
        super().__init__()
        d = cfg.d_model
        affine = cfg.block != "adaln_zero"
        self.norm1 = nn.LayerNorm(d, elementwise_affine=affine)
        self.mixer = DenoiserMixer(cfg)
        self.norm2 = nn.LayerNorm(d, elementwise_affine=affine) if cfg.mlp_ratio > 0 else None
        self.ffn = (
            nn.Sequential(
                nn.Linear(d, cfg.mlp_ratio * d), nn.SiLU(), nn.Linear(cfg.mlp_ratio * d, d)
            )
            if cfg.mlp_ratio > 0
            else None
        )
        self.modulation: nn.Sequential | None = None
        if not affine:  # (shift, scale, gate) for the mixer and, with an FFN, for it too
            self.parts = 6 if self.ffn is not None else 3
            self.modulation = nn.Sequential(nn.SiLU(), nn.Linear(d, self.parts * d))
            nn.init.zeros_(self.modulation[-1].weight)  # every block starts as the identity
            nn.init.zeros_(self.modulation[-1].bias)

    def modulations(self, cond: torch.Tensor | None) -> Modulation:
        """The block's shifts, scales and gates from the condition (None: a pre-norm block)."""
        if self.modulation is None:
            return None
        if cond is None:
            raise ValueError("an adaLN-Zero block needs the timestep condition")
        return list(self.modulation(cond).chunk(self.parts, dim=-1))

    def mixer_input(self, x: torch.Tensor, mod: Modulation) -> torch.Tensor:
        """The mixer's input: LN(x), shifted and scaled under adaLN-Zero."""
        h = self.norm1(x)
        return h if mod is None else h * (1 + mod[1]) + mod[0]

    def mixer_branch(self, y: torch.Tensor, mod: Modulation) -> torch.Tensor:
        """What the mixer's output adds to the residual stream (gated under adaLN-Zero)."""
        return y if mod is None else mod[2] * y

    def feed_forward(self, x: torch.Tensor, mod: Modulation) -> torch.Tensor:
        """x plus the FFN branch (its input shifted and scaled, its output gated under
        adaLN-Zero); x itself without an FFN."""
        if self.ffn is None:
            return x
        h = self.norm2(x)
        if mod is None:
            return x + self.ffn(h)
        return x + mod[5] * self.ffn(h * (1 + mod[4]) + mod[3])

    def forward(
        self, x: torch.Tensor, state: Any, form: Form, cond: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, Any]:
        mod = self.modulations(cond)
        y, state = self.mixer(self.mixer_input(x, mod), state, form)
        return self.feed_forward(x + self.mixer_branch(y, mod), mod), state


class Denoiser(BlockStack, nn.Module):
    """Token ids (B, T) -> final hidden states; `logits` reads out through the embedding.

    The carried state of ``direction: forward`` is ``{"offset": tokens read, "layers": [...]}``
    (the offset keeps the learned positions continuing across pieces); a bidirectional or full
    model returns None and refuses a state.
    """

    def __init__(self, cfg: DenoiserConfig) -> None:
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        d = cfg.d_model
        self.embed = nn.Embedding(cfg.vocab_size, d)  # N(0, 1): PyTorch's default
        self.pos_embed = nn.Embedding(cfg.max_len, d) if cfg.positions == "learned" else None
        self.time_proj: nn.Linear | None = None
        if cfg.timestep is not None:
            self.time_proj = nn.Linear(d, d)
            self.register_buffer(
                "time_features", timestep_features(cfg.timestep, d), persistent=False
            )
        self.blocks = nn.ModuleList(DenoiserBlock(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(d)

    def time_offset(self) -> torch.Tensor | None:
        """The (d,) timestep vector: the offset added at every position, or under adaLN-Zero
        every block's condition (None without a timestep)."""
        if self.time_proj is None:
            return None
        return self.time_proj(self.time_features)

    def condition(self) -> torch.Tensor | None:
        """The blocks' condition: the timestep vector under adaLN-Zero, else None."""
        return self.time_offset() if self.cfg.block == "adaln_zero" else None

    def inputs(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """The first block's input (B, T, d) for tokens at positions offset .. offset+T-1."""
        x = self.embed(tokens)
        if self.pos_embed is not None:
            stop = offset + tokens.shape[1]
            if stop > self.cfg.max_len:
                raise ValueError(
                    f"sequence reaches position {stop} but model.max_len is {self.cfg.max_len}"
                )
            x = x + self.pos_embed(torch.arange(offset, stop, device=tokens.device))
        time = self.time_offset() if self.cfg.block is None else None
        if time is not None:
            x = x + time
        return x

    def hidden(
        self, tokens: torch.Tensor, state: dict[str, Any] | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, dict[str, Any] | None]:
        """Final normalised hidden states (B, T, d) and the carried state (None when
        bidirectional or full)."""
        cond = self.condition()
        if self.cfg.direction != "forward":
            if state is not None:
                kind = "full-attention" if self.cfg.direction == "full" else "bidirectional"
                raise ValueError(f"a {kind} denoiser cannot stream with a carried state")
            x = self.inputs(tokens)
            for block in self.blocks:
                x, _ = block(x, None, form, cond)
            return self.norm(x), None
        offset = 0 if state is None else int(state["offset"])
        layers = [None] * len(self.blocks) if state is None else state["layers"]
        x = self.inputs(tokens, offset)
        new_layers = []
        for block, s in zip(self.blocks, layers, strict=True):
            x, s = block(x, s, form, cond)
            new_layers.append(s)
        return self.norm(x), {"offset": offset + tokens.shape[1], "layers": new_layers}

    def hidden_at(
        self, tokens: torch.Tensor, sel: torch.Tensor, form: Form = "chunked"
    ) -> torch.Tensor:
        """``hidden(tokens)[0][sel]`` (sel a (B, T) mask), computing the last layer only where
        the marked positions need it: its cells over the span of marked columns (the forward
        cell up to the last, the backward cell from the first), its FFN and the final norm at
        the marked positions alone. For the paper's MQAR (one layer, one answer at 2K + 1)
        that skips most of the backward stream and of the FFN; the values are the same."""
        cols = sel.any(0).nonzero().flatten()
        if cols.numel() == 0:
            return self.inputs(tokens).new_zeros(0, self.cfg.d_model)
        lo, hi = int(cols[0]), int(cols[-1]) + 1
        cond = self.condition()
        x = self.inputs(tokens)
        for block in self.blocks[:-1]:
            x, _ = block(x, None, form, cond)
        last = self.blocks[-1]
        mod = last.modulations(cond)
        y = last.mixer.window(last.mixer_input(x, mod), lo, hi, form)
        x = x[:, lo:hi] + last.mixer_branch(y, mod)
        return self.norm(last.feed_forward(x[sel[:, lo:hi]], mod))

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Read-out through the token embedding (tied, no bias); call on selected positions
        only to save work."""
        return h @ self.embed.weight.t()
