"""Chunked kernels and cells of the factorial agree with their step-by-step references."""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from arbench.cells import build_cell
from arbench.cells.delta_rule import delta_rule_chunked, delta_rule_recurrent
from arbench.cells.diagonal import (
    diagonal_chunked,
    diagonal_recurrent,
    gated_linear_attention_chunked,
    gated_linear_attention_recurrent,
)
from arbench.cells.factorial import (
    DECAY_BIAS_INIT,
    DeltaRuleCell,
    DiagonalCell,
    FactorialCell,
    GatedDeltaNetCell,
)
from arbench.cells.short_conv import ShortConv

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
B, H, T, DK, DV, CHUNK = 2, 2, 50, 8, 6, 16  # T is deliberately not a multiple of CHUNK
ARMS = list(itertools.product(["delta_rule", "diagonal"], [False, True], [False, True]))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def assert_close(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], tol: float) -> None:
    assert got.keys() == ref.keys()
    for name in ref:
        assert ref[name].norm() > 0, f"{name}: reference is all zeros, comparison is vacuous"
        err = rel_err(got[name], ref[name])
        assert err <= tol, f"{name}: relative error {err:.3g} > {tol:g}"


def kernel_inputs(dtype: torch.dtype, seed: int = 0) -> dict[str, torch.Tensor]:
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


def run_and_grad(fn, inputs: dict[str, torch.Tensor], seed: int = 1) -> dict[str, torch.Tensor]:
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


def _gla_inputs(inputs: dict[str, torch.Tensor], strength: float = 1.0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(7)
    dtype = inputs["q"].dtype
    log_decay = strength * F.logsigmoid(torch.randn(B, H, T, DK, generator=g, dtype=dtype) + 1.0)
    return {
        "q": inputs["q"],
        "k": inputs["k"],
        "v": inputs["v"],
        "log_decay": log_decay,
        "initial_state": inputs["initial_state"],
    }


KERNELS = {
    "delta_rule": (delta_rule_recurrent, delta_rule_chunked),
    "diagonal": (diagonal_recurrent, diagonal_chunked),
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decay", [False, True])
@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_kernel_chunked_matches_recurrent(kernel: str, decay: bool, dtype: torch.dtype) -> None:
    recurrent, chunked = KERNELS[kernel]
    inputs = kernel_inputs(dtype)
    if not decay:
        inputs["log_alpha"] = None
    inputs = {n: x for n, x in inputs.items() if x is not None}
    ref = run_and_grad(recurrent, inputs)
    got = run_and_grad(lambda **kw: chunked(**kw, chunk_size=CHUNK), inputs)
    assert_close(got, ref, TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("path", ["factorised", "tree"])
def test_gated_linear_attention_chunked_matches_recurrent(dtype: torch.dtype, path: str) -> None:
    from arbench.cells.dplr import factorisable

    # decays strong enough to overflow the factorised form (in this dtype) must take the tree
    strength = 1.0 if path == "factorised" else {torch.float32: 25.0, torch.float64: 200.0}[dtype]
    inputs = _gla_inputs(kernel_inputs(dtype), strength)
    g = F.pad(inputs["log_decay"], (0, 0, 0, 14)).unflatten(2, (-1, CHUNK)).cumsum(-2)
    assert factorisable(g, dim=-2) == (path == "factorised")
    ref = run_and_grad(gated_linear_attention_recurrent, inputs)
    got = run_and_grad(lambda **kw: gated_linear_attention_chunked(**kw, chunk_size=CHUNK), inputs)
    assert_close(got, ref, TOL[dtype])


def test_diagonal_clamped_decay_is_finite_and_consistent() -> None:
    """One-hot keys with beta ~ 1 hit the log-decay floor; both forms clamp identically."""
    inputs = kernel_inputs(torch.float64)
    idx = torch.arange(T) % DK
    inputs["k"] = F.one_hot(idx, DK).to(torch.float64).expand(B, H, T, DK).contiguous()
    inputs["beta"] = torch.full((B, H, T), 1.0 - 1e-15, dtype=torch.float64)
    ref = run_and_grad(diagonal_recurrent, inputs)
    got = run_and_grad(lambda **kw: diagonal_chunked(**kw, chunk_size=CHUNK), inputs)
    assert all(torch.isfinite(x).all() for x in got.values())
    assert_close(got, ref, 1e-10)


def test_delta_rule_matches_explicit_formula() -> None:
    """Guard against both forms sharing a bug: one step against the written-out recurrence."""
    x = kernel_inputs(torch.float64)
    x = {n: (t[:, :, :1] if t.dim() >= 3 and n != "initial_state" else t) for n, t in x.items()}
    o, s = delta_rule_chunked(**x, chunk_size=CHUNK)
    k, v, q = x["k"][:, :, 0], x["v"][:, :, 0], x["q"][:, :, 0]
    b, a = x["beta"][:, :, 0, None, None], x["log_alpha"][:, :, 0, None, None].exp()
    eye = torch.eye(DK, dtype=torch.float64)
    kkt = k[..., :, None] * k[..., None, :]
    expect = a * (eye - b * kkt) @ x["initial_state"] + b * k[..., :, None] * v[..., None, :]
    assert rel_err(s, expect) < 1e-12
    assert rel_err(o[:, :, 0], torch.einsum("bhkv,bhk->bhv", expect, q)) < 1e-12


def test_diagonal_matches_explicit_formula() -> None:
    x = kernel_inputs(torch.float64)
    x = {n: (t[:, :, :1] if t.dim() >= 3 and n != "initial_state" else t) for n, t in x.items()}
    _, s = diagonal_chunked(**x, chunk_size=CHUNK)
    k, v = x["k"][:, :, 0], x["v"][:, :, 0]
    b, a = x["beta"][:, :, 0, None, None], x["log_alpha"][:, :, 0, None, None].exp()
    diag = torch.diag_embed(1.0 - b[..., 0] * k * k)
    expect = a * diag @ x["initial_state"] + b * k[..., :, None] * v[..., None, :]
    assert rel_err(s, expect) < 1e-12


# ---------------------------------------------------------------- cells


D_MODEL, CELL_HEADS, CONV_K = 16, 2, 4


def make_cell(name: str, conv: bool, decay: bool, dtype: torch.dtype) -> FactorialCell:
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


def cell_state(cell: FactorialCell, dtype: torch.dtype) -> dict:
    g = torch.Generator().manual_seed(4)
    s = torch.randn(B, cell.heads, cell.d_k, cell.d_v, generator=g, dtype=dtype)
    conv = None
    if cell.use_conv:
        widths = (cell.heads * cell.d_k, cell.heads * cell.d_k, cell.heads * cell.d_v)
        conv = tuple(torch.randn(B, CONV_K - 1, w, generator=g, dtype=dtype) for w in widths)
    return {"S": s, "conv": conv}


def cell_run(cell: FactorialCell, x: torch.Tensor, state: dict, form: str) -> dict:
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
    name: str, conv: bool, decay: bool, dtype: torch.dtype
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
def test_cell_streaming_equals_one_pass(name: str, conv: bool, decay: bool, form: str) -> None:
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


# ---------------------------------------------------------------- short conv


@pytest.mark.parametrize("kernel_size", [1, 4])
def test_short_conv_causal_and_streaming(kernel_size: int) -> None:
    conv = ShortConv(5, kernel_size).double()
    g = torch.Generator().manual_seed(9)
    x = torch.randn(2, 11, 5, generator=g, dtype=torch.float64)
    y, tail = conv(x)
    # Explicit causal depthwise convolution with zero history.
    w = conv.conv.weight[:, 0, :]  # (C, K); output t uses x[t-K+1 .. t]
    xp = F.pad(x, (0, 0, kernel_size - 1, 0))
    expect = sum(xp[:, j : j + 11] * w[:, j] for j in range(kernel_size))
    assert rel_err(y, expect) < 1e-12
    assert tail.shape == (2, kernel_size - 1, 5)
    y1, t1 = conv(x[:, :1])
    y2, t2 = conv(x[:, 1:7], t1)
    y3, t3 = conv(x[:, 7:], t2)
    assert torch.allclose(torch.cat([y1, y2, y3], dim=1), y, rtol=0, atol=1e-12)
    assert torch.equal(t3, tail)


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


@pytest.mark.parametrize("c", [1, 5, 16, 32])
def test_unit_lower_inverse_and_its_gradient(c: int) -> None:
    from arbench.cells.delta_rule import _UnitLowerInverse, unit_lower_inverse

    g = torch.Generator().manual_seed(c)
    a = torch.randn(3, c, c, generator=g, dtype=torch.float64) * 0.3
    eye = torch.eye(c, dtype=torch.float64)
    ref = torch.linalg.inv(eye + a.tril(-1))
    assert (unit_lower_inverse(a) - ref).abs().max() < 1e-12
    assert torch.autograd.gradcheck(_UnitLowerInverse.apply, (a.requires_grad_(True),))


@pytest.mark.parametrize("chunk", [12, 64])
def test_delta_rule_any_chunk_size(chunk: int) -> None:
    inputs = kernel_inputs(torch.float64)
    ref = run_and_grad(delta_rule_recurrent, inputs)
    got = run_and_grad(lambda **kw: delta_rule_chunked(**kw, chunk_size=chunk), inputs)
    assert_close(got, ref, TOL[torch.float64])
