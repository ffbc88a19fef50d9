"""Model families: which configuration class and module a run's model block builds.

A model block names its family with ``family`` (default ``lm``: `LanguageModel`, a stack of
one cell kind); ``kvbench`` is the key-value benchmark's transformer (`models.kvbench`);
``denoiser`` is the paper's bidirectional masked denoiser around a cell (`models.denoiser`). The
training loop, the run layer and evaluation build and reload models only through here, so a
new family is one entry in `FAMILIES`. A family with its own memory and work model for the
resource planner (`arbench.resources.jobs`) names it in `MEMORY_MODELS`; every other family
is priced from the probe table.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Protocol

import torch
from torch import nn

from arbench.models import kvbench_memory
from arbench.models.denoiser import Denoiser, DenoiserConfig
from arbench.models.kvbench import KVModelConfig, KVTransformer
from arbench.models.lm import LanguageModel, ModelConfig

FAMILIES: dict[str, tuple[type, type[nn.Module]]] = {
    "lm": (ModelConfig, LanguageModel),
    "kvbench": (KVModelConfig, KVTransformer),
    "denoiser": (DenoiserConfig, Denoiser),
}


class MemoryModel(Protocol):
    """A family's own memory and work model (a module): peak device bytes, FLOPs and
    operators of a training step and of evaluating one sequence, and its parameter count,
    each of the family's configuration (`model_config`)."""

    def train_work(self, cfg: Any, rows: int, length: int) -> dict[str, float]: ...

    def eval_work(self, cfg: Any, length: int, options: dict[str, Any]) -> dict[str, float]: ...

    def n_parameters(self, cfg: Any) -> int: ...


# the families whose memory and work the resource planner computes from their shapes rather
# than from the probe table (the key-value transformer changes attention path with length)
MEMORY_MODELS: dict[str, MemoryModel] = {"kvbench": kvbench_memory}


def memory_model(settings: dict[str, Any]) -> MemoryModel | None:
    """The own memory and work model of a model block's family (`MEMORY_MODELS`); None for a
    family the probe table prices."""
    return MEMORY_MODELS.get(settings.get("family", "lm"))


def _family(settings: dict[str, Any]) -> str:
    name = settings.get("family", "lm")
    if name not in FAMILIES:
        raise ValueError(f"model.family: unknown {name!r}; known: {sorted(FAMILIES)}")
    return name


def fields_of(family: str) -> set[str]:
    """The settings a model block of ``family`` may hold (its configuration's fields but the
    vocabulary, which the task sets)."""
    cls = FAMILIES[_family({"family": family})][0]
    return {f.name for f in fields(cls)} - {"vocab_size"}


def model_config(settings: dict[str, Any], vocab_size: int, positions: int | None = None) -> Any:
    """The configuration a model block describes, with the task's vocabulary; ``positions``
    (the task's longest sequence, `Task.positions`) fills ``max_len`` where the family has
    that field and the settings leave it unset."""
    name = _family(settings)
    cls = FAMILIES[name][0]
    names = {f.name for f in fields(cls)}
    rest = {k: v for k, v in settings.items() if k != "family"}
    if "family" in names:
        rest["family"] = name
    if positions is not None and "max_len" in names and rest.get("max_len") is None:
        rest["max_len"] = positions
    return cls(vocab_size=vocab_size, **rest)


def config_from_record(record: dict[str, Any]) -> Any:
    """A configuration back from its recorded fields (a final.json's ``model``)."""
    cls = FAMILIES[_family(record)][0]
    return cls(**record)


def instantiate(cfg: Any) -> nn.Module:
    """The module of a configuration, with torch's default initialisation."""
    for cls, module in FAMILIES.values():
        if type(cfg) is cls:
            return module(cfg)
    raise TypeError(f"no model family takes a {type(cfg).__name__}")


def build(cfg: Any, seed: int) -> nn.Module:
    """A model whose initial weights are a pure function of ``seed`` (in a forked RNG scope,
    so the caller's global RNG state is untouched)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return instantiate(cfg)
