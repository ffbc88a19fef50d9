"""Build a model from a cell name and a state/parameter budget.

For each cell the shape knobs it accepts (found from its constructor) are
enumerated; every combination whose per-layer recurrent state equals the state
budget is a candidate, and the one whose whole-model parameter count is closest
to the parameter budget (or smallest, without one) wins. Attention has no fixed
state, so only its parameters are matched; a wrapper cell (`SequenceMixer.wraps`) is shaped
through the cell it wraps.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from arbench.cells import CELLS, build_cell, count_parameters
from arbench.models.lm import LanguageModel, ModelConfig, build_model

HEADS = (1, 2, 4, 8)
D_STATE = (8, 16, 32, 64)


@dataclass
class Budgeted:
    """The chosen options and what they cost."""

    cell: str
    options: dict[str, Any]
    state_per_layer: int
    mixer_parameters: int
    model_parameters: int


def _shape_candidates(cell: str, d_model: int, state: int) -> Iterator[dict[str, Any]]:
    """Option dicts for ``cell`` that might give ``state`` elements per layer."""
    klass = CELLS[cell]
    if klass.wraps is not None:  # a wrapper: shapes of the cell it wraps, per copy's state
        w = klass.wraps
        for inner in _shape_candidates(w.cell, d_model, state // w.copies):
            yield {w.option: w.cell, **inner}
        return
    params = klass.option_names()  # presets forward **options to a parent's knobs
    if "d_state" in params:  # SSD-style: heads x d_state x head_dim
        for h in HEADS:
            for n in D_STATE:
                p, rem = divmod(state, h * n)
                if not rem and p >= 1:
                    yield {"heads": h, "d_state": n, "head_dim": p}
        return
    if "addr_scale" in params:  # lattice memory: heads x (2s+3)^2 cells x d_v
        yield from _lattice_candidates(state)
        return
    if "d_k" in params:  # matrix memory per head: heads x d_k x d_v
        for h in HEADS:
            side = math.isqrt(state // h)
            if h * side * side == state:
                yield {"heads": h, "d_k": side, **({"d_v": side} if "d_v" in params else {})}
        return
    for h in HEADS:  # no fixed state (attention): heads only
        if d_model % h == 0:
            yield {"heads": h}


LATTICE_MIN_DV = 4  # below this a cell holds too few numbers to tell values apart


def _lattice_candidates(state: int) -> Iterator[dict[str, Any]]:
    """Exact (heads, addr_scale, d_v) with heads * side^2 * d_v == state, side = 2s+3 >= 4
    (one cell per axis more than the single-address 3x3 grid). The first non-empty tier is
    offered: d_v from D_STATE; else d_v >= `LATTICE_MIN_DV` (state 64: a 4x4 grid of 4-vectors,
    not an 8x8 grid storing one number per cell, the smallest model but a useless memory);
    else any whole d_v, so even the smallest budgets match exactly."""
    shapes = [
        (h, side, state // (h * side * side))
        for h in HEADS
        for side in range(4, math.isqrt(state // h) + 1)
        if state % (h * side * side) == 0
    ]
    tiers = (
        [s for s in shapes if s[2] in D_STATE],
        [s for s in shapes if s[2] >= LATTICE_MIN_DV],
        shapes,
    )
    for h, side, d_v in next((t for t in tiers if t), []):
        yield {"heads": h, "addr_scale": (side - 3) / 2, "d_v": d_v}


def _distance(b: Budgeted, parameters: int | None) -> int:
    """How far a candidate is from the parameter budget (its size, without one)."""
    return b.model_parameters if parameters is None else abs(b.model_parameters - parameters)


def fit(
    cell: str,
    vocab_size: int,
    *,
    state_per_layer: int = 1024,
    parameters: int | None = None,
    d_model: int = 32,
    layers: int = 2,
    mlp_ratio: int = 4,
    **fixed: Any,
) -> Budgeted:
    """Choose ``cell``'s shape options to meet the budgets; ``fixed`` options are kept."""
    if cell not in CELLS:
        raise KeyError(f"unknown cell {cell!r}; known: {sorted(CELLS)}")
    reason = CELLS[cell].unavailable_reason()
    if reason is not None:
        raise ImportError(f"cell {cell!r} cannot be built here: {reason}")
    best: Budgeted | None = None
    # everything but the mixers (embedding, MLPs, norms) is the same for every candidate, so
    # one model is built and the others are counted from their mixer alone
    rest: int | None = None
    for shape in _shape_candidates(cell, d_model, state_per_layer):
        options = {**shape, **fixed}
        try:
            mixer = build_cell(cell, d_model, **options)
        except (ValueError, TypeError):
            continue
        s = mixer.state_size()
        if s and s != state_per_layer:
            continue
        per_layer = count_parameters(mixer)
        if rest is None:
            built = LanguageModel(
                ModelConfig(vocab_size, d_model, layers, mlp_ratio, cell, options)
            )
            rest = built.n_parameters() - layers * per_layer
        model = rest + layers * per_layer
        cand = Budgeted(cell, options, s, per_layer, model)
        if best is None or _distance(cand, parameters) < _distance(best, parameters):
            best = cand
    if best is None:
        raise ValueError(
            f"no shape of {cell!r} at d_model={d_model} has {state_per_layer} state elements"
        )
    return best


def build_for_budget(cell: str, vocab_size: int, seed: int = 0, **budget: Any) -> LanguageModel:
    """A seeded model of ``cell`` whose shape was chosen by `fit`."""
    chosen = fit(cell, vocab_size, **budget)
    return build_model(
        ModelConfig(
            vocab_size,
            budget.get("d_model", 32),
            budget.get("layers", 2),
            budget.get("mlp_ratio", 4),
            cell,
            chosen.options,
        ),
        seed,
    )
