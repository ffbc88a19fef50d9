"""The learned, input-independent per-head decay (``decay: constant``) shared by the cells
that offer it: one logit per head, the per-token retention a_h = sigmoid(logit_h).

``decay_init`` sets the initial retentions: a float (every head), a list (one per head) or
None (the cell's default logits). Values must lie strictly inside (0, 1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

DEFAULT_LOGITS = (2.0, 7.0)  # several heads: logits spread 2..7 (retention 0.881..0.999)
DEFAULT_SINGLE_LOGIT = 3.0  # one head: retention sigmoid(3) = 0.953 (a 14-token half-life)


def default_logits(heads: int) -> torch.Tensor:
    """The default per-head logits: spread from fast forgetting to near-retention."""
    if heads > 1:
        return torch.linspace(*DEFAULT_LOGITS, heads)
    return torch.tensor([DEFAULT_SINGLE_LOGIT])


def check_decay_init(decay_init: float | Sequence[float] | None, heads: int) -> None:
    """Fail early, in one line naming ``decay_init``, on values outside (0, 1) or a list whose
    length is not the number of heads."""
    if decay_init is None:
        return
    values = [decay_init] if isinstance(decay_init, int | float) else list(decay_init)
    if not isinstance(decay_init, int | float) and len(values) != heads:
        raise ValueError(
            f"decay_init: {len(values)} values for {heads} heads (give one per head, or one "
            "float for all)"
        )
    for x in values:
        if isinstance(x, bool) or not isinstance(x, int | float) or not 0.0 < x < 1.0:
            raise ValueError(f"decay_init: each value must be in (0, 1), got {x!r}")


def initial_logits(heads: int, decay_init: float | Sequence[float] | None) -> torch.Tensor:
    """The per-head decay logits that start at ``decay_init`` (checked), or the default."""
    check_decay_init(decay_init, heads)
    if decay_init is None:
        return default_logits(heads)
    values = [decay_init] * heads if isinstance(decay_init, int | float) else list(decay_init)
    return torch.tensor([math.log(a) - math.log1p(-a) for a in values], dtype=torch.float32)
