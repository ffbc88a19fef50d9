"""The CPU AdamW against torch.optim.AdamW: bit-identical parameters and state over many
steps (two groups, weight decay on one, a changing rate, a parameter without a gradient),
checkpoints that load both ways, and no torch._dynamo import."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from arbench.train.adamw import CpuAdamW, make_adamw


def _model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))


def _groups(m: torch.nn.Module, wd: float) -> list[dict]:
    ps = list(m.parameters())
    return [{"params": ps[::2], "weight_decay": wd}, {"params": ps[1::2], "weight_decay": 0.0}]


def _train(m: torch.nn.Module, opt, steps: range, frozen: bool = False) -> None:
    for i in steps:
        gen = torch.Generator().manual_seed(i)  # each step's batch, whatever came before
        for g in opt.param_groups:
            g["lr"] = 1e-2 * (1 + i % 3)
        x = torch.randn(16, 6, generator=gen)
        loss = m(x).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if frozen:  # a parameter without a gradient is left alone
            m[2].bias.grad = None
        opt.step()


@pytest.mark.parametrize("wd", [0.0, 0.1])
def test_updates_equal_torch_adamw_bit_for_bit(wd: float) -> None:
    ours, theirs = _model(0), _model(0)
    a = CpuAdamW(_groups(ours, wd), lr=1e-2, betas=(0.9, 0.98))
    b = torch.optim.AdamW(_groups(theirs, wd), lr=1e-2, betas=(0.9, 0.98))
    _train(ours, a, range(0, 40))
    _train(theirs, b, range(0, 40))
    _train(ours, a, range(40, 45), frozen=True)
    _train(theirs, b, range(40, 45), frozen=True)
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        assert torch.equal(p, q)
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["state"].keys() == sb["state"].keys()
    for i in sa["state"]:
        for k in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(sa["state"][i][k], sb["state"][i][k]), (i, k)
    assert [g["params"] for g in sa["param_groups"]] == [g["params"] for g in sb["param_groups"]]


def test_a_checkpoint_resumes_identically_in_either_optimizer() -> None:
    """Stop after 10 steps, save, resume in a fresh optimizer of each kind: the same 10 more
    steps give the same parameters as an uninterrupted run."""
    straight = _model(1)
    opt = CpuAdamW(_groups(straight, 0.05), lr=1e-2)
    _train(straight, opt, range(0, 20))
    for kind in (CpuAdamW, torch.optim.AdamW):
        m = _model(1)
        first = CpuAdamW(_groups(m, 0.05), lr=1e-2)
        _train(m, first, range(0, 10))
        blob = first.state_dict()
        second = kind(_groups(m, 0.05), lr=1e-2)
        second.load_state_dict(blob)
        _train(m, second, range(10, 20))
        for p, q in zip(m.parameters(), straight.parameters(), strict=True):
            assert torch.equal(p, q), kind
    m = _model(1)  # and torch's checkpoint into ours
    first = torch.optim.AdamW(_groups(m, 0.05), lr=1e-2)
    _train(m, first, range(0, 10))
    second = CpuAdamW(_groups(m, 0.05), lr=1e-2)
    second.load_state_dict(first.state_dict())
    _train(m, second, range(10, 20))
    assert all(
        torch.equal(p, q) for p, q in zip(m.parameters(), straight.parameters(), strict=True)
    )


def test_a_mismatched_checkpoint_fails_naming_the_groups() -> None:
    m = _model(2)
    opt = CpuAdamW(_groups(m, 0.1), lr=1e-3)
    blob = opt.state_dict()
    blob["param_groups"] = blob["param_groups"][:1]
    with pytest.raises(ValueError, match="parameter groups"):
        CpuAdamW(_groups(m, 0.1), lr=1e-3).load_state_dict(blob)


def test_the_cpu_picks_ours_and_a_training_step_never_imports_dynamo() -> None:
    m = _model(3)
    assert isinstance(
        make_adamw(_groups(m, 0.1), 1e-3, (0.9, 0.999), torch.device("cpu")), CpuAdamW
    )
    code = (
        "import sys, torch\n"
        "from arbench.train.adamw import make_adamw\n"
        "m = torch.nn.Linear(3, 2)\n"
        "groups = [{'params': list(m.parameters())}]\n"
        "o = make_adamw(groups, 1e-3, (0.9, 0.999), torch.device('cpu'))\n"
        "m(torch.ones(3)).sum().backward()\n"
        "torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)\n"
        "o.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
