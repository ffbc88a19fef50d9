"""The paper's attention control as the paper recipe builds it (the denoiser with ``direction:
full``, ``block: adaln_zero`` and the full-attention cell): the whole model against the paper's
``TinyAttentionDenoiser`` re-read from its equations, one query position at a time, in the
paper's parameter names (JIBSIL/dualgoose @824f4b73, ``dualgoose/model.py``
``timestep_features``, ``TinyAttentionBlock``, ``TinyAttentionDenoiser``); the blocks start as
the identity; corrupted readings miss; the arms' options are pinned against config.yaml."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from arbench import config
from arbench.experiment import runs_of
from arbench.models import families
from arbench.tasks.base import build_task

TOL = 1e-10


def _runs() -> dict[str, object]:
    cfg = config.load(scale="paper")
    return {
        "wall": next(
            r
            for r in runs_of("paper_wall_lengths", cfg["experiments"]["paper_wall_lengths"])
            if r.name == "attention-seq_len64"
        ),
        "ksweep": next(
            r
            for r in runs_of("paper_ksweep", cfg["experiments"]["paper_ksweep"])
            if r.name == "attention-pairs8"
        ),
    }


RUNS = _runs()


def _model(which: str, seed: int = 0, moved: bool = True) -> tuple[torch.nn.Module, int]:
    """The run's model in float64, every parameter moved off its initial value when ``moved``
    (the zero-initialised modulation would hide the shifts, scales and gates); its length."""
    run = RUNS[which]
    task = build_task(run.task)
    cfg = families.model_config(run.model, task.vocab_size, positions=task.positions())
    model = families.build(cfg, seed).double()
    if moved:
        gen = torch.Generator().manual_seed(seed + 5)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.2 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return model, task.positions()


def _paper_names(model: torch.nn.Module) -> dict[str, str]:
    """Our parameter names -> the paper's (`TinyAttentionDenoiser`'s state dict)."""
    names = {
        "embed.weight": "token_emb.weight",
        "pos_embed.weight": "pos_emb.weight",
        "time_proj.weight": "time_proj.weight",
        "time_proj.bias": "time_proj.bias",
        "norm.weight": "norm.weight",
        "norm.bias": "norm.bias",
    }
    for i in range(len(model.blocks)):
        for ours, theirs in (
            ("mixer.forward_cell.qkv", "qkv"),
            ("mixer.forward_cell.out", "out"),
            ("ffn.0", "ffn.0"),
            ("ffn.2", "ffn.2"),
            ("modulation.1", "adaln.1"),
        ):
            for w in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{w}"] = f"blocks.{i}.{theirs}.{w}"
    return names


def paper_logits(
    p: dict[str, torch.Tensor], tokens: torch.Tensor, heads: int, wrong: str | None = None
) -> torch.Tensor:
    """``TinyAttentionDenoiser`` at t = 0.5, read from its equations, one query at a time.

    x = E[token] + P[position]; c = W_t f(0.5) + b_t with f the sin and cos of 0.5 exp(linspace
    (0, ln 1000, d/2)) (c is not added to x); per block (shift1, scale1, gate1, shift2, scale2,
    gate2) = W_a SiLU(c) + b_a; h = LN(x) (1 + scale1) + shift1 (LN without affine); [q k v] =
    W h + b, heads of d / heads, softmax(q k^T / sqrt(dh)) v over every key; x += gate1 (W_o y
    + b_o); h = LN(x) (1 + scale2) + shift2; x += gate2 FFN(h), FFN = Linear, SiLU, Linear; the
    logits LN_affine(x) E^T. ``wrong``: "time_offset" (c also added to x), "causal" (keys
    after the query masked), "gate_order" (shift1 and scale1 swapped), "no_gate" (gate1 = 1).
    """
    emb = p["token_emb.weight"]
    b, t = tokens.shape
    d = emb.shape[1]
    dh = d // heads
    x = emb[tokens] + p["pos_emb.weight"][:t]
    freqs = torch.exp(torch.linspace(0.0, math.log(1000.0), d // 2, dtype=emb.dtype))
    # the features as ours hold them, rounded to float32 (the paper computes them in the
    # model's dtype, float32 in its runs: the same to about one rounding)
    feats = torch.cat([torch.sin(0.5 * freqs), torch.cos(0.5 * freqs)]).float().to(emb.dtype)
    c = feats @ p["time_proj.weight"].T + p["time_proj.bias"]
    if wrong == "time_offset":
        x = x + c
    layers = sorted({int(k.split(".")[1]) for k in p if k.startswith("blocks.")})
    for i in layers:
        q_ = f"blocks.{i}."
        mod = F.silu(c) @ p[q_ + "adaln.1.weight"].T + p[q_ + "adaln.1.bias"]
        shift1, scale1, gate1, shift2, scale2, gate2 = mod.split(d)
        if wrong == "gate_order":
            shift1, scale1 = scale1, shift1
        if wrong == "no_gate":
            gate1 = torch.ones_like(gate1)
        h = F.layer_norm(x, (d,)) * (1 + scale1) + shift1
        q, k, v = (h @ p[q_ + "qkv.weight"].T + p[q_ + "qkv.bias"]).split(d, -1)
        y = x.new_zeros(b, t, d)
        for pos in range(t):
            for head in range(heads):
                cols = slice(head * dh, (head + 1) * dh)
                s = torch.einsum("bc,bjc->bj", q[:, pos, cols], k[:, :, cols]) / math.sqrt(dh)
                if wrong == "causal":
                    s[:, pos + 1 :] = float("-inf")
                y[:, pos, cols] = torch.einsum("bj,bjc->bc", torch.softmax(s, -1), v[:, :, cols])
        x = x + gate1 * (y @ p[q_ + "out.weight"].T + p[q_ + "out.bias"])
        h = F.layer_norm(x, (d,)) * (1 + scale2) + shift2
        f = F.silu(h @ p[q_ + "ffn.0.weight"].T + p[q_ + "ffn.0.bias"])
        x = x + gate2 * (f @ p[q_ + "ffn.2.weight"].T + p[q_ + "ffn.2.bias"])
    x = F.layer_norm(x, (d,), p["norm.weight"], p["norm.bias"])
    return x @ emb.T


def _compare(which: str, wrong: str | None = None) -> dict[str, float]:
    """Relative error, ours against the paper's reading: the logits at every position and the
    gradients of a random projection of them with respect to every parameter."""
    model, length = _model(which)
    names = _paper_names(model)
    ours = dict(model.named_parameters())
    assert set(ours) == set(names), "a parameter the paper's model lacks, or one missing"
    paper = {names[k]: v.detach().clone().requires_grad_() for k, v in ours.items()}
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, model.cfg.vocab_size, (2, length), generator=gen)
    heads = model.blocks[0].mixer.forward_cell.heads
    want = paper_logits(paper, tokens, heads, wrong)
    got = model(tokens)[0]
    w = torch.randn(want.shape, generator=gen, dtype=want.dtype)
    g_want = torch.autograd.grad((want * w).sum(), list(paper.values()), materialize_grads=True)
    g_got = torch.autograd.grad((got * w).sum(), list(ours.values()))
    errors = {"logits": ((got - want).norm() / want.norm()).item()}
    for key, a, b in zip(ours, g_got, g_want, strict=True):
        errors[f"grad {names[key]}"] = ((a - b).norm() / b.norm().clamp_min(1e-300)).item()
    return errors


@pytest.mark.parametrize("which", ["wall", "ksweep"])
def test_the_attention_arm_is_the_papers_model_query_by_query(which: str) -> None:
    errors = _compare(which)
    bad = {k: f"{e:.2g}" for k, e in errors.items() if not e < TOL}
    assert not bad, f"{which}: {bad}"


@pytest.mark.parametrize("wrong", ["time_offset", "causal", "gate_order", "no_gate"])
def test_a_corrupted_reading_misses_by_orders_of_magnitude(wrong: str) -> None:
    assert _compare("wall", wrong)["logits"] > 1e4 * TOL


def test_every_block_starts_as_the_identity() -> None:
    """adaLN-Zero: the modulation's Linear starts at zero, so every gate is 0 and the hidden
    states at initialisation are the final norm of token plus position embedding."""
    model, length = _model("wall", moved=False)
    for block in model.blocks:
        assert not block.modulation[-1].weight.any() and not block.modulation[-1].bias.any()
        assert block.norm1.weight is None and block.norm2.weight is None  # affine-free
    tokens = torch.randint(0, 64, (2, length), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        h, state = model.hidden(tokens)
        x = model.embed(tokens) + model.pos_embed(torch.arange(length))
    assert state is None
    torch.testing.assert_close(h, model.norm(x), rtol=0, atol=1e-12)


def test_the_arms_options_are_the_papers() -> None:
    """Table 4's control at --heads 2 (head dim 16, two layers) and the K-sweep's at the
    script's default --heads 8 (one layer), both at d 32 on the paper recipe."""
    for which, heads, layers in (("wall", 2, 2), ("ksweep", 8, 1)):
        m = RUNS[which].model
        assert (m["cell"], m["cell_options"], m["direction"], m["block"]) == (
            "full_attention",
            {"heads": heads},
            "full",
            "adaln_zero",
        )
        assert (m["d_model"], m["layers"], m["timestep"], m["positions"]) == (
            32,
            layers,
            0.5,
            "learned",
        )
