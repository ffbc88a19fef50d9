"""The cell-zoo table: every registered cell's state and parameters at one budget."""

from __future__ import annotations

from typing import Any

from arbench.cells import CELLS
from arbench.models import ModelConfig, build_model
from arbench.models.budget import fit
from arbench.tasks import build_task


def cell_rows(
    vocab_size: int, state_per_layer: int, parameters: int | None, **backbone: Any
) -> list[dict[str, Any]]:
    """One row per registered cell that can be built here (see `unavailable_cells`), shaped
    by `fit` to the given budget."""
    rows = []
    for name, klass in sorted(CELLS.items()):
        if klass.unavailable_reason() is not None:
            continue
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


def unavailable_cells() -> list[dict[str, str]]:
    """Registered cells that cannot be built here (no row in the table), each with its reason."""
    return [
        {"cell": name, "reason": reason}
        for name, klass in sorted(CELLS.items())
        if (reason := klass.unavailable_reason()) is not None
    ]


def zoo_context(task: dict[str, Any], model: dict[str, Any], reference: str) -> dict[str, Any]:
    """Everything the cell-zoo table shows: every cell shaped to the reference arm's
    vocabulary, backbone, recurrent state per layer and parameter count."""
    vocab = build_task(task).vocab_size
    ref = build_model(ModelConfig(vocab_size=vocab, **model), 0)
    backbone = {k: model[k] for k in ("d_model", "layers", "mlp_ratio")}
    state, parameters = ref.state_size_per_layer(), ref.n_parameters()
    return {
        "rows": cell_rows(vocab, state, parameters, **backbone),
        "unavailable": unavailable_cells(),
        "vocab_size": vocab,
        "state_per_layer": state,
        "parameters": parameters,
        "backbone": backbone,
        "reference": reference,
    }
