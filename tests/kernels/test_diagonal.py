"""The delta rule's diagonal ablation: chunked == recurrent, the log-decay floor, the formula."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.kernels.diagonal import diagonal_chunked, diagonal_recurrent

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
CHUNK = 16  # the inputs' T = 50 is deliberately not a multiple of it


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decay", [False, True])
def test_kernel_chunked_matches_recurrent(
    decay: bool, dtype: torch.dtype, delta_family_forms_agree
) -> None:
    delta_family_forms_agree(diagonal_recurrent, diagonal_chunked, decay, dtype, TOL[dtype], CHUNK)


def test_diagonal_clamped_decay_is_finite_and_consistent(
    delta_inputs, run_and_grad, assert_close
) -> None:
    """One-hot keys with beta ~ 1 hit the log-decay floor; both forms clamp identically."""
    inputs = delta_inputs(torch.float64)
    b, h, t, dk = inputs["k"].shape
    idx = torch.arange(t) % dk
    inputs["k"] = F.one_hot(idx, dk).to(torch.float64).expand(b, h, t, dk).contiguous()
    inputs["beta"] = torch.full((b, h, t), 1.0 - 1e-15, dtype=torch.float64)
    ref = run_and_grad(diagonal_recurrent, inputs)
    got = run_and_grad(lambda **kw: diagonal_chunked(**kw, chunk_size=CHUNK), inputs)
    assert all(torch.isfinite(x).all() for x in got.values())
    assert_close(got, ref, 1e-10)


def test_diagonal_matches_explicit_formula(delta_inputs, rel_err) -> None:
    x = delta_inputs(torch.float64)
    x = {n: (t[:, :, :1] if t.dim() >= 3 and n != "initial_state" else t) for n, t in x.items()}
    _, s = diagonal_chunked(**x, chunk_size=CHUNK)
    k, v = x["k"][:, :, 0], x["v"][:, :, 0]
    b, a = x["beta"][:, :, 0, None, None], x["log_alpha"][:, :, 0, None, None].exp()
    diag = torch.diag_embed(1.0 - b[..., 0] * k * k)
    expect = a * diag @ x["initial_state"] + b * k[..., :, None] * v[..., None, :]
    assert rel_err(s, expect) < 1e-12


def test_kernel_gradients_from_the_final_state_alone(final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree("diagonal")
