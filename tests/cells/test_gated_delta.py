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


def test_constant_decay_init_sets_the_initial_retentions() -> None:
    """decay_init: the pilot's settings (0.9999 for one head, a spread for four) are the
    initial sigmoid(decay_logit); None keeps the default; bad values fail naming the option."""
    one = build_cell("delta_rule", 32, heads=1, decay="constant", decay_init=0.9999)
    assert abs(float(torch.sigmoid(one.decay_logit.detach().double())) - 0.9999) < 1e-6
    spread = [0.88, 0.975, 0.995, 0.9999]
    four = build_cell(
        "delta_rule", 64, heads=4, d_k=16, d_v=16, decay="constant", decay_init=spread
    )
    a = torch.sigmoid(four.decay_logit.detach().double())
    assert torch.allclose(a, torch.tensor(spread, dtype=a.dtype), atol=1e-6)
    default = build_cell("delta_rule", 32, heads=4, decay="constant")
    assert torch.equal(default.decay_logit.detach(), torch.linspace(2.0, 7.0, 4))
    for bad, message in [
        (1.5, r"decay_init: each value must be in \(0, 1\)"),
        ([0.9, 0.9], "decay_init: 2 values for 4 heads"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_cell("delta_rule", 32, heads=4, decay="constant", decay_init=bad)
    with pytest.raises(ValueError, match="decay_init needs decay: constant"):
        build_cell("delta_rule", 32, decay=True, decay_init=0.9)


# The parameterisation knobs the fidelity pilots toggle (docs/PROTOCOL.md): both forms still
# agree, forward and gradients, with every knob away from its default.
KNOBS = [
    {"qk_bias": 1.0},
    {"qk_bias": 3.0, "qk_bias_axis": True, "beta_range": 2.0},
    {"key_bias": True, "feature_map": "elu1", "beta_bias": 2.0},
    {"feature_map": "silu", "key_norm": "max"},
    {"feature_map": "relu", "decay": True, "decay_bias": 1.0},
]


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(k))
@pytest.mark.parametrize("name", ["delta_rule", "diagonal"])
def test_parameterisation_knobs_keep_the_forms_equal(name: str, knobs: dict, assert_close) -> None:
    dtype = torch.float64
    cell = build_cell(name, D_MODEL, heads=CELL_HEADS, chunk_size=CHUNK, **knobs).to(dtype)
    x = torch.randn(B, T, D_MODEL, generator=torch.Generator().manual_seed(6), dtype=dtype)
    state = cell_state(cell, dtype)
    assert_close(cell_run(cell, x, state, "chunked"), cell_run(cell, x, state, "recurrent"), 1e-10)


def test_qk_bias_is_a_shared_component_of_queries_and_keys() -> None:
    cell = build_cell("delta_rule", D_MODEL, heads=CELL_HEADS, qk_bias=1.5)
    for proj in (cell.q_proj, cell.k_proj):
        assert torch.equal(proj.bias, torch.full((D_MODEL,), 1.5))
    axis = build_cell("diagonal", D_MODEL, heads=CELL_HEADS, qk_bias=2.0, qk_bias_axis=True)
    per_head = axis.k_proj.bias.reshape(CELL_HEADS, -1)
    assert (per_head[:, 0] == 2.0).all() and (per_head[:, 1:] == 0).all()
    plain = build_cell("delta_rule", D_MODEL)
    assert plain.q_proj.bias is None and plain.k_proj.bias is None  # default: no bias


def test_beta_range_and_bias_set_the_write_strength() -> None:
    cell = build_cell("delta_rule", D_MODEL, beta_range=2.0, beta_bias=30.0)
    beta = cell.prepare(torch.randn(1, 5, D_MODEL), None)[0][3]
    torch.testing.assert_close(beta, torch.full_like(beta, 2.0))


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"feature_map": "tanh"}, "feature_map"),
        ({"key_norm": "l1"}, "key_norm"),
        ({"beta_range": 2.5}, "beta_range"),
        ({"qk_bias_axis": True}, "qk_bias_axis"),
    ],
)
def test_bad_parameterisation_fails_naming_the_option(options: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        build_cell("delta_rule", D_MODEL, **options)
