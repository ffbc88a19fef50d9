"""Config: scales, schema errors that name the key, pinned environments."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from arbench import config

ROOT = Path(__file__).resolve().parents[1]
RAW = yaml.safe_load((ROOT / "config.yaml").read_text())


def test_scales_shrink_the_protocol() -> None:
    paper = config.resolve(copy.deepcopy(RAW) | {"scale": "paper"})
    demo = config.resolve(copy.deepcopy(RAW) | {"scale": "demo"})
    smoke = config.resolve(copy.deepcopy(RAW) | {"scale": "smoke"})
    p, d, s = (c["experiments"]["factorial"] for c in (paper, demo, smoke))
    assert p["seeds"] == 10 and len(p["arms"]) == 8 and p["task"]["pairs"] == 32
    assert s["seeds"] < d["seeds"] < p["seeds"]
    assert s["train"]["steps"] < d["train"]["steps"] < p["train"]["steps"]
    assert d["task"] == p["task"]  # the demo keeps the paper's task


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda c: c.update(scale="huge"), "scale"),
        (lambda c: c["experiments"]["factorial"]["train"].update(steps=-1), "train.steps"),
        (lambda c: c["experiments"]["factorial"]["task"].update(pairs=99), "n_keys"),
        (lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(cell="lstm"), "lstm"),
        (lambda c: c["experiments"]["factorial"]["contrasts"][0].update(a="ghost"), "ghost"),
        (lambda c: c["experiments"]["factorial"].update(typo=1), "typo"),
        (
            lambda c: (
                c.update(scale="demo")
                or c["scales"]["demo"]["multiply"].update({"experiments.*.nope": 2})
            ),
            "nope",
        ),
    ],
)
def test_bad_config_fails_naming_the_key(edit, needle: str) -> None:
    cfg = copy.deepcopy(RAW)
    edit(cfg)
    with pytest.raises(config.ConfigError, match=re.escape(needle)):
        config.resolve(cfg)


@pytest.mark.parametrize("env", sorted((ROOT / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_env_files_parse_and_pin_everything(env: Path) -> None:
    spec = yaml.safe_load(env.read_text())
    assert spec["dependencies"], env
    norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
    lock = {
        norm(name): version
        for name, version in (
            line.split("==") for line in (ROOT / "requirements.lock").read_text().split()
        )
    }
    for dep in spec["dependencies"]:
        if isinstance(dep, dict):
            for pin in dep["pip"]:
                name, _, version = pin.partition("==")
                assert version, f"{env.name}: {pin} is not pinned exactly"
                assert lock.get(norm(name)) == version, f"{env.name}: {pin} disagrees with the lock"
        else:
            assert re.fullmatch(r"[\w.-]+=[\w.]+", dep), f"{env.name}: {dep} is not pinned"


def test_lock_pins_every_package() -> None:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[\w.+]+", line), line
