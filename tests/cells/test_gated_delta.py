"""Gated delta-rule cells (delta_rule, diagonal, gated_deltanet): every arm's chunked form
matches its recurrent form, streams exactly, and has the same state size."""

from __future__ import annotations

import itertools

import pytest
import torch

from arbench.cells import build_cell
from arbench.cells.gated_delta import (
    DECAY_BIAS_INIT,
    DeltaRuleCell,
    DiagonalCell,
    GatedDeltaCell,
    GatedDeltaNetCell,
)

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
B, T, CHUNK = 2, 50, 16  # T is deliberately not a multiple of CHUNK
D_MODEL, CELL_HEADS, CONV_K = 16, 2, 4
ARMS = list(itertools.product(["delta_rule", "diagonal"], [False, True], [False, True]))


def make_cell(name: str, conv: bool, decay: bool, dtype: torch.dtype) -> GatedDeltaCell:
    cell = build_cell(
        name, D_MODEL, heads=CELL_HEADS, conv=conv, decay=decay, conv_kernel=CONV_K,
        chunk_size=CHUNK,
    )  # fmt: skip
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for pname, p in cell.named_parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.4)
            if pname == "decay_proj.bias":
                p.add_(3.0)
    return cell.to(dtype)


def cell_state(cell: GatedDeltaCell, dtype: torch.dtype) -> dict:
    g = torch.Generator().manual_seed(4)
    s = torch.randn(B, cell.heads, cell.d_k, cell.d_v, generator=g, dtype=dtype)
    conv = None
    if cell.use_conv:
        widths = (cell.heads * cell.d_k, cell.heads * cell.d_k, cell.heads * cell.d_v)
        conv = tuple(torch.randn(B, CONV_K - 1, w, generator=g, dtype=dtype) for w in widths)
    return {"S": s, "conv": conv}


def cell_run(cell: GatedDeltaCell, x: torch.Tensor, state: dict, form: str) -> dict:
    cell.zero_grad()
    xl = x.detach().clone().requires_grad_(True)
    y, new = cell(xl, state, form=form)
    g = torch.Generator().manual_seed(5)
    loss = (y * torch.randn(y.shape, generator=g, dtype=y.dtype)).sum()
    loss = loss + (new["S"] * torch.randn(new["S"].shape, generator=g, dtype=y.dtype)).sum()
    loss.backward()
    out = {"y": y.detach(), "S": new["S"].detach(), "dx": xl.grad}
    out.update({f"d_{n}": p.grad.clone() for n, p in cell.named_parameters()})
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("name", "conv", "decay"), ARMS)
def test_cell_chunked_matches_recurrent(
    name: str, conv: bool, decay: bool, dtype: torch.dtype, assert_close
) -> None:
    cell = make_cell(name, conv, decay, dtype)
    x = torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(6), dtype=dtype)
    state = cell_state(cell, dtype)
    ref = cell_run(cell, x, state, "recurrent")
    got = cell_run(cell, x, state, "chunked")
    assert ("d_decay_proj.weight" in ref) == decay
    assert ("d_q_conv.conv.weight" in ref) == conv
    assert_close(got, ref, TOL[dtype])


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
@pytest.mark.parametrize(("name", "conv", "decay"), ARMS)
def test_cell_streaming_equals_one_pass(
    name: str, conv: bool, decay: bool, form: str, rel_err
) -> None:
    dtype = torch.float64
    cell = make_cell(name, conv, decay, dtype)
    x = torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(8), dtype=dtype)
    with torch.no_grad():
        y_full, s_full = cell(x, None, form=form)
        state, pieces = None, []
        for lo, hi in [(0, 2), (2, 21), (21, T)]:  # uneven, one shorter than the conv tail
            y, state = cell(x[:, lo:hi], state, form=form)
            pieces.append(y)
    assert rel_err(torch.cat(pieces, dim=1), y_full) < 1e-10
    assert rel_err(state["S"], s_full["S"]) < 1e-10
    if conv:
        for a, b in zip(state["conv"], s_full["conv"], strict=True):
            assert rel_err(a, b) < 1e-12  # projections of a slice may round differently
    else:
        assert state["conv"] is None


@pytest.mark.parametrize(("name", "conv", "decay"), ARMS)
def test_all_arms_have_equal_state_size(name: str, conv: bool, decay: bool) -> None:
    cell = build_cell(name, 32, conv=conv, decay=decay)
    assert cell.state_size() == 1024
    _, state = cell(torch.zeros(1, 3, 32))
    assert state["S"].numel() == cell.state_size()


def test_registered_presets() -> None:
    assert isinstance(build_cell("delta_rule", 32), DeltaRuleCell)
    assert isinstance(build_cell("diagonal", 32), DiagonalCell)
    gdn = build_cell("gated_deltanet", 32)
    assert isinstance(gdn, GatedDeltaNetCell)
    assert gdn.use_conv and gdn.use_decay and gdn.transition == "delta"
    assert gdn.state_size() == 1024
    assert torch.allclose(gdn.decay_proj.bias, torch.full((1,), DECAY_BIAS_INIT))
    assert not build_cell("gated_deltanet", 32, conv=False).use_conv


@pytest.mark.parametrize("heads", [1, 4])
def test_constant_decay_is_input_independent_and_forms_agree(heads: int) -> None:
    """decay='constant': one learned decay per head, the same at every step and input."""
    g = torch.Generator().manual_seed(11)
    cell = build_cell("delta_rule", 32, heads=heads, decay="constant", conv=True, chunk_size=8)
    assert cell.decay_logit.shape == (heads,)
    x = torch.randn(2, 21, 32, generator=g, requires_grad=True)
    y_c, s_c = cell(x, form="chunked")
    y_r, s_r = cell(x, form="recurrent")
    assert torch.allclose(y_c, y_r, rtol=1e-4, atol=1e-5)
    assert torch.allclose(s_c["S"], s_r["S"], rtol=1e-4, atol=1e-5)
    (gc,) = torch.autograd.grad(y_c.square().sum(), cell.decay_logit)
    (gr,) = torch.autograd.grad(y_r.square().sum(), cell.decay_logit)
    assert torch.allclose(gc, gr, rtol=1e-4, atol=1e-6) and gc.abs().sum() > 0
    with pytest.raises(ValueError, match="decay"):
        build_cell("delta_rule", 32, decay="sometimes")
