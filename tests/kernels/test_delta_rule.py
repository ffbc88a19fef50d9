"""The rank-1 delta rule's chunked (WY/UT) kernel agrees with its step-by-step reference."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

from arbench.kernels.delta_rule import delta_rule_chunked, delta_rule_recurrent

TOL = {torch.float32: 1e-4, torch.float64: 1e-10}
DTYPES = [torch.float32, torch.float64]
CHUNK = 16  # the inputs' T = 50 is deliberately not a multiple of it


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("decay", [False, True])
def test_kernel_chunked_matches_recurrent(
    decay: bool, dtype: torch.dtype, delta_family_forms_agree
) -> None:
    delta_family_forms_agree(
        delta_rule_recurrent, delta_rule_chunked, decay, dtype, TOL[dtype], CHUNK
    )


def test_delta_rule_matches_explicit_formula(delta_inputs, rel_err) -> None:
    """Guard against both forms sharing a bug: one step against the written-out recurrence."""
    x = delta_inputs(torch.float64)
    x = {n: (t[:, :, :1] if t.dim() >= 3 and n != "initial_state" else t) for n, t in x.items()}
    o, s = delta_rule_chunked(**x, chunk_size=CHUNK)
    k, v, q = x["k"][:, :, 0], x["v"][:, :, 0], x["q"][:, :, 0]
    b, a = x["beta"][:, :, 0, None, None], x["log_alpha"][:, :, 0, None, None].exp()
    eye = torch.eye(k.shape[-1], dtype=torch.float64)
    kkt = k[..., :, None] * k[..., None, :]
    expect = a * (eye - b * kkt) @ x["initial_state"] + b * k[..., :, None] * v[..., None, :]
    assert rel_err(s, expect) < 1e-12
    assert rel_err(o[:, :, 0], torch.einsum("bhkv,bhk->bhv", expect, q)) < 1e-12


@pytest.mark.parametrize("chunk", [12, 64])
def test_delta_rule_any_chunk_size(chunk: int, delta_inputs, run_and_grad, assert_close) -> None:
    inputs = delta_inputs(torch.float64)
    ref = run_and_grad(delta_rule_recurrent, inputs)
    got = run_and_grad(lambda **kw: delta_rule_chunked(**kw, chunk_size=chunk), inputs)
    assert_close(got, ref, TOL[torch.float64])


@pytest.mark.parametrize("name", ["delta_rule", "gated_deltanet"])
def test_kernel_gradients_from_the_final_state_alone(name: str, final_state_gradients_agree):
    """A loss on the final state only gives the chunked kernel the recurrent one's gradients."""
    final_state_gradients_agree(name)


# --- bit-identity: the published paper-scale runs must retrain to the last bit ---------------
# A frozen copy of the chunked algorithm as it computed up to the in-place padding (the kernel
# code of f245edd): padding by F.pad, fused operands by cat, the inverse as `frozen_inverse`. Any
# change to the library that alters one rounding (a reassociated product, another reduction
# length, a fused add) makes it differ in some bit.


def _frozen_scan(m: torch.Tensor, r: torch.Tensor, s: torch.Tensor) -> list[torch.Tensor]:
    """S_{i+1} = M_i S_i + R_i over the chunk axis of (B,H,N,.,.) in (B*H,.,.) steps; all S."""
    out = [s.flatten(0, 1)]
    for m_i, r_i in zip(m.flatten(0, 1).unbind(1), r.flatten(0, 1).unbind(1), strict=True):
        out.append(torch.baddbmm(r_i, m_i, out[-1], out=torch.empty_like(out[-1])))
    return out


def _frozen_delta_rule(
    inputs: dict[str, torch.Tensor | None], d_o, d_s, c: int, inverse: Callable
) -> list:
    """[o, S, d_q, d_k, d_v, d_beta, (d_log_alpha,) d_s0] of the frozen chunked algorithm for
    output cotangents d_o, d_s; the hand-written backward as it stood, step for step."""
    q, k, v, beta, la, s0 = (inputs[n] for n in ("q", "k", "v", "beta", "log_alpha", "s0"))
    (b, h, t, dk), dv = q.shape, v.shape[-1]
    n = -(-t // c)

    def chunks(x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, [0, 0] * (x.dim() - 3) + [0, n * c - t]).unflatten(2, (n, c))

    def unchunk(x: torch.Tensor) -> torch.Tensor:
        return x.flatten(2, 3)[:, :, :t]

    s0 = q.new_zeros(b, h, dk, dv) if s0 is None else s0
    q, k, v, beta = map(chunks, (q, k, v, beta))
    lower = torch.ones(c, c, dtype=q.dtype).tril_()
    p = torch.cat([k, q], -2) @ k.mT
    if la is None:
        mask, gamma, to_end, k_e, kg = lower, None, None, k, k
    else:
        la = la.detach().requires_grad_(True)
        g_out = chunks(la).cumsum(-1)
        g = g_out.detach()
        mask = (g[..., :, None] - g[..., None, :]).mul_(lower).exp_().mul_(lower)
        gamma, to_end = g.exp(), (g[..., -1:] - g).exp_()
        k_e, kg = k * to_end[..., None], k * gamma[..., None]
    p.unflatten(-2, (2, c)).mul_(mask.unsqueeze(-3))
    p_kk, p_qk = p.split(c, -2)
    x = torch.cat([v, kg], -1)
    tinv = inverse(beta[..., :, None] * p_kk)
    y = tinv @ (beta[..., None] * x)
    u_part, w_part = y.split([dv, dk], -1)
    m = (k_e.mT @ w_part).neg_()
    m.diagonal(dim1=-2, dim2=-1).add_(1.0 if gamma is None else gamma[..., -1:])
    states = _frozen_scan(m, k_e.mT @ u_part, s0)
    starts = torch.stack(states[:-1]).unflatten(1, (b, h)).movedim(0, 2).contiguous()
    z = p_qk @ y
    q_eff = (q if gamma is None else q * gamma[..., None]) - z[..., dv:]
    o = (q_eff @ starts).add_(z[..., :dv])

    d_o = chunks(d_o)
    d_st = (q_eff.mT @ d_o).flatten(0, 1).unbind(1)
    gs = [d_s.flatten(0, 1)]  # the reverse scan, last chunk first
    for m_i, d_i in zip(m.flatten(0, 1).mT.unbind(1)[::-1], d_st[::-1], strict=True):
        gs.append(torch.baddbmm(d_i, m_i, gs[-1], out=torch.empty_like(gs[-1])))
    d_r = torch.stack(gs[-2::-1]).unflatten(1, (b, h)).movedim(0, 2).contiguous()
    d_m = d_r @ starts.mT
    d_qeff = d_o @ starts.mT
    d_z = torch.cat([d_o, -d_qeff], -1)
    d_p_qk = d_z @ y.mT
    gm = torch.cat([d_r, -d_m], -1)
    d_y = (p_qk.mT @ d_z).add_(k_e @ gm)
    d_ke = y @ gm.mT
    d_xb = tinv.mT @ d_y
    d_a = -(d_xb @ y.mT).tril_(-1)
    d_p_kk = d_a * beta[..., :, None]
    d_beta = (d_a * p_kk).sum(-1) + (d_xb * x).sum(-1)
    d_v, d_kg = (d_xb * beta[..., None]).split([dv, dk], -1)
    grads = []
    if gamma is None:
        d_q, d_k = d_qeff, d_ke + d_kg
    else:
        d_pair = d_p_kk * p_kk + d_p_qk * p_qk
        d_to_end = (k * d_ke).sum(-1) * to_end
        d_g = ((q * d_qeff).sum(-1) + (k * d_kg).sum(-1)) * gamma - d_to_end
        d_g[..., -1] += d_to_end.sum(-1) + d_m.diagonal(dim1=-2, dim2=-1).sum(-1) * gamma[..., -1]
        d_g = d_g + d_pair.sum(-1) - d_pair.sum(-2)
        grads = list(torch.autograd.grad(g_out, la, d_g))
        d_k = torch.addcmul(d_ke * to_end[..., None], d_kg, gamma[..., None])
        d_q = d_qeff * gamma[..., None]
    d_p_kk, d_p_qk = d_p_kk * mask, d_p_qk * mask
    d_q = d_q + d_p_qk @ k
    d_k = d_k + (d_p_kk + d_p_kk.mT) @ k + d_p_qk.mT @ q
    outs = [unchunk(o), states[-1].view(b, h, dk, dv)]
    return outs + [unchunk(d) for d in (d_q, d_k, d_v, d_beta)] + grads + [gs[-1].view(s0.shape)]


@pytest.mark.parametrize("decay", [False, True], ids=["no_decay", "decay"])
@pytest.mark.parametrize("initial", [False, True], ids=["zero_state", "initial_state"])
@pytest.mark.parametrize(
    "shape", [(6, 1, 66, 32, 32, 32), (3, 2, 50, 8, 6, 16)], ids=["paper", "small"]
)
def test_chunked_is_bitwise_the_frozen_algorithm(
    shape: tuple[int, ...], initial: bool, decay: bool, frozen_inverse
) -> None:
    """Output, final state and every input gradient equal the frozen algorithm's exactly, with
    padding (T not a multiple of the chunk): the paper's deltanet arm at T = 66 in chunks of 32."""
    b, h, t, dk, dv, c = shape
    g = torch.Generator().manual_seed(7)

    def rand(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=g)

    inputs = {
        "q": torch.tanh(rand(b, h, t, dk)) * dk**-0.5,
        "k": F.normalize(rand(b, h, t, dk), dim=-1),
        "v": rand(b, h, t, dv),
        "beta": torch.sigmoid(rand(b, h, t)),
        "log_alpha": F.logsigmoid(rand(b, h, t) + 2.0) if decay else None,
        "s0": rand(b, h, dk, dv) if initial else None,
    }
    d_o, d_s = rand(b, h, t, dv), rand(b, h, dk, dv)
    want = _frozen_delta_rule(inputs, d_o, d_s, c, frozen_inverse)
    leaves = {n: None if x is None else x.clone().requires_grad_(True) for n, x in inputs.items()}
    o, s = delta_rule_chunked(
        leaves["q"],
        leaves["k"],
        leaves["v"],
        leaves["beta"],
        leaves["log_alpha"],
        leaves["s0"],
        chunk_size=c,
    )
    grads = torch.autograd.grad(
        (o, s), [x for x in leaves.values() if x is not None], (d_o, d_s), allow_unused=True
    )
    if not initial:  # the zero state's gradient, computed by the frozen form all the same
        want.pop()
    got = [o, s, *grads]
    assert len(got) == len(want)
    for x, y in zip(got, want, strict=True):
        assert torch.equal(x, y)
