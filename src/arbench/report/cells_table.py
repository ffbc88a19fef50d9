"""The cell-zoo table: every registered cell's state and parameters at one budget."""

from __future__ import annotations

from typing import Any

from arbench.cells import CELLS
from arbench.models.budget import fit


def cell_rows(
    vocab_size: int, state_per_layer: int, parameters: int | None, **backbone: Any
) -> list[dict[str, Any]]:
    """One row per registered cell, shaped by `fit` to the given budget."""
    rows = []
    for name, klass in sorted(CELLS.items()):
        chosen = fit(
            name, vocab_size, state_per_layer=state_per_layer, parameters=parameters, **backbone
        )
        doc = (klass.__doc__ or "").strip().splitlines()[0]
        rows.append(
            {
                "cell": name,
                "options": chosen.options,
                "state_per_layer": chosen.state_per_layer,
                "grows_with_length": chosen.state_per_layer == 0,
                "mixer_parameters": chosen.mixer_parameters,
                "model_parameters": chosen.model_parameters,
                "summary": doc,
            }
        )
    return rows
