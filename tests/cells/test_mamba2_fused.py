"""The official fused Mamba-2 cell: unavailable without mamba_ssm, and (with a stand-in
mamba_ssm) built at our mamba2 cell's state with the arguments the real constructor takes."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import types

import pytest
import torch
from torch import nn

from arbench.bench.cells import bench_cells, has_kernel
from arbench.cells import CELLS, build_cell
from arbench.cells.mamba2_fused import MISSING, FusedMamba2Cell
from arbench.models.budget import fit

# Keyword parameters of mamba_ssm.modules.mamba2.Mamba2.__init__ (state-spaces/mamba).
REAL_MAMBA2_PARAMETERS = {
    "d_model", "d_state", "d_conv", "conv_init", "expand", "headdim", "d_ssm", "ngroups",
    "A_init_range", "D_has_hdim", "rmsnorm", "norm_before_gate", "dt_min", "dt_max",
    "dt_init_floor", "dt_limit", "bias", "conv_bias", "chunk_size", "use_mem_eff_path",
    "layer_idx", "process_group", "sequence_parallel", "device", "dtype",
}  # fmt: skip

REAL_SPEC = importlib.util.find_spec
mamba_ssm_installed = REAL_SPEC("mamba_ssm") is not None


@pytest.fixture
def fake_mamba_ssm(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """A stand-in `mamba_ssm` whose Mamba2 (an nn.Module with one Linear) records its kwargs;
    returns the list of recorded kwargs."""
    calls: list[dict] = []

    class Mamba2(nn.Module):
        def __init__(self, **kwargs) -> None:
            super().__init__()
            calls.append(kwargs)
            self.proj = nn.Linear(kwargs["d_model"], kwargs["d_model"])

        def forward(self, u: torch.Tensor) -> torch.Tensor:
            return self.proj(u)

    module = types.ModuleType("mamba_ssm")
    module.__spec__ = importlib.machinery.ModuleSpec("mamba_ssm", None)
    module.Mamba2 = Mamba2
    monkeypatch.setitem(sys.modules, "mamba_ssm", module)

    def find_spec(name: str, *args, **kwargs):
        return module.__spec__ if name == "mamba_ssm" else REAL_SPEC(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    return calls


@pytest.mark.skipif(mamba_ssm_installed, reason="mamba_ssm is installed here")
def test_unavailable_without_mamba_ssm() -> None:
    assert "mamba_ssm" not in sys.modules  # importing the cell module did not import it
    reason = CELLS["mamba2_fused"].unavailable_reason()
    assert reason == MISSING and reason.strip() and "\n" not in reason
    assert "mamba_ssm" in reason
    with pytest.raises(ImportError, match="mamba_ssm"):
        build_cell("mamba2_fused", 32, heads=2, d_state=32, head_dim=16)
    with pytest.raises(ImportError, match="mamba_ssm"):
        fit("mamba2_fused", 130, state_per_layer=1024)
    assert "mamba2_fused" not in bench_cells()
    # every other cell is usable here
    assert all(k.unavailable_reason() is None for n, k in CELLS.items() if n != "mamba2_fused")


def test_built_at_mamba2_state_with_real_constructor_arguments(
    fake_mamba_ssm: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert FusedMamba2Cell.unavailable_reason() is None
    options = {"heads": 2, "d_state": 32, "head_dim": 16}
    cell = build_cell("mamba2_fused", 32, **options)
    (kwargs,) = fake_mamba_ssm
    assert set(kwargs) <= REAL_MAMBA2_PARAMETERS
    assert kwargs["d_model"] == 32 and kwargs["d_state"] == 32 and kwargs["headdim"] == 16
    assert kwargs["d_conv"] == 4 and kwargs["chunk_size"] == 32
    assert kwargs["expand"] == 1 and isinstance(kwargs["expand"], int)
    assert kwargs["ngroups"] == 1 and kwargs["rmsnorm"] is True
    assert kwargs["norm_before_gate"] is False and kwargs["D_has_hdim"] is False
    assert cell.state_size() == 1024 == build_cell("mamba2", 32, **options).state_size()
    assert FusedMamba2Cell.option_names() == CELLS["mamba2"].option_names()

    x = torch.randn(2, 7, 32)
    y, state = cell(x)
    torch.testing.assert_close(y, cell.inner(x))
    assert state is None
    with pytest.raises(ValueError, match="streaming"):
        cell(x, {"S": torch.zeros(2, 2, 32, 16)})
    with pytest.raises(ValueError, match="recurrent"):
        cell(x, form="recurrent")
    with pytest.raises(ValueError, match="unknown form"):
        cell(x, form="parallel")  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="mamba2_fused"):
        cell.prepare(x, None)
    assert not has_kernel(cell)
    assert "mamba2_fused" not in bench_cells()  # usable, but CUDA only: not in the CPU bench


def test_default_shape_and_widths_mamba_ssm_cannot_take(
    fake_mamba_ssm: list[dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    cell = build_cell("mamba2_fused", 32)  # mamba2's defaults: 4 heads of 16, expand 2
    assert fake_mamba_ssm[-1]["expand"] == 2 and fake_mamba_ssm[-1]["headdim"] == 16
    assert cell.state_size() == build_cell("mamba2", 32).state_size() == 1024
    with pytest.raises(ValueError, match="multiple of d_model"):
        build_cell("mamba2_fused", 32, heads=3, head_dim=16)  # inner width 48 = 1.5 d_model


def test_needs_cuda(fake_mamba_ssm: list[dict], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert FusedMamba2Cell.unavailable_reason() is None  # no CUDA query in the reason
    with pytest.raises(RuntimeError, match="CUDA") as info:
        build_cell("mamba2_fused", 32, heads=2, d_state=32, head_dim=16)
    assert "mamba2_fused" in str(info.value)
    assert not fake_mamba_ssm  # refused before building the layer
