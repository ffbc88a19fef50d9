"""The delta rule's diagonal ablation: keep only the diagonal of its transition.

S_t = a_t (I - b_t Diag(k_t * k_t)) S_{t-1} + b_t k_t v_t^T, o_t = S_t^T q_t: the delta rule's
(I - b k k^T) reduced to its diagonal, with the same state and gates. That is gated linear
attention (`gla`) with the per-channel log-decay d_{t,i} = log a_t + log(1 - b_t k_{t,i}^2) and
key b_t k_t, so both forms run the GLA kernels on inputs mapped by `diagonal_log_decay`.
"""

from __future__ import annotations

import math

import torch

from arbench.kernels.common import check_shapes
from arbench.kernels.gla import gated_linear_attention_chunked, gated_linear_attention_recurrent

LOG_DECAY_FLOOR = -30.0  # per-step per-channel log-decay floor of the diagonal ablation


def diagonal_log_decay(
    k: torch.Tensor, beta: torch.Tensor, log_alpha: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-channel log-decay log(a_t (1 - b_t k_{t,i}^2)), floored at LOG_DECAY_FLOOR.

    Shared by both forms so they clamp identically; the clamp sits before the log so gradients
    stay finite even when b_t k_{t,i}^2 rounds to 1.
    """
    keep = (1.0 - beta[..., None] * k * k).clamp_min(math.exp(LOG_DECAY_FLOOR))
    log_decay = keep.log()
    if log_alpha is not None:
        log_decay = log_decay + log_alpha[..., None]
    return log_decay


def diagonal_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step diagonal ablation S_t = a_t (I - b_t Diag(k_t^2)) S_{t-1} + b_t k_t v_t^T."""
    check_shapes(q, k, v, per_step={"beta": beta, "log_alpha": log_alpha})
    log_decay = diagonal_log_decay(k, beta, log_alpha)
    return gated_linear_attention_recurrent(q, beta[..., None] * k, v, log_decay, initial_state)


def diagonal_chunked(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    log_alpha: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    chunk_size: int = 16,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunkwise-parallel diagonal ablation; same result as `diagonal_recurrent`."""
    check_shapes(q, k, v, per_step={"beta": beta, "log_alpha": log_alpha})
    log_decay = diagonal_log_decay(k, beta, log_alpha)
    return gated_linear_attention_chunked(
        q, beta[..., None] * k, v, log_decay, initial_state, chunk_size=chunk_size
    )
