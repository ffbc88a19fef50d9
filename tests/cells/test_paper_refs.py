"""The paper's three reference cells (deltanet_ref, rwkv7_ref, mamba2_ref): chunked ==
recurrent, streaming == one pass, pinned parameter counts, each of Table 1's nine arms against
the paper's whole layer re-read token by token in its own layout (outputs, state and every
gradient, both forms) with corrupted references that must fail, the initial decay of about
0.5, bad options."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from arbench.cells import CELLS, build_cell, count_parameters
from arbench.cells.base import SequenceMixer
from arbench.cells.deltanet_ref import DeltaNetRef
from arbench.cells.mamba2 import Mamba2Cell, Mamba2Ref
from arbench.cells.rwkv7_ref import RWKV7Ref
from arbench.config.loading import load_yaml
from arbench.experiment import cell_options_of

D = 16  # the width of the shared fixtures (conftest.D)
CHUNK = 8  # the fixtures' T = 19 and 30 span several chunks

# every form the paper uses: (cell, options)
FORMS: list[tuple[str, dict[str, Any]]] = [
    ("deltanet_ref", {}),
    ("deltanet_ref", {"decay": True}),
    ("deltanet_ref", {"decay": True, "conv": True}),
    ("rwkv7_ref", {}),
    ("rwkv7_ref", {"rank": False}),
    ("rwkv7_ref", {"conv": True}),
    ("rwkv7_ref", {"rank": False, "conv": True}),
    ("mamba2_ref", {}),
    ("mamba2_ref", {"conv_kernel": 1}),
]
IDS = [name + "".join(f"-{k}={v}" for k, v in opts.items()) for name, opts in FORMS]


def factory(name: str, options: dict[str, Any]) -> Callable[[], SequenceMixer]:
    return partial(build_cell, name, D, chunk_size=CHUNK, **options)


@pytest.mark.parametrize(("name", "options"), FORMS, ids=IDS)
@pytest.mark.parametrize(("dtype", "tol"), [(torch.float32, 1e-4), (torch.float64, 1e-10)])
def test_chunked_matches_recurrent(name, options, dtype, tol, forms_agree) -> None:
    forms_agree(factory(name, options), dtype, tol)


@pytest.mark.parametrize(("name", "options"), FORMS, ids=IDS)
def test_streaming_matches_one_pass(name, options, streams_exactly) -> None:
    streams_exactly(factory(name, options))


@pytest.mark.parametrize(
    ("name", "options", "count"),
    [
        ("deltanet_ref", {}, 4_257),
        ("deltanet_ref", {"decay": True}, 5_313),
        ("deltanet_ref", {"decay": True, "conv": True}, 5_793),  # + 96 * 4 weights + 96 biases
        ("rwkv7_ref", {}, 7_392),
        ("rwkv7_ref", {"rank": False}, 7_392),
        ("rwkv7_ref", {"conv": True}, 7_872),
        ("rwkv7_ref", {"rank": False, "conv": True}, 7_872),
        ("mamba2_ref", {}, 8_128),
        ("mamba2_ref", {"conv_kernel": 1}, 7_840),
    ],
)
def test_parameter_counts_at_width_32(name: str, options: dict[str, Any], count: int) -> None:
    cell = build_cell(name, 32, **options)
    assert count_parameters(cell) == count
    assert cell.state_size() == 1_024  # d^2 for the two matrix memories, 8 x 8 x 16 for Mamba-2


def test_registry_and_carried_state() -> None:
    assert (CELLS["deltanet_ref"], CELLS["rwkv7_ref"], CELLS["mamba2_ref"]) == (
        DeltaNetRef,
        RWKV7Ref,
        Mamba2Ref,
    )
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(0))
    for name in ("deltanet_ref", "rwkv7_ref"):
        _, plain = build_cell(name, 32)(x)
        _, armed = build_cell(name, 32, conv=True)(x)
        assert set(plain) == {"S"} and plain["S"].shape == (2, 1, 32, 32)
        assert set(armed) == {"S", "conv"} and armed["conv"].shape == (2, 3, 96)
    _, st = build_cell("mamba2_ref", 32)(x)
    assert st["S"].shape == (2, 8, 16, 8) and st["conv"].shape == (2, 3, 64 + 2 * 16)


# ------------------------------- every Table 1 arm against the paper's update, token by token
# The paper's layers (JIBSIL/dualgoose @824f4b73: dualgoose/mixers.py DeltaNetRefLayer and
# RWKV7RefLayer, dualgoose/rwkv7_ref.py rwkv7_scan, dualgoose/model.py TinyMamba2RefSSM; each
# arm's options from scripts/mqar_probe.py MODELS) re-read from their equations as one loop over
# tokens, the whole mixer: projection, short conv, feature maps, transition, read-out and output
# projection, in the paper's parameter layout and state orientation. Our cell, as the paper
# recipe builds it, must match it in float64 to 1e-10 in outputs, final state and conv tail and in
# the gradients of every parameter and of the input (and of a carried state), through both the
# chunked and the recurrent form.

PAPER_D = 32  # the paper recipe's d_model (config.yaml recipes.paper.model)
# Table 1's arms as experiments.paper_mqar builds their cells (pinned against config.yaml below)
PAPER_ARMS: dict[str, tuple[str, dict[str, Any]]] = {
    "armed_gdn": ("deltanet_ref", {"decay": True, "conv": True}),
    "gated_deltanet": ("deltanet_ref", {"decay": True}),
    "deltanet": ("deltanet_ref", {}),
    "dg_rank_ref": ("rwkv7_ref", {"rank": True}),
    "dg_diag_ref": ("rwkv7_ref", {"rank": False}),
    "dg_rank_conv_ref": ("rwkv7_ref", {"rank": True, "conv": True}),
    "dg_diag_conv": ("rwkv7_ref", {"rank": False, "conv": True}),
    "mamba2_ref": ("mamba2_ref", {}),
    "mamba2_ref_noconv": ("mamba2_ref", {"conv_kernel": 1}),
}
# (batch, length, from a carried state): lengths off the chunk sizes (16, and 32 for the
# undecayed delta rule), 37 over three chunks of 16 (two of 32), 3 shorter than the conv
# kernel (4); a carried state is a random matrix memory and conv tail, the paper's zeros else
SHAPES = [(2, 23, False), (1, 37, True), (2, 3, True)]
TOL = 1e-10


def test_the_arms_are_the_paper_recipes() -> None:
    """PAPER_ARMS is experiments.paper_mqar's arms, each cell with its options, at d 32."""
    cfg = load_yaml(Path(__file__).resolve().parents[2] / "config.yaml")
    arms = cfg["experiments"]["paper_mqar"]["arms"]
    assert {arm: (spec["cell"], cell_options_of(spec)) for arm, spec in arms.items()} == (
        PAPER_ARMS
    )
    assert cfg["recipes"]["paper"]["model"]["d_model"] == PAPER_D


def _conv_step(
    window: torch.Tensor, u: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of a left-padded depthwise Conv1d (weight (C, 1, K), a bias) then SiLU.

    window: the K-1 previous raw inputs (B, K-1, C), oldest first (zeros at the start);
    u: this token's (B, C). Returns (SiLU(bias + sum_j weight[:, 0, j] * input_{t-K+1+j}),
    the window moved on by one token).
    """
    seen = torch.cat([window, u[:, None]], dim=1)  # (B, K, C)
    out = F.silu(bias + torch.einsum("bjc,cj->bc", seen, weight[:, 0]))
    return out, seen[:, 1:]


def paper_deltanet(
    p: dict[str, torch.Tensor],
    x: torch.Tensor,
    options: dict[str, Any],
    state: torch.Tensor | None,
    window: torch.Tensor | None,
    wrong: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The paper's DeltaNet layer ("deltanet"; "gated_deltanet" with ``decay``, "armed_gdn"
    with the conv as well), one token at a time on its (dv x dk) state P.

    Per token: [q k v beta (w)] = W x + b; with the conv, SiLU(depthwise conv + bias) over
    [q k v]; q = tanh(q) / sqrt(d), k / |k|, beta = sigmoid, w = sigmoid; P <- P Diag(w) (the
    key axis); P <- P + beta (v - P k) k^T; y = W_out (P q) + b_out. Returns (y, final P, the
    conv window). ``wrong`` names a deliberate error: "decay_last" (the decay after the
    update), "unscaled_erase" (beta on the write only), "no_conv" (the conv skipped).
    """
    b, t, d = x.shape
    decay, conv = options.get("decay", False), options.get("conv", False)
    widths = [d, d, d, 1] + ([d] if decay else [])
    P = x.new_zeros(b, d, d) if state is None else state
    outs = []
    for i in range(t):
        q, k, v, beta, *w = (x[:, i] @ p["proj.weight"].T + p["proj.bias"]).split(widths, -1)
        if conv and wrong != "no_conv":
            qkv, window = _conv_step(
                window, torch.cat([q, k, v], -1), p["qkv_conv.weight"], p["qkv_conv.bias"]
            )
            q, k, v = qkv.split(d, -1)
        q = torch.tanh(q) * d**-0.5
        k = k / k.norm(dim=-1, keepdim=True)
        beta = torch.sigmoid(beta)  # (B, 1)
        if decay and wrong != "decay_last":
            P = P * torch.sigmoid(w[0])[:, None, :]
        read = torch.einsum("bvk,bk->bv", P, k)
        delta = beta * v - read if wrong == "unscaled_erase" else beta * (v - read)
        P = P + torch.einsum("bv,bk->bvk", delta, k)
        if decay and wrong == "decay_last":
            P = P * torch.sigmoid(w[0])[:, None, :]
        o = torch.einsum("bvk,bk->bv", P, q)
        outs.append(o @ p["out.weight"].T + p["out.bias"])
    return torch.stack(outs, dim=1), P, window


def paper_rwkv7(
    p: dict[str, torch.Tensor],
    x: torch.Tensor,
    options: dict[str, Any],
    state: torch.Tensor | None,
    window: torch.Tensor | None,
    wrong: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The paper's RWKV-7 reference layer ("dg_rank_ref"; "dg_diag_ref" without ``rank``;
    "dg_rank_conv_ref" / "dg_diag_conv" with the conv), one token at a time on its (dv x dk)
    state P.

    Per token: [v k r w kappa a] = W x + b; with the conv, SiLU(depthwise conv + bias) over
    [v k r]; w = sigmoid, a = sigmoid(a) * w, k, r, kappa = tanh / sqrt(d); P <- P Diag(w) (key
    axis); with ``rank`` P <- P - (P (a * kappa)) kappa^T; P <- P + v k^T; y = W_out (P r) +
    b_out. ``wrong``: "erase_first" (the erase before the decay), "decay_on_values" (Diag(w)
    on the value axis), "no_conv".
    """
    b, t, d = x.shape
    rank, conv = options.get("rank", True), options.get("conv", False)
    P = x.new_zeros(b, d, d) if state is None else state
    outs = []
    for i in range(t):
        v, k, r, w, kappa, a = (x[:, i] @ p["proj.weight"].T + p["proj.bias"]).split(d, -1)
        if conv and wrong != "no_conv":
            vkr, window = _conv_step(
                window, torch.cat([v, k, r], -1), p["vkr_conv.weight"], p["vkr_conv.bias"]
            )
            v, k, r = vkr.split(d, -1)
        w = torch.sigmoid(w)
        a = torch.sigmoid(a) * w
        k, r, kappa = (torch.tanh(y) * d**-0.5 for y in (k, r, kappa))

        def erase(P: torch.Tensor, a=a, kappa=kappa) -> torch.Tensor:
            removed = torch.einsum("bvk,bk->bv", P, a * kappa)
            return P - torch.einsum("bv,bk->bvk", removed, kappa)

        if rank and wrong == "erase_first":
            P = erase(P)
        P = P * (w[:, :, None] if wrong == "decay_on_values" else w[:, None, :])
        if rank and wrong != "erase_first":
            P = erase(P)
        P = P + torch.einsum("bv,bk->bvk", v, k)
        o = torch.einsum("bvk,bk->bv", P, r)
        outs.append(o @ p["out.weight"].T + p["out.bias"])
    return torch.stack(outs, dim=1), P, window


def paper_mamba2(
    p: dict[str, torch.Tensor],
    x: torch.Tensor,
    options: dict[str, Any],
    state: torch.Tensor | None,
    window: torch.Tensor | None,
    wrong: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The paper's pure-PyTorch Mamba-2 ("mamba2_ref"; "mamba2_ref_noconv" at conv kernel 1),
    one token at a time on its (heads x head_dim x d_state) state h.

    Per token: [z xBC dt] = W x + b; xBC = SiLU(depthwise conv + bias), split into x (heads x
    head_dim), B and C (d_state each, shared by the heads); dt = softplus(dt + dt_bias) and
    A = -exp(A_log) per head; h <- exp(dt A) h + (dt x) B^T; y = h C + D x; out = W_out
    (y * SiLU(z)) + b_out, no norm. ``wrong``: "no_D" (the skip dropped), "no_conv" (SiLU
    straight on the projection).
    """
    del options  # the conv kernel is the conv weight's width
    b, t, _ = x.shape
    heads, d_inner = p["A_log"].numel(), p["out_proj.weight"].shape[1]
    d_state = (p["conv.bias"].numel() - d_inner) // 2
    head_dim = d_inner // heads
    h = x.new_zeros(b, heads, head_dim, d_state) if state is None else state
    outs = []
    for i in range(t):
        u = x[:, i] @ p["in_proj.weight"].T + p["in_proj.bias"]
        z, xbc, dt = u.split([d_inner, d_inner + 2 * d_state, heads], -1)
        if wrong == "no_conv":
            xbc = F.silu(xbc)
        else:
            xbc, window = _conv_step(window, xbc, p["conv.weight"], p["conv.bias"])
        xs, bm, cm = xbc.split([d_inner, d_state, d_state], -1)
        xs = xs.reshape(b, heads, head_dim)
        dt = F.softplus(dt + p["dt_bias"])  # (B, heads)
        retain = torch.exp(dt * -torch.exp(p["A_log"]))
        h = retain[:, :, None, None] * h + torch.einsum("bhp,bn->bhpn", dt[..., None] * xs, bm)
        y = torch.einsum("bhpn,bn->bhp", h, cm)
        if wrong != "no_D":
            y = y + p["D"][:, None] * xs
        y = y.reshape(b, d_inner) * F.silu(z)
        outs.append(y @ p["out_proj.weight"].T + p["out_proj.bias"])
    return torch.stack(outs, dim=1), h, window


# per cell: the per-token reference, and our parameter names -> the paper's
_DELTA_NAMES = {
    "in_proj.weight": "proj.weight",
    "in_proj.bias": "proj.bias",
    "out_proj.weight": "out.weight",
    "out_proj.bias": "out.bias",
}
PAPER_REFERENCES: dict[str, tuple[Callable[..., Any], dict[str, str]]] = {
    "deltanet_ref": (
        paper_deltanet,
        {**_DELTA_NAMES, "conv.conv.conv.weight": "qkv_conv.weight", "conv.bias": "qkv_conv.bias"},
    ),
    "rwkv7_ref": (
        paper_rwkv7,
        {**_DELTA_NAMES, "conv.conv.conv.weight": "vkr_conv.weight", "conv.bias": "vkr_conv.bias"},
    ),
    "mamba2_ref": (
        paper_mamba2,
        {
            **{f"{m}.{w}": f"{m}.{w}" for m in ("in_proj", "out_proj") for w in ("weight", "bias")},
            "conv.conv.weight": "conv.weight",
            "conv_bias": "conv.bias",
            **{name: name for name in ("A_log", "dt_bias", "D")},
        },
    ),
}


def _paper_arm(arm: str, seeded: Callable[..., SequenceMixer]) -> SequenceMixer:
    """The arm's cell as the paper recipe builds it (d 32, default chunk), in float64, every
    parameter then moved off its initial value (A_log = 0, dt_bias = 0 and D = 1 would hide
    a sign, a missing exp or a missing skip weight)."""
    name, options = PAPER_ARMS[arm]
    cell = seeded(partial(build_cell, name, PAPER_D, **options)).double()
    gen = torch.Generator().manual_seed(17)
    with torch.no_grad():
        for param in cell.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=gen, dtype=param.dtype))
    return cell


def _to_paper(name: str, s: torch.Tensor) -> torch.Tensor:
    """Our state in the paper's orientation: S (B,1,dk,dv) -> P (B,dv,dk) for the matrix
    memories, S (B,H,N,P) -> h (B,H,P,N) for Mamba-2."""
    return s.transpose(-1, -2) if name == "mamba2_ref" else s[:, 0].transpose(-1, -2)


def _compare(
    arm: str,
    cell: SequenceMixer,
    batch: int,
    length: int,
    carried: bool,
    form: str,
    wrong: str | None = None,
) -> dict[str, float]:
    """Relative error of our cell (in ``form``) against the paper's update read token by
    token, per quantity: y, the final state S, the conv tail, and the gradients of a random
    projection of (y, S) with respect to the input, the carried state and every parameter
    (named as the paper's). ``wrong`` corrupts the reference: one of its own errors, or
    "weight" (one in-projection weight moved by 1e-2) or "transposed_state" (the carried
    state handed over in our layout: transposed for the square memories, (N, P) read as
    (P, N) for Mamba-2's)."""
    name, options = PAPER_ARMS[arm]
    reference, names = PAPER_REFERENCES[name]
    gen = torch.Generator().manual_seed(batch * 100 + length)
    x = F.layer_norm(
        torch.randn(batch, length, PAPER_D, generator=gen, dtype=torch.float64), (PAPER_D,)
    )
    x.requires_grad_()
    with torch.no_grad():
        shapes = {key: val.shape for key, val in cell(x[:, :1])[1].items()}
    state = None
    if carried:
        state = {
            key: (0.3 * torch.randn(shape, generator=gen, dtype=x.dtype)).requires_grad_()
            for key, shape in shapes.items()
        }
    leaves = {"x": x, **{f"state {k}": v for k, v in (state or {}).items() if v.numel()}}
    ours = dict(cell.named_parameters())
    assert set(ours) <= set(names), f"{arm}: parameters the paper's layer lacks"
    paper = {names[key]: val.detach().clone().requires_grad_() for key, val in ours.items()}
    if wrong == "weight":
        with torch.no_grad():
            paper[names["in_proj.weight"]][0, 0] += 1e-2
    s0, window = (None, None) if state is None else (state["S"], state.get("conv"))
    if s0 is not None:
        s0 = _to_paper(name, s0)
        if wrong == "transposed_state":  # our layout read as the paper's
            s0 = s0.transpose(-1, -2).reshape(s0.shape)
    if window is None and "conv" in shapes:  # the paper's left pad: zeros
        window = x.new_zeros(batch, *shapes["conv"][1:])
    want_y, want_p, want_tail = reference(paper, x, options, s0, window, wrong)
    want_s = want_p.transpose(-1, -2)  # back in our orientation
    want_s = want_s if name == "mamba2_ref" else want_s[:, None]

    wy = torch.randn(want_y.shape, generator=gen, dtype=x.dtype)
    ws = torch.randn(want_s.shape, generator=gen, dtype=x.dtype)

    def outcome(y, s, tail, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        # a parameter a (corrupted) reference never reads gets a zero gradient, so its error
        # is 1, or 0/0 where ours is zero too: never below the tolerance
        loss = (y * wy).sum() + (s * ws).sum()
        inputs = [*leaves.values(), *params.values()]
        grads = torch.autograd.grad(loss, inputs, allow_unused=True, materialize_grads=True)
        got = {"y": y.detach(), "S": s.detach()}
        if tail is not None and tail.numel():
            got["conv"] = tail.detach()
        return {**got, **{f"grad {k}": g for k, g in zip([*leaves, *params], grads, strict=True)}}

    want = outcome(want_y, want_s, want_tail, paper)
    y, st = cell(x, state, form=form)
    got = outcome(y, st["S"], st.get("conv"), {names[k]: v for k, v in ours.items()})
    assert got.keys() == want.keys()
    return {key: ((got[key] - want[key]).norm() / want[key].norm()).item() for key in want}


@pytest.mark.parametrize("form", ["chunked", "recurrent"])
@pytest.mark.parametrize(
    ("batch", "length", "carried"), SHAPES, ids=[f"B{b}T{t}{'-carried' * c}" for b, t, c in SHAPES]
)
@pytest.mark.parametrize("arm", PAPER_ARMS)
def test_each_arm_is_the_papers_update_token_by_token(
    arm, batch, length, carried, form, seeded
) -> None:
    errors = _compare(arm, _paper_arm(arm, seeded), batch, length, carried, form)
    assert {"y", "S", "grad x"} <= errors.keys()
    bad = {key: f"{err:.2g}" for key, err in errors.items() if not err < TOL}
    assert not bad, f"{arm} ({form}): {bad}"


# the deliberate errors each reference must notice: two for every arm (one in-projection weight
# moved by 1e-2; the carried state read transposed) and the arm's own (the decay's place or
# axis, beta on the erase, the conv, Mamba-2's skip)
GENERIC_CORRUPTIONS = ("weight", "transposed_state")
CORRUPTIONS: dict[str, tuple[str, ...]] = {
    "armed_gdn": ("decay_last", "unscaled_erase", "no_conv"),
    "gated_deltanet": ("decay_last", "unscaled_erase"),
    "deltanet": ("unscaled_erase",),
    "dg_rank_ref": ("erase_first", "decay_on_values"),
    "dg_diag_ref": ("decay_on_values",),
    "dg_rank_conv_ref": ("erase_first", "decay_on_values", "no_conv"),
    "dg_diag_conv": ("decay_on_values", "no_conv"),
    "mamba2_ref": ("no_D", "no_conv"),
    "mamba2_ref_noconv": ("no_D", "no_conv"),
}


@pytest.mark.parametrize(
    ("arm", "wrong"),
    [(arm, wrong) for arm in PAPER_ARMS for wrong in GENERIC_CORRUPTIONS + CORRUPTIONS[arm]],
)
def test_each_arms_comparison_can_fail(arm: str, wrong: str, seeded) -> None:
    """A corrupted reference misses the 1e-10 above by over four orders of magnitude
    (2.6e-5 at the least: one weight in a conv arm), in the output and in the input's
    gradient, so the comparison is not vacuous. One form (the chunked one, which training
    runs) suffices: both are compared with the same reference."""
    errors = _compare(arm, _paper_arm(arm, seeded), 1, 37, True, "chunked", wrong)
    assert errors["y"] > 1e-6 and errors["grad x"] > 1e-6, errors


def _layer_normed(seed: int, t: int = 23, d: int = 32) -> torch.Tensor:
    x = torch.randn(2, t, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return F.layer_norm(x, (d,))


# ------------------------------------------------------------ initial decay about 0.5 per token


@pytest.mark.parametrize(
    ("name", "options", "slot"),
    [
        ("deltanet_ref", {"decay": True}, 4),  # kernel args (q, k, v, beta, log w, S0)
        ("rwkv7_ref", {}, 3),  # (r, k, v, log w, a, b, S0)
        ("rwkv7_ref", {"rank": False}, 3),  # (r, k, v, log w, S0)
        ("mamba2_ref", {}, 3),  # (C, B, dt x, dt A, S0)
    ],
)
def test_initial_decay_is_about_one_half(name: str, options: dict[str, Any], slot: int) -> None:
    cell = build_cell(name, 32, **options).double()
    with torch.no_grad():
        args, _ = cell.prepare(_layer_normed(seed=3, t=64), None)
    mean = args[slot].exp().mean().item()
    assert 0.4 < mean < 0.6, mean


# ------------------------------------------------------------------- options and the base cell


@pytest.mark.parametrize(
    ("name", "options", "error", "named"),
    [
        ("deltanet_ref", {"decay": "yes"}, ValueError, "decay"),
        ("deltanet_ref", {"conv": 1}, ValueError, "conv"),
        ("deltanet_ref", {"conv_kernel": 0}, ValueError, "conv_kernel"),
        ("deltanet_ref", {"chunk_size": 12}, ValueError, "chunk_size"),
        ("deltanet_ref", {"heads": 3}, ValueError, "heads"),
        ("deltanet_ref", {"rank": True}, TypeError, "rank"),
        ("rwkv7_ref", {"rank": "on"}, ValueError, "rank"),
        ("rwkv7_ref", {"decay": True}, TypeError, "decay"),
        ("mamba2_ref", {"init": "zeros"}, ValueError, "init"),
        ("mamba2_ref", {"bias": 1}, ValueError, "bias"),
        ("mamba2_ref", {"gated_norm": None}, ValueError, "gated_norm"),
        ("mamba2", {"bias": True}, TypeError, "bias"),  # a knob only mamba2_ref declares
    ],
)
def test_a_bad_option_fails_early_naming_it(name, options, error, named) -> None:
    with pytest.raises(error, match=named) as info:
        build_cell(name, 32, **options)
    assert "\n" not in str(info.value)


def test_mamba2_ref_options_and_its_base_cell() -> None:
    """mamba2_ref declares the variant knobs, mamba2 none of them; with mamba2's values for
    them (and its 4 heads) mamba2_ref is exactly a mamba2 built from the same seed."""
    assert {"bias", "gated_norm", "init"} <= Mamba2Ref.option_names()
    assert not {"bias", "gated_norm", "init"} & Mamba2Cell.option_names()
    ref = build_cell("mamba2_ref", 32)
    assert ref.norm is None and ref.in_proj.bias is not None and ref.out_proj.bias is not None
    assert torch.equal(ref.A_log, torch.zeros(8)) and torch.equal(ref.dt_bias, torch.zeros(8))

    def seeded_state(make: Callable[[], SequenceMixer]) -> tuple[SequenceMixer, dict]:
        with torch.random.fork_rng():
            torch.manual_seed(0)
            cell = make()
        return cell, cell.state_dict()

    base, base_params = seeded_state(lambda: Mamba2Cell(32))
    as_base, params = seeded_state(
        lambda: Mamba2Ref(32, heads=4, bias=False, gated_norm=True, init="standard")
    )
    assert params.keys() == base_params.keys()
    assert all(torch.equal(params[k], base_params[k]) for k in params)
    x = torch.randn(2, 9, 32, generator=torch.Generator().manual_seed(1))
    assert torch.equal(as_base(x)[0], base(x)[0])
