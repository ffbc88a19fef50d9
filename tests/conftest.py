"""Shared fixtures: tiny configs so tests stay fast on 2 cores."""

from __future__ import annotations

import torch

torch.set_num_threads(1)
