"""Tiled attention against the plain reference: outputs and gradients, with and without a
window, squared scores, grouped kv heads, query offsets and tiles that do not divide T."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels.tiled_attention import attention_banded, attention_plain, attention_tiled


def _qkv(T: int, S: int | None = None, hq: int = 4, hkv: int = 4, d: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    S = T if S is None else S
    mk = lambda h, n: torch.randn(2, h, n, d, generator=g, dtype=torch.float64)  # noqa: E731
    return mk(hq, T), mk(hkv, S), mk(hkv, S)


@pytest.mark.parametrize("T, tile", [(1, 4), (37, 8), (64, 64), (100, 33), (50, 1024)])
@pytest.mark.parametrize("window", [None, 1, 10])
@pytest.mark.parametrize("square", [False, True])
def test_tiled_equals_plain(T: int, tile: int, window: int | None, square: bool) -> None:
    q, k, v = _qkv(T)
    ref = attention_plain(q, k, v, window=window, square=square)
    got = attention_tiled(q, k, v, window=window, square=square, tile=tile)
    assert torch.allclose(got, ref, atol=1e-12, rtol=0)


def test_gradients_agree() -> None:
    grads = []
    for fn in (attention_plain, lambda *a, **kw: attention_tiled(*a, tile=16, **kw)):
        q, k, v = (x.requires_grad_() for x in _qkv(45))
        out = fn(q, k, v, window=10, square=True)
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view_as(out)).sum().backward()
        grads.append((q.grad, k.grad, v.grad))
    for a, b in zip(*grads, strict=True):
        assert torch.allclose(a, b, atol=1e-10)


def test_grouped_kv_heads_and_offset() -> None:
    q, k, v = _qkv(20, S=50, hq=4, hkv=2)
    ref = attention_plain(q, k, v, offset=30)
    got = attention_tiled(q, k, v, offset=30, tile=7)
    assert torch.allclose(got, ref, atol=1e-12)
    # the offset matters: placed at 0, the same queries would see only the first 20 keys
    assert not torch.allclose(ref, attention_plain(q, k[:, :, :20], v[:, :, :20]))


def test_window_sees_exactly_the_recent_keys() -> None:
    """A query's output depends on the W most recent values and on no earlier one."""
    q, k, v = _qkv(30)
    base = attention_tiled(q, k, v, window=5, tile=8)
    v2 = v.clone()
    v2[:, :, 10] += 100.0  # position 10 is seen by queries 10..14 only
    moved = (attention_tiled(q, k, v2, window=5, tile=8) - base).abs().amax(dim=(0, 1, 3))
    assert (moved[10:15] > 1e-6).all() and (moved[:10] == 0).all() and (moved[15:] == 0).all()


def test_causal_no_future_leak() -> None:
    q, k, v = _qkv(24)
    base = attention_tiled(q, k, v, tile=5)
    v2 = v.clone()
    v2[:, :, 20:] = 0
    assert torch.equal(attention_tiled(q, k, v2, tile=5)[:, :, :20], base[:, :, :20])


def test_squared_scores_differ_from_plain_scores() -> None:
    """The square option is live: it changes the output (so the tests above can fail)."""
    q, k, v = _qkv(16)
    assert not torch.allclose(attention_tiled(q, k, v, square=True), attention_tiled(q, k, v))


def test_bad_inputs_fail_early() -> None:
    q, k, v = _qkv(8, hq=3, hkv=2)
    with pytest.raises(ValueError, match="not a multiple"):
        attention_tiled(q, k, v)
    q, k, v = _qkv(8)
    with pytest.raises(ValueError, match="cannot cover"):
        attention_tiled(q, k, v, offset=4)
    with pytest.raises(ValueError, match="tile"):
        attention_tiled(q, k, v, tile=0)


@pytest.mark.parametrize("window, square", [(None, False), (None, True), (4, False), (4, True)])
@pytest.mark.parametrize("kv_heads", [1, 2, 4])
def test_the_dispatcher_equals_plain_attention_forward_and_backward(
    window: int | None, square: bool, kv_heads: int
) -> None:
    """The fused kernel (plain global layers) and the tiled path (beyond ``tile``) give the
    reference's outputs and gradients."""
    from arbench.kernels.tiled_attention import attention, sdpa_applies

    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 37, 8, generator=g, dtype=torch.float64, requires_grad=True)
    k = torch.randn(2, kv_heads, 37, 8, generator=g, dtype=torch.float64, requires_grad=True)
    v = torch.randn(2, kv_heads, 37, 8, generator=g, dtype=torch.float64, requires_grad=True)
    ref = attention_plain(q, k, v, window=window, square=square)
    gref = torch.autograd.grad(ref.square().sum(), (q, k, v))
    for tile in (64, 8):  # plain-or-fused, then tiled
        out = attention(q, k, v, window=window, square=square, tile=tile)
        torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)
        grads = torch.autograd.grad(out.square().sum(), (q, k, v))
        for a, b in zip(grads, gref, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert sdpa_applies(window, square) == (window is None and not square)


# ---------------------------------------------------------------- memory-bounded training forms


def _fp32(T: int, S: int, hq: int, hkv: int, seed: int, d: int = 16):
    g = torch.Generator().manual_seed(seed)
    mk = lambda h, n: torch.randn(2, h, n, d, generator=g).requires_grad_()  # noqa: E731
    return mk(hq, T), mk(hkv, S), mk(hkv, S), torch.randn(2, hq, T, d, generator=g)


def _forward_and_grads(fn, q, k, v, weight):  # noqa: ANN001, ANN202
    out = fn(q, k, v)
    return (out, *torch.autograd.grad((out * weight).sum(), (q, k, v)))


FORMS = {
    "tiled": lambda w, sq, off: (
        lambda q, k, v: attention_tiled(q, k, v, window=w, square=sq, offset=off, tile=16)
    ),
    "banded": lambda w, sq, off: (
        lambda q, k, v: attention_banded(q, k, v, window=w, square=sq, offset=off)
    ),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize(
    "T, S, offset, hq, hkv, window, square",
    [
        (70, 70, 0, 4, 4, 10, True),  # the long run's local layers
        (70, 70, 0, 4, 4, 10, False),
        (70, 70, 0, 4, 2, 10, True),  # grouped kv heads
        (70, 70, 0, 4, 1, 1, False),  # a window of one: each query sees itself
        (30, 75, 45, 4, 2, 10, True),  # a query chunk after a cache of 45 keys
        (6, 6, 0, 2, 2, 10, False),  # a window longer than the sequence
        (70, 70, 0, 4, 4, None, True),  # the long run's global layers (tiled only)
        (40, 90, 50, 4, 2, None, True),
        (70, 70, 0, 4, 2, None, False),
    ],
)
def test_training_forms_equal_plain_forward_and_gradients_fp32(
    form: str, T: int, S: int, offset: int, hq: int, hkv: int, window: int | None, square: bool
) -> None:
    """Each memory-bounded form gives the reference's output and its gradients with respect
    to q, k and v, in fp32 at a tight tolerance, with windows, grouped kv heads and offsets."""
    if form == "banded" and window is None:
        pytest.skip("the band needs a window")
    q, k, v, weight = _fp32(T, S, hq, hkv, seed=T + S + offset)
    ref = _forward_and_grads(
        lambda a, b, c: attention_plain(a, b, c, window=window, square=square, offset=offset),
        q, k, v, weight,
    )  # fmt: skip
    got = _forward_and_grads(FORMS[form](window, square, offset), q, k, v, weight)
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=2e-5, msg=f"{form} {name}")


def _saved_bytes(fn, T: int) -> int:  # noqa: ANN001
    """Bytes autograd keeps for the backward pass of ``fn`` at length T (distinct storages)."""
    q, k, v, _ = _fp32(T, T, 4, 4, seed=0, d=8)
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(q, k, v).sum()
    return sum(storages.values())


@pytest.mark.parametrize(
    "window, square", [(10, True), (10, False), (None, True)], ids=["band-sq", "band", "tiled-sq"]
)
def test_training_memory_is_linear_in_the_length(window: int | None, square: bool) -> None:
    """What the dispatcher keeps for the backward pass grows like T, not T^2 (the plain
    reference, checked alongside, grows like T^2), so a test with a T x T tensor fails."""
    from arbench.kernels.tiled_attention import attention

    fn = lambda q, k, v: attention(q, k, v, window=window, square=square, tile=64)  # noqa: E731
    small, large = _saved_bytes(fn, 512), _saved_bytes(fn, 2048)
    assert large / small < 4.5  # linear: 4x the length, about 4x the bytes
    plain = lambda q, k, v: attention_plain(q, k, v, window=window, square=square)  # noqa: E731
    assert _saved_bytes(plain, 2048) / _saved_bytes(plain, 512) > 10


def test_the_dispatcher_takes_the_band_for_windows_and_tiles_beyond_one_tile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which form each layer kind runs: a window shorter than the keys by the band, squared
    global scores by the tiled form above ``tile`` or with gradients, the plain form within
    one tile without gradients."""
    from arbench.kernels import tiled_attention as ta

    used: list[str] = []
    for name in ("attention_banded", "attention_tiled", "attention_plain"):
        real = getattr(ta, name)
        monkeypatch.setattr(
            ta, name, lambda *a, _r=real, _n=name, **kw: (used.append(_n), _r(*a, **kw))[1]
        )
    q, k, v, _ = _fp32(40, 40, 4, 4, seed=1)
    ta.attention(q, k, v, window=10, square=True, tile=16)
    ta.attention(q, k, v, window=None, square=True, tile=16)
    ta.attention(q, k, v, window=None, square=True, tile=64)  # within a tile, but gradients
    with torch.no_grad():
        ta.attention(q, k, v, window=None, square=True, tile=64)
    assert used == ["attention_banded", "attention_tiled", "attention_tiled", "attention_plain"]
