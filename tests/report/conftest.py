"""Shared by the report tests: an experiment block and synthetic per-seed evaluations of it,
in both layouts (bars with contrasts; a sweep over lengths and answer types)."""

from __future__ import annotations

from typing import Any

import pytest

# the `compile_tex` fixture (LaTeX, installed first where it can be) is tests/conftest.py's

BARS = {
    "title": "A factorial_like & table",
    # 20 values: chance is below 10 x 1/20 = 0.5, so "plain" (mean 0.28) is chance, "armed" not
    "task": {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 20},
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


GRID = {
    **BARS,
    "title": "A grid",
    "eval": {"examples": 50, "rebinding": True},
    "grid": {"key": "task.pairs", "values": [2, 4]},
}
TUNED = {
    **BARS,
    "title": "A tuned grid",
    "train": {**BARS["train"], "lr": 2e-3},
    "grid": {"key": "train.lr", "values": [1e-3, 2e-3, 4e-3], "tune": True},
}
# per (arm, value): five seeds' accuracies; "plain" is best at the largest rate
GRID_SCORES = {
    ("armed", 0): [0.99, 0.98, 0.97, 0.99, 0.96],
    ("armed", 1): [0.9, 0.95, 0.5, 0.92, 0.93],
    ("armed", 2): [0.6, 0.55, 0.7, 0.5, 0.65],
    ("plain", 0): [0.1, 0.12, 0.11, 0.08, 0.09],
    ("plain", 1): [0.2, 0.1, 0.15, 0.12, 0.11],
    ("plain", 2): [0.4, 0.95, 0.3, 0.35, 0.92],
}


def grid_evals_for(exp: dict[str, Any]) -> list[dict[str, Any]]:
    from arbench.experiment import runs_of

    out = []
    for run_arm in [r.name for r in runs_of("", exp)]:
        arm, value = run_arm.split("-")[0], exp["grid"]["values"].index(_value(exp, run_arm))
        for seed, acc in enumerate(GRID_SCORES[(arm, value)]):
            ev = _eval(arm, seed, acc, False)
            ev["arm"] = run_arm
            if exp["eval"].get("rebinding"):
                ev["scores"]["rebinding_accuracy"] = acc - 0.01
            out.append(ev)
    return out


def _value(exp: dict[str, Any], run_arm: str) -> Any:
    from arbench.experiment import run_of

    return run_of(exp, run_arm).value


@pytest.fixture
def grid_experiment() -> dict[str, Any]:
    return GRID


@pytest.fixture
def grid_evals() -> list[dict[str, Any]]:
    return grid_evals_for(GRID)


@pytest.fixture
def tuned_experiment() -> dict[str, Any]:
    return TUNED


@pytest.fixture
def tuned_evals() -> list[dict[str, Any]]:
    return grid_evals_for(TUNED)


@pytest.fixture
def grid_scores() -> dict[tuple[str, int], list[float]]:
    return GRID_SCORES


HAYSTACK = {"name": "haystack", "pairs": 2, "n_keys": 8, "n_values": 20, "seq_len": 24}
LOCKIN = {
    **BARS,
    "title": "A lock-in study",
    "task": HAYSTACK,
    "layout": "lockin",
    "arms": {
        "plain": {"cell": "delta_rule", "conv": True},
        "ramped": {"cell": "delta_rule", "conv": True, "train": {"curriculum": {"ramp": "shaped"}}},
    },
    "contrasts": [{"knob": "curriculum", "a": "ramped", "b": "plain"}],
}
# "ramped" locks in on 4 of 5 seeds, "plain" on 1: Fisher two-sided p = 0.206
LOCKIN_SCORES = {"ramped": [0.99, 0.97, 1.0, 0.3, 0.95], "plain": [0.05, 0.06, 0.98, 0.04, 0.05]}


@pytest.fixture
def lockin_experiment() -> dict[str, Any]:
    return LOCKIN


@pytest.fixture
def lockin_evals() -> list[dict[str, Any]]:
    return [
        _eval(arm, s, acc, False)
        for arm, scores in LOCKIN_SCORES.items()
        for s, acc in enumerate(scores)
    ]


@pytest.fixture
def lockin_curves() -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Training curves: every seed of each arm rising to its final score, gap where ramped."""
    return {
        (arm, s): [
            {
                "step": 10 * i,
                "acc": acc * i / 20,
                "loss": 1.0,
                **({"gap": i / 20} if arm == "ramped" else {}),
            }
            for i in range(1, 21)
        ]
        for arm, scores in LOCKIN_SCORES.items()
        for s, acc in enumerate(scores)
    }
