"""The unit lower-triangular inverse of the WY/UT forms, and its hand-written gradient."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.kernels.triangular import UnitLowerInverse, halving_buffer, unit_lower_inverse


@pytest.mark.parametrize("c", [1, 5, 16, 32])
def test_unit_lower_inverse_and_its_gradient(c: int) -> None:
    g = torch.Generator().manual_seed(c)
    a = torch.randn(3, c, c, generator=g, dtype=torch.float64) * 0.3
    eye = torch.eye(c, dtype=torch.float64)
    ref = torch.linalg.inv(eye + a.tril(-1))
    assert (unit_lower_inverse(a) - ref).abs().max() < 1e-12
    assert torch.autograd.gradcheck(UnitLowerInverse.apply, (a.requires_grad_(True),))


@pytest.mark.parametrize("c", [1, 5, 8, 16, 32, 64])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_unit_lower_inverse_is_bitwise_the_frozen_one(
    c: int, dtype: torch.dtype, frozen_inverse
) -> None:
    """Every bit (signed zeros too) as the frozen blocked halving, whatever the input's layout:
    contiguous, column-major, batch axes that do not merge, or already a `halving_buffer`
    (the result kept in that layout or not): the published runs must retrain to the last bit."""
    g = torch.Generator().manual_seed(c)
    a = torch.randn(6, 3, c, c, generator=g, dtype=dtype) * 0.5
    p2 = 1 << max(0, c - 1).bit_length()
    bits = torch.int32 if dtype == torch.float32 else torch.int64

    def frozen(x: torch.Tensor) -> torch.Tensor:
        return frozen_inverse(F.pad(x, (0, p2 - c, 0, p2 - c)))[..., :c, :c]

    halving = halving_buffer(a.shape, a).copy_(a)
    cases = [
        (a, unit_lower_inverse(a)),
        (a, unit_lower_inverse(a.mT.contiguous().mT)),
        (a[:, 1:], unit_lower_inverse(a[:, 1:])),
        (a, unit_lower_inverse(halving)),
        (a, unit_lower_inverse(halving, keep_layout=True)),
    ]
    for x, got in cases:
        assert torch.equal(got.contiguous().view(bits), frozen(x).contiguous().view(bits))
