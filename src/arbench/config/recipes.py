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
import re
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


def _check_name(key: str, recipe: Any, recipes: dict[str, Any]) -> None:
    """``recipe``, read at ``key``, names a preset of ``recipes``."""
    if recipe not in recipes:
        raise ConfigError(f"{key}: unknown recipe {recipe!r}; known: {sorted(recipes)}")


def recipe_of(cfg: dict[str, Any], name: str, exp: dict[str, Any]) -> str:
    """The recipe experiment ``name`` runs under: its own ``recipe``, else the config's (an
    unknown name fails naming the key that gave it: the experiment's, or the top-level
    ``recipe``)."""
    recipes = _known(cfg)
    if exp.get("recipe") is not None:
        _check_name(f"experiments.{name}.recipe", exp["recipe"], recipes)
        return exp["recipe"]
    if cfg.get("recipe") is None:
        raise ConfigError(f"experiments.{name}.recipe: missing, and no top-level recipe")
    _check_name("recipe", cfg["recipe"], recipes)
    return cfg["recipe"]


def check_names(cfg: dict[str, Any]) -> None:
    """The recipes block presets only task, model and train, and the top-level ``recipe``
    names one of them (even where every experiment names its own), each error naming its own
    key rather than an experiment that uses it."""
    recipes = _known(cfg)
    if cfg.get("recipe") is not None:
        _check_name("recipe", cfg["recipe"], recipes)


def expand(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``config`` with every experiment's blocks merged over its recipe's preset.

    An arm may not name a recipe of its own: scale rewrites reach an experiment's blocks, not
    an arm's, so an arm under another recipe would escape every scale's cut; an experiment of
    its own (sharing its runs by identity) is the way to run arms under the other recipe.
    """
    cfg = copy.deepcopy(config)
    check_names(cfg)
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


# a key path inside an experiment's task, model or train block, as errors write it:
# ``experiments.x.task.paris``, ``experiments.x (run arm a): train.dense``
_BLOCK_KEY = re.compile(
    r"experiments\.(?P<exp>[\w-]+)(?:\.| \([^)]*\): )(?P<block>task|model|train)\.(?P<key>\w+)"
)


def _covers(rule: str, target: list[str]) -> bool:
    """Whether a scale rule's dotted path (``*`` wildcards) reaches the key path ``target``."""
    parts = rule.split(".")
    if len(parts) > len(target):
        return False
    return all(p in ("*", t) for p, t in zip(parts, target[: len(parts)], strict=True))


def origin(message: str, config: dict[str, Any]) -> str:
    """``message``, an error naming a key of an experiment's task, model or train block, with
    the recipe preset named where that setting is the preset's alone (neither the experiment,
    nor an arm, nor a grid, nor any scale rule sets it): the error is the preset's, reported
    where the first experiment running under it is checked. ``config`` is the config as
    written (before `expand`)."""
    m = _BLOCK_KEY.search(message)
    exp = (config.get("experiments") or {}).get(m.group("exp")) if m else None
    if not m or not isinstance(exp, dict):
        return message
    name, block, key = m.group("exp", "block", "key")
    try:
        recipe = recipe_of(config, name, exp)
    except ConfigError:
        return message
    preset = ((config.get("recipes") or {}).get(recipe) or {}).get(block) or {}
    own = [exp.get(block) or {}]
    own += [
        spec.get(block) or {} for spec in (exp.get("arms") or {}).values() if isinstance(spec, dict)
    ]
    target = ["experiments", name, block, key]
    rules = [
        path
        for scale in (config.get("scales") or {}).values()
        for kind in ("set", "multiply")
        for path in ((scale or {}).get(kind) or {})
    ]
    if (
        key not in preset
        or any(isinstance(b, dict) and key in b for b in own)
        or (exp.get("grid") or {}).get("key", "").startswith(f"{block}.{key}")
        or any(_covers(rule, target) for rule in rules)
    ):
        return message
    return f"{message} (set by recipes.{recipe}.{block}.{key}; {name} runs under recipe {recipe!r})"
