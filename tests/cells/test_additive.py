"""Additive linear attention cell: chunked == recurrent and streaming == one pass."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from arbench.cells.additive import AdditiveCell
from arbench.cells.base import SequenceMixer

D = 16
CELL_MAKERS: dict[str, Callable[[], SequenceMixer]] = {
    "additive": lambda: AdditiveCell(D, heads=2, chunk_size=8),
    "additive_conv": lambda: AdditiveCell(D, heads=2, conv=True, chunk_size=8),
    # one learned decay per head (default init, and the passkey pilot's spread); the decays
    # are set well below 1 here so the chunked form's decay matrix is exercised
    "additive_decay": lambda: AdditiveCell(D, heads=2, decay="constant", chunk_size=8),
    "additive_decay_conv": lambda: AdditiveCell(
        D, heads=2, conv=True, decay="constant", decay_init=[0.7, 0.9999], chunk_size=8
    ),
}


@pytest.mark.parametrize("name", list(CELL_MAKERS))
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_cell_chunked_matches_recurrent(name: str, dtype: torch.dtype, tol: float, forms_agree):
    forms_agree(CELL_MAKERS[name], dtype, tol)


@pytest.mark.parametrize("name", list(CELL_MAKERS))
def test_cell_streaming_matches_one_pass(name: str, streams_exactly):
    streams_exactly(CELL_MAKERS[name])


def test_constant_decay_init_values_and_default() -> None:
    """decay_init sets sigmoid(decay_logit) per head; None keeps delta_rule's defaults."""
    cell = AdditiveCell(
        64, heads=4, d_k=16, d_v=16, decay="constant", decay_init=[0.88, 0.975, 0.995, 0.9999]
    )
    a = torch.sigmoid(cell.decay_logit.detach().double())
    assert torch.allclose(a, torch.tensor([0.88, 0.975, 0.995, 0.9999], dtype=a.dtype), atol=1e-6)
    one = AdditiveCell(32, heads=1, decay="constant", decay_init=0.9999)
    assert abs(float(torch.sigmoid(one.decay_logit.detach().double())) - 0.9999) < 1e-6
    assert torch.equal(
        AdditiveCell(32, heads=1, decay="constant").decay_logit.detach(), torch.tensor([3.0])
    )
    assert torch.equal(
        AdditiveCell(32, heads=4, decay="constant").decay_logit.detach(),
        torch.linspace(2.0, 7.0, 4),
    )
    assert not hasattr(AdditiveCell(32), "decay_logit")  # no decay: no new parameter


def test_constant_decay_is_the_decayed_recurrence() -> None:
    """With q = k and one step of history, the output is a S0 q + (k . q) v: the state only
    decays and adds (S <- a S + k v^T), no erase."""
    torch.manual_seed(0)
    cell = AdditiveCell(D, heads=2, decay="constant", decay_init=[0.5, 0.25]).double()
    x = torch.randn(1, 3, D, dtype=torch.float64)
    (q, k, v, log_decay, _), _ = cell.prepare(x, None)
    a = log_decay.exp()
    assert torch.allclose(a[0, :, 0], torch.tensor([0.5, 0.25], dtype=a.dtype))
    assert torch.allclose(a, a[:, :, :1].expand_as(a))  # the same at every step
    s = torch.zeros(1, 2, cell.d_k, cell.d_v, dtype=torch.float64)
    for t in range(3):
        s = a[:, :, t, None, None] * s + k[:, :, t, :, None] * v[:, :, t, None, :]
    _, s_k = cell.kernel("chunked")(q, k, v, log_decay, None)
    assert torch.allclose(s_k, s)


def test_constant_decay_gradient_forms_agree(rel_err) -> None:
    """float64: the decay logits' gradients (and the input's) agree between the forms."""

    def grads(f: str) -> list[torch.Tensor]:
        torch.manual_seed(1)
        cell = AdditiveCell(
            D, heads=2, conv=True, decay="constant", decay_init=[0.6, 0.95], chunk_size=8
        ).double()
        x = torch.randn(2, 21, D, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
        x.requires_grad_()
        y, st = cell(x, form=f)
        w = torch.randn(y.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        return list(torch.autograd.grad((y * w).sum() + st["S"].sum(), [x, cell.decay_logit]))

    chunked, recurrent = grads("chunked"), grads("recurrent")
    for a, b in zip(chunked, recurrent, strict=True):
        assert rel_err(a, b) < 1e-10
    assert chunked[1].abs().min() > 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"decay": "constant", "decay_init": 1.0}, "decay_init: each value must be in (0, 1)"),
        ({"decay": "constant", "decay_init": [0.5, 0.0]}, "decay_init: each value must be in"),
        ({"decay": "constant", "decay_init": [0.9, 0.9, 0.9]}, "decay_init: 3 values for 2 heads"),
        ({"decay_init": 0.9}, "decay_init needs decay: constant"),
        ({"decay": True}, "decay must be false or 'constant'"),
    ],
)
def test_bad_decay_options_fail_early(options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        AdditiveCell(D, heads=2, **options)
