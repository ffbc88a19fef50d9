"""The kernels' shared helpers: the shape checker, time chunking, the chunk-size rule, masks."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels.common import (
    causal_mask,
    check_chunk_size,
    check_shapes,
    from_chunks,
    middle_relative,
    to_chunks,
)
from arbench.kernels.delta_rule import delta_rule_chunked
from arbench.kernels.dplr import dplr_recurrent
from arbench.kernels.gla import gated_linear_attention_chunked
from arbench.kernels.scalar_decay import scalar_decay_chunked

B, H, T, DK, DV = 2, 3, 7, 4, 5


def qkv(heads: int = H) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.zeros(B, heads, T, DK), torch.zeros(B, heads, T, DK), torch.zeros(B, H, T, DV)


def test_check_shapes_returns_the_dimensions_and_skips_absent_gates() -> None:
    q, k, v = qkv()
    step, channel = torch.zeros(B, H, T), torch.zeros(B, H, T, DK)
    dims = check_shapes(
        q, k, v, per_step={"beta": step, "log_alpha": None}, per_channel={"a": channel}
    )
    assert dims == (B, H, T, DK, DV)
    shared = qkv(heads=1)
    assert check_shapes(*shared, per_step={"log_decay": step}, shared_heads=True) == dims


@pytest.mark.parametrize(
    ("name", "args", "kwargs"),
    [
        ("v", (*qkv()[:2], torch.zeros(B, H, T)), {}),
        ("q", (torch.zeros(B, H, T + 1, DK), torch.zeros(B, H, T + 1, DK), qkv()[2]), {}),
        ("q", qkv(heads=1), {}),  # a shared head axis only where the kernel allows it
        ("k", (qkv()[0], torch.zeros(B, H, T, DK + 1), qkv()[2]), {}),
        ("beta", qkv(), {"per_step": {"beta": torch.zeros(B, H, T, 1)}}),
        ("log_decay", qkv(), {"per_step": {"log_decay": torch.zeros(B, 1, T)}}),
        ("log_w", qkv(), {"per_channel": {"log_w": torch.zeros(B, H, T)}}),
        ("a", qkv(), {"per_channel": {"a": torch.zeros(B, H, T, DV)}}),
    ],
)
def test_check_shapes_names_the_bad_argument(name: str, args, kwargs) -> None:
    with pytest.raises(ValueError, match=rf"^{name} must ") as err:
        check_shapes(*args, **kwargs)
    assert "\n" not in str(err.value)


def test_kernels_reject_bad_per_step_per_channel_and_v_shapes() -> None:
    q, k, v = qkv()
    step, channel = torch.zeros(B, H, T), torch.zeros(B, H, T, DK)
    with pytest.raises(ValueError, match="^beta must"):
        delta_rule_chunked(q, k, v, torch.zeros(B, H, T + 1))
    with pytest.raises(ValueError, match="^log_alpha must"):
        delta_rule_chunked(q, k, v, step, torch.zeros(B, 1, T))
    with pytest.raises(ValueError, match="^log_decay must"):
        gated_linear_attention_chunked(q, k, v, step)
    with pytest.raises(ValueError, match="^b must"):
        dplr_recurrent(q, k, v, channel, channel, channel[..., :-1])
    with pytest.raises(ValueError, match="^v must"):
        scalar_decay_chunked(q[:, :1], k[:, :1], v[..., 0])


@pytest.mark.parametrize("shape", [(B, H, 21), (B, H, 21, DK)])
def test_to_chunks_pads_with_zeros_and_round_trips(shape) -> None:
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0)) + 5.0  # no zeros
    n, c = 3, 8
    y = to_chunks(x, n, c)
    assert y.shape == (B, H, n, c, *shape[3:])
    flat = y.flatten(2, 3)
    assert torch.equal(flat[:, :, :21], x)
    assert torch.equal(flat[:, :, 21:], torch.zeros_like(flat[:, :, 21:]))
    assert torch.equal(from_chunks(y, 21), x)


def test_to_chunks_without_padding_is_a_view_even_of_strided_input() -> None:
    x = torch.randn(B, 16, H, DK).transpose(1, 2)  # (B,H,T,dk) as split_heads makes it
    y = to_chunks(x, 2, 8)
    assert y.data_ptr() == x.data_ptr() and torch.equal(y.flatten(2, 3), x)


def test_check_chunk_size_accepts_powers_of_two_only() -> None:
    for c in (1, 2, 16, 64):
        check_chunk_size(c)
    for c in (0, -4, 12, 48):
        with pytest.raises(ValueError, match="power of two"):
            check_chunk_size(c)


def test_causal_mask_and_middle_relative_decays() -> None:
    like = torch.zeros(1, dtype=torch.float64)
    assert torch.equal(causal_mask(4, like), torch.ones(4, 4, dtype=torch.float64).tril())
    assert torch.equal(causal_mask(4, like, strict=True), torch.ones(4, 4).tril(-1).double())
    g = (-torch.rand(2, 8, 3, dtype=torch.float64)).cumsum(-2)
    ref, e_pos, e_neg, e_ref, e_end = middle_relative(g)
    assert torch.equal(ref, g[:, 4:5])
    # e^{G_t - r} e^{r - G_s} = e^{G_t - G_s}; e^r e^{G-r} = e^G; e^{G_C - r} e^r = e^{G_C}
    pair = e_pos[:, :, None, :] * e_neg[:, None, :, :]
    torch.testing.assert_close(pair, (g[:, :, None] - g[:, None, :]).exp())
    torch.testing.assert_close(e_pos * e_ref, g.exp())
    torch.testing.assert_close(e_end * e_ref, g[:, -1:].exp())


def test_fit_chunk_holds_a_short_sequence_in_the_smallest_power_of_two() -> None:
    from arbench.kernels.common import fit_chunk

    assert [fit_chunk(32, t) for t in (0, 1, 2, 7, 8, 9, 32, 66)] == [1, 1, 2, 8, 8, 16, 32, 32]
    assert fit_chunk(16, 5) == 8 and fit_chunk(64, 1000) == 64


def test_a_sequence_shorter_than_the_chunk_matches_the_recurrent_form() -> None:
    """The chunk shrinks to the sequence (`fit_chunk`); the values stay the recurrent ones."""
    from arbench.kernels.delta_rule import delta_rule_chunked, delta_rule_recurrent
    from arbench.kernels.kda import kda_chunked, kda_recurrent

    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(2, 1, 7, 8, generator=g, dtype=torch.float64) for _ in range(2))
    k = torch.nn.functional.normalize(k, dim=-1)
    v = torch.randn(2, 1, 7, 4, generator=g, dtype=torch.float64)
    beta = torch.rand(2, 1, 7, generator=g, dtype=torch.float64)
    log_a = -torch.rand(2, 1, 7, 8, generator=g, dtype=torch.float64)
    for chunked, recurrent, extra in (
        (delta_rule_chunked, delta_rule_recurrent, ()),
        (kda_chunked, kda_recurrent, (log_a,)),
    ):
        o_c, s_c = chunked(q, k, v, beta, *extra, chunk_size=32)
        o_r, s_r = recurrent(q, k, v, beta, *extra)
        assert torch.allclose(o_c, o_r, atol=1e-12) and torch.allclose(s_c, s_r, atol=1e-12)
