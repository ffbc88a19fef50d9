"""Grow a trained model's vocabulary from few keys to many (the lattice-recall layout).

A model trained with ``old_keys`` keys and as many values (vocabulary ``2 old_keys + 2``:
keys, values, the unused id, SEP; `arbench.tasks.lattice_recall`) is continued with
``new_keys`` keys (e.g. 1,024 -> 16,384). Its vocabulary-indexed rows (the input embedding
and, when untied, the readout's weight and bias; `arbench.models.lm.LanguageModel`) are
rebuilt for the new layout:

* key id ``k`` copies old key ``k mod old_keys``; value id ``new_keys + j`` copies old
  value ``old_keys + (j mod old_keys)``; the unused id and SEP copy their old rows;
* ids that did not exist before (``k``, ``j`` >= ``old_keys``) get Gaussian noise of
  ``noise`` times the standard deviation of the old tensor's entries, from ``generator``,
  so copies of one donor are told apart; ids that existed keep their rows exactly.

Every other parameter is copied unchanged. The result loads into a model built with
``vocab_size = extended_vocab_size(new_keys)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

ROW_NAMES = ("embed.weight", "readout.weight", "readout.bias")  # LanguageModel's names


def extended_vocab_size(keys: int) -> int:
    """The vocabulary of the layout with ``keys`` keys and as many values."""
    return 2 * keys + 2


def donor_ids(old_keys: int, new_keys: int) -> torch.Tensor:
    """(2 new_keys + 2,) the old id each new id copies (module docstring)."""
    k = torch.arange(new_keys)
    return torch.cat([k % old_keys, old_keys + k % old_keys, 2 * old_keys + torch.arange(2)])


def fresh_ids(old_keys: int, new_keys: int) -> torch.Tensor:
    """(2 new_keys + 2,) bool: the new ids that did not exist before (they get noise)."""
    k = torch.arange(new_keys)
    fresh = k >= old_keys
    return torch.cat([fresh, fresh, torch.zeros(2, dtype=torch.bool)])


def extend_vocabulary(
    state_dict: Mapping[str, torch.Tensor],
    old_keys: int,
    new_keys: int,
    noise: float,
    generator: torch.Generator,
    row_names: Iterable[str] | None = None,
) -> dict[str, torch.Tensor]:
    """A copy of ``state_dict`` with its vocabulary rows grown from ``old_keys`` to
    ``new_keys`` keys (module docstring). ``row_names`` names the vocabulary-indexed
    tensors (first dimension the vocabulary); by default those of `ROW_NAMES` present, at
    least one of which must be. A tensor whose first dimension is not ``2 old_keys + 2``,
    or a named tensor that is missing, is a ValueError naming it."""
    if old_keys < 1 or new_keys < old_keys:
        raise ValueError(f"new_keys={new_keys} must be >= old_keys={old_keys} >= 1")
    if noise < 0:
        raise ValueError(f"noise must be >= 0, got {noise}")
    if row_names is None:
        names = [n for n in ROW_NAMES if n in state_dict]
        if not names:
            raise ValueError(f"the state dict holds none of {list(ROW_NAMES)}; pass row_names")
    else:
        names = list(row_names)
        missing = [n for n in names if n not in state_dict]
        if missing:
            raise ValueError(f"row_names: {missing[0]!r} is not in the state dict")
    old_vocab = extended_vocab_size(old_keys)
    for name in names:
        shape = tuple(state_dict[name].shape)
        if not shape or shape[0] != old_vocab:
            raise ValueError(
                f"{name} has shape {shape}; old_keys={old_keys} needs {old_vocab} rows "
                f"(2 * {old_keys} + 2)"
            )
    donor, fresh = donor_ids(old_keys, new_keys), fresh_ids(old_keys, new_keys)
    out = {k: v.clone() for k, v in state_dict.items()}
    for name in names:
        old = state_dict[name]
        rows = old[donor.to(old.device)].clone()
        if noise > 0 and fresh.any():
            scale = noise * float(old.float().std())
            shape = (int(fresh.sum()), *old.shape[1:])
            draw = torch.randn(shape, generator=generator, dtype=torch.float32)
            rows[fresh.to(old.device)] += (scale * draw).to(device=old.device, dtype=old.dtype)
        out[name] = rows
    return out
