"""A small language model around any registered sequence mixer.

Pre-norm residual blocks (RMSNorm -> mixer, RMSNorm -> MLP), input/output embeddings tied
unless `tied_embeddings` is false. Everything except the mixer is shared by every arm, so a
factorial toggles only the mixer's knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from arbench.cells import SequenceMixer, build_cell, count_parameters
from arbench.cells.base import Form


@dataclass
class ModelConfig:
    """Backbone shape; `cell` names a registered mixer and `cell_options` its knobs."""

    vocab_size: int
    d_model: int = 32
    layers: int = 2
    mlp_ratio: int = 4
    cell: str = "delta_rule"
    cell_options: dict[str, Any] = field(default_factory=dict)
    tied_embeddings: bool = True
    embed_std: float | None = None  # None: d_model ** -0.5


class RMSNorm(nn.Module):
    """Root-mean-square norm with a learned gain."""

    def __init__(self, d: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    """One residual block: mixer then MLP, each behind an RMSNorm."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.d_model)
        self.mixer: SequenceMixer = build_cell(cfg.cell, cfg.d_model, **cfg.cell_options)
        self.norm2 = RMSNorm(cfg.d_model)
        hidden = cfg.mlp_ratio * cfg.d_model
        self.mlp = (
            nn.Sequential(nn.Linear(cfg.d_model, hidden), nn.GELU(), nn.Linear(hidden, cfg.d_model))
            if cfg.mlp_ratio > 0
            else None
        )

    def forward(self, x: torch.Tensor, state: Any, form: Form) -> tuple[torch.Tensor, Any]:
        y, state = self.mixer(self.norm1(x), state, form=form)
        x = x + y
        if self.mlp is not None:
            x = x + self.mlp(self.norm2(x))
        return x, state


class BlockStack:
    """What every model of residual blocks around a mixer offers the loop and evaluation
    beyond `hidden` and `logits`: forward, state sizes and the parameter count (shared by
    `LanguageModel` and the denoiser)."""

    blocks: nn.ModuleList

    def forward(
        self, tokens: torch.Tensor, state: Any = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, Any]:
        h, state = self.hidden(tokens, state, form)
        return self.logits(h), state

    def state_size(self) -> int:
        """Recurrent state elements summed over layers."""
        return sum(b.mixer.state_size() for b in self.blocks)

    def state_size_per_layer(self) -> int:
        """Recurrent state elements of one layer's mixer (the matched quantity)."""
        return self.blocks[0].mixer.state_size()

    def n_parameters(self) -> int:
        return count_parameters(self)


class LanguageModel(BlockStack, nn.Module):
    """Token ids (B, T) -> logits; carries per-layer mixer state for streaming."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        std = cfg.embed_std if cfg.embed_std is not None else cfg.d_model**-0.5
        nn.init.normal_(self.embed.weight, std=std)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.d_model)
        self.readout = None if cfg.tied_embeddings else nn.Linear(cfg.d_model, cfg.vocab_size)

    def hidden(
        self, tokens: torch.Tensor, state: list[Any] | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, list[Any]]:
        """Final normalised hidden states (B, T, d) and the new per-layer states."""
        x = self.embed(tokens)
        state = state if state is not None else [None] * len(self.blocks)
        new_state = []
        for block, s in zip(self.blocks, state, strict=True):
            x, s = block(x, s, form)
            new_state.append(s)
        return self.norm(x), new_state

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """Read-out through the token embeddings (or the untied `readout`); call on selected
        positions only to save work."""
        if self.readout is not None:
            return self.readout(h)
        return h @ self.embed.weight.t()


def build_model(cfg: ModelConfig, seed: int) -> LanguageModel:
    """Construct a model whose initial weights are a pure function of ``seed``.

    Module initialisers draw from torch's default generator, so construction
    runs inside a forked RNG scope seeded from ``seed``; the caller's global
    RNG state is left untouched.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LanguageModel(cfg)
