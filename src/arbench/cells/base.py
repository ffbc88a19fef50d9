"""The contract every sequence mixer ("cell") honours.

A cell maps (B, T, d_model) -> (B, T, d_model). It accepts an optional carried
state and returns the state after the last position, so a long sequence can be
processed in pieces (streaming evaluation) with outputs identical to one pass.
`form` selects the step-by-step recurrent reference or the chunkwise-parallel
implementation of the cell's kernel (from `arbench.kernels`); both must agree to numerical
precision.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, Literal

import torch
from torch import nn

Form = Literal["chunked", "recurrent"]
State = Any  # a tensor or a dict of tensors; opaque to callers


FORMS: tuple[Form, ...] = ("chunked", "recurrent")
Kernel = Callable[..., tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class Wraps:
    """What a wrapper cell declares so `arbench.models.budget` shapes the cell inside it: the
    wrapper holds ``copies`` states of ``cell``, named by its constructor option ``option``."""

    cell: str
    copies: int = 1
    option: str = "inner"


class SequenceMixer(nn.Module):
    """Base class: a cell is `prepare` (projections, gates) -> recurrence kernel -> `finish`.

    Recurrent cells implement `prepare`, `kernel` and `finish` (and `state_size`); the shared
    `forward` runs them, so the chunked and recurrent forms differ only in the kernel, and the
    benchmark can time the kernel alone on the inputs the cell really feeds it. Cells without a
    state recurrence (attention, the bidirectional wrapper) override `forward` instead.

    Class attributes declare what enumerators of `CELLS` need to know without a name table:
    `wraps` (a wrapper shaped through the cell it wraps, for the budget), `single_form` (its
    "recurrent" form is no state recurrence, so the benchmark times one form), `not_timed`
    (why the CPU benchmark cannot time it even where it builds; None: it can) and `causal`
    (its output at t reads positions up to t only, so it can stream with a carried state; a
    non-causal cell reads the whole sequence at once and refuses a state).
    """

    wraps: ClassVar[Wraps | None] = None
    single_form: ClassVar[bool] = False
    not_timed: ClassVar[str | None] = None
    causal: ClassVar[bool] = True

    def forward(
        self, x: torch.Tensor, state: State | None = None, form: Form = "chunked"
    ) -> tuple[torch.Tensor, State]:
        """Map (B,T,d_model) to (B,T,d_model), carrying the cell's state between calls."""
        kernel = self.kernel(form)
        args, ctx = self.prepare(x, state)
        o, s = kernel(*args)
        return self.finish(o, s, ctx)

    def prepare(self, x: torch.Tensor, state: State | None) -> tuple[tuple[Any, ...], Any]:
        """(kernel arguments ending in the initial state, context for `finish`)."""
        raise NotImplementedError

    def kernel(self, form: Form) -> Kernel:
        """The recurrence in the requested form: kernel(*args) -> (outputs, final state)."""
        raise NotImplementedError

    def finish(self, o: torch.Tensor, s: torch.Tensor, ctx: Any) -> tuple[torch.Tensor, State]:
        """(output (B,T,d_model), carried state) from the kernel's outputs and final state."""
        raise NotImplementedError

    def state_size(self) -> int:
        """Recurrent state elements per layer (parameters and conv buffers excluded)."""
        raise NotImplementedError

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """Why this cell cannot be built here (one line), or None when it can.

        Every cell is registered, usable or not; a cell that needs an optional package or CUDA
        (such as `mamba2_fused`, the official fused kernel) says here what is missing, so
        whatever enumerates `CELLS` (the budget, the cell table, the benchmark) and the
        workflow skip it, and the arms that use it, with this reason instead of failing. It
        must be cheap and must not import the optional package.
        """
        return None

    @classmethod
    def option_names(cls, options: dict[str, Any] | None = None) -> set[str]:
        """The keyword options the cell's constructor accepts (`d_model` aside).

        The named parameters of every `__init__` along the MRO, since presets (such as
        `gated_deltanet`) forward **options to a parent's; `self`, `d_model` and *args/**kwargs
        are excluded. `options`, the options about to be passed, matters only to wrappers whose
        accepted options depend on them (`Bidirectional` and its inner cell).
        """
        names: set[str] = set()
        keyword = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        for klass in cls.__mro__:
            if "__init__" in vars(klass):
                params = inspect.signature(klass.__init__).parameters.values()
                names.update(p.name for p in params if p.kind in keyword)
        return names - {"self", "d_model"}


def pick_form(form: Form, chunked: Kernel, recurrent: Kernel, chunk_size: int) -> Kernel:
    """The chunked kernel bound to `chunk_size`, or the recurrent one; rejects unknown forms."""
    if form == "chunked":
        return partial(chunked, chunk_size=chunk_size)
    if form == "recurrent":
        return recurrent
    raise ValueError(f"unknown form {form!r}; expected one of {FORMS}")


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, H*d) -> (B, H, T, d): the layout every recurrence kernel takes."""
    b, t, hd = x.shape
    return x.reshape(b, t, heads, hd // heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> (B, T, H*d), the inverse of `split_heads`."""
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


class _L2Normalize(torch.autograd.Function):
    """y = scale * x / max(||x||, eps) over the last axis, with a hand-written backward.

    Same values and gradients as scale * F.normalize, about 2x faster forward+backward on CPU,
    where autograd's norm/clamp/div chain dominates the cost of a small cell.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, eps: float, scale: float) -> torch.Tensor:
        norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
        unclamped = norm >= eps
        inv = norm.clamp_min_(eps).reciprocal_()
        y = x * (inv * scale) if scale != 1.0 else x * inv
        ctx.save_for_backward(y, inv, unclamped)
        ctx.scale = scale
        return y

    @staticmethod
    def backward(ctx: Any, d_y: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        y, inv, unclamped = ctx.saved_tensors
        s = ctx.scale
        # d/dx (s x / |x|) = s (I - u u^T) / |x| with u = y / s; where the norm was clamped
        # the factor 1/eps is constant and only s I / eps remains.
        dot = torch.linalg.vecdot(y, d_y, dim=-1).unsqueeze(-1).mul_(unclamped)
        if s == 1.0:
            return (d_y - y * dot).mul_(inv), None, None
        return (d_y * s - y * dot.div_(s)).mul_(inv), None, None


def l2_normalize(x: torch.Tensor, eps: float = 1e-12, scale: float = 1.0) -> torch.Tensor:
    """scale * F.normalize(x, dim=-1, eps=eps) in one pass, with a faster backward."""
    return _L2Normalize.apply(x, eps, scale)


def count_parameters(module: nn.Module) -> int:
    """Trainable parameter count of a module."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


CELLS: dict[str, type[SequenceMixer]] = {}


def register(name: str):
    """Class decorator: make a cell constructible by name through `build_cell`."""

    def wrap(cls: type[SequenceMixer]) -> type[SequenceMixer]:
        if name in CELLS:
            raise ValueError(f"cell {name!r} registered twice")
        CELLS[name] = cls
        return cls

    return wrap


def build_cell(name: str, d_model: int, **options: Any) -> SequenceMixer:
    """Instantiate a registered cell; unknown names list the known ones."""
    if name not in CELLS:
        raise KeyError(f"unknown cell {name!r}; known: {sorted(CELLS)}")
    return CELLS[name](d_model=d_model, **options)
