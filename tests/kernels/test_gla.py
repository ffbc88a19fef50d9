"""Gated linear attention: both chunked paths (factorised, tree) agree with the recurrence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.kernels.gla import gated_linear_attention_chunked, gated_linear_attention_recurrent
from arbench.kernels.pairwise_tree import factorisable

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
CHUNK = 16  # the inputs' T = 50 is deliberately not a multiple of it


def gla_inputs(inputs: dict[str, torch.Tensor], strength: float = 1.0) -> dict[str, torch.Tensor]:
    """The delta-rule inputs' q, k, v and state with a seeded per-channel log-decay."""
    g = torch.Generator().manual_seed(7)
    dtype = inputs["q"].dtype
    shape = inputs["k"].shape
    log_decay = strength * F.logsigmoid(torch.randn(shape, generator=g, dtype=dtype) + 1.0)
    return {
        "q": inputs["q"],
        "k": inputs["k"],
        "v": inputs["v"],
        "log_decay": log_decay,
        "initial_state": inputs["initial_state"],
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["factorised", "tree"])
def test_gated_linear_attention_chunked_matches_recurrent(
    dtype: torch.dtype, path: str, delta_inputs, run_and_grad, assert_close
) -> None:
    # decays strong enough to overflow the factorised form (in this dtype) must take the tree
    strength = 1.0 if path == "factorised" else {torch.float32: 25.0, torch.float64: 200.0}[dtype]
    inputs = gla_inputs(delta_inputs(dtype), strength)
    g = F.pad(inputs["log_decay"], (0, 0, 0, 14)).unflatten(2, (-1, CHUNK)).cumsum(-2)
    assert factorisable(g, dim=-2) == (path == "factorised")
    ref = run_and_grad(gated_linear_attention_recurrent, inputs)
    got = run_and_grad(lambda **kw: gated_linear_attention_chunked(**kw, chunk_size=CHUNK), inputs)
    assert_close(got, ref, TOL[dtype])
