"""Bidirectional wrapper: a forward scan plus a time-reversed scan of any registered cell.

Non-causal (the output at t sees the whole sequence), so it is for encoder-style ablations
only; streaming with a carried state is not defined and raises an error.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import nn

from arbench.cells.base import CELLS, Form, SequenceMixer, State, Wraps, build_cell, register

Combine = Literal["sum", "concat"]
INNER = "delta_rule"  # the default inner cell, and the one a state budget shapes


@register("bidirectional")
class Bidirectional(SequenceMixer):
    """y = fwd(x) (+) flip(bwd(flip(x))), combined by sum or by concat + linear projection."""

    wraps = Wraps(cell=INNER, copies=2, option="inner")  # one inner state per direction
    causal = False  # the backward scan reads every later position

    def __init__(
        self,
        d_model: int,
        inner: str = INNER,
        combine: Combine = "sum",
        **inner_options: Any,
    ) -> None:
        super().__init__()
        if combine not in ("sum", "concat"):
            raise ValueError(f"combine must be 'sum' or 'concat', got {combine!r}")
        if inner == "bidirectional":
            raise ValueError("the inner cell of Bidirectional must be a causal cell")
        self.d_model = d_model
        self.inner = inner
        self.combine = combine
        self.forward_cell = build_cell(inner, d_model, **inner_options)
        self.backward_cell = build_cell(inner, d_model, **inner_options)
        if combine == "concat":
            self.proj = nn.Linear(2 * d_model, d_model, bias=False)

    @classmethod
    def option_names(cls, options: dict[str, Any] | None = None) -> set[str]:
        """Its own options (inner, combine) plus those of the inner cell it would build."""
        inner = (options or {}).get("inner", INNER)
        if inner not in CELLS:
            raise KeyError(f"unknown cell {inner!r}; known: {sorted(CELLS)}")
        return super().option_names(options) | CELLS[inner].option_names(options)

    def state_size(self) -> int:
        """Twice the inner cell's state (one memory per direction)."""
        return 2 * self.forward_cell.state_size()

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        """Map (B,T,d_model) to (B,T,d_model) non-causally; returns (y, None)."""
        if state is not None:
            raise ValueError(
                "Bidirectional is non-causal: streaming with a carried state is not supported"
            )
        y_fwd, _ = self.forward_cell(x, form=form)
        y_bwd, _ = self.backward_cell(x.flip(1), form=form)
        y_bwd = y_bwd.flip(1)
        if self.combine == "sum":
            return y_fwd + y_bwd, None
        return self.proj(torch.cat([y_fwd, y_bwd], dim=-1)), None
