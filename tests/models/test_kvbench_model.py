"""The key-value benchmark's transformer: the variant grid, the parameter count of the
published shape, RoPE's relative positions at lengths far beyond training, and the tiled
path equal to the plain one (outputs and gradients)."""

from __future__ import annotations

import pytest
import torch

from arbench.models.kvbench import VARIANTS, KVModelConfig, KVTransformer, rope


def test_nine_variants_with_the_published_axes() -> None:
    assert len(VARIANTS) == 9
    specs = {v: KVModelConfig(variant=v).specs() for v in VARIANTS}
    assert all(s.rope_fraction == 1.0 and s.window is None for s in specs["rope"])
    assert {s.rope_fraction for s in specs["partial_rope"]} == {0.5}
    local, glob = specs["hybrid_square"][0], specs["hybrid_square"][1]
    assert (local.window, local.rope_fraction, glob.window, glob.rope_fraction) == (10, 1, None, 0)
    assert all(s.square for s in specs["hybrid_square"]) and not any(
        s.square for s in specs["hybrid"]
    )
    kda = specs["hybrid_square_kda"]
    assert [s.kind for s in kda[:2]] == ["kda", "attention"] and kda[1].square


def test_default_shape_has_about_2_1m_parameters() -> None:
    n = KVTransformer(KVModelConfig(variant="hybrid_square")).n_parameters()
    assert 2.0e6 < n < 2.2e6


def test_unknown_variant_names_the_key() -> None:
    with pytest.raises(ValueError, match="model.variant"):
        KVModelConfig(variant="nope").specs()


def test_rope_scores_depend_only_on_relative_position_far_out() -> None:
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 1, 1, 32, generator=g), torch.randn(1, 1, 1, 32, generator=g)
    near = (rope(q, 105, 1.0, 1e4) * rope(k, 100, 1.0, 1e4)).sum()
    far = (rope(q, 9_999_905, 1.0, 1e4) * rope(k, 9_999_900, 1.0, 1e4)).sum()
    assert torch.allclose(near, far, atol=1e-4)
    # a half-rope leaves the other half alone
    assert torch.equal(rope(q, 7, 0.5, 1e4)[..., 16:], q[..., 16:])


@pytest.mark.parametrize(
    "variant", ["rope", "partial_rope_square", "hybrid_square", "hybrid_square_kda"]
)
def test_tiled_path_equals_plain_beyond_the_training_length(variant: str) -> None:
    torch.manual_seed(0)
    cfg = KVModelConfig(
        variant=variant, d_model=32, layers=2, heads=2, kv_heads=1, head_dim=16, ffn_hidden=64
    )
    model = KVTransformer(cfg).double()
    tokens = torch.randint(0, 12, (2, 300))
    plain = model(tokens, tile=10_000)
    tiled = model(tokens, tile=64)
    assert torch.allclose(plain, tiled, atol=1e-9)


def test_gradients_flow_through_the_tiled_path() -> None:
    torch.manual_seed(0)
    cfg = KVModelConfig(d_model=32, layers=2, heads=2, kv_heads=2, head_dim=16, ffn_hidden=64)
    model = KVTransformer(cfg).double()
    tokens = torch.randint(0, 12, (1, 80))
    grads = []
    for tile in (1000, 16):
        model.zero_grad()
        model(tokens, tile=tile).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.allclose(grads[0], grads[1], atol=1e-8)


def test_causal_the_future_does_not_change_the_past() -> None:
    torch.manual_seed(0)
    cfg = KVModelConfig(d_model=32, layers=2, heads=2, kv_heads=2, head_dim=16, ffn_hidden=64)
    model = KVTransformer(cfg).eval()
    a = torch.randint(0, 12, (1, 50))
    b = a.clone()
    b[0, 40:] = (b[0, 40:] + 1) % 12
    assert torch.allclose(model(a)[0, :40], model(b)[0, :40], atol=1e-6)


@pytest.mark.parametrize(
    "variant", ["rope", "hybrid", "hybrid_square", "partial_rope_square", "hybrid_square_kda"]
)
def test_chunked_evaluation_equals_the_whole_sequence(variant: str) -> None:
    """The long-context evaluator's layer-by-layer pass, ``chunk`` positions at a time (keys
    and values of a layer first, RoPE at each chunk's offset, windows across chunk edges),
    gives the whole-sequence forward's states; KDA layers keep the whole-sequence path."""
    torch.manual_seed(0)
    cfg = KVModelConfig(variant=variant, d_model=32, layers=4, heads=4, kv_heads=2,
                        head_dim=8, ffn_hidden=64, dropout=0.1)  # fmt: skip
    model = KVTransformer(cfg).double().eval()
    tokens = torch.randint(0, 12, (2, 301))
    with torch.no_grad():
        whole = model.hidden(tokens, tile=64)[0]
        chunked = model.hidden(tokens, tile=16, chunk=37)[0]
    torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-10)
    with torch.no_grad():  # a chunk as long as the sequence: the whole-sequence path
        assert torch.equal(model.hidden(tokens, tile=64, chunk=301)[0], whole)
    with pytest.raises(ValueError, match="chunk"):
        model.hidden(tokens, chunk=0)
