"""The cell contract: L2 norm, form selection, prepare -> kernel -> finish, accepted options."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from arbench.bench.cells import cell_options, has_kernel, kernel_inputs
from arbench.cells import CELLS, build_cell
from arbench.cells.base import l2_normalize, pick_form


@pytest.mark.parametrize("scale", [1.0, 0.25])
def test_l2_normalize_matches_f_normalize_including_zero_rows(scale: float, draw) -> None:
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


def test_option_names_are_the_constructor_keywords() -> None:
    delta = CELLS["delta_rule"].option_names()
    shape = {"conv", "decay", "heads", "d_k", "d_v", "conv_kernel", "chunk_size"}
    parameterisation = {"qk_bias", "qk_bias_axis", "key_bias", "feature_map", "qk_norm"}
    parameterisation |= {"key_norm", "beta_range", "beta_bias", "decay_bias", "decay_init"}
    assert shape | parameterisation == delta
    assert "convv" not in delta and "d_model" not in delta and "self" not in delta
    # a preset forwards **options to its parent: the parent's keywords are accepted
    assert "conv" in CELLS["gated_deltanet"].option_names()
    assert CELLS["gated_deltanet"].option_names() == delta
    assert {"d_state", "head_dim", "expand"} <= CELLS["mamba2"].option_names()
    assert "positions" in CELLS["attention"].option_names()
    for name, cls in CELLS.items():  # the budget's chosen shape options are all accepted
        if cls.unavailable_reason() is not None:  # cannot be built here, so cannot be fitted
            continue
        options = cell_options(name)
        assert set(options) <= cls.option_names(options), name


def test_cells_declare_what_the_budget_and_the_benchmark_need() -> None:
    """Class attributes instead of name tables: the base class's defaults, the attention
    cells' single form, the fused Mamba-2's reason it is not timed, the bidirectional wrapper's
    inner cell, the non-causal cells (the wrapper and full attention)."""
    from arbench.cells.base import SequenceMixer, Wraps

    assert (
        SequenceMixer.wraps,
        SequenceMixer.single_form,
        SequenceMixer.not_timed,
        SequenceMixer.causal,
    ) == (None, False, None, True)
    assert [n for n, k in CELLS.items() if k.single_form] == ["attention", "full_attention"]
    assert [n for n, k in CELLS.items() if not k.causal] == ["bidirectional", "full_attention"]
    assert [n for n, k in CELLS.items() if k.not_timed] == ["mamba2_fused"]
    assert {n: k.wraps for n, k in CELLS.items() if k.wraps} == {
        "bidirectional": Wraps(cell="delta_rule", copies=2, option="inner")
    }
