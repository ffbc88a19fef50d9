"""The language model around a cell: seeded construction, shapes, streaming equals one pass."""

from __future__ import annotations

import torch

from arbench.models import ModelConfig, build_model


def test_initial_weights_are_a_function_of_the_seed_only() -> None:
    cfg = ModelConfig(vocab_size=20, d_model=16, cell="delta_rule", cell_options={"conv": True})
    torch.manual_seed(123)
    a, b, c = build_model(cfg, 1), build_model(cfg, 1), build_model(cfg, 2)
    after = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(after, torch.rand(1))  # building consumed none of the caller's RNG
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_streaming_in_pieces_equals_one_pass() -> None:
    cfg = ModelConfig(vocab_size=20, d_model=16, cell="delta_rule", cell_options={"conv": True})
    model = build_model(cfg, 0).eval()
    tokens = torch.randint(0, 20, (2, 23), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        whole, _ = model(tokens)
        first, state = model(tokens[:, :10])
        rest, _ = model(tokens[:, 10:], state)
    assert whole.shape == (2, 23, 20)
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, rtol=1e-5, atol=1e-6)


def test_embedding_scale_and_untied_readout() -> None:
    base = dict(vocab_size=400, d_model=16, cell="delta_rule")
    default = build_model(ModelConfig(**base), 0)
    wide = build_model(ModelConfig(**base, embed_std=1.0), 0)
    assert abs(default.embed.weight.std().item() - 16**-0.5) < 0.02
    assert abs(wide.embed.weight.std().item() - 1.0) < 0.05
    assert default.readout is None  # tied: logits are h @ E^T
    untied = build_model(ModelConfig(**base, tied_embeddings=False), 0)
    h = torch.randn(3, 16)
    torch.testing.assert_close(untied.logits(h), untied.readout(h))
    assert untied.n_parameters() == default.n_parameters() + 16 * 400 + 400
