"""Probes measure a real training step, and the model extrapolates them faithfully."""

from __future__ import annotations

import pytest

from arbench.resources import ProbeTable, Shape, predict, probe_specs
from arbench.resources.probe import measure

MODEL = {
    "d_model": 16,
    "layers": 1,
    "mlp_ratio": 2,
    "cell": "delta_rule",
    "cell_options": {"heads": 2, "d_k": 8, "d_v": 8, "conv": True},
}


def test_a_probe_counts_weights_moments_and_activations() -> None:
    one = measure(MODEL, 40, None, 256, 32, rows=1)
    two = measure(MODEL, 40, None, 256, 32, rows=2)
    assert one["parameters"] > 0 and one["ops"] > 0 and one["flops"] > 0
    # weights, gradients and two AdamW moments are held at least once
    assert one["peak_bytes"] >= 4 * 4 * one["parameters"]
    # a second row costs what the first row's activations cost (within the allocator's
    # rounding), and a forward without gradients holds less than a training step
    per_row = two["peak_bytes"] - one["peak_bytes"]
    assert 0 < per_row < one["peak_bytes"]
    assert one["eval_peak_bytes"] < one["peak_bytes"]


def test_a_long_row_is_predicted_within_ten_percent_of_its_measurement(tmp_path) -> None:
    """Probes at 512, 1,024 and 2,048 tokens predict a 2-row step of 6,144 tokens: the
    prediction the resource model makes for every paper-scale row longer than its probes."""
    table = ProbeTable(tmp_path / "probes.json")
    specs = probe_specs(MODEL, 40, None, [6144], 0.125)
    for spec in specs:
        table.add(spec, measure(MODEL, 40, None, spec.length, spec.supervised, spec.rows))
    shape = Shape(rows=2, length=6144, supervised=768)
    predicted = predict(table, specs, shape, "train t/a/seed0")
    measured = measure(MODEL, 40, None, 6144, 768, rows=2)
    for field in ("peak_bytes", "eval_peak_bytes", "flops"):
        assert predicted[field] == pytest.approx(measured[field], rel=0.10), field
    assert predicted["ops"] == pytest.approx(measured["ops"], rel=0.10)
