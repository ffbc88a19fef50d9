"""The lattice memory cell: chunked == recurrent through the whole cell (outputs, state and the
gradient of the input, the carried state and every parameter, float64), streaming in pieces,
state size, option checks, write addresses, and budget fitting to exact state sizes."""

from __future__ import annotations

import pytest
import torch

from arbench.bench.cells import has_kernel, kernel_inputs
from arbench.cells import CELLS, build_cell
from arbench.cells.lattice import LatticeCell
from arbench.kernels.lattice import lattice_chunked, spread_loss
from arbench.models.budget import fit

F64 = torch.float64
D = 16

CELL_CASES = {  # constructor options at d_model = D
    "two heads, 8x8 grid": {"heads": 2, "d_v": 4, "addr_scale": 2.5},
    "4x4 grid, no conv, kernel gain": {
        "d_v": 3,
        "addr_scale": 0.5,
        "conv": False,
        "write_gain": "kernel",
    },
    "default 131x131 grid": {"d_v": 2, "conv_size": 2},
    "untied reads (the protocol's read_tie=False)": {
        "heads": 2,
        "d_v": 4,
        "addr_scale": 2.5,
        "read_tie": False,
    },
}


def make(options: dict, seed: int = 0) -> LatticeCell:
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        cell = build_cell("lattice", D, **options).to(F64)
    with torch.no_grad():  # retention well below 1 and varied, so decay is exercised
        cell.retention_proj.bias.fill_(2.0)
    return cell


@pytest.mark.parametrize("case", list(CELL_CASES))
def test_forms_agree_on_outputs_state_and_every_gradient(case: str, randn, rel_err) -> None:
    cell = make(CELL_CASES[case])
    with torch.no_grad():
        _, state = cell(randn(2, 6, D, seed=1, dtype=F64), form="recurrent")
    s_in = state["S"].clone().requires_grad_(True)
    x = randn(2, 45, D, seed=2, dtype=F64).requires_grad_(True)
    wy = randn(2, 45, D, seed=3, dtype=F64)
    params = [p for _, p in cell.named_parameters()]
    results = {}
    for form in ("recurrent", "chunked"):
        y, new = cell(x, {**state, "S": s_in}, form=form)
        ws = randn(*new["S"].shape, seed=4, dtype=F64)
        loss = (y * wy).sum() + (new["S"] * ws).sum()
        grads = torch.autograd.grad(loss, [x, s_in, *params])
        results[form] = (y, new["S"], *grads)
    names = ["y", "S", "d_x", "d_S0"] + [f"d_{n}" for n, _ in cell.named_parameters()]
    for name, got, want in zip(names, results["chunked"], results["recurrent"], strict=True):
        assert want.abs().max() > 0, f"{name}: vacuous"
        assert rel_err(got, want) < 1e-10, name


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
def test_pieces_with_the_state_carried_equal_one_pass(form: str, randn, max_rel_err) -> None:
    cell = make(CELL_CASES["two heads, 8x8 grid"])
    x = randn(2, 40, D, seed=5, dtype=F64)
    with torch.no_grad():
        y_full, s_full = cell(x, form=form)
        pieces, state = [], None
        for lo, hi in ((0, 1), (1, 3), (3, 21), (21, 22), (22, 40)):
            y, state = cell(x[:, lo:hi], state, form=form)
            pieces.append(y)
    assert max_rel_err(torch.cat(pieces, 1), y_full) <= 1e-10
    assert max_rel_err(state["S"], s_full["S"]) <= 1e-10
    assert max_rel_err(state["conv"], s_full["conv"]) == 0


def test_the_kernel_alone_reproduces_the_cell(randn) -> None:
    cell = make(CELL_CASES["two heads, 8x8 grid"])
    x = randn(2, 30, D, seed=6, dtype=F64)
    assert has_kernel(cell)
    for form in ("chunked", "recurrent"):
        o, s = cell.kernel(form)(*kernel_inputs(cell, x))
        _, ctx = cell.prepare(x, None)
        y, _ = cell.finish(o, s, ctx)
        torch.testing.assert_close(y, cell(x, form=form)[0])
    with pytest.raises(ValueError, match="unknown form"):
        cell.kernel("parallel")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "size"),
    [
        ({"heads": 2, "d_v": 4, "addr_scale": 2.5}, 2 * 64 * 4),
        ({"d_v": 3}, 131 * 131 * 3),
        ({"addr_scale": 0.0, "d_v": 5}, 9 * 5),
        ({"heads": 3, "addr_scale": 14.5}, 3 * 32 * 32 * 5),
    ],
)
def test_state_size_is_heads_cells_dv_whatever_the_length(options, size, randn) -> None:
    cell = build_cell("lattice", D, **options)
    assert cell.state_size() == size
    side = round(2 * cell.addr_scale + 3)
    for t in (1, 9, 70):
        with torch.no_grad():
            _, state = cell(randn(2, t, D, seed=t))
        assert state["S"].shape == (2, cell.heads, side * side, cell.d_v)
        assert state["S"][0].numel() == size


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("heads", 0),
        ("heads", 1.5),
        ("d_v", 0),
        ("addr_scale", 0.3),
        ("addr_scale", -1.0),
        ("addr_scale", float("nan")),
        ("retention_init", float("inf")),
        ("retention_init", float("nan")),
        ("retention_init", "9"),
        ("conv", "yes"),
        ("conv_size", 0),
        ("write_gain", "soft"),
    ],
)
def test_bad_options_fail_early_naming_the_option(option: str, value) -> None:
    with pytest.raises(ValueError, match=option) as err:
        build_cell("lattice", D, **{option: value})
    assert "\n" not in str(err.value)


def test_retention_starts_near_one(randn) -> None:
    cell = build_cell("lattice", D, addr_scale=2.5)
    assert torch.equal(cell.retention_proj.bias, torch.full((1,), 9.0))
    (_, _, _, log_retention, _), _ = cell.prepare(randn(2, 20, D, seed=7), None)
    assert log_retention.exp().min() > 0.999
    other = build_cell("lattice", D, addr_scale=2.5, retention_init=-1)
    assert torch.equal(other.retention_proj.bias, torch.full((1,), -1.0))


def test_write_addresses_are_the_kernel_addresses_at_those_positions(randn) -> None:
    cell = make({"heads": 2, "d_v": 2, "addr_scale": 6.5})
    x = randn(3, 25, D, seed=8, dtype=F64)
    (addr, *_), _ = cell.prepare(x, None)
    assert addr.abs().max() <= 6.5
    positions = torch.tensor([[0, 4, 4, 24], [1, 2, 3, 5], [24, 23, 0, 9]])
    got = cell.write_addresses(x, positions)
    assert got.shape == (3, 2, 4, 2)
    for b in range(3):
        torch.testing.assert_close(got[b], addr[b][:, positions[b]])
    torch.testing.assert_close(cell.write_addresses(x), addr)
    # continuing from a carried conv tail gives the addresses of the continued sequence
    _, state = cell(x[:, :10])
    torch.testing.assert_close(cell.write_addresses(x[:, 10:], state=state), addr[:, :, 10:])
    # the regulariser runs on them and trains the address path
    spread_loss(got, 6.5).backward()
    assert cell.addr_proj.weight.grad.abs().max() > 0 and cell.v_proj.weight.grad is None


def test_the_spread_penalty_is_the_spread_loss_of_the_write_addresses(randn) -> None:
    """What the regulariser (`arbench.train.spread`) asks of a lattice layer, drawn from the
    generator it is given."""
    cell = make({"heads": 2, "d_v": 2, "addr_scale": 2.5})
    x = randn(2, 12, D, seed=3, dtype=F64)
    positions = torch.tensor([[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]])
    got = cell.spread_penalty(x, positions, 3, torch.Generator().manual_seed(5))
    addresses = cell.write_addresses(x, positions)
    want = spread_loss(addresses, 2.5, 3, torch.Generator().manual_seed(5))
    assert got.shape == () and torch.equal(got, want)


def test_chunked_form_is_the_lattice_kernel(monkeypatch, randn) -> None:
    """The cell's chunked path runs `lattice_chunked` with its scale and gain."""
    calls = []

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return lattice_chunked(*args, **kwargs)

    monkeypatch.setattr("arbench.cells.lattice.lattice_chunked", spy)
    cell = build_cell("lattice", D, addr_scale=0.5, write_gain="kernel")
    cell(randn(1, 5, D, seed=9))
    assert calls == [{"scale": 0.5, "gain": "kernel"}]


@pytest.mark.parametrize("state", [16, 64, 256, 512, 1024, 4096, 16384])
def test_the_budget_fits_exact_state_sizes(state: int) -> None:
    chosen = fit("lattice", 130, state_per_layer=state, d_model=32)
    assert chosen.state_per_layer == state
    assert set(chosen.options) <= CELLS["lattice"].option_names()
    side = 2 * chosen.options["addr_scale"] + 3
    assert side == int(side) >= 4
    if state >= 256:  # a value of a sensible width when the state allows one
        assert chosen.options["d_v"] >= 8
