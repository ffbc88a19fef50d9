"""Fixtures shared by the cell tests: seeded construction and the checks every recurrent cell
family runs (chunked == recurrent, values and gradients; streaming in pieces == one pass)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from arbench.cells.base import SequenceMixer

D = 16  # width of the linear-attention and Mamba-2 cells
DPLR_B, DPLR_T, DPLR_D = 2, 45, 32  # batch, length (not a multiple of the chunk), width


def _seeded(make: Callable[[], SequenceMixer], seed: int = 0) -> SequenceMixer:
    """Build a module with a fixed seed without touching the caller's global RNG state."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make()


@pytest.fixture
def seeded():
    return _seeded


@pytest.fixture
def forms_agree(
    randn, rel_err
) -> Callable[[Callable[[], SequenceMixer], torch.dtype, float], None]:
    """Check: from a nonzero carried state, the chunked and recurrent forms give the same
    outputs, final state and gradients (input and initial state) within tol."""

    def initial_state(cell: SequenceMixer, x: torch.Tensor) -> dict:
        """A nonzero state: the state after a random prefix (conv tails included)."""
        _, st = cell(randn(x.shape[0], 5, D, seed=7, dtype=x.dtype), form="recurrent")
        return {key: val.detach() if val is not None else None for key, val in st.items()}

    def check(make: Callable[[], SequenceMixer], dtype: torch.dtype, tol: float) -> None:
        cell = _seeded(make).to(dtype)
        x = randn(2, 19, D, seed=3, dtype=dtype).requires_grad_()
        st = initial_state(cell, x)
        st["S"].requires_grad_()
        y_r, s_r = cell(x, st, form="recurrent")
        y_c, s_c = cell(x, st, form="chunked")
        assert rel_err(y_c, y_r) < tol and rel_err(s_c["S"], s_r["S"]) < tol
        w = randn(*y_r.shape, seed=11, dtype=dtype)
        g_r = torch.autograd.grad((y_r * w).sum() + s_r["S"].sum(), [x, st["S"]])
        g_c = torch.autograd.grad((y_c * w).sum() + s_c["S"].sum(), [x, st["S"]])
        for a, b in zip(g_c, g_r, strict=True):
            assert rel_err(a, b) < tol

    return check


@pytest.fixture
def streams_exactly(randn, rel_err) -> Callable[[Callable[[], SequenceMixer]], None]:
    """Check: five uneven pieces with the state carried reproduce one pass."""

    def check(make: Callable[[], SequenceMixer]) -> None:
        cell = _seeded(make).double()
        x = randn(2, 30, D, seed=4, dtype=torch.float64)
        y_full, s_full = cell(x)
        pieces, st = [], None
        for a, b in [(0, 1), (1, 4), (4, 13), (13, 14), (14, 30)]:
            y, st = cell(x[:, a:b], st)
            pieces.append(y)
        assert rel_err(torch.cat(pieces, 1), y_full) < 1e-10
        assert rel_err(st["S"], s_full["S"]) < 1e-10

    return check


@pytest.fixture
def dplr_forms_agree(max_rel_err) -> Callable[[SequenceMixer, torch.dtype, float], None]:
    """Check for the DPLR-family cells (KDA, RWKV-7): from the state after a random prefix,
    chunked == recurrent in outputs, final state and the input and state gradients."""

    def check(cell: SequenceMixer, dtype: torch.dtype, tol: float) -> None:
        gen = torch.Generator().manual_seed(5)
        x = torch.randn(DPLR_B, 7, DPLR_D, generator=gen, dtype=dtype)
        with torch.no_grad():
            _, state = cell(x, form="recurrent")
        state = {k: v.detach() for k, v in state.items()}
        s_in = state["S"].clone().requires_grad_()
        x = torch.randn(DPLR_B, DPLR_T, DPLR_D, generator=gen, dtype=dtype, requires_grad=True)
        wy = torch.randn(DPLR_B, DPLR_T, DPLR_D, generator=gen, dtype=dtype)
        results = []
        for form in ("recurrent", "chunked"):
            y, new = cell(x, {**state, "S": s_in}, form=form)
            loss = (y * wy).sum() + new["S"].square().sum()
            gx, gs = torch.autograd.grad(loss, [x, s_in])
            results.append((y, new["S"], gx, gs))
        for a, b in zip(results[1], results[0], strict=True):
            assert max_rel_err(a, b) <= tol, type(cell).__name__

    return check


@pytest.fixture
def dplr_streams_exactly(max_rel_err) -> Callable[[SequenceMixer], None]:
    """Check for the DPLR-family cells: uneven pieces reproduce one pass, every state entry."""

    def check(cell: SequenceMixer) -> None:
        gen = torch.Generator().manual_seed(6)
        x = torch.randn(DPLR_B, 70, DPLR_D, generator=gen, dtype=torch.float64)
        with torch.no_grad():
            y_full, s_full = cell(x)
            pieces, state = [], None
            for lo, hi in ((0, 1), (1, 20), (20, 53), (53, 70)):
                y, state = cell(x[:, lo:hi], state)
                pieces.append(y)
        assert max_rel_err(torch.cat(pieces, dim=1), y_full) <= 1e-10
        for key in s_full:
            assert max_rel_err(state[key], s_full[key]) <= 1e-10

    return check
