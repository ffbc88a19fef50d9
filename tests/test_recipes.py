"""Recipes: an experiment's blocks merged over its recipe's preset, the recipe in the run
identity and fingerprint, and bad recipes failing naming the key."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from arbench import config
from arbench.config.recipes import expand
from arbench.experiment import runs_of

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def test_an_experiment_naming_no_recipe_runs_under_the_default_one() -> None:
    cfg = config.resolve(copy.deepcopy(RAW) | {"scale": "paper"})
    assert RAW["recipe"] == "paper"
    exp = cfg["experiments"]["paper_mqar"]
    assert "recipe" not in RAW["experiments"]["paper_mqar"]
    assert exp["recipe"] == "paper" and exp["train"]["recipe"] == "paper"
    preset = RAW["recipes"]["paper"]
    for block in ("model", "train"):
        for key, value in preset[block].items():
            assert exp[block][key] == value, (block, key)


def test_the_experiments_own_settings_win_over_the_recipe() -> None:
    raw = copy.deepcopy(RAW)
    raw["experiments"]["paper_mqar"]["train"] = {"lr": 3.0e-3}
    raw["experiments"]["paper_mqar"]["model"] = {"layers": 2}
    exp = expand(raw)["experiments"]["paper_mqar"]
    assert exp["train"]["lr"] == 3.0e-3 and exp["train"]["steps"] == 6000
    assert exp["model"]["layers"] == 2 and exp["model"]["family"] == "denoiser"
    assert RAW["recipes"]["paper"]["train"]["lr"] == 1.0e-3  # the preset is not mutated


def test_causal_experiments_keep_their_blocks_as_written() -> None:
    exp = expand(copy.deepcopy(RAW))["experiments"]["factorial"]
    own = RAW["experiments"]["factorial"]
    assert exp["model"] == own["model"]
    assert {k: v for k, v in exp["train"].items() if k != "recipe"} == own["train"]
    assert exp["train"]["recipe"] == "causal"


def test_the_recipe_is_part_of_the_run_identity() -> None:
    raw = copy.deepcopy(RAW)
    raw["recipes"]["other"] = copy.deepcopy(raw["recipes"]["paper"])
    cfg = expand(raw)
    raw["experiments"]["paper_mqar"]["recipe"] = "other"
    other = expand(raw)
    a = runs_of("paper_mqar", cfg["experiments"]["paper_mqar"])[0]
    b = runs_of("paper_mqar", other["experiments"]["paper_mqar"])[0]
    assert a.model == b.model and a.task == b.task
    assert a.identity != b.identity


def test_the_fingerprint_names_the_recipe() -> None:
    from arbench.train.run_files import fingerprint, run_settings
    from arbench.train.settings import TrainConfig

    train = config.resolve(copy.deepcopy(RAW))["experiments"]["paper_mqar"]["train"]
    ours = TrainConfig.from_dict(train)
    assert ours.recipe == "paper"
    other = {**train, "recipe": "causal"}
    assert fingerprint(run_settings({}, train, {}, 0)) != fingerprint(
        run_settings({}, other, {}, 0)
    )


def test_a_scale_rewrites_the_blocks_a_recipe_supplies() -> None:
    demo = config.resolve(copy.deepcopy(RAW) | {"scale": "demo"})
    train = demo["experiments"]["paper_mqar"]["train"]
    assert (train["steps"], train["batch"], train["warmup"]) == (1500, 64, 0)  # the demo's
    assert train["loss_weight"] == 2.0 and train["decay_params"] == "all"  # the recipe's
    smoke = config.resolve(copy.deepcopy(RAW) | {"scale": "smoke"})
    assert smoke["experiments"]["paper_mqar"]["train"]["batch"] == 64  # 256 x 0.25


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda c: c["experiments"]["paper_mqar"].update(recipe="papr"),
            "experiments.paper_mqar.recipe: unknown recipe 'papr'; known: ['causal', 'paper']",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"]["arms"]["deltanet"].update(recipe="causal"),
            "experiments.paper_mqar.arms.deltanet.recipe: an arm takes its experiment's recipe",
        ),
        (
            lambda c: c["recipes"]["paper"].update(eval={"examples": 4}),
            "recipes.paper.eval: a recipe presets only ['task', 'model', 'train']",
        ),
        (
            lambda c: c["recipes"]["paper"]["train"].update(decay_params="some"),
            "decay_params",
        ),
        (
            lambda c: c["recipes"]["paper"]["model"].update(direction="sideways"),
            "direction",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"]["arms"]["deltanet"].update(
                model={"merge": "sum"}
            ),
            "merge",
        ),
    ],
)
def test_a_bad_recipe_fails_naming_the_key(edit, needle: str) -> None:
    raw = copy.deepcopy(RAW)
    edit(raw)
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.resolve(raw)


def _message(edit) -> str:
    raw = copy.deepcopy(RAW)
    edit(raw)
    with pytest.raises(config.ConfigError) as err:
        config.resolve(raw)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_a_top_level_recipe_typo_names_the_top_level_key() -> None:
    # reported as experiments.paper_mqar.recipe, a key the config does not have
    message = _message(lambda c: c.update(recipe="papr"))
    assert message == "recipe: unknown recipe 'papr'; known: ['causal', 'paper']"

    # even where every experiment names its own
    def every_own(c: dict) -> None:
        c.update(recipe="papr")
        for exp in c["experiments"].values():
            exp.setdefault("recipe", "paper")

    assert _message(every_own).startswith("recipe: unknown recipe 'papr'")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (  # reported under the first experiment checked that runs under the recipe
            lambda c: c["recipes"]["paper"]["train"].update(lrr=1.0),
            "config key recipes.paper.train.lrr: unknown key; allowed: ['batch'",
        ),
        (
            lambda c: c["recipes"]["paper"]["train"].update(steps=0),
            "config key recipes.paper.train.steps: 0 is less than the minimum of 1",
        ),
        (
            lambda c: c["recipes"]["paper"]["model"].update(family="nope"),
            "config key recipes.paper.model.family: 'nope' is not one of",
        ),
    ],
)
def test_a_bad_preset_value_is_reported_under_its_recipe(edit, message: str) -> None:
    got = _message(edit)
    assert got.startswith(message), got
    assert "experiments." not in got


def test_a_preset_setting_a_task_rejects_names_the_preset_too() -> None:
    got = _message(lambda c: c["recipes"]["paper"].update(task={"paris": 3}))
    assert got.startswith("experiments.paper_mqar.task.paris: not a setting of task 'paper_mqar'")
    assert got.endswith("(set by recipes.paper.task.paris; paper_mqar runs under recipe 'paper')")

    # an experiment's own setting is its own: no preset named
    def own(c: dict) -> None:
        c["experiments"]["paper_mqar"]["task"]["paris"] = 3

    assert "recipes.paper" not in _message(own)
