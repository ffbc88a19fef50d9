"""Config: scales, one source for release settings, errors that name the key, pinned envs."""

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
        (lambda c: c["experiments"]["factorial"]["task"].update(name="mqr"), "unknown task 'mqr'"),
        (lambda c: c["experiments"]["factorial"]["task"].update(paris=3), "unknown key 'paris'"),
        (lambda c: c["releases"]["passkey_swar"]["params"].update(w=0), "releases.passkey_swar"),
        (lambda c: c["releases"]["passkey_swar"].update(task="mqar"), "has no release"),
        (
            lambda c: c["experiments"]["passkey_swar"]["task"].update(release="nope"),
            "experiments.passkey_swar.task.release",
        ),
        (
            lambda c: c["experiments"]["passkey_swar"]["task"].update(train_configs=[32]),
            "set it in releases.passkey_swar.train_configs",
        ),
        (
            lambda c: c["experiments"]["passkey_swar"]["arms"]["gated_deltanet"].update(
                eval_max_write=8
            ),
            "takes no evaluation option 'max_write'",
        ),
        (lambda c: c["zoo"]["reference"].update(arm="ghost"), "zoo.reference.arm"),
        (
            lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(
                cell="bidirectional", inner="lstm"
            ),
            "arms.delta: unknown cell 'lstm'",
        ),
        (lambda c: c["bench"]["stream"].update(experiment="nope"), "bench.stream.experiment"),
        (
            lambda c: c["experiments"]["capacity"]["grid"].update(key="pairs"),
            "experiments.capacity.grid.key",
        ),
        (
            lambda c: c["experiments"]["capacity"]["grid"].update(values=[4, 4]),
            "experiments.capacity.grid.values: [4, 4] repeats a value",
        ),
        (
            lambda c: c["experiments"]["lr_sweep"]["grid"].update(values=[1e-3, 2e-3]),
            "must include the shared default train.lr=0.006",
        ),
        (
            lambda c: c["experiments"]["capacity"]["grid"].update(values=[4, 256]),
            "experiments.capacity.task (grid task.pairs=256)",
        ),
        (
            lambda c: c["experiments"]["transition"]["eval"].update(rebind=True),
            "experiments.transition.eval.rebind: task 'mqar' takes no evaluation option",
        ),
        (
            lambda c: c["experiments"]["mamba2"]["arms"]["mamba2"].update(qk_bias=1.0),
            "experiments.mamba2.arms.mamba2.qk_bias",
        ),
        (
            lambda c: c["experiments"]["factorial"]["train"].update(curriculum={"ramp": "linear"}),
            "train.curriculum: task 'mqar' has no 'gap' signal",
        ),
        (
            lambda c: c["experiments"]["curriculum"]["arms"]["curriculum"]["train"].update(
                curriculum={"ramp": "linear", "until": 0}
            ),
            "curriculum.until",
        ),
        (
            lambda c: c["experiments"]["collision"]["arms"]["causal_1layer"]["model"].update(
                layer=1
            ),
            "experiments.collision.arms.causal_1layer.model.layer: not a model setting",
        ),
        (
            lambda c: c["experiments"]["ramps"]["arms"]["gated"]["task"].update(seq_len=12),
            "experiments.ramps.task",
        ),
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


def test_an_unknown_arm_key_fails_naming_arm_key_and_the_accepted_ones() -> None:
    cfg = copy.deepcopy(RAW)
    cfg["experiments"]["factorial"]["arms"]["delta_conv"]["convv"] = True
    with pytest.raises(config.ConfigError) as err:
        config.resolve(cfg)
    message = str(err.value)
    assert "\n" not in message
    assert "experiments.factorial.arms.delta_conv.convv" in message
    assert "'delta_rule'" in message and "'conv'" in message and "'decay'" in message
    cfg = copy.deepcopy(RAW)
    cfg["experiments"]["factorial"]["model"]["cell_options"]["hedas"] = 2
    with pytest.raises(config.ConfigError, match=r"factorial\.model\.cell_options\.hedas"):
        config.resolve(cfg)


def test_a_grid_runs_every_arm_at_every_value() -> None:
    exp = config.resolve(copy.deepcopy(RAW))["experiments"]["lr_sweep"]
    arms = config.run_arms(exp)
    assert len(arms) == len(exp["arms"]) * len(exp["grid"]["values"])
    assert arms[:2] == ["delta-lr0.002", "delta-lr0.0035"]
    assert config.point_of(exp, "mamba2-lr0.011") == ("mamba2", 0.011)
    assert config.train_settings(exp, "mamba2-lr0.011")["lr"] == 0.011
    assert exp["train"]["lr"] == 0.006  # the block itself is never edited
    assert config.task_settings(exp, "mamba2-lr0.011") == exp["task"]
    with pytest.raises(KeyError, match="not a run arm"):
        config.point_of(exp, "mamba2-lr0.5")
    capacity = config.resolve(copy.deepcopy(RAW))["experiments"]["capacity"]
    assert config.task_settings(capacity, "delta-pairs128")["pairs"] == 128
    assert config.model_settings(capacity, "delta-pairs128")["cell"] == "delta_rule"


def test_a_scale_rewrite_of_one_experiment_never_reaches_its_aliases() -> None:
    # the MQAR experiments share their train block through a YAML anchor; the demo sets the
    # factorial's steps and multiplies every experiment's once, never one shared dict twice
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    exps = raw["experiments"]
    assert exps["factorial"]["train"] is exps["transition"]["train"]  # aliased as loaded
    raw["scales"]["demo"]["set"]["experiments.factorial.train.steps"] = 123
    demo = config.resolve(raw | {"scale": "demo"})["experiments"]
    assert demo["factorial"]["train"]["steps"] == 123
    assert demo["transition"]["train"]["steps"] == 1000  # 4000 x 0.25, once
    assert demo["transition"]["train"] is not demo["factorial"]["train"]


def test_an_arm_whose_cell_cannot_run_here_is_skipped_with_its_reason() -> None:
    cfg = config.resolve(copy.deepcopy(RAW))
    exp = cfg["experiments"]["mamba2"]
    from arbench.cells import CELLS

    if CELLS["mamba2_fused"].unavailable_reason() is None:
        pytest.skip("mamba_ssm is importable here: the fused arm runs")
    assert "mamba2_fused" not in exp["arms"]
    assert "mamba_ssm" in exp["skipped"]["arms"]["mamba2_fused"]
    assert [c["a"] for c in exp["skipped"]["contrasts"]] == ["mamba2_fused"]
    assert all("mamba2_fused" not in (c["a"], c["b"]) for c in exp["contrasts"])


def test_release_settings_have_one_source() -> None:
    for scale in ("paper", "demo", "smoke"):
        cfg = config.resolve(copy.deepcopy(RAW) | {"scale": scale})
        task, release = cfg["experiments"]["passkey_swar"]["task"], cfg["releases"]["passkey_swar"]
        for key in ("params", "train_configs", "eval_configs"):
            assert task[key] == release[key], (scale, key)


def test_model_settings_merge_backbone_and_arm() -> None:
    cfg = config.resolve(copy.deepcopy(RAW))
    exp = cfg["experiments"]["passkey_swar"]
    assert config.model_settings(exp, "attention_2layer") == {
        "d_model": 32,
        "layers": 2,
        "mlp_ratio": 4,
        "cell": "attention",
        "cell_options": {"heads": 4, "positions": "rotary"},
    }
    assert config.eval_options(exp, "attention_2layer") == {"max_writes": 4096}


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


def test_an_arm_changes_only_the_settings_it_names() -> None:
    cfg = config.resolve(copy.deepcopy(RAW))
    ramps, collision = cfg["experiments"]["ramps"], cfg["experiments"]["collision"]
    gated = config.train_settings(ramps, "gated")
    assert gated["curriculum"]["ramp"] == "gated" and gated["steps"] == 4000
    assert config.task_settings(ramps, "gated")["seq_len"] == 512
    assert config.task_settings(ramps, "uniform")["seq_len"] == 256
    assert config.model_settings(collision, "causal_1layer")["layers"] == 1
    assert config.model_settings(collision, "causal")["layers"] == 2
    # the experiment's own training options stay where an arm does not replace them
    assert config.train_settings(collision, "causal")["dense"] is True
    assert config.train_settings(collision, "causal_shaped")["curriculum"]["ramp"] == "shaped"
    # block overrides are not cell options
    assert "train" not in config.model_settings(ramps, "gated")["cell_options"]
