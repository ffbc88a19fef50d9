"""The shared building blocks of the cells: chunk-carry scans, L2 norm, short conv, the
prepare -> kernel -> finish split (what the benchmark times as a cell's kernel)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.cells import build_cell
from arbench.cells.base import l2_normalize, pick_form
from arbench.cells.scan import diagonal_scan, matrix_scan
from arbench.cells.short_conv import ShortConv
from arbench.bench.cells import cell_options, has_kernel, kernel_inputs

F64 = torch.float64


def loop_scan(step, writes: torch.Tensor, s0: torch.Tensor):
    """Reference: S_{n+1} = step(n, S_n) + R_n with autograd through every step."""
    s, starts = s0, []
    for i in range(writes.shape[2]):
        starts.append(s)
        s = step(i, s) + writes[:, :, i]
    return torch.stack(starts, 2), s


def draw(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64)


@pytest.mark.parametrize("decay_shape", [(2, 3, 5, 4, 1), (2, 3, 5, 1, 1), None])
def test_diagonal_scan_matches_loop_forward_and_gradients(decay_shape) -> None:
    w, s0 = draw(2, 3, 5, 4, 3, seed=1), draw(2, 3, 4, 3, seed=2)
    a = None if decay_shape is None else torch.rand(decay_shape, dtype=F64)
    leaves = [x.requires_grad_(True) for x in (w, s0) + ((a,) if a is not None else ())]
    got = diagonal_scan(a, w, s0)
    want = loop_scan(lambda i, s: s if a is None else a[:, :, i] * s, w, s0)
    proj = [draw(*x.shape, seed=3 + i) for i, x in enumerate(want)]

    def loss(outs) -> torch.Tensor:
        return sum((x * p).sum() for x, p in zip(outs, proj, strict=True))

    g_got = torch.autograd.grad(loss(got), leaves)
    g_want = torch.autograd.grad(loss(want), leaves)
    for x, y in zip((*got, *g_got), (*want, *g_want), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_matrix_scan_matches_loop_and_passes_gradcheck() -> None:
    m = (0.5 * draw(2, 2, 4, 3, 3, seed=4)).requires_grad_(True)
    r, s0 = draw(2, 2, 4, 3, 2, seed=5).requires_grad_(True), draw(2, 2, 3, 2, seed=6)
    s0.requires_grad_(True)
    want = loop_scan(lambda i, s: m[:, :, i] @ s, r, s0)
    for x, y in zip(matrix_scan(m, r, s0), want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(matrix_scan, (m, r, s0))
    assert torch.autograd.gradcheck(lambda *x: matrix_scan(*x)[1], (m, r, s0))  # final only


def test_undecayed_scan_gradients_when_only_starts_or_only_final_state_is_used() -> None:
    w, s0 = draw(2, 1, 4, 3, 2, seed=21), draw(2, 1, 3, 2, seed=22)
    for pick in (0, 1):
        leaves = [x.clone().requires_grad_(True) for x in (w, s0)]
        got = diagonal_scan(None, *leaves)[pick]
        ref = [x.clone().requires_grad_(True) for x in (w, s0)]
        want = loop_scan(lambda i, s: s, *ref)[pick]
        proj = draw(*want.shape, seed=23)
        g_got = torch.autograd.grad((got * proj).sum(), leaves)
        g_want = torch.autograd.grad((want * proj).sum(), ref)
        for x, y in zip(g_got, g_want, strict=True):
            torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)


def test_scan_detects_a_wrong_carry() -> None:
    """Corruption: a state carried with the transposed transition no longer matches."""
    m, r, s0 = draw(1, 1, 3, 3, 3, seed=7), draw(1, 1, 3, 3, 2, seed=8), draw(1, 1, 3, 2, seed=9)
    wrong = loop_scan(lambda i, s: m[:, :, i].transpose(-1, -2) @ s, r, s0)
    assert not torch.allclose(matrix_scan(m, r, s0)[1], wrong[1])


@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_l2_normalize_matches_f_normalize_including_zero_rows(scale: float) -> None:
    x = draw(4, 5, 6, seed=10)
    x[0, 0] = 0.0  # clamped norm
    x.requires_grad_(True)
    g = draw(4, 5, 6, seed=11)
    got = l2_normalize(x, scale=scale)
    want = F.normalize(x, dim=-1) * scale
    torch.testing.assert_close(got, want, rtol=1e-14, atol=1e-14)
    (dx_got,) = torch.autograd.grad((got * g).sum(), x)
    (dx_want,) = torch.autograd.grad((want * g).sum(), x)
    torch.testing.assert_close(dx_got, dx_want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("t", [0, 1, 3, 19])
def test_short_conv_is_a_causal_depthwise_correlation(t: int) -> None:
    conv = ShortConv(5, 4).to(F64)
    x = draw(2, t, 5, seed=12).requires_grad_(True)
    tail = draw(2, 3, 5, seed=13)
    y, new_tail = conv(x, tail)
    xp = torch.cat([tail, x], 1)
    w = conv.conv.weight[:, 0, :]
    want = sum(xp[:, j : j + t] * w[:, j] for j in range(4))
    torch.testing.assert_close(y, want if t else x, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(new_tail, xp[:, -3:])
    if t:
        assert torch.autograd.gradcheck(lambda x, w: conv(x, tail)[0], (x, conv.conv.weight))


def test_pick_form_rejects_unknown_forms() -> None:
    with pytest.raises(ValueError, match="unknown form"):
        pick_form("parallel", lambda: None, lambda: None, 8)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["additive", "delta_rule", "diagonal", "mamba2", "kda", "rwkv7"])
def test_kernel_alone_reproduces_the_cell(name: str) -> None:
    """What the benchmark times as the kernel is exactly what the cell runs between
    `prepare` and `finish`."""
    torch.manual_seed(0)
    cell = build_cell(name, 32, **cell_options(name))
    x = torch.randn(2, 40, 32)
    assert has_kernel(cell)
    for form in ("chunked", "recurrent"):
        o, s = cell.kernel(form)(*kernel_inputs(cell, x))
        _, ctx = cell.prepare(x, None)
        y, _ = cell.finish(o, s, ctx)
        torch.testing.assert_close(y, cell(x, form=form)[0])
    assert not has_kernel(build_cell("attention", 32))


@pytest.mark.parametrize(
    "name", ["additive", "delta_rule", "diagonal", "gated_deltanet", "mamba2", "kda", "rwkv7"]
)
def test_kernel_gradients_from_the_final_state_alone(name: str) -> None:
    """A loss on the final state only (the outputs' gradient arrives as materialised zeros)
    gives the chunked kernel the recurrent kernel's input gradients."""
    torch.manual_seed(0)
    cell = build_cell(name, 32, **cell_options(name)).double()
    args = kernel_inputs(cell, torch.randn(2, 40, 32, dtype=F64))
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


def _pairwise_inputs(decay_scale: float, seed: int = 14):
    """x (rows: inclusive then exclusive decay), y, and the inclusive cumulative log-decay g."""
    gen = torch.Generator().manual_seed(seed)
    c, dk = 16, 4
    x = torch.randn(3, c, 2, dk, generator=gen, dtype=F64)
    y = torch.randn(3, c, 1, dk, generator=gen, dtype=F64)
    g = (-decay_scale * torch.rand(3, c, 1, dk, generator=gen, dtype=F64)).cumsum(-3)
    return x, y, g


def _row_decays(g: torch.Tensor) -> torch.Tensor:
    return torch.cat([g, F.pad(g[:, :-1], (0, 0, 0, 0, 1, 0))], dim=-2)  # inclusive, exclusive


def test_factorisable_admits_mild_decays_only_and_the_tree_takes_strong_ones() -> None:
    """The kernels' fast path is allowed only when no exponent can pass the float32 reach;
    strong decays go to the tree, which stays finite. (Both paths are compared with the
    recurrent forms, values and gradients, in the GLA, KDA and DPLR kernel tests.)"""
    from arbench.cells.dplr import _tree_pairwise, factorisable

    _, _, g = (t.float() for t in _pairwise_inputs(0.5))
    assert factorisable(g, dim=-3)
    x, y, g = (t.float() for t in _pairwise_inputs(30.0))
    assert not factorisable(g, dim=-3)
    assert torch.isfinite(_tree_pairwise(x, _row_decays(g), y, g, 1)).all()
