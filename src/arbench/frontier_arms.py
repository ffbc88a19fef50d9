"""The frontier experiment's arms, expanded from one compact declaration.

A frontier trains every listed cell at every listed state size, so its arms are a product
the config declares once instead of typing forty of them:

    frontier:
      cells: [delta_rule, mamba2, ...]   # fixed-state cells
      states: [64, 256, ...]             # recurrent state per layer, in elements
      widths: [16, 16, ...]              # d_model at each state (same length)
      options: {conv: true}              # given to every cell that accepts the option
      control: {cell: attention, widths: [16, 32], options: {positions: rotary}}

Each (cell, state) becomes the arm ``<cell>_s<state>`` whose shape is the one
`arbench.models.budget.fit` finds with exactly that state at that width (the smallest such
model); the control becomes ``<cell>_d<width>`` per width (its memory, the KV cache, grows
with the sequence and is reported as such). A cell that cannot reach a state at its width,
is a config error naming it; one that cannot be built on this machine (a fused kernel
without CUDA) is planned without a shape and then skipped with its reason, like any other
unavailable arm.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

KEYS = ("cells", "states", "widths", "options", "control")
CONTROL_KEYS = ("cell", "widths", "options")


class FrontierError(ValueError):
    """A frontier declaration problem, naming its key."""


def _accepted(cell: str, options: dict[str, Any]) -> dict[str, Any]:
    from arbench.cells import CELLS

    names = CELLS[cell].option_names()
    return {k: v for k, v in options.items() if k in names}


@lru_cache(maxsize=512)
def _fit(cell: str, vocab: int, state: int, width: int, layers: int, mlp: int, fixed: str) -> str:
    """`budget.fit`'s chosen options as JSON, cached: a config is resolved many times in one
    process (the workflow, the tests), and each fit builds candidate models."""
    from arbench.models.budget import fit

    chosen = fit(
        cell,
        vocab,
        state_per_layer=state,
        d_model=width,
        layers=layers,
        mlp_ratio=mlp,
        **json.loads(fixed),
    )
    return json.dumps(chosen.options)


def expand(name: str, exp: dict[str, Any]) -> None:
    """Replace ``exp["arms"]`` by the arms its ``frontier`` block declares (in place)."""
    from arbench.cells import CELLS
    from arbench.tasks import build_task

    where = f"experiments.{name}.frontier"
    block = exp["frontier"]
    unknown = sorted(set(block) - set(KEYS))
    if unknown:
        raise FrontierError(f"{where}: unknown key {unknown[0]!r}; allowed: {list(KEYS)}")
    cells, states, widths = block.get("cells", []), block.get("states", []), block.get("widths", [])
    if len(states) != len(widths) or not states:
        raise FrontierError(
            f"{where}.widths: {widths} must give one d_model per state of {where}.states {states}"
        )
    for cell in cells:
        if cell not in CELLS:
            raise FrontierError(f"{where}.cells: unknown cell {cell!r}; known: {sorted(CELLS)}")
    if "arms" in exp:
        raise FrontierError(
            f"experiments.{name}: declares both arms and frontier; "
            "give one (frontier makes the arms)"
        )
    model = exp["model"]
    vocab = build_task(exp["task"]).vocab_size
    arms: dict[str, dict[str, Any]] = {}
    for cell in cells:
        fixed = _accepted(cell, {**model.get("cell_options", {}), **block.get("options", {})})
        for state, width in zip(states, widths, strict=True):
            if CELLS[cell].unavailable_reason() is not None:  # planned, then skipped with why
                arms[f"{cell}_s{state}"] = {"cell": cell, "model": {"d_model": int(width)}}
                continue
            try:
                options = json.loads(
                    _fit(
                        cell,
                        vocab,
                        int(state),
                        int(width),
                        int(model["layers"]),
                        int(model.get("mlp_ratio", 4)),
                        json.dumps(fixed, sort_keys=True),
                    )
                )
            except (ValueError, ImportError) as err:
                raise FrontierError(f"{where}: cell {cell!r} at state {state}: {err}") from None
            arms[f"{cell}_s{state}"] = {"cell": cell, **options, "model": {"d_model": int(width)}}
    control = block.get("control")
    if control:
        unknown = sorted(set(control) - set(CONTROL_KEYS))
        if unknown:
            raise FrontierError(
                f"{where}.control: unknown key {unknown[0]!r}; allowed: {list(CONTROL_KEYS)}"
            )
        cell = control.get("cell")
        if cell not in CELLS:
            raise FrontierError(f"{where}.control.cell: unknown cell {cell!r}")
        options = _accepted(cell, control.get("options", {}))
        for width in control.get("widths", []):
            arms[f"{cell}_d{width}"] = {"cell": cell, **options, "model": {"d_model": int(width)}}
    if not arms:
        raise FrontierError(f"{where}: declares no arms (no cells and no control)")
    exp["arms"] = arms


def expand_all(cfg: dict[str, Any]) -> None:
    """Expand every experiment that declares a ``frontier`` block (in place)."""
    for name, exp in cfg.get("experiments", {}).items():
        if "frontier" in exp:
            expand(name, exp)
