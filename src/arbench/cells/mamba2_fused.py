"""The official fused Mamba-2 kernel (`mamba_ssm.Mamba2`) at our `mamba2` cell's state and budget.

The threats-to-validity arm: the same layer as `arbench.cells.mamba2` (in-projection to
(z, x, B, C, dt), causal depthwise conv with bias + SiLU, scalar-decay SSD with one group of
B and C shared by all heads, a per-head D skip, SiLU(z) gate before the RMSNorm, out-projection,
no projection biases, the same A and dt initialisation), but run by the package's fused Triton
and CUDA kernels instead of our pure-torch reference. The shape knobs and their defaults are
those of `mamba2`, so the same options give the same heads x d_state x head_dim state.

`mamba_ssm` needs CUDA and its compiled kernels, so it is imported only when the cell is built;
`unavailable_reason` says (without importing it) whether it can be here, and the workflow skips
this cell's arms where it cannot. The fused layer trains and evaluates whole sequences only:
no carried state (streaming evaluation) and no recurrent form.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import torch

from arbench.cells.base import FORMS, Form, Kernel, SequenceMixer, State, register
from arbench.cells.mamba2 import A_INIT_RANGE, DT_FLOOR, DT_MAX, DT_MIN, resolve_head_dim

NAME = "mamba2_fused"
MISSING = (
    "the official mamba_ssm package is not importable here (it needs CUDA and its compiled kernels)"
)


def _mamba_ssm_found() -> bool:
    """Whether `mamba_ssm` can be imported, found without importing it."""
    try:
        return importlib.util.find_spec("mamba_ssm") is not None
    except (ImportError, ValueError):  # ValueError: in sys.modules without a __spec__
        return "mamba_ssm" in sys.modules


@register(NAME)
class FusedMamba2Cell(SequenceMixer):
    """Mamba-2 through the official fused kernel (mamba_ssm.Mamba2, CUDA only), state as mamba2."""

    not_timed = "CUDA only (mamba_ssm's fused kernels) and no recurrent form"

    def __init__(
        self,
        d_model: int,
        heads: int = 4,
        d_state: int = 16,
        head_dim: int | None = None,
        expand: int = 2,
        conv_kernel: int = 4,
        chunk_size: int = 32,
    ) -> None:
        super().__init__()
        reason = self.unavailable_reason()
        if reason is not None:
            raise ImportError(f"{NAME}: {reason}")
        if not torch.cuda.is_available():
            raise RuntimeError(f"{NAME} needs CUDA (the fused mamba_ssm kernels run on GPU only)")
        head_dim = resolve_head_dim(d_model, heads, expand, head_dim)
        d_inner = heads * head_dim
        inner_expand, rem = divmod(d_inner, d_model)
        if rem or not inner_expand:
            # mamba_ssm sizes its inner width as expand * d_model; a fractional expand would
            # give a fractional width (and d_ssm < d_inner adds a gated MLP instead).
            raise ValueError(
                f"{NAME}: heads*head_dim={d_inner} must be a positive multiple of d_model={d_model}"
            )
        try:
            from mamba_ssm import Mamba2
        except ImportError as exc:
            raise ImportError(f"{NAME}: mamba_ssm is installed but does not import: {exc}") from exc
        self.d_model = d_model
        self.heads = heads
        self.d_state = d_state
        self.head_dim = head_dim
        self.d_inner = d_inner
        self.chunk_size = chunk_size
        self.inner = Mamba2(
            d_model=d_model,
            d_state=d_state,
            d_conv=conv_kernel,
            expand=inner_expand,
            headdim=head_dim,
            ngroups=1,  # one B and C shared by all heads, as in mamba2
            A_init_range=A_INIT_RANGE,
            D_has_hdim=False,  # one D per head
            rmsnorm=True,
            norm_before_gate=False,  # gate with SiLU(z), then RMSNorm, as in mamba2
            dt_min=DT_MIN,
            dt_max=DT_MAX,
            dt_init_floor=DT_FLOOR,
            bias=False,  # in/out projections without bias
            conv_bias=True,
            chunk_size=chunk_size,
        )

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """MISSING where `mamba_ssm` cannot be found (no import, no CUDA query), else None."""
        return None if _mamba_ssm_found() else MISSING

    def state_size(self) -> int:
        """heads * d_state * head_dim, as mamba2 (the SSM state; conv tail excluded)."""
        return self.heads * self.d_state * self.head_dim

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        """(B,T,d_model) -> (self.inner(x), None): whole sequences, fused chunked kernel only."""
        if state is not None:
            raise ValueError(
                f"{NAME}: the fused kernel here trains and evaluates whole sequences only; "
                "streaming evaluation (a carried state) is not supported"
            )
        if form == "recurrent":
            raise ValueError(f"{NAME} has no recurrent form (only the fused chunked kernel)")
        if form not in FORMS:
            raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")
        return self.inner(x), None

    def _no_split(self) -> NotImplementedError:
        return NotImplementedError(
            f"{NAME} runs mamba_ssm's fused layer whole; it has no separate prepare/kernel/finish"
        )

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple[Any, ...], Any]:
        raise self._no_split()

    def kernel(self, form: Form) -> Kernel:
        raise self._no_split()

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: Any) -> tuple[torch.Tensor, State]:
        raise self._no_split()
