"""Model families: which configuration class and module a run's model block builds.

A model block names its family with ``family`` (default ``lm``: `LanguageModel`, a stack of
one cell kind); ``kvbench`` is the key-value benchmark's transformer (`models.kvbench`);
``denoiser`` is the paper's bidirectional masked denoiser around a cell (`models.denoiser`). The
training loop, the run layer and evaluation build and reload models only through here, so a
new family is one entry in `FAMILIES`.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch
from torch import nn

from arbench.models.denoiser import Denoiser, DenoiserConfig
from arbench.models.kvbench import KVModelConfig, KVTransformer
from arbench.models.lm import LanguageModel, ModelConfig

FAMILIES: dict[str, tuple[type, type[nn.Module]]] = {
    "lm": (ModelConfig, LanguageModel),
    "kvbench": (KVModelConfig, KVTransformer),
    "denoiser": (DenoiserConfig, Denoiser),
}


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
