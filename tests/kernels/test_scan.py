"""The chunk-to-chunk state carries agree with an autograd loop, values and gradients."""

from __future__ import annotations

import pytest
import torch

from arbench.kernels.scan import diagonal_scan, matrix_scan

F64 = torch.float64


def loop_scan(step, writes: torch.Tensor, s0: torch.Tensor):
    """Reference: S_{n+1} = step(n, S_n) + R_n with autograd through every step."""
    s, starts = s0, []
    for i in range(writes.shape[2]):
        starts.append(s)
        s = step(i, s) + writes[:, :, i]
    return torch.stack(starts, 2), s


@pytest.mark.parametrize("decay_shape", [(2, 3, 5, 4, 1), (2, 3, 5, 1, 1), None])
def test_diagonal_scan_matches_loop_forward_and_gradients(decay_shape, draw) -> None:
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


def test_matrix_scan_matches_loop_and_passes_gradcheck(draw) -> None:
    m = (0.5 * draw(2, 2, 4, 3, 3, seed=4)).requires_grad_(True)
    r, s0 = draw(2, 2, 4, 3, 2, seed=5).requires_grad_(True), draw(2, 2, 3, 2, seed=6)
    s0.requires_grad_(True)
    want = loop_scan(lambda i, s: m[:, :, i] @ s, r, s0)
    for x, y in zip(matrix_scan(m, r, s0), want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    assert torch.autograd.gradcheck(matrix_scan, (m, r, s0))
    assert torch.autograd.gradcheck(lambda *x: matrix_scan(*x)[1], (m, r, s0))  # final only


def test_undecayed_scan_gradients_when_only_starts_or_only_final_state_is_used(draw) -> None:
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


def test_scan_detects_a_wrong_carry(draw) -> None:
    """Corruption: a state carried with the transposed transition no longer matches."""
    m, r, s0 = draw(1, 1, 3, 3, 3, seed=7), draw(1, 1, 3, 3, 2, seed=8), draw(1, 1, 3, 2, seed=9)
    wrong = loop_scan(lambda i, s: m[:, :, i].transpose(-1, -2) @ s, r, s0)
    assert not torch.allclose(matrix_scan(m, r, s0)[1], wrong[1])


def test_lowrank_scan_equals_the_formed_matrix_scan_values_and_state_gradients(draw) -> None:
    """M = Diag(d) - a^T b kept factored: the same states entering each chunk, final state,
    dR and dS0 as `matrix_scan` on the formed M; a wrong sign in the correction is caught."""
    from arbench.kernels.scan import (
        lowrank_scan_backward,
        lowrank_scan_forward,
        matrix_scan_backward,
        matrix_scan_forward,
    )

    b_, h, n, c, dk, dv = 2, 3, 5, 2, 6, 4
    d = torch.rand(b_, h, n, dk, dtype=F64)
    a, b = draw(b_, h, n, c, dk, seed=1), draw(b_, h, n, c, dk, seed=2)
    r, s0 = draw(b_, h, n, dk, dv, seed=3), draw(b_, h, dk, dv, seed=4)
    m = torch.diag_embed(d) - a.transpose(-1, -2) @ b
    want = matrix_scan_forward(m, r, s0)
    got = lowrank_scan_forward(d, a, b, r, s0)
    for x, y in zip(got, want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    d_starts, d_final = draw(b_, h, n, dk, dv, seed=5), draw(b_, h, dk, dv, seed=6)
    _, d_r, d_s0 = matrix_scan_backward(m, want[0], d_starts, d_final)
    for x, y in zip(lowrank_scan_backward(d, a, b, d_starts, d_final), (d_r, d_s0), strict=True):
        torch.testing.assert_close(x, y, rtol=1e-12, atol=1e-12)
    wrong = lowrank_scan_forward(d, -a, b, r, s0)[1]
    assert (wrong - want[1]).abs().max() > 1e-3
