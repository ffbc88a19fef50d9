"""The shared settings checks: a block into its dataclass with an unknown key named, and a
whole number at least a minimum, each failing in one line naming the key."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from arbench.settings import settings_block, whole_number


@dataclass
class Toy:
    steps: int
    lr: float = 1e-3


def test_a_block_becomes_its_dataclass_and_an_unknown_key_is_named() -> None:
    assert settings_block(Toy, {"steps": 3, "name": "x"}, "train", drop=("name",)) == Toy(3)
    with pytest.raises(ValueError, match=r"^train: unknown key 'lrr'; known: \['lr', 'steps'\]$"):
        settings_block(Toy, {"steps": 3, "lrr": 1.0}, "train")


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_a_whole_number_below_its_minimum_or_of_another_type_is_named(bad) -> None:
    with pytest.raises(ValueError, match=rf"^train\.steps must be an integer >= 1, got {bad!r}$"):
        whole_number(bad, "train.steps")
    assert whole_number(2, "x", minimum=2) == 2 and whole_number(0, "x", minimum=0) == 0
