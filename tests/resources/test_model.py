"""The resource model's arithmetic: fitting probes, devices, estimates and the memory check."""

from __future__ import annotations

import dataclasses

import pytest

from arbench.resources import (
    Device,
    Estimate,
    ProbeTable,
    ResourceError,
    Shape,
    _fit,
    check,
    predict,
    probe_specs,
)

H200 = Device(
    "h200", memory_gib=131, host_memory_gib=120, tflops=67, utilisation=0.5, op_overhead_us=10
)


def test_a_fit_is_exact_where_measured_and_quadratic_beyond() -> None:
    pts = [
        (512.0, 3 + 2 * 512 + 1e-3 * 512**2),
        (1024.0, 3 + 2 * 1024 + 1e-3 * 1024**2),
        (2048.0, 3 + 2 * 2048 + 1e-3 * 2048**2),
    ]
    assert _fit(pts, 1024.0) == pts[1][1]
    assert _fit(pts, 32768.0) == pytest.approx(3 + 2 * 32768 + 1e-3 * 32768**2, rel=1e-9)


def test_a_fitted_curvature_never_makes_a_longer_row_cheaper() -> None:
    bent = [(512.0, 100.0), (1024.0, 190.0), (2048.0, 300.0)]  # concave: falls far out
    assert _fit(bent, 65536.0) == pytest.approx(300.0 + 110.0 / 1024 * (65536 - 2048))


def test_one_probe_predicts_only_its_own_length() -> None:
    assert _fit([(64.0, 5.0)], 64.0) == 5.0
    with pytest.raises(ValueError, match="cannot predict length 128"):
        _fit([(64.0, 5.0)], 128.0)


def test_probes_cover_a_long_row_by_the_fit_lengths_and_positions_cap_them() -> None:
    specs = probe_specs({"cell": "x"}, 10, None, [32768, 32768], 0.25)
    assert [(s.length, s.rows) for s in specs] == [(256, 1), (256, 2), (512, 1), (1024, 1)]
    assert [s.supervised for s in specs] == [64, 64, 128, 256]
    short = probe_specs({"cell": "x"}, 10, 72, [72, 72], 1 / 72)
    assert [(s.length, s.rows, s.supervised) for s in short] == [(72, 1, 1), (72, 2, 1)]


def _table(tmp_path, fixed: float, per_token: float) -> tuple[ProbeTable, list]:
    """A probe table of a model whose step holds ``fixed`` bytes and ``per_token`` per token."""
    table = ProbeTable(tmp_path / "probes.json")
    specs = probe_specs({"cell": "x"}, 10, None, [8192], 0.5)
    for s in specs:
        table.add(
            s,
            {
                "peak_bytes": fixed + s.rows * per_token * s.length,
                "eval_peak_bytes": fixed / 4 + s.rows * per_token / 3 * s.length,
                "flops": s.rows * 1e6 * s.length,
                "ops": 100.0 + s.length / 64,
                "parameters": 1000.0,
            },
        )
    return table, specs


def test_prediction_separates_the_fixed_part_from_the_rows(tmp_path) -> None:
    table, specs = _table(tmp_path, fixed=1e6, per_token=100.0)
    p = predict(table, specs, Shape(rows=16, length=8192, supervised=4096), "train x")
    assert p["peak_bytes"] == pytest.approx(1e6 + 16 * 100.0 * 8192)
    assert p["peak_bytes_fixed"] == pytest.approx(1e6)
    assert p["flops"] == pytest.approx(16 * 1e6 * 8192)
    assert p["ops"] == pytest.approx(100 + 8192 / 64)


def test_a_missing_probe_names_the_job(tmp_path) -> None:
    table, specs = _table(tmp_path, 1.0, 1.0)
    table.rows.pop(specs[-1].key)
    with pytest.raises(
        ResourceError, match=r"^train e/a/seed0: no probe of its model at 1 x 1024 tokens"
    ):
        predict(table, specs, Shape(1, 8192, 1), "train e/a/seed0")


def test_the_table_round_trips(tmp_path) -> None:
    table, specs = _table(tmp_path, 1.0, 1.0)
    table.save()
    again = ProbeTable(tmp_path / "probes.json")
    assert again.missing(specs) == [] and again.rows == table.rows


def test_device_time_is_operators_plus_flops() -> None:
    assert H200.seconds(0.0, 1e5) == pytest.approx(1.0)
    assert H200.seconds(67e12 * 0.5, 0) == pytest.approx(1.0)


def _estimate(device_bytes: float) -> Estimate:
    return Estimate(
        "train big/arm-pairs8192/seed3", "h200", device_bytes, 2**30, 3600.0, Shape(16, 32768, 8192)
    )


def test_an_estimate_asks_for_headroom() -> None:
    est = _estimate(10 * 2**30)
    assert est.runtime_minutes == 80  # 60 min x 1.25 + 5
    assert est.device_mem_mb == pytest.approx(10 * 2**30 * 1.25 / 1e6, abs=1)


def test_a_submission_asks_for_at_most_the_partition_limit() -> None:
    """100 predicted hours: 7,505 minutes, asked for 2,880 at a time (a 48 h partition) in
    3 submissions, each after the first resuming from the checkpoint; a retry of a short job
    asks for twice its minutes, never past the limit."""
    long = dataclasses.replace(_estimate(2**30), seconds=100 * 3600.0)
    assert long.runtime_minutes == 7505
    assert long.request_minutes(2880) == 2880 and long.request_minutes(2880, attempt=3) == 2880
    assert long.submissions(2880) == 3
    short = _estimate(2**30)  # 80 minutes
    assert [short.request_minutes(2880, a) for a in (1, 2, 3, 7)] == [80, 160, 320, 2880]
    assert short.submissions(2880) == 1 and short.upper_seconds == short.seconds


def test_a_job_over_its_host_memory_fails_the_check() -> None:
    check(dataclasses.replace(_estimate(2**30), host_bytes=119 * 2**30), H200)
    with pytest.raises(ResourceError, match=r"needs 121.0 GiB of host memory beside h200"):
        check(dataclasses.replace(_estimate(2**30), host_bytes=121 * 2**30), H200)


def test_an_over_memory_job_fails_the_check_naming_itself() -> None:
    check(_estimate(130 * 2**30), H200)
    with pytest.raises(ResourceError) as err:
        check(_estimate(132 * 2**30), H200)
    assert str(err.value).startswith("train big/arm-pairs8192/seed3: needs 132.0 GiB on h200")
    assert "\n" not in str(err.value)


def _bent(tmp_path, flops_square: float) -> tuple[ProbeTable, list]:
    """Probes whose memory per row bends at small lengths (a fixed buffer per row) and whose
    FLOPs hold a T^2 term of ``flops_square``."""
    table = ProbeTable(tmp_path / "probes.json")
    specs = probe_specs({"cell": "x"}, 10, None, [8192], 0.5)
    bend = {256: 5e3, 512: 0.0, 1024: 0.0}
    for s in specs:
        per_row = 100.0 * s.length + bend[s.length]
        table.add(
            s,
            {
                "peak_bytes": 1e6 + s.rows * per_row,
                "eval_peak_bytes": 1.0,
                "flops": s.rows * (1e3 * s.length + flops_square * s.length**2),
                "ops": 10.0,
                "parameters": 1.0,
            },
        )
    return table, specs


def test_memory_is_extrapolated_as_a_square_only_where_the_work_is(tmp_path) -> None:
    shape = Shape(rows=1, length=8192, supervised=4096)
    linear, specs = _bent(tmp_path, flops_square=0.0)
    assert predict(linear, specs, shape, "j")["peak_bytes"] == pytest.approx(1e6 + 100 * 8192)
    square, specs = _bent(tmp_path, flops_square=10.0)
    assert predict(square, specs, shape, "j")["peak_bytes"] > 1e6 + 100 * 8192 * 1.2
