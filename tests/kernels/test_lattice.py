"""Lattice memory kernels: B-spline taps against a dense oracle, chunked == recurrent (values and
gradients, float64), pieces == one pass, last write wins by hand, causality, underflow-free
retention, the segmented scan, and the spread regulariser (ordering, generator, detached gate,
no N x N tensor)."""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from arbench.kernels.lattice import (
    grid_side,
    lattice_chunked,
    lattice_recurrent,
    lattice_taps,
    segment_scan,
    spread_loss,
    spread_terms,
)

F64 = torch.float64
FORMS = {"recurrent": lattice_recurrent, "chunked": lattice_chunked}


# ------------------------------------------------------------------ an independent oracle
def bspline(x: torch.Tensor) -> torch.Tensor:
    """The quadratic B-spline centred at 0 (support [-3/2, 3/2]), written out piecewise."""
    a = x.abs()
    inner = 0.75 - a * a
    outer = 0.5 * (1.5 - a) ** 2
    return torch.where(a <= 0.5, inner, torch.where(a <= 1.5, outer, torch.zeros_like(a)))


def dense_weights(addr: torch.Tensor, scale: float) -> torch.Tensor:
    """(..., side*side) weight of every lattice cell for addresses (..., 2): B2(x - centre_x)
    B2(y - centre_y) over the centres -s-1, ..., s+1 of each axis."""
    side = int(round(2 * scale + 3))
    centres = torch.arange(side, dtype=addr.dtype) - (scale + 1.0)
    wx = bspline(addr[..., 0, None] - centres)
    wy = bspline(addr[..., 1, None] - centres)
    return (wx[..., :, None] * wy[..., None, :]).flatten(-2)


def scatter_taps(cells: torch.Tensor, values: torch.Tensor, side: int) -> torch.Tensor:
    """Nine taps per address spread into a dense (..., side*side) vector."""
    out = values.new_zeros(*values.shape[:-1], side * side)
    return out.scatter_add(-1, cells, values)


def special_addresses(scale: float) -> list[list[float]]:
    """Addresses at the clamp edges, at a cell centre and exactly half-way between two cells."""
    pts = [[scale, -scale], [-scale, scale], [0.0, 0.0]]
    half = math.floor(scale + 1.0) + 0.5 - (scale + 1.0)  # a coordinate between two centres
    if abs(half) <= scale:
        pts += [[half, 0.0], [half, half]]
    return pts


def kernel_inputs(b, h, t, dv, scale, seed=0, retention=True, state=True, repeat=True):
    """Random kernel arguments in float64; with `repeat`, a third of the tokens share addresses
    (so cells are written many times) and the special addresses appear."""
    g = torch.Generator().manual_seed(seed)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g, dtype=F64)

    addr = scale * torch.tanh(1.3 * rand(b, h, t, 2))
    if repeat and t >= 9:
        pts = torch.tensor(special_addresses(scale), dtype=F64)
        addr[:, :, : len(pts)] = pts
        addr[:, :, t // 3 :: 3] = addr[:, :, 1:2]  # one address written again and again
    side = grid_side(scale)
    return {
        "addr": addr,
        "beta": torch.sigmoid(rand(b, h, t) + 1.0),
        "v": rand(b, h, t, dv),
        "log_retention": F.logsigmoid(rand(b, h, t) + 3.0) if retention else None,
        "initial_state": rand(b, h, side * side, dv) if state else None,
    }


def run(form: str, inputs: dict, scale: float, gain: str = "peak", seed: int = 1):
    """Outputs, final state and the gradient of every tensor input of a random projection."""
    leaves = {n: x.clone().requires_grad_(True) for n, x in inputs.items() if x is not None}
    o, s = FORMS[form](**{**inputs, **leaves}, scale=scale, gain=gain)
    g = torch.Generator().manual_seed(seed)
    loss = (o * torch.randn(o.shape, generator=g, dtype=F64)).sum()
    loss = loss + (s * torch.randn(s.shape, generator=g, dtype=F64)).sum()
    loss.backward()
    return {"o": o.detach(), "S": s.detach(), **{f"d_{n}": x.grad for n, x in leaves.items()}}


# ------------------------------------------------------------------------------------ taps
@pytest.mark.parametrize("scale", [0.0, 0.5, 2.5, 3.0, 64.0])
def test_taps_match_the_dense_b_spline_and_its_gradient(scale: float, draw) -> None:
    side = grid_side(scale)
    pts = torch.tensor(special_addresses(scale), dtype=F64)
    addr = torch.cat([pts, scale * torch.tanh(draw(40, 2, seed=1))]).requires_grad_(True)
    cells, w, gain = lattice_taps(addr, scale, "peak")
    assert cells.shape == (len(addr), 9) and int(cells.min()) >= 0 and int(cells.max()) < side**2
    assert all(len(set(row.tolist())) == 9 for row in cells)  # nine distinct cells
    got = scatter_taps(cells, w, side)
    want = dense_weights(addr, scale)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-14)
    torch.testing.assert_close(w.sum(-1), torch.ones(len(addr), dtype=F64))
    # peak gain: each weight over the largest; the nearest cell is fully overwritten
    torch.testing.assert_close(gain, w / w.amax(-1, keepdim=True), rtol=0, atol=1e-14)
    assert (gain.amax(-1) == 1).all()
    _, _, kernel_gain = lattice_taps(addr, scale, "kernel")
    assert torch.equal(kernel_gain, w)
    proj = draw(*want.shape, seed=2)
    (g_got,) = torch.autograd.grad((got * proj).sum(), addr)
    (g_want,) = torch.autograd.grad((want * proj).sum(), addr)
    torch.testing.assert_close(g_got, g_want, rtol=1e-12, atol=1e-12)
    if scale > 0:
        assert g_got.abs().max() > 1e-3


def test_addresses_outside_the_square_are_clamped_to_its_edge() -> None:
    scale = 2.5
    outside = torch.tensor([[9.0, -9.0], [2.6, 0.0]], dtype=F64)
    inside = torch.tensor([[2.5, -2.5], [2.5, 0.0]], dtype=F64)
    for a, b in zip(lattice_taps(outside, scale), lattice_taps(inside, scale), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("bad", [0.3, -0.5, float("nan"), float("inf"), "2"])
def test_grid_side_rejects_scales_without_a_whole_grid(bad) -> None:
    with pytest.raises(ValueError, match="addr_scale") as err:
        grid_side(bad)
    assert "\n" not in str(err.value)
    assert grid_side(2.5) == 8 and grid_side(64) == 131 and grid_side(0) == 3


# ------------------------------------------------------------------- chunked == recurrent
CASES = {  # (B, H, T, dv, scale, gain, retention, carried state)
    "two heads, 8x8 grid": (2, 2, 50, 6, 2.5, "peak", True, True),
    "4x4 grid, cells hit ~100 times": (1, 2, 300, 3, 0.5, "kernel", True, True),
    "131x131 grid, no retention, no state": (2, 1, 64, 4, 64.0, "peak", False, False),
    "single address": (1, 1, 33, 3, 0.0, "peak", True, True),
    "long T": (1, 1, 1024, 2, 1.0, "peak", True, True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_chunked_matches_recurrent_values_and_gradients(case: str, assert_close) -> None:
    b, h, t, dv, scale, gain, retention, state = CASES[case]
    inputs = kernel_inputs(b, h, t, dv, scale, seed=3, retention=retention, state=state)
    ref = run("recurrent", inputs, scale, gain)
    got = run("chunked", inputs, scale, gain)
    assert_close(got, ref, 1e-10)


def _untied_inputs(case: str, seed: int) -> tuple[dict, float, str]:
    """A chunked-vs-recurrent case with read addresses of their own: a third of them at
    write addresses of earlier tokens (so reads land where values were written)."""
    b, h, t, dv, scale, gain, retention, state = CASES[case]
    inputs = kernel_inputs(b, h, t, dv, scale, seed=seed, retention=retention, state=state)
    g = torch.Generator().manual_seed(seed + 100)
    read = scale * torch.tanh(1.3 * torch.randn(b, h, t, 2, generator=g, dtype=F64))
    if t >= 3:
        read[:, :, 2::3] = inputs["addr"][:, :, 1 : t - 1 : 3][:, :, : read[:, :, 2::3].shape[2]]
    return {**inputs, "read_addr": read}, scale, gain


@pytest.mark.parametrize("case", list(CASES))
def test_untied_reads_chunked_matches_recurrent_values_and_gradients(
    case: str, assert_close
) -> None:
    """read_addr apart from addr (the protocol's read_tie=False): both forms agree on the
    outputs, the final state and every input's gradient, read addresses included."""
    inputs, scale, gain = _untied_inputs(case, seed=13)
    ref = run("recurrent", inputs, scale, gain)
    got = run("chunked", inputs, scale, gain)
    assert ref["d_read_addr"].abs().max() > 0
    assert_close(got, ref, 1e-10)


@pytest.mark.parametrize("form", list(FORMS))
def test_untied_reads_at_the_write_addresses_are_the_tied_kernel(form: str) -> None:
    inputs = kernel_inputs(2, 2, 50, 4, 2.5, seed=14)
    o, s = FORMS[form](**inputs, scale=2.5)
    o2, s2 = FORMS[form](**inputs, read_addr=inputs["addr"].clone(), scale=2.5)
    torch.testing.assert_close(o2, o, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(s2, s, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("form", list(FORMS))
def test_an_untied_read_finds_the_value_written_at_its_read_address(form: str) -> None:
    """A token that reads at an earlier token's write address (its own write elsewhere)
    reads that token's value, by the hand reference; a read address that moves only moves
    the read, never the state."""
    scale = 6.0
    key, far = [1.0, -2.0], [-5.0, 5.0]
    addr = torch.tensor([[[key, far, far]]], dtype=F64)
    read = torch.tensor([[[far, far, key]]], dtype=F64)
    beta = torch.ones(1, 1, 3, dtype=F64)
    v = torch.tensor([[[[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]]], dtype=F64)
    o, s = FORMS[form](addr, beta, v, torch.zeros(1, 1, 3, dtype=F64), scale=scale, read_addr=read)
    reads, state = hand_memory([(key, 1.0, [1.0, 0.0])], scale, 2)
    w = dense_weights(torch.tensor(key, dtype=F64), scale)
    torch.testing.assert_close(o[0, 0, 2], (w[:, None] * state).sum(0), rtol=0, atol=1e-14)
    assert o[0, 0, 2, 0] > 0.5 and o[0, 0, 2, 1] == 0
    _, s_moved = FORMS[form](addr, beta, v, None, scale=scale, read_addr=read.flip(2))
    torch.testing.assert_close(s_moved, s, rtol=0, atol=0)


def test_strong_retention_underflows_to_zero_without_nan() -> None:
    """Cumulative log-retention of -3,200 (e^-3200 = 0 in float64): a form dividing by the
    cumulative retention would give inf or nan; both forms must agree and stay finite."""
    inputs = kernel_inputs(1, 1, 64, 3, 2.5, seed=4)
    inputs["log_retention"] = torch.full((1, 1, 64), -50.0, dtype=F64)
    inputs["log_retention"][..., ::7] = 0.0
    ref, got = run("recurrent", inputs, 2.5), run("chunked", inputs, 2.5)
    for name in ref:
        assert torch.isfinite(got[name]).all(), name
        torch.testing.assert_close(got[name], ref[name], rtol=1e-10, atol=1e-12)


def test_final_state_only_loss_gives_the_same_gradients(draw) -> None:
    """A loss on the final state alone (the outputs' gradient is materialised as zeros)."""
    inputs = kernel_inputs(2, 1, 40, 3, 2.5, seed=5)
    grads = {}
    for form, fn in FORMS.items():
        leaves = [x.clone().requires_grad_(True) for x in inputs.values()]
        _, s = fn(*leaves, scale=2.5)
        grads[form] = torch.autograd.grad((s * draw(*s.shape, seed=6)).sum(), leaves)
    for got, want in zip(grads["chunked"], grads["recurrent"], strict=True):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert all(g.abs().max() > 1e-3 for g in grads["chunked"])


@pytest.mark.parametrize("form", list(FORMS))
def test_pieces_with_the_state_carried_equal_one_pass(form: str) -> None:
    inputs = kernel_inputs(2, 2, 50, 4, 2.5, seed=7)
    fn = FORMS[form]
    o_full, s_full = fn(**inputs, scale=2.5)
    pieces, s = [], inputs["initial_state"]
    for lo, hi in ((0, 1), (1, 17), (17, 18), (18, 50)):
        part = {n: x[:, :, lo:hi] for n, x in inputs.items() if n != "initial_state"}
        o, s = fn(**part, initial_state=s, scale=2.5)
        pieces.append(o)
    torch.testing.assert_close(torch.cat(pieces, 2), o_full, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(s, s_full, rtol=1e-12, atol=1e-12)
    o0, s0 = fn(**{n: x[:, :, :0] for n, x in inputs.items() if n != "initial_state"}, scale=2.5)
    assert o0.shape == (2, 2, 0, 4) and not s0.any()


@pytest.mark.parametrize("form", list(FORMS))
def test_reads_are_causal_and_come_before_the_write(form: str) -> None:
    """o_t depends on v_s, beta_s and a_s for s < t only: a token never reads its own write."""
    inputs = kernel_inputs(1, 1, 12, 2, 0.5, seed=8)  # a 4x4 grid: every token overlaps
    for name in ("v", "beta", "addr"):
        x = inputs[name].clone().requires_grad_(True)
        o, _ = FORMS[form](**{**inputs, name: x}, scale=0.5)
        for t in range(12):
            (g,) = torch.autograd.grad(o[0, 0, t].sum(), x, retain_graph=True)
            assert not g[:, :, t + (name == "addr") :].any(), (name, t)  # a_t moves the read
            if t > 0:
                assert g[:, :, :t].abs().max() > 0, (name, t)
    o, _ = FORMS[form](**{**inputs, "initial_state": None}, scale=0.5)
    assert not o[:, :, 0].any()  # an empty memory reads zeros


# -------------------------------------------------------------------------- last write wins
def hand_memory(events, scale: float, dv: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Reference memory from the spec, one dense cell vector at a time: each event is
    (address, beta, value); read sum_c w_c S_c, then S_c += beta g_c (v - S_c), retention 1,
    with g the peak-normalised B-spline weight."""
    side = int(round(2 * scale + 3))
    s = torch.zeros(side * side, dv, dtype=F64)
    reads = []
    for addr, beta, value in events:
        w = dense_weights(torch.tensor(addr, dtype=F64), scale)
        g = w / w.max()
        reads.append((w[:, None] * s).sum(0))
        s = s + beta * g[:, None] * (torch.tensor(value, dtype=F64) - s)
    return reads, s


def kernel_run(form: str, events, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel on one row of (address, beta, value) events, retention 1, empty memory."""
    addr = torch.tensor([[[e[0] for e in events]]], dtype=F64)
    beta = torch.tensor([[[e[1] for e in events]]], dtype=F64)
    v = torch.tensor([[[e[2] for e in events]]], dtype=F64)
    o, s = FORMS[form](addr, beta, v, torch.zeros(beta.shape, dtype=F64), scale=scale)
    return o[0, 0], s[0, 0]


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("where", ["cell centre", "off centre"])
def test_a_key_written_twice_reads_back_its_second_value(form: str, where: str) -> None:
    scale, side = 6.0, 15  # cell centres at the whole numbers -7..7
    key = [1.0, -2.0] if where == "cell centre" else [1.3, -2.45]
    far = [-5.0, 5.0]
    v1, v2, v3 = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]
    events = [(key, 1.0, v1), (far, 1.0, v3), (key, 1.0, v2), (key, 0.0, v3)]  # last: a read
    reads, state = hand_memory(events, scale, 3)
    o, s = kernel_run(form, events, scale)
    torch.testing.assert_close(o, torch.stack(reads), rtol=0, atol=1e-14)
    torch.testing.assert_close(s, state, rtol=0, atol=1e-14)
    got = o[-1]
    assert got[2] == 0  # the far key's footprint does not reach this one
    assert got[1] > (8 if where == "cell centre" else 4) * got[0] > 0  # the second dominates
    if where == "cell centre":  # the nearest cell is overwritten outright
        centre = round(key[0] + scale + 1) * side + round(key[1] + scale + 1)
        assert torch.equal(s[centre], torch.tensor(v2, dtype=F64))
    # written again and again, the second value all but replaces the first
    events = [(key, 1.0, v1)] + [(key, 1.0, v2)] * 30 + [(key, 0.0, v3)]
    reads, _ = hand_memory(events, scale, 3)
    o, _ = kernel_run(form, events, scale)
    torch.testing.assert_close(o, torch.stack(reads), rtol=0, atol=1e-14)
    assert 0 < o[-1, 0] < 0.01 * o[-1, 1]


# ---------------------------------------------------------------------------- segment scan
def test_segment_scan_matches_a_loop_values_and_gradients(draw) -> None:
    n, d = 37, 3
    a = torch.rand(n, generator=torch.Generator().manual_seed(9), dtype=F64)
    a[[0, 5, 6, 20, 30]] = 0.0  # segment starts: the longest segment (6..19) has 14
    b = draw(n, d, seed=10)
    leaves = [a.clone().requires_grad_(True), b.clone().requires_grad_(True)]
    got = segment_scan(*leaves, span=14)
    ref_leaves = [a.clone().requires_grad_(True), b.clone().requires_grad_(True)]
    x, rows = torch.zeros(d, dtype=F64), []
    for i in range(n):
        x = ref_leaves[0][i] * x + ref_leaves[1][i]
        rows.append(x)
    want = torch.stack(rows)
    torch.testing.assert_close(got, want, rtol=1e-13, atol=1e-13)
    proj = draw(n, d, seed=11)
    g_got = torch.autograd.grad((got * proj).sum(), leaves)
    g_want = torch.autograd.grad((want * proj).sum(), ref_leaves)
    for x, y in zip(g_got, g_want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-13, atol=1e-13)
    assert torch.autograd.gradcheck(lambda a_, b_: segment_scan(a_, b_), leaves)


# ------------------------------------------------------------------------ spread regulariser
def pairwise_overlap(addr: torch.Tensor, scale: float) -> torch.Tensor:
    """Oracle: the mean cosine similarity of two distinct keys' dense kernel footprints, per
    row, from the full (N, N) matrix (differentiable: what a non-detached gate would carry)."""
    u = F.normalize(dense_weights(addr, scale), dim=-1)
    gram = u @ u.transpose(-1, -2)
    n = addr.shape[-2]
    return (gram.sum((-1, -2)) - gram.diagonal(dim1=-2, dim2=-1).sum(-1)) / (n * (n - 1))


def test_spread_addresses_score_lower_than_collapsed_ones(draw) -> None:
    scale = 64.0
    spread = scale * (2 * torch.rand(2, 256, 2, generator=torch.Generator().manual_seed(12)) - 1)
    collapsed = 3.0 + 0.01 * draw(2, 256, 2, seed=13).float()
    assert spread_loss(spread, scale) < spread_loss(collapsed, scale) - 0.5
    _, weight = spread_terms(collapsed, scale)
    assert (weight > 0.5).all()  # overlapping keys are pushed harder
    _, weight = spread_terms(spread, scale)
    torch.testing.assert_close(weight, torch.full((2,), 0.3))


def test_the_gate_matches_the_pairwise_oracle_and_is_detached(draw) -> None:
    scale = 2.5
    addr = (1.5 * torch.tanh(draw(3, 40, 2, seed=14))).requires_grad_(True)
    entropy, weight = spread_terms(addr, scale)
    overlap = pairwise_overlap(addr, scale)
    assert ((overlap > 0.1) & (overlap < 0.9)).all()  # inside the gate's linear part
    want = 0.3 + 0.7 * (overlap - 0.05).clamp(0.0, 1.0)
    torch.testing.assert_close(weight, want.detach(), rtol=1e-12, atol=1e-12)
    hist = dense_weights(addr, scale).mean(-2)
    torch.testing.assert_close(entropy, -(hist * hist.clamp_min(1e-300).log()).sum(-1))
    assert not weight.requires_grad
    (g_loss,) = torch.autograd.grad(spread_loss(addr, scale), addr)
    (g_entropy,) = torch.autograd.grad((want.detach() * -entropy).mean(), addr, retain_graph=True)
    torch.testing.assert_close(g_loss, g_entropy, rtol=1e-12, atol=1e-12)
    # an undetached gate would move the gradient by this much: the check above can fail
    (g_gate,) = torch.autograd.grad((want * -entropy.detach()).mean(), addr)
    assert g_gate.abs().max() > 1e-3


def test_the_subsample_comes_from_the_generator_passed_in(draw) -> None:
    addr = 2.0 * torch.tanh(draw(2, 600, 2, seed=15))

    def value(seed: int | None) -> float:
        gen = None if seed is None else torch.Generator().manual_seed(seed)
        return spread_loss(addr, 2.5, subsample=50, generator=gen).item()

    rng = torch.random.get_rng_state()
    assert value(1) == value(1) and value(None) == value(None)
    assert len({value(1), value(2), value(3)}) == 3  # the subsample changes with the seed
    assert torch.equal(torch.random.get_rng_state(), rng)  # the global RNG is never drawn
    full = spread_loss(addr, 2.5, subsample=600)
    assert full.item() == spread_loss(addr, 2.5, subsample=5000).item()  # N <= subsample: all
    assert abs(value(1) - full.item()) < 0.15 * abs(full.item())  # an estimate of the same


class _LargestTensor(TorchFunctionMode):
    """Records the largest tensor any torch call returns."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for x in out if isinstance(out, tuple | list) else (out,):
            if isinstance(x, torch.Tensor):
                self.largest = max(self.largest, x.numel())
        return out


def test_runs_at_8192_keys_without_an_n_by_n_tensor() -> None:
    n = 8192
    gen = torch.Generator().manual_seed(16)
    addr = (64.0 * (2 * torch.rand(2, n, 2, generator=gen) - 1)).requires_grad_(True)
    start = time.perf_counter()
    with _LargestTensor() as mode:
        loss = spread_loss(addr, 64.0, generator=torch.Generator().manual_seed(0))
        loss.backward()
    assert time.perf_counter() - start < 5.0
    assert mode.largest < 2048 * 2048 // 8  # not even the subsample's M x M
    assert torch.isfinite(addr.grad).all() and addr.grad.abs().max() > 0
