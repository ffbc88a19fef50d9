"""The rank-1 delta rule's chunked (WY/UT) kernel agrees with its step-by-step reference."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels.delta_rule import delta_rule_chunked, delta_rule_recurrent

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
CHUNK = 16  # the inputs' T = 50 is deliberately not a multiple of it


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decay", [False, True])
def test_kernel_chunked_matches_recurrent(
    decay: bool, dtype: torch.dtype, delta_family_forms_agree
) -> None:
    delta_family_forms_agree(
        delta_rule_recurrent, delta_rule_chunked, decay, dtype, TOL[dtype], CHUNK
    )


def test_delta_rule_matches_explicit_formula(delta_inputs, rel_err) -> None:
    """Guard against both forms sharing a bug: one step against the written-out recurrence."""
    x = delta_inputs(torch.float64)
    x = {n: (t[:, :, :1] if t.dim() >= 3 and n != "initial_state" else t) for n, t in x.items()}
    o, s = delta_rule_chunked(**x, chunk_size=CHUNK)
    k, v, q = x["k"][:, :, 0], x["v"][:, :, 0], x["q"][:, :, 0]
    b, a = x["beta"][:, :, 0, None, None], x["log_alpha"][:, :, 0, None, None].exp()
    eye = torch.eye(k.shape[-1], dtype=torch.float64)
    kkt = k[..., :, None] * k[..., None, :]
    expect = a * (eye - b * kkt) @ x["initial_state"] + b * k[..., :, None] * v[..., None, :]
    assert rel_err(s, expect) < 1e-12
    assert rel_err(o[:, :, 0], torch.einsum("bhkv,bhk->bhv", expect, q)) < 1e-12


@pytest.mark.parametrize("chunk", [12, 64])
def test_delta_rule_any_chunk_size(chunk: int, delta_inputs, run_and_grad, assert_close) -> None:
    inputs = delta_inputs(torch.float64)
    ref = run_and_grad(delta_rule_recurrent, inputs)
    got = run_and_grad(lambda **kw: delta_rule_chunked(**kw, chunk_size=chunk), inputs)
    assert_close(got, ref, TOL[torch.float64])


@pytest.mark.parametrize("name", ["delta_rule", "gated_deltanet"])
def test_kernel_gradients_from_the_final_state_alone(name: str, final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree(name)
