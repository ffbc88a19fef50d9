"""The memo of other scales' checks: a pass is reused by a later process, a failure never is,
and anything the check reads (config, library, reference files) changes the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import arbench.config as arbench_config
from arbench.config import check_memo
from arbench.config.loading import dealias, load_yaml


@pytest.fixture
def memo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder, and no in-process cache of earlier checks."""
    monkeypatch.setenv("ARBENCH_CACHE", str(tmp_path / "cache"))
    arbench_config._other_scale_error.cache_clear()
    yield tmp_path / "cache"
    arbench_config._other_scale_error.cache_clear()


def _raw() -> str:
    """The raw config as `resolve` hands it to the other scales' checks."""
    config = arbench_config.expand_recipes(dealias(load_yaml(arbench_config.ROOT / "config.yaml")))
    arbench_config.validate(config)
    return json.dumps(config, sort_keys=True)


def test_a_pass_is_recorded_and_reused_without_checking(memo, monkeypatch) -> None:
    raw = _raw()
    assert arbench_config._other_scale_error(raw, "smoke") is None
    assert check_memo.passed(raw, "smoke") and len(list(memo.rglob("*"))) >= 1
    arbench_config._other_scale_error.cache_clear()  # as a new process would start

    def fail(cfg):
        raise AssertionError("checked again although recorded as passed")

    monkeypatch.setattr(arbench_config, "_resolve_scale", fail)
    assert arbench_config._other_scale_error(raw, "smoke") is None


def test_a_failure_is_never_recorded(memo, monkeypatch) -> None:
    raw = _raw()

    def bad(cfg):
        raise arbench_config.ConfigError("scales.smoke: injected")

    monkeypatch.setattr(arbench_config, "_resolve_scale", bad)
    assert arbench_config._other_scale_error(raw, "smoke") == "scales.smoke: injected"
    assert not check_memo.passed(raw, "smoke")
    assert not memo.exists() or not any(memo.rglob("*"))


def test_the_key_changes_with_config_scale_and_reference_bytes(memo, tmp_path) -> None:
    raw = _raw()
    base = check_memo.key(raw, "smoke")
    assert check_memo.key(raw, "demo") != base
    cfg = json.loads(raw)
    cfg["experiments"]["factorial"]["train"]["steps"] += 1
    assert check_memo.key(json.dumps(cfg, sort_keys=True), "smoke") != base
    ref = tmp_path / "ref.yaml"
    ref.write_text("a: 1\n")
    cfg = json.loads(raw)
    cfg["experiments"]["factorial"]["reference"] = {"file": str(ref), "set": "x"}
    with_ref = check_memo.key(json.dumps(cfg, sort_keys=True), "smoke")
    ref.write_text("a: 2\n")
    assert check_memo.key(json.dumps(cfg, sort_keys=True), "smoke") != with_ref


def test_an_unwritable_cache_folder_only_costs_the_check(tmp_path, monkeypatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("ARBENCH_CACHE", str(blocker))
    arbench_config._other_scale_error.cache_clear()
    raw = _raw()
    assert arbench_config._other_scale_error(raw, "smoke") is None
    assert not check_memo.passed(raw, "smoke")
    arbench_config._other_scale_error.cache_clear()
