"""Recipes: named presets of task layout, model and training an experiment runs under.

The config's ``recipes:`` block names each preset (``paper``: the paper's own harness, a
one-layer bidirectional masked denoiser with its optimiser; ``causal``: the experiments' own
blocks as written, the field's causal-LM reading). An experiment names one with ``recipe:``
(the top-level ``recipe:`` when it names none); `expand` merges the preset's task, model and
train blocks under the experiment's own, key by key (the experiment's settings win), before
any scale rewrites them, and records the name as ``train.recipe``, so a run's fingerprint
(and its shared-run identity) names its recipe. docs/PROTOCOL.md, "The recipes", sets the
paper recipe beside the paper's code.
"""

from __future__ import annotations

import copy
from typing import Any

from arbench.config.errors import ConfigError
from arbench.config.loading import _merge

RECIPE_BLOCKS = ("task", "model", "train")


def _known(cfg: dict[str, Any]) -> dict[str, Any]:
    recipes = cfg.get("recipes") or {}
    if not isinstance(recipes, dict):
        raise ConfigError("recipes: must map recipe names to {task, model, train} presets")
    for name, preset in recipes.items():
        for block in preset or {}:
            if block not in RECIPE_BLOCKS:
                raise ConfigError(
                    f"recipes.{name}.{block}: a recipe presets only {list(RECIPE_BLOCKS)}"
                )
    return recipes


def recipe_of(cfg: dict[str, Any], name: str, exp: dict[str, Any]) -> str:
    """The recipe experiment ``name`` runs under: its own ``recipe``, else the config's."""
    recipe = exp.get("recipe", cfg.get("recipe"))
    recipes = _known(cfg)
    if recipe is None:
        raise ConfigError(f"experiments.{name}.recipe: missing, and no top-level recipe")
    if recipe not in recipes:
        raise ConfigError(
            f"experiments.{name}.recipe: unknown recipe {recipe!r}; known: {sorted(recipes)}"
        )
    return recipe


def expand(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with every experiment's blocks merged over its recipe's preset.

    An arm may not name a recipe of its own: scale rewrites reach an experiment's blocks, not
    an arm's, so an arm under another recipe would escape every scale's cut; an experiment of
    its own (sharing its runs by identity) is the way to run arms under the other recipe.
    """
    cfg = copy.deepcopy(config)
    recipes = _known(cfg)
    for name, exp in (cfg.get("experiments") or {}).items():
        recipe = recipe_of(cfg, name, exp)
        for arm, spec in (exp.get("arms") or {}).items():
            if isinstance(spec, dict) and "recipe" in spec:
                raise ConfigError(
                    f"experiments.{name}.arms.{arm}.recipe: an arm takes its experiment's "
                    f"recipe ({recipe!r}); put arms of another recipe in an experiment of "
                    "their own (scale rewrites would not reach an arm's recipe)"
                )
        preset = recipes[recipe] or {}
        for block in RECIPE_BLOCKS:
            merged = _merge(copy.deepcopy(preset.get(block) or {}), exp.get(block) or {})
            if merged or block in exp:
                exp[block] = merged
        exp["recipe"] = recipe
    stamp(cfg)
    return cfg


def stamp(cfg: dict[str, Any]) -> None:
    """Record each experiment's recipe as ``train.recipe``, in place: after the expansion and
    again after a scale's rewrites (a scale may replace a whole train block)."""
    for exp in (cfg.get("experiments") or {}).values():
        if "recipe" in exp and isinstance(exp.get("train"), dict):
            exp["train"]["recipe"] = exp["recipe"]
