"""The contract every sequence mixer ("cell") honours.

A cell maps (B, T, d_model) -> (B, T, d_model). It accepts an optional carried
state and returns the state after the last position, so a long sequence can be
processed in pieces (streaming evaluation) with outputs identical to one pass.
`form` selects the step-by-step recurrent reference or the chunkwise-parallel
implementation; both must agree to numerical precision.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

Form = Literal["chunked", "recurrent"]
State = Any  # a tensor or a dict of tensors; opaque to callers


class SequenceMixer(nn.Module):
    """Base class: subclasses implement `forward` and `state_size`."""

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        raise NotImplementedError

    def state_size(self) -> int:
        """Recurrent state elements per layer (parameters and conv buffers excluded)."""
        raise NotImplementedError


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, H*d) -> (B, H, T, d): the layout every recurrence kernel takes."""
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> (B, T, H*d), the inverse of `split_heads`."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


def count_parameters(module: nn.Module) -> int:
    """Trainable parameter count of a module."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


CELLS: dict[str, type[SequenceMixer]] = {}


def register(name: str):
    """Class decorator: make a cell constructible by name through `build_cell`."""

    def wrap(cls: type[SequenceMixer]) -> type[SequenceMixer]:
        if name in CELLS:
            raise ValueError(f"cell {name!r} registered twice")
        CELLS[name] = cls
        return cls

    return wrap


def build_cell(name: str, d_model: int, **options: Any) -> SequenceMixer:
    """Instantiate a registered cell; unknown names list the known ones."""
    if name not in CELLS:
        raise KeyError(f"unknown cell {name!r}; known: {sorted(CELLS)}")
    return CELLS[name](d_model=d_model, **options)
