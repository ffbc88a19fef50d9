"""Vocabulary extension: donor rows, noise scale, untouched parameters, shape errors."""

from __future__ import annotations

import pytest
import torch

from arbench.models.lm import LanguageModel, ModelConfig, build_model
from arbench.models.vocab_extension import (
    donor_ids,
    extend_vocabulary,
    extended_vocab_size,
    fresh_ids,
)


def _model(keys: int, tied: bool = False, d: int = 8) -> LanguageModel:
    cfg = ModelConfig(vocab_size=extended_vocab_size(keys), d_model=d, layers=1)
    cfg.tied_embeddings = tied
    return build_model(cfg, 0)


def test_donors_follow_the_layout() -> None:
    donor = donor_ids(4, 10)
    keys, values = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1], [4, 5, 6, 7, 4, 5, 6, 7, 4, 5]
    assert donor.tolist() == keys + values + [8, 9]  # id mod 4; unused id and SEP kept
    assert fresh_ids(4, 10).tolist() == ([False] * 4 + [True] * 6) * 2 + [False, False]


@pytest.mark.parametrize("tied", [False, True])
def test_real_model_grows_from_1024_to_16384_keys(tied: bool) -> None:
    old = _model(1024, tied=tied)
    sd = old.state_dict()
    new = extend_vocabulary(sd, 1024, 16384, 0.1, torch.Generator().manual_seed(0))
    grown = LanguageModel(ModelConfig(vocab_size=32770, d_model=8, layers=1, tied_embeddings=tied))
    grown.load_state_dict(new)  # strict: every name and shape fits
    rows = [n for n in ("embed.weight", "readout.weight", "readout.bias") if n in sd]
    assert rows == (
        ["embed.weight"] if tied else ["embed.weight", "readout.weight", "readout.bias"]
    )
    for name, value in sd.items():
        if name not in rows:
            assert torch.equal(new[name], value), name  # every other parameter unchanged
    for name in rows:
        old_rows, new_rows = sd[name], new[name]
        assert new_rows.shape[0] == 32770
        assert torch.equal(new_rows[:1024], old_rows[:1024])  # existing keys kept exactly
        assert torch.equal(new_rows[16384 : 16384 + 1024], old_rows[1024:2048])  # values
        assert torch.equal(new_rows[-2:], old_rows[-2:])  # unused id and SEP
        assert not torch.equal(new_rows[1024 + 5], old_rows[5])  # a copy, with noise


def test_donor_copy_and_noise_scale() -> None:
    sd = _model(64, d=32).state_dict()
    old = sd["embed.weight"]
    exact = extend_vocabulary(sd, 64, 1024, 0.0, torch.Generator())
    assert torch.equal(exact["embed.weight"], old[donor_ids(64, 1024)])
    noisy = extend_vocabulary(sd, 64, 1024, 0.5, torch.Generator().manual_seed(1))
    delta = noisy["embed.weight"] - exact["embed.weight"]
    fresh = fresh_ids(64, 1024)
    assert torch.count_nonzero(delta[~fresh]) == 0
    assert delta[fresh].std().item() == pytest.approx(0.5 * old.std().item(), rel=0.03)
    assert delta[fresh].mean().abs().item() < 0.02 * old.std().item()
    bias = noisy["readout.bias"] - exact["readout.bias"]
    assert bias[fresh].std().item() == pytest.approx(0.5 * sd["readout.bias"].std().item(), rel=0.1)
    again = extend_vocabulary(sd, 64, 1024, 0.5, torch.Generator().manual_seed(1))
    assert torch.equal(again["embed.weight"], noisy["embed.weight"])  # the generator's draws
    other = extend_vocabulary(sd, 64, 1024, 0.5, torch.Generator().manual_seed(2))
    assert not torch.equal(other["embed.weight"], noisy["embed.weight"])
    assert torch.equal(sd["embed.weight"], old)  # the input is not modified


def test_shape_mismatch_and_bad_arguments_are_clear_errors() -> None:
    sd = _model(16).state_dict()
    gen = torch.Generator()
    with pytest.raises(ValueError, match=r"embed.weight has shape \(34, 8\); old_keys=32 needs 66"):
        extend_vocabulary(sd, 32, 64, 0.1, gen)
    with pytest.raises(ValueError, match="new_keys=8 must be >= old_keys=16"):
        extend_vocabulary(sd, 16, 8, 0.1, gen)
    with pytest.raises(ValueError, match="noise"):
        extend_vocabulary(sd, 16, 64, -1.0, gen)
    with pytest.raises(ValueError, match="'head.weight' is not in the state dict"):
        extend_vocabulary(sd, 16, 64, 0.1, gen, row_names=["embed.weight", "head.weight"])
    with pytest.raises(ValueError, match="pass row_names"):
        extend_vocabulary({"w": torch.zeros(34, 2)}, 16, 64, 0.1, gen)
    custom = extend_vocabulary(
        {"w": torch.ones(34, 2), "b": torch.ones(3)}, 16, 64, 0.0, gen, ["w"]
    )
    assert custom["w"].shape == (130, 2) and custom["b"].shape == (3,)
