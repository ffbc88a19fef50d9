"""Causal depthwise short convolution over time, with a carried tail for streaming."""

from __future__ import annotations

import torch
from torch import nn


class ShortConv(nn.Module):
    """Causal depthwise Conv1d on (B,T,C); carries the last kernel_size-1 inputs between calls.

    No bias and no activation, so adding it to a cell changes only the local mixing.
    """

    def __init__(self, channels: int, kernel_size: int = 4) -> None:
        super().__init__()
        if kernel_size < 1:
            raise ValueError(f"kernel_size must be >= 1, got {kernel_size}")
        self.channels = channels
        self.kernel_size = kernel_size
        self.conv = nn.Conv1d(channels, channels, kernel_size, groups=channels, bias=False)

    def forward(
        self, x: torch.Tensor, tail: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Return (y, new_tail); tail is (B, kernel_size-1, C), zeros (sequence start) if None."""
        b, _, c = x.shape
        w = self.kernel_size - 1
        if tail is None:
            tail = x.new_zeros(b, w, c)
        xp = torch.cat([tail, x], dim=1)
        t = x.shape[1]
        # Depthwise cross-correlation as K shifted multiply-adds: on (B,T,C) this avoids the
        # layout round trip through Conv1d's (B,C,T) and is faster on CPU; same weights.
        weight = self.conv.weight[:, 0, :]  # (C, K)
        y = xp[:, w:] * weight[:, w]
        for j in range(w):
            y = torch.addcmul(y, xp[:, j : j + t], weight[:, j])
        new_tail = xp[:, xp.shape[1] - w :]
        return y, new_tail
