"""Shared fixtures: tiny configs so tests stay fast on 2 cores."""

from __future__ import annotations

import pytest
import torch

torch.set_num_threads(1)


# ---------------------------------------------- helpers shared by tests/kernels and tests/cells
# Test modules are imported by path (--import-mode=importlib) and cannot import one another, so
# a helper several of them use is a fixture that returns it.


def _rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Frobenius-norm relative error of a against the reference b."""
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def _max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute error of a, relative to the largest entry of the reference b."""
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def _assert_close(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], tol: float) -> None:
    """Same keys, and each tensor within relative error tol of a nonzero reference."""
    assert got.keys() == ref.keys()
    for name in ref:
        assert ref[name].norm() > 0, f"{name}: reference is all zeros, comparison is vacuous"
        err = _rel_err(got[name], ref[name])
        assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"


def _randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Standard normal draws from their own seeded generator (the global RNG is untouched)."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _draw(*shape: int, seed: int) -> torch.Tensor:
    """`randn` in float64 with an explicit seed."""
    return _randn(*shape, seed=seed, dtype=torch.float64)


@pytest.fixture
def rel_err():
    return _rel_err


@pytest.fixture
def max_rel_err():
    return _max_rel_err


@pytest.fixture
def assert_close():
    return _assert_close


@pytest.fixture
def randn():
    return _randn


@pytest.fixture
def draw():
    return _draw
