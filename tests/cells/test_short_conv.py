"""The causal depthwise short convolution: the explicit correlation, tails, streaming."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.cells.short_conv import ShortConv

F64 = torch.float64


@pytest.mark.parametrize("t", [0, 1, 3, 19])
def test_short_conv_is_a_causal_depthwise_correlation(t: int, draw) -> None:
    conv = ShortConv(5, 4).to(F64)
    x = draw(2, t, 5, seed=12).requires_grad_(True)
    tail = draw(2, 3, 5, seed=13)
    y, new_tail = conv(x, tail)
    xp = torch.cat([tail, x], 1)
    w = conv.conv.weight[:, 0, :]
    want = sum(xp[:, j : j + t] * w[:, j] for j in range(4))
    torch.testing.assert_close(y, want if t else x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new_tail, xp[:, -3:])
    if t:
        assert torch.autograd.gradcheck(lambda x, w: conv(x, tail)[0], (x, conv.conv.weight))


@pytest.mark.parametrize("kernel_size", [1, 4])
def test_short_conv_causal_and_streaming(kernel_size: int, rel_err) -> None:
    conv = ShortConv(5, kernel_size).double()
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 11, 5, generator=g, dtype=torch.float64)
    y, tail = conv(x)
    # Explicit causal depthwise convolution with zero history.
    w = conv.conv.weight[:, 0, :]  # (C, K); output t uses x[t-K+1 .. t]
    xp = F.pad(x, (0, 0, kernel_size - 1, 0))
    expect = sum(xp[:, j : j + 11] * w[:, j] for j in range(kernel_size))
    assert rel_err(y, expect) < 1e-12
    assert tail.shape == (2, kernel_size - 1, 5)
    y1, t1 = conv(x[:, :1])
    y2, t2 = conv(x[:, 1:7], t1)
    y3, t3 = conv(x[:, 7:], t2)
    assert torch.allclose(torch.cat([y1, y2, y3], dim=1), y, rtol=0, atol=1e-12)
    assert torch.equal(t3, tail)


def test_the_silu_conv_starts_with_a_conv1d_default_bias_and_applies_silu() -> None:
    """The paper's reference cells' conv: nn.Conv1d's default bias draw, U(±1/sqrt(k)) for a
    depthwise kernel k (not zeros), then SiLU after the biased convolution."""
    from arbench.cells.short_conv import SiluConv

    torch.manual_seed(0)
    conv = SiluConv(4096, 4)
    b = conv.bias.detach()
    assert b.abs().max() <= 0.5 and b.abs().max() > 0.45 and abs(b.mean()) < 0.02
    assert abs(b.std().item() - 0.5 / 3**0.5) < 0.01  # the uniform's standard deviation
    x = torch.randn(2, 9, 4096)
    y, _ = conv(x)
    z, _ = conv.conv(x)
    assert torch.allclose(y, F.silu(z + b))


@pytest.mark.parametrize("t", [1, 19])
def test_one_tap_short_conv_is_the_convolution_as_a_scale(t: int, draw) -> None:
    """kernel_size 1 skips the convolution call for a per-channel product: the same values as
    the depthwise convolution, the same gradients, an empty tail."""
    conv = ShortConv(5, 1).to(F64)
    x = draw(2, t, 5, seed=14).requires_grad_(True)
    y, tail = conv(x, torch.zeros(2, 0, 5, dtype=F64))
    image = x.unsqueeze(1).permute(0, 3, 1, 2)
    want = F.conv2d(image, conv.conv.weight.unsqueeze(2), groups=5).permute(0, 2, 3, 1).squeeze(1)
    torch.testing.assert_close(y, want, rtol=0, atol=0)
    assert tail.shape == (2, 0, 5)
    assert torch.autograd.gradcheck(lambda x, w: conv(x)[0], (x, conv.conv.weight))
    assert conv(x[:, :0])[0].shape == (2, 0, 5)
