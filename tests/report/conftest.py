"""Shared by the report tests: an experiment block and synthetic per-seed evaluations of it,
in both layouts (bars with contrasts; a sweep over lengths and answer types)."""

from __future__ import annotations

from typing import Any

import pytest

BARS = {
    "title": "A factorial_like & table",
    "task": {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8},
    "model": {"d_model": 16, "layers": 2},
    "train": {"steps": 10, "batch": 4, "lr": 1e-3, "warmup": 1},
    "eval": {"examples": 50},
    "seeds": 5,
    "lock_in_threshold": 0.9,
    "arms": {
        "armed": {"cell": "delta_rule", "conv": True},
        "plain": {"cell": "delta_rule", "conv": False},
    },
    "contrasts": [{"knob": "convolution", "within": "rank-1", "a": "armed", "b": "plain"}],
}
SWEEP = {
    **BARS,
    "title": "A sweep",
    "task": {
        "name": "passkey_swar",
        "release": "passkey_swar",
        "train_configs": [32],
        "eval_configs": [32, 64],
        "params": {},
    },
    "contrasts": [],
}


def _eval(arm: str, seed: int, accuracy: float, per_config: bool) -> dict[str, Any]:
    scores: dict[str, Any] = {"accuracy": accuracy}
    if per_config:
        scores["per_config"] = {
            f"n{n}": {
                "examples": 3,
                "seconds": 0.1,
                "ar_valid": accuracy,
                "ar_valid_n": 9,
                "passkey": accuracy / 2,
                "passkey_n": 12,
                "ar_expired_stale": None,
                "all": accuracy,
            }
            for n in (64, 32)
        }
    return {
        "experiment": "x",
        "arm": arm,
        "seed": seed,
        "scores": scores,
        "n_parameters": 1000 + (arm == "armed") * 50,
        "state_size_per_layer": 256,
        "train_wall_time_s": 1.0,
    }


@pytest.fixture
def bars_evals() -> list[dict[str, Any]]:
    armed = [0.95, 0.97, 0.99, 0.5, 0.92]
    plain = [0.1, 0.12, 0.11, 0.95, 0.13]
    return [_eval("armed", s, a, False) for s, a in enumerate(armed)] + [
        _eval("plain", s, a, False) for s, a in enumerate(plain)
    ]


@pytest.fixture
def sweep_evals() -> list[dict[str, Any]]:
    return [_eval(arm, s, 0.2 + 0.1 * s, True) for arm in ("armed", "plain") for s in range(2)]


@pytest.fixture
def bars_experiment() -> dict[str, Any]:
    return BARS


@pytest.fixture
def sweep_experiment() -> dict[str, Any]:
    return SWEEP
