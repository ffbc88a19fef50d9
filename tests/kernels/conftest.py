"""Fixtures shared by the kernel tests: seeded kernel inputs and forward+backward runners."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from arbench.bench.cells import cell_options, kernel_inputs
from arbench.cells import build_cell

# delta-rule family inputs: T is deliberately not a multiple of the tests' chunk sizes
B, H, T, DK, DV = 2, 2, 50, 8, 6


def _delta_inputs(dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
    """Unit q, k (B,H,T,DK); v (B,H,T,DV); beta, log_alpha (B,H,T); initial_state (B,H,DK,DV)."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=dtype)

    return {
        "q": F.normalize(rand(B, H, T, DK), dim=-1),
        "k": F.normalize(rand(B, H, T, DK), dim=-1),
        "v": rand(B, H, T, DV),
        "beta": torch.sigmoid(rand(B, H, T)),
        "log_alpha": F.logsigmoid(rand(B, H, T) + 2.0),
        "initial_state": rand(B, H, DK, DV),
    }


def _frozen_inverse(a: torch.Tensor) -> torch.Tensor:
    """(I + tril(a, -1))^{-1} by blocked halving (C a power of two), frozen as it computed up to
    the halving layout (f245edd): matmul on diagonal-block views of eye and tril(a)."""
    c = a.shape[-1]
    low, t = a.tril(-1), torch.eye(c, dtype=a.dtype).expand(a.shape).clone()
    m = 1
    while m < c:
        shape = (*a.shape[:-2], c // (2 * m), 2 * m, c // (2 * m), 2 * m)
        tb, lb = (x.view(shape).diagonal(dim1=-4, dim2=-2).movedim(-1, -3) for x in (t, low))
        tb[..., m:, :m] = -(tb[..., m:, m:] @ (lb[..., m:, :m] @ tb[..., :m, :m]))
        m *= 2
    return t


def _run_and_grad(fn, inputs: dict[str, torch.Tensor], seed: int = 1) -> dict[str, torch.Tensor]:
    """Outputs, final state and input gradients of a random projection of both."""
    leaves = {n: x.detach().clone().requires_grad_(True) for n, x in inputs.items()}
    o, s = fn(**leaves)
    g = torch.Generator().manual_seed(seed)
    loss = (o * torch.randn(o.shape, generator=g, dtype=o.dtype)).sum()
    loss = loss + (s * torch.randn(s.shape, generator=g, dtype=s.dtype)).sum()
    loss.backward()
    out = {"o": o.detach(), "S": s.detach()}
    out.update({f"d_{n}": x.grad for n, x in leaves.items()})
    return out


def _outputs_and_grads(fn, inputs: list[torch.Tensor], gen: torch.Generator, **kw):
    """(o, S, input gradients) of sum(o * wo) + sum(S * ws), wo and ws drawn from gen."""
    o, s = fn(*inputs, **kw)
    wo = torch.randn(o.shape, generator=gen, dtype=o.dtype)
    ws = torch.randn(s.shape, generator=gen, dtype=s.dtype)
    grads = torch.autograd.grad((o * wo).sum() + (s * ws).sum(), inputs)
    return o, s, grads


@pytest.fixture
def delta_inputs() -> Callable[..., dict[str, torch.Tensor]]:
    return _delta_inputs


@pytest.fixture
def frozen_inverse() -> Callable[[torch.Tensor], torch.Tensor]:
    """The unit lower-triangular inverse as frozen for the bit-identity tests."""
    return _frozen_inverse


@pytest.fixture
def run_and_grad():
    return _run_and_grad


@pytest.fixture
def delta_family_forms_agree(assert_close) -> Callable[..., None]:
    """check(recurrent, chunked, decay, dtype, tol, chunk): the two forms of a delta-rule-family
    kernel agree, outputs and every input's gradient, on `_delta_inputs` (T = 50)."""

    def check(recurrent, chunked, decay: bool, dtype: torch.dtype, tol: float, chunk: int):
        inputs = _delta_inputs(dtype)
        if not decay:
            inputs["log_alpha"] = None
        inputs = {n: x for n, x in inputs.items() if x is not None}
        ref = _run_and_grad(recurrent, inputs)
        got = _run_and_grad(lambda **kw: chunked(**kw, chunk_size=chunk), inputs)
        assert_close(got, ref, tol)

    return check


@pytest.fixture
def outputs_and_grads():
    return _outputs_and_grads


@pytest.fixture
def final_state_gradients_agree(draw) -> Callable[[str], None]:
    """Check for a registered cell's kernel: a loss on the final state only (the outputs'
    gradient arrives as materialised zeros) gives the chunked kernel the recurrent kernel's
    input gradients, on the inputs the cell really feeds it."""

    def check(name: str) -> None:
        torch.manual_seed(0)
        cell = build_cell(name, 32, **cell_options(name)).double()
        args = kernel_inputs(cell, torch.randn(2, 40, 32, dtype=torch.float64))
        grads = {}
        for form in ("chunked", "recurrent"):
            leaves = [a.clone().requires_grad_(True) if torch.is_tensor(a) else a for a in args]
            _, s = cell.kernel(form)(*leaves)
            tensors = [a for a in leaves if torch.is_tensor(a)]
            loss = (s * draw(*s.shape, seed=24)).sum()
            got = torch.autograd.grad(loss, tensors, allow_unused=True)  # q does not reach S
            grads[form] = [
                torch.zeros_like(a) if g is None else g for a, g in zip(tensors, got, strict=True)
            ]
        for got, want in zip(grads["chunked"], grads["recurrent"], strict=True):
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
        assert any(g.abs().max() > 1e-3 for g in grads["chunked"])

    return check
