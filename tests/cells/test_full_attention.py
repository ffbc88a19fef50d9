"""The full (non-causal) attention cell: every output reads every input, no carried state, one
form, the paper's projection layout and parameter count, and its attention against a reading
of the paper's block one query at a time."""

from __future__ import annotations

import pytest
import torch

from arbench.cells import CELLS, build_cell, count_parameters
from arbench.cells.full_attention import FullAttention

D = 16


def _cell(heads: int = 2, seed: int = 0) -> FullAttention:
    """A float64 cell whose biases are nonzero (the defaults are small but never zero)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cell = FullAttention(D, heads=heads).double()
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in cell.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return cell


def _x(b: int = 2, t: int = 13, seed: int = 3) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(b, t, D, generator=gen, dtype=torch.float64)


def read_query_by_query(
    cell: FullAttention, x: torch.Tensor, wrong: str | None = None
) -> torch.Tensor:
    """The paper's attention (dualgoose/model.py TinyAttentionBlock @824f4b73: q, k, v the
    thirds of one biased Linear, each viewed as heads of d / heads; softmax(q k^T / sqrt(dh))
    v with no mask; the heads concatenated; a biased output Linear), one query position and
    head at a time. ``wrong``: "causal" (keys after the query masked), "scale" (1 / dh in
    place of 1 / sqrt(dh)), "order" (the thirds read as k, q, v)."""
    b, t, d = x.shape
    h, dh = cell.heads, d // cell.heads
    q, k, v = (x @ cell.qkv.weight.T + cell.qkv.bias).split(d, -1)
    if wrong == "order":
        q, k = k, q
    out = x.new_zeros(b, t, d)
    for i in range(t):
        for head in range(h):
            cols = slice(head * dh, (head + 1) * dh)
            scores = torch.einsum("bc,bjc->bj", q[:, i, cols], k[:, :, cols])
            scores = scores / (dh if wrong == "scale" else dh**0.5)
            if wrong == "causal":
                scores[:, i + 1 :] = float("-inf")
            weights = torch.softmax(scores, dim=-1)
            out[:, i, cols] = torch.einsum("bj,bjc->bc", weights, v[:, :, cols])
    return out @ cell.out.weight.T + cell.out.bias


@pytest.mark.parametrize("heads", [1, 2, 8])
def test_the_cell_is_the_papers_attention_read_query_by_query(heads: int) -> None:
    cell = _cell(heads=heads)
    x = _x().requires_grad_()
    want = read_query_by_query(cell, x)
    for form in ("chunked", "recurrent"):
        got, state = cell(x, form=form)
        assert state is None
        assert torch.allclose(got, want, atol=1e-12, rtol=0)
    w = torch.randn(want.shape, generator=torch.Generator().manual_seed(9), dtype=want.dtype)
    params = [x, *cell.parameters()]
    g_want = torch.autograd.grad((want * w).sum(), params)
    g_got = torch.autograd.grad((cell(x)[0] * w).sum(), params)
    for a, b in zip(g_got, g_want, strict=True):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)


@pytest.mark.parametrize("wrong", ["causal", "scale", "order"])
def test_a_corrupted_reading_misses(wrong: str) -> None:
    cell = _cell()
    x = _x()
    got, _ = cell(x)
    want = read_query_by_query(cell, x, wrong)
    assert ((got - want).norm() / want.norm()).item() > 1e-3


def test_every_output_reads_every_input_and_no_state_is_carried() -> None:
    cell = _cell()
    x = _x(t=12)
    changed = x.clone()
    changed[:, 8] += 1.0
    a, _ = cell(x)
    b, _ = cell(changed)
    assert (a[:, :8] - b[:, :8]).abs().min() > 0  # earlier positions see the later token
    with pytest.raises(ValueError, match="non-causal: it cannot stream"):
        cell(x, state={"k": x})
    with pytest.raises(ValueError, match="unknown form"):
        cell(x, form="scan")


def test_declarations_options_and_parameters() -> None:
    klass = CELLS["full_attention"]
    assert klass is FullAttention
    assert (klass.causal, klass.single_form, klass.wraps, klass.not_timed) == (
        False,
        True,
        None,
        None,
    )
    assert klass.option_names() == {"heads"}
    # the paper's qkv Linear(d, 3d) and out Linear(d, d), both with bias, at d = 32
    cell = build_cell("full_attention", 32, heads=2)
    assert count_parameters(cell) == (32 * 96 + 96) + (32 * 32 + 32)
    assert cell.state_size() == 0 and cell.state_size(10) == 2 * 32 * 10
    with pytest.raises(ValueError, match="not divisible by heads=3"):
        build_cell("full_attention", 32, heads=3)
