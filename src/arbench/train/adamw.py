"""AdamW for CPU training jobs, step for step the arithmetic of ``torch.optim.AdamW`` on CPU
(its single-tensor path), without ``torch.optim``'s import of ``torch._dynamo``.

Every ``torch.optim`` optimizer wraps its methods so that their first call imports
``torch._dynamo``: 2.2 s of CPU in each fresh process, as much as a smoke-scale training
job's own work. This class does the same updates in the same order with the same float
operations (decoupled weight decay, ``lerp_`` for the first moment, ``mul_``/``addcmul_`` for
the second, bias corrections from a float step count), so a CPU run is bit-identical to one
under ``torch.optim.AdamW`` and their checkpoints load into each other: ``state_dict`` has
torch's layout (a float32 ``step`` tensor, ``exp_avg``, ``exp_avg_sq`` per parameter).
`make_adamw` picks it on the CPU and ``torch.optim.AdamW`` (its fused multi-tensor path)
on an accelerator.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

import torch


class CpuAdamW:
    """Decoupled-weight-decay Adam over parameter groups (``params``, ``lr``,
    ``weight_decay``; ``betas`` and ``eps`` shared), with the ``param_groups``,
    ``zero_grad``, ``step``, ``state_dict`` and ``load_state_dict`` the training loop uses."""

    def __init__(
        self,
        groups: Iterable[dict[str, Any]],
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ) -> None:
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay}
        self.param_groups: list[dict[str, Any]] = []
        for g in groups:
            group = {**defaults, **g, "params": list(g["params"])}
            self.param_groups.append(group)
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def _params(self) -> list[torch.Tensor]:
        return [p for g in self.param_groups for p in g["params"]]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self._params():
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient, in group order."""
        for g in self.param_groups:
            lr, wd, eps = g["lr"], g["weight_decay"], g["eps"]
            beta1, beta2 = g["betas"]
            for p in g["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                st = self.state.get(p)
                if st is None:
                    st = self.state[p] = {
                        "step": torch.tensor(0.0, dtype=torch.float32),
                        "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                        "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
                    }
                st["step"] += 1
                if wd != 0:
                    p.mul_(1 - lr * wd)
                st["exp_avg"].lerp_(grad, 1 - beta1)
                st["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                n = st["step"].item()
                step_size = lr / (1 - beta1**n)
                denom = (st["exp_avg_sq"].sqrt() / (1 - beta2**n) ** 0.5).add_(eps)
                p.addcdiv_(st["exp_avg"], denom, value=-step_size)

    def state_dict(self) -> dict[str, Any]:
        """torch's layout: state by parameter index, groups with their indices."""
        index = {id(p): i for i, p in enumerate(self._params())}
        groups, i = [], 0
        for g in self.param_groups:
            n = len(g["params"])
            groups.append(
                {**{k: v for k, v in g.items() if k != "params"}, "params": list(range(i, i + n))}
            )
            i += n
        state = {index[id(p)]: dict(s) for p, s in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, blob: dict[str, Any]) -> None:
        """Restore what `state_dict` (or ``torch.optim.AdamW.state_dict``) wrote."""
        blob = copy.deepcopy(blob)
        params = self._params()
        if len(blob["param_groups"]) != len(self.param_groups) or sum(
            len(g["params"]) for g in blob["param_groups"]
        ) != len(params):
            raise ValueError("optimizer state: parameter groups do not match the model's")
        for mine, saved in zip(self.param_groups, blob["param_groups"], strict=True):
            for k, v in saved.items():
                if k != "params":
                    mine[k] = tuple(v) if k == "betas" else v
        self.state = {}
        for i, s in blob["state"].items():
            p = params[int(i)]
            self.state[p] = {
                "step": s["step"].to(torch.float32).cpu(),
                "exp_avg": s["exp_avg"].to(p),
                "exp_avg_sq": s["exp_avg_sq"].to(p),
            }


def make_adamw(
    groups: list[dict[str, Any]], lr: float, betas: tuple[float, float], device: torch.device
) -> Any:
    """``torch.optim.AdamW`` on an accelerator, `CpuAdamW` (the same numbers, no
    ``torch._dynamo`` import) on the CPU; PyTorch's defaults for ``eps`` and weight decay
    unless a group sets its own."""
    if device.type != "cpu":
        return torch.optim.AdamW(groups, lr=lr, betas=betas)
    return CpuAdamW(groups, lr=lr, betas=betas)
