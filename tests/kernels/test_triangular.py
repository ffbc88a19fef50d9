"""The unit lower-triangular inverse of the WY/UT forms, and its hand-written gradient."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels.triangular import UnitLowerInverse, unit_lower_inverse


@pytest.mark.parametrize("c", [1, 5, 16, 32])
def test_unit_lower_inverse_and_its_gradient(c: int) -> None:
    g = torch.Generator().manual_seed(c)
    a = torch.randn(3, c, c, generator=g, dtype=torch.float64) * 0.3
    eye = torch.eye(c, dtype=torch.float64)
    ref = torch.linalg.inv(eye + a.tril(-1))
    assert (unit_lower_inverse(a) - ref).abs().max() < 1e-12
    assert torch.autograd.gradcheck(UnitLowerInverse.apply, (a.requires_grad_(True),))
