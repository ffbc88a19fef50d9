"""Config: scales, one source for release settings, errors that name the key, pinned envs."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from arbench import config, experiment

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
        (
            lambda c: c["experiments"]["factorial"]["task"].update(paris=3),
            "experiments.factorial.task.paris: not a setting of task 'mqar'",
        ),
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
            lambda c: c["experiments"]["kvbench"]["arms"]["rope"].update(variant="nope"),
            "model.variant: unknown 'nope'",
        ),
        (
            lambda c: c["experiments"]["kvbench"]["arms"]["rope"].update(windw=3),
            "experiments.kvbench.arms.rope.windw: not a setting of model family 'kvbench'",
        ),
        (
            lambda c: c["experiments"]["kvbench"]["arms"]["rope"].update(cell="delta_rule"),
            "experiments.kvbench.arms.rope.cell: a model of family 'kvbench' takes no cell",
        ),
        (
            lambda c: c["experiments"]["kvbench"]["model"].update(kv_heads=3),
            "not a multiple of kv_heads=3",
        ),
        (
            lambda c: c["experiments"]["factorial"]["arms"]["delta"].pop("cell"),
            "experiments.factorial.arms.delta.cell: missing",
        ),
        (
            lambda c: c["experiments"]["kvbench"]["train"]["load"].update(until=[0.5]),
            "train.load.until needs 3 fractions",
        ),
        (
            lambda c: c["experiments"]["kvbench_long"]["train"].update(tokens_per_step=0),
            "tokens_per_step",
        ),
        (
            lambda c: c["experiments"]["kvbench"]["train"]["load"].update(stop=True),
            "train.load.stop needs accuracy-gated rungs",
        ),
        (
            lambda c: c["experiments"]["factorial"]["train"].update(tokens_per_step=4096),
            "train.tokens_per_step: task 'mqar' gives no sequence length",
        ),
        (
            lambda c: c["experiments"]["factorial"]["train"].update(
                load={"values": [2, 4], "until": [0.5]}
            ),
            "train.load: task 'mqar' has no 'load' signal",
        ),
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
            "experiments.collision.arms.causal_1layer.model.layer: unknown key; "
            "allowed: ['block', 'cell",
        ),
        (
            lambda c: c["experiments"]["ramps"]["arms"]["gated"]["task"].update(seq_len=12),
            "experiments.ramps.task",
        ),
        (
            lambda c: (
                c.update(scale="demo")
                or c["scales"]["study"]["multiply"].update({"experiments.*.nope": 2})
            ),
            "nope",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"]["seeds"].update(deltanett=20),
            "experiments.paper_mqar.seeds.deltanett: not an arm of the experiment",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"]["seeds"].pop("default"),
            "experiments.paper_mqar.seeds: no count for arm 'armed_gdn'",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"].update(
                reference={"file": "references/nope.yaml", "set": "table1_k32"}
            ),
            "experiments.paper_mqar.reference.file: no file 'references/nope.yaml'",
        ),
        (
            lambda c: c["experiments"]["paper_mqar"].update(
                reference={"file": "references/paper_code_results.yaml", "set": "tabel1"}
            ),
            "experiments.paper_mqar.reference.set: ",
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
    arms = [r.name for r in experiment.runs_of("", exp)]
    assert len(arms) == len(exp["arms"]) * len(exp["grid"]["values"])
    assert arms[:2] == ["delta-lr0.002", "delta-lr0.0035"]
    assert (
        experiment.run_of(exp, "mamba2-lr0.011").arm,
        experiment.run_of(exp, "mamba2-lr0.011").value,
    ) == ("mamba2", 0.011)
    assert experiment.run_of(exp, "mamba2-lr0.011").train["lr"] == 0.011
    assert exp["train"]["lr"] == 0.006  # the block itself is never edited
    assert experiment.run_of(exp, "mamba2-lr0.011").task == exp["task"]
    with pytest.raises(KeyError, match="not a run arm"):
        (experiment.run_of(exp, "mamba2-lr0.5").arm, experiment.run_of(exp, "mamba2-lr0.5").value)
    capacity = config.resolve(copy.deepcopy(RAW))["experiments"]["capacity"]
    assert experiment.run_of(capacity, "delta-pairs128").task["pairs"] == 128
    assert experiment.run_of(capacity, "delta-pairs128").model["cell"] == "delta_rule"


def test_a_scale_rewrite_of_one_experiment_never_reaches_its_aliases() -> None:
    # the MQAR experiments share their train block through a YAML anchor; the demo sets the
    # factorial's steps and multiplies every experiment's once, never one shared dict twice
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    exps = raw["experiments"]
    assert exps["factorial"]["train"] is exps["transition"]["train"]  # aliased as loaded
    raw["scales"]["study"]["set"]["experiments.factorial.train.steps"] = 123
    demo = config.resolve(raw | {"scale": "study"})["experiments"]
    assert demo["factorial"]["train"]["steps"] == 123
    assert demo["transition"]["train"]["steps"] == 600  # 4000 x 0.15, once
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


def test_the_checks_expand_each_experiments_rows_once(monkeypatch) -> None:
    # the warm-start, reference and source-results checks read the rows the experiment's own
    # checks read (one table), not an expansion each: lattice_capacity's base is expanded once
    from arbench.config import validation

    cfg = config.resolve(copy.deepcopy(RAW) | {"scale": "smoke"})
    expanded: list[str] = []

    def counted(name: str, exp: dict) -> list[experiment.Run]:
        expanded.append(name)
        return experiment.runs_of(name, exp)

    monkeypatch.setattr(validation, "runs_of", counted)
    config.semantic_checks(cfg)
    assert sorted(expanded) == sorted(cfg["experiments"])


def test_release_settings_have_one_source() -> None:
    for scale in ("paper", "demo", "smoke"):
        cfg = config.resolve(copy.deepcopy(RAW) | {"scale": scale})
        task, release = cfg["experiments"]["passkey_swar"]["task"], cfg["releases"]["passkey_swar"]
        for key in ("params", "train_configs", "eval_configs"):
            assert task[key] == release[key], (scale, key)


def test_model_settings_merge_backbone_and_arm() -> None:
    cfg = config.resolve(copy.deepcopy(RAW))
    exp = cfg["experiments"]["passkey_swar"]
    assert experiment.run_of(exp, "attention_2layer").model == {
        "d_model": 32,
        "layers": 2,
        "mlp_ratio": 4,
        "cell": "attention",
        "cell_options": {"heads": 4, "positions": "rotary"},
    }
    assert experiment.run_of(exp, "attention_2layer").eval_options == {"max_writes": 4096}


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
    gated = experiment.run_of(ramps, "gated").train
    assert gated["curriculum"]["ramp"] == "gated" and gated["steps"] == 4000
    assert experiment.run_of(ramps, "gated").task["seq_len"] == 512
    assert experiment.run_of(ramps, "uniform").task["seq_len"] == 256
    assert experiment.run_of(collision, "causal_1layer").model["layers"] == 1
    assert experiment.run_of(collision, "causal").model["layers"] == 2
    # the experiment's own training options stay where an arm does not replace them
    assert experiment.run_of(collision, "causal").train["dense"] is True
    assert experiment.run_of(collision, "causal_shaped").train["curriculum"]["ramp"] == "shaped"
    # block overrides are not cell options
    assert "train" not in experiment.run_of(ramps, "gated").model["cell_options"]


# ---------------------------------------------------------------- bad input, before any job
def _error(cfg: dict) -> str:
    """The one-line message `resolve` rejects ``cfg`` with."""
    with pytest.raises(config.ConfigError) as err:
        config.resolve(cfg)
    message = str(err.value)
    assert "\n" not in message, message
    return message


def _edited(edit) -> dict:
    cfg = config.dealias(RAW)  # unshared, so an edit reaches one experiment only
    edit(cfg)
    return cfg


def test_a_repeated_key_fails_naming_its_path_and_both_lines(tmp_path: Path) -> None:
    text = (ROOT / "config.yaml").read_text()
    first = "      delta:               &delta {cell: delta_rule, conv: false, decay: false}\n"
    assert text.count(first) == 1
    second = "      delta: {cell: delta_rule, conv: true, decay: true}\n"
    bad = tmp_path / "config.yaml"
    bad.write_text(text.replace(first, first + second))
    line = text[: text.index(first)].count("\n") + 1
    with pytest.raises(config.ConfigError) as err:
        config.load_yaml(bad)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{bad} line {line + 1}: key experiments.factorial.arms.delta ")
    assert f"set twice (first on line {line})" in message
    # inside a flow mapping, and in a file given with --configfile (read_config)
    extra = tmp_path / "extra.yaml"
    extra.write_text("experiments:\n  factorial:\n    arms:\n      delta: {conv: 1, conv: 2}\n")
    with pytest.raises(config.ConfigError, match=r"extra\.yaml line 4: key experiments"):
        config.read_config([ROOT / "config.yaml", extra])


def test_the_strict_loader_reads_the_real_config_as_pyyaml_does() -> None:
    # merge keys (<<) followed by the arm's own keys are overrides, not repeated keys
    strict = config.load_yaml(ROOT / "config.yaml")
    assert json.dumps(strict, sort_keys=True) == json.dumps(RAW, sort_keys=True)
    for scale in ("paper", "demo", "smoke"):
        config.resolve(config.read_config([ROOT / "config.yaml"], {"scale": scale}))


@pytest.mark.parametrize(
    ("text", "value"),
    [("3e-3", 0.003), ("1e-4", 0.0001), ("-2.5E+2", -250.0), ("1.0e5", 100000.0), ("12", 12)],
)
def test_a_number_in_exponent_form_is_a_number(text: str, value: float) -> None:
    loaded = yaml.load(f"lr: {text}", config.StrictLoader)["lr"]  # noqa: S506
    assert loaded == value and type(loaded) is type(value)
    assert yaml.load(f"lr: '{text}'", config.StrictLoader)["lr"] == text  # quoted: a string


def test_lr_3e_3_in_a_config_file_trains_with_a_float(tmp_path: Path) -> None:
    extra = tmp_path / "lr.yaml"
    extra.write_text("experiments:\n  factorial:\n    train:\n      lr: 3e-3\n")
    assert yaml.safe_load(extra.read_text())["experiments"]["factorial"]["train"]["lr"] == "3e-3"
    cfg = config.resolve(config.read_config([ROOT / "config.yaml", extra], {"scale": "smoke"}))
    lr = experiment.run_of(cfg["experiments"]["factorial"], "delta").train["lr"]
    assert lr == 0.003 and isinstance(lr, float)
    # the edit reaches the factorial only, not the experiments sharing its anchor
    assert cfg["experiments"]["transition"]["train"]["lr"] == 0.006
    # a number that arrives as a string anyway (quoted, or read by PyYAML) names the fix
    message = _error(_edited(lambda c: c["experiments"]["factorial"]["train"].update(lr="3e-3")))
    assert message.startswith("config key experiments.factorial.train.lr: '3e-3' is not of type")
    assert "write the number unquoted" in message


def test_read_config_merges_in_snakemakes_order_and_checks_snakemakes_copy(
    tmp_path: Path,
) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text("threads_per_run: 2\nbench: {B: 8}\n")
    # --config values: top level as Snakemake parses them, nested ones as its base loader
    # leaves them (every scalar a string)
    files, overrides = [ROOT / "config.yaml", extra], {"scale": "demo", "bench": {"B": "4"}}
    cfg = config.read_config(files, overrides)
    assert (cfg["scale"], cfg["threads_per_run"], cfg["bench"]["B"]) == ("demo", 2, 4)
    assert cfg["bench"]["T"] == RAW["bench"]["T"]  # merged key by key
    theirs = copy.deepcopy(cfg)
    theirs["bench"]["B"] = "4"  # a string where we read a number agrees
    config.read_config(files, overrides, expected=theirs)
    theirs["bench"]["B"] = 5
    with pytest.raises(config.ConfigError, match=r"^config key bench\.B: the strict read"):
        config.read_config(files, overrides, expected=theirs)


@pytest.mark.parametrize(
    ("edit", "start", "allowed"),
    [
        (
            lambda c: c["experiments"]["factorial"]["task"].update(paris=3),
            "experiments.factorial.task.paris: not a setting of task 'mqar'",
            ["answer", "n_keys", "n_values", "name", "pairs", "seq_len"],
        ),
        (
            lambda c: c["experiments"]["haystack"]["task"].update(gap=3),
            "experiments.haystack.task.gap: not a setting of task 'haystack'",
            ["distractors", "layout", "shift"],
        ),
        (
            lambda c: c["experiments"]["s5"]["task"].update(dept=3),
            "experiments.s5.task.dept: not a setting of task 's5'",
            ["depth", "name"],
        ),
        (
            lambda c: c["experiments"]["passkey_swar"]["task"].update(eval_splitt="test"),
            "experiments.passkey_swar.task.eval_splitt: not a setting of task 'passkey_swar'",
            ["eval_split", "piece", "release"],
        ),
        (  # an arm's own task block: named as the arm's
            lambda c: c["experiments"]["ramps"]["arms"]["gated"]["task"].update(seqlen=64),
            "experiments.ramps.arms.gated.task.seqlen: not a setting of task 'haystack'",
            ["seq_len"],
        ),
    ],
)
def test_an_unknown_task_option_fails_naming_the_key_and_the_tasks_settings(
    edit, start: str, allowed: list[str]
) -> None:
    message = _error(_edited(edit))
    assert message.startswith(start + "; allowed: ["), message
    listed = message.split("allowed: ")[1]
    assert all(repr(k) in listed for k in allowed), message


def test_a_task_value_of_the_wrong_type_fails_naming_the_declared_type() -> None:
    message = _error(_edited(lambda c: c["experiments"]["factorial"]["task"].update(pairs="16")))
    assert message == (
        "experiments.factorial.task.pairs: '16' is not allowed; task 'mqar' takes pairs: int "
        "(write the number unquoted, e.g. 3.0e-3)"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            lambda c: c["experiments"]["factorial"]["eval"].update(rebind=True),
            "experiments.factorial.eval.rebind: task 'mqar' takes no evaluation option 'rebind'; "
            "allowed: ['rebinding']",
        ),
        (
            lambda c: c["experiments"]["haystack"]["eval"].update(rebinding=True),
            "experiments.haystack.eval.rebinding: task 'haystack' takes no evaluation option "
            "'rebinding'; allowed: []",
        ),
        (
            lambda c: c["experiments"]["passkey_swar"]["arms"]["attention_2layer"].update(
                eval_max_writes="4096"
            ),
            "experiments.passkey_swar.arms.attention_2layer.eval_max_writes: '4096' is not "
            "allowed; task 'passkey_swar''s evaluator takes max_writes: int | null "
            "(write the number unquoted, e.g. 3.0e-3)",
        ),
        (
            lambda c: c["experiments"]["transition"]["eval"].update(rebinding="yes"),
            "experiments.transition.eval.rebinding: 'yes' is not allowed; task 'mqar''s "
            "evaluator takes rebinding: bool",
        ),
    ],
)
def test_an_unknown_eval_option_fails_naming_the_evaluators_options(edit, message: str) -> None:
    assert _error(_edited(edit)) == message


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (  # a name the cell does not declare
            lambda c: c["experiments"]["s5"]["arms"]["rwkv7"].update(decay=True),
            "experiments.s5.arms.rwkv7.decay: not an option of cell 'rwkv7'; allowed: [",
        ),
        (  # a declared name with a value of another type
            lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(heads="two"),
            "experiments.factorial.arms.delta.heads: 'two' is not allowed; cell 'delta_rule' "
            "takes heads: int",
        ),
        (  # a value the constructor itself rejects
            lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(decay="always"),
            "experiments.factorial.arms.delta: cell 'delta_rule' rejects d_model=32, heads=1, "
            "qk_bias=1.0, conv=False, decay='always': ValueError: decay must be false, true or "
            "'constant', got 'always'",
        ),
        (  # a shape the constructor rejects at this arm's width
            lambda c: c["experiments"]["haystack"]["arms"]["attention"].update(heads=3),
            "experiments.haystack.arms.attention: cell 'attention' rejects d_model=32, heads=3, "
            "positions='rotary': ValueError: d_model=32 not divisible by heads=3",
        ),
        (  # a preset forwarding **options: its parent's declaration counts
            lambda c: c["experiments"]["s5"]["arms"]["gated_deltanet"].update(conv="yes"),
            "experiments.s5.arms.gated_deltanet.conv: 'yes' is not allowed; cell "
            "'gated_deltanet' takes conv: bool",
        ),
        (  # a wrapper: its inner cell's options, checked by building it
            lambda c: c["experiments"]["collision"]["arms"]["bidirectional"].update(heads=5),
            "experiments.collision.arms.bidirectional: cell 'bidirectional' rejects d_model=32",
        ),
    ],
)
def test_an_arm_option_the_cell_does_not_accept_fails_before_any_job(edit, message: str) -> None:
    assert _error(_edited(edit)).startswith(message)


def test_the_accepted_cell_options_come_from_the_cells_declaration() -> None:
    from arbench.cells import CELLS

    message = _error(_edited(lambda c: c["experiments"]["s5"]["arms"]["rwkv7"].update(decay=True)))
    listed = message.split("allowed: ")[1]
    assert listed == repr(sorted(CELLS["rwkv7"].option_names()))


def test_per_arm_training_overrides_are_declared_and_validated() -> None:
    arm_schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text())["$defs"][
        "experiment"
    ]["properties"]["arms"]["additionalProperties"]["properties"]
    assert arm_schema["train"]["$ref"] == "#/$defs/train"
    assert arm_schema["model"]["$ref"] == "#/$defs/model"
    cfg = config.resolve(
        _edited(lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(train={"lr": 1e-3}))
    )
    exp = cfg["experiments"]["factorial"]
    assert experiment.run_of(exp, "delta").train["lr"] == 0.001
    assert experiment.run_of(exp, "delta_conv").train["lr"] == 0.006
    message = _error(
        _edited(lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(train={"lrr": 1}))
    )
    assert message.startswith(
        "config key experiments.factorial.arms.delta.train.lrr: unknown key; allowed: ['batch',"
    )
    assert "'lr'" in message and "'curriculum'" in message
    message = _error(
        _edited(lambda c: c["experiments"]["factorial"]["arms"]["delta"].update(train={"lr": -1}))
    )
    assert message == (
        "config key experiments.factorial.arms.delta.train.lr: -1 is less than or equal to the "
        "minimum of 0"
    )


def test_an_unknown_key_in_any_block_lists_the_allowed_keys() -> None:
    message = _error(_edited(lambda c: c["bench"].update(repeat=3)))
    assert message.startswith("config key bench.repeat: unknown key; allowed: ['B', 'T', ")
    message = _error(_edited(lambda c: c.update(seed=3)))
    assert message.startswith("config key seed: unknown key; allowed: ['bench', 'experiments'")


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (  # a value the schema rejects
            {"set": {"experiments.factorial.train.lr": "1e-4"}},
            "config key experiments.factorial.train.lr: '1e-4' is not of type 'number': write the "
            "number unquoted, e.g. 3.0e-3 (as rewritten by scales.smoke)",
        ),
        (  # a cell option the cell rejects
            {"set": {"experiments.factorial.arms.delta.decay": "sometimes"}},
            "experiments.factorial.arms.delta: cell 'delta_rule' rejects d_model=32, heads=1, "
            "qk_bias=1.0, conv=False, decay='sometimes': ValueError: decay must be false, true or "
            "'constant', got 'sometimes' (at scale smoke)",
        ),
        (  # a key that does not exist: the keys there are listed
            {"set": {"experiments.factorial.eval.rebind": True}},
            "scales.smoke.set 'experiments.factorial.eval.rebind': no key "
            "'experiments.factorial.eval.rebind' (a scale rewrites existing keys only); "
            "experiments.factorial.eval has ['examples']",
        ),
        (
            {"multiply": {"experiments.factorial.task.answer": 2}},
            "scales.smoke.multiply 'experiments.factorial.task.answer': "
            "experiments.factorial.task.answer is 'key', not a number",
        ),
    ],
)
def test_scale_rewrites_get_the_same_checks(rules: dict, message: str) -> None:
    cfg = _edited(lambda c: c.update(scale="smoke"))
    for kind, paths in rules.items():
        cfg["scales"]["smoke"][kind].update(paths)
    assert _error(cfg).startswith(message)


def test_grid_values_get_the_same_checks() -> None:
    message = _error(
        _edited(lambda c: c["experiments"]["lr_sweep"]["grid"].update(values=["2e-3", 6.0e-3]))
    )
    assert message.startswith(
        "experiments.lr_sweep.grid.values: '2e-3' for train.lr (run arm delta-lr2e-3): '2e-3' "
        "is not of type 'number'"
    )
    message = _error(
        _edited(lambda c: c["experiments"]["capacity"]["grid"].update(values=[4, "8"]))
    )
    assert message == (
        "experiments.capacity.grid.values: '8' for task.pairs: not allowed; the task takes int"
    )
    message = _error(_edited(lambda c: c["experiments"]["capacity"]["grid"].update(key="task.par")))
    assert message.startswith(
        "experiments.capacity.grid.key: 'task.par' names no task setting; allowed: ['task.answer'"
    )
    heads = {"key": "model.cell_options.heads", "values": [1, 3]}
    message = _error(_edited(lambda c: c["experiments"]["decay"].update(grid=heads)))
    assert message.startswith("experiments.decay.arms.delta: cell 'delta_rule' rejects d_model=32")
    assert "(run arm delta-heads3)" in message
    # a grid over a cell option an arm sets itself would never change that arm
    message = _error(_edited(lambda c: c["experiments"]["mamba2"].update(grid=heads)))
    assert message == (
        "experiments.mamba2.grid.key: 'model.cell_options.heads' is set by arm 'delta' itself "
        "(heads=1), which would override every grid value"
    )


def test_config_overrides_get_the_same_checks() -> None:
    for overrides, message in [
        ({"threads_per_run": 0}, "config key threads_per_run: 0 is less than the minimum of 1"),
        (
            {"scale": "huge"},
            "config key scale: 'huge' is not one of ['paper', 'study', 'demo', 'smoke']",
        ),
        ({"bench": {"B": "zero"}}, "config key bench.B: 'zero' is not of type 'integer'"),
    ]:
        assert _error(config.read_config([ROOT / "config.yaml"], overrides)) == message


@pytest.mark.parametrize(
    ("rewrite", "named"),
    [
        ({"experiments.factorial.arms.delta.convv": True}, "convv"),
        ({"experiments.factorial.train.lr": "fast"}, "lr"),
        ({"experiments.nosuch.seeds": 1}, "nosuch"),
    ],
)
def test_a_typo_in_another_scales_overrides_fails_a_paper_plan(rewrite, named) -> None:
    # the demo's rewrites are checked whichever scale is planned, naming that scale
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["scales"]["demo"]["set"].update(rewrite)
    with pytest.raises(config.ConfigError) as err:
        config.resolve(raw | {"scale": "paper"})
    message = str(err.value)
    assert "\n" not in message and "scales.demo" in message and named in message


def test_a_scale_that_measures_some_experiments_marks_the_rest_path_only() -> None:
    demo = config.load(scale="demo")["experiments"]
    measured = {n for n, e in demo.items() if not e.get("path_only")}
    assert measured == {"factorial", "decay", "paper_mqar", "paper_wall"}
    paper = config.load(scale="paper")["experiments"]
    assert not any(e.get("path_only") for e in paper.values())
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["scales"]["demo"]["measures"] = ["factorial", "factorail"]
    with pytest.raises(config.ConfigError, match=r"scales.demo.measures: 'factorail'"):
        config.resolve(raw | {"scale": "demo"})


def test_a_scale_drops_arms_as_skipped_with_their_contrasts() -> None:
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["scales"]["demo"]["drop_arms"] = {"factorial": ["diagonal_decay"]}
    exp = config.resolve(raw | {"scale": "demo"})["experiments"]["factorial"]
    assert "diagonal_decay" not in exp["arms"] and len(exp["arms"]) == 7
    why = exp["skipped"]["arms"]["diagonal_decay"]
    assert why == "not run at scale demo (scales.demo.drop_arms)"
    assert exp["skipped"]["contrasts"] == [
        c
        for c in config.load(scale="paper")["experiments"]["factorial"]["contrasts"]
        if "diagonal_decay" in (c["a"], c["b"])
    ]
    assert not [c for c in exp["contrasts"] if "diagonal_decay" in (c["a"], c["b"])]
    # the paper scale keeps every arm
    paper = config.resolve(raw | {"scale": "paper"})["experiments"]["factorial"]
    assert len(paper["arms"]) == 8 and "skipped" not in paper


@pytest.mark.parametrize(
    ("drops", "message"),
    [
        ({"factorail": ["delta"]}, "scales.demo.drop_arms.factorail: not an experiment"),
        ({"factorial": ["delat"]}, "scales.demo.drop_arms.factorial: 'delat' is not an arm"),
        (
            {"decay": ["delta", "delta_decay"]},
            "scales.demo.drop_arms.decay: drops every arm",
        ),
    ],
)
def test_a_bad_drop_fails_naming_the_key(drops: dict, message: str) -> None:
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["scales"]["demo"]["drop_arms"] = drops
    for scale in ("demo", "paper"):  # another scale's bad drop fails every plan
        got = _error(raw | {"scale": scale})
        assert message in got, got


def test_a_study_names_only_experiments_of_the_config() -> None:
    raw = yaml.safe_load((ROOT / "config.yaml").read_text())
    raw["studies"]["wall"].append("hay_stack")
    at = len(raw["studies"]["wall"]) - 1
    with pytest.raises(config.ConfigError, match=rf"studies.wall\[{at}\]: 'hay_stack'"):
        config.resolve(raw | {"scale": "paper"})


def test_the_demo_keeps_the_factorial_runs_of_the_study_scale() -> None:
    # the cut demo's factorial trains a subset of what the study scale (the previous demo)
    # does, each run the same: the five arms its claims read, 3 of the study's 4 seeds
    demo = config.load(scale="demo")["experiments"]
    study = config.load(scale="study")["experiments"]
    for name in ("factorial", "decay"):
        a = {r.name: r.identity for r in experiment.runs_of(name, demo[name])}
        b = {r.name: r.identity for r in experiment.runs_of(name, study[name])}
        assert a and all(b[run] == identity for run, identity in a.items())
        assert demo[name]["seeds"] == 3 and study[name]["seeds"] == 4
        assert demo[name]["eval"] == study[name]["eval"]
    assert len(demo["factorial"]["arms"]) == 5


# ------------------------------------------------------------------ the reference files

_REF_ROW = "      armed_gdn: {0: 0.978515625, 1: 1.0,"


def _with_reference(tmp_path: Path, edit) -> dict:
    """The config with paper_mqar's reference file replaced by an edited copy."""
    text = (ROOT / "references" / "paper_code_results.yaml").read_text()
    assert _REF_ROW in text
    path = tmp_path / "ref.yaml"
    path.write_text(edit(text))
    return _edited(lambda c: c["experiments"]["paper_mqar"]["reference"].update(file=str(path)))


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        (  # passed planning and failed in the stats job: could not convert string to float
            "      armed_gdn: {0: 0.9x, 1: 1.0,",
            "ref.yaml: set table1_k32, arm armed_gdn (arms), seed 0: '0.9x' is not a number",
        ),
        (  # PyYAML kept the later value: the set's mean moved silently
            "      armed_gdn: {0: 0.978515625, 1: 1.0, 0: 0.1,",
            "ref.yaml line {line}: key sets.table1_k32.arms.armed_gdn.0 is set twice",
        ),
        (  # a ParserError "in <unicode string>" over several lines
            "      armed_gdn: {0: 0.978515625, 1: [1.0,",
            "ref.yaml line {line}, column {column}: not valid YAML: expected ',' or ']'",
        ),
    ],
)
def test_a_bad_reference_file_fails_planning_naming_where(
    tmp_path: Path, row: str, needle: str
) -> None:
    text = (ROOT / "references" / "paper_code_results.yaml").read_text()
    line = text[: text.index(_REF_ROW)].count("\n") + 1
    # the flow sequence left open ends at the mapping's closing brace
    column = text.splitlines()[line - 1].replace(_REF_ROW, row).index("}") + 1
    cfg = _with_reference(tmp_path, lambda text: text.replace(_REF_ROW, row, 1))
    message = _error(cfg)
    where = f"experiments.paper_mqar.reference.file: {tmp_path}/"
    assert message.startswith(where + needle.format(line=line, column=column)), message
    assert "<unicode string>" not in message


# ------------------------------------------------------------------ seeds, drops, scales


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (0, "config key experiments.factorial.seeds: 0 is less than the minimum of 1 (seeds"),
        (
            {"default": 0},
            "config key experiments.factorial.seeds.default: 0 is less than the minimum of 1",
        ),
        ("4", "config key experiments.factorial.seeds: '4' is not valid under any of the given"),
    ],
)
def test_a_bad_seed_count_names_what_is_wrong(seeds, message: str) -> None:
    got = _error(_edited(lambda c: c["experiments"]["factorial"].update(seeds=seeds)))
    assert got.startswith(message), got
    assert "seeds per arm: a number for every arm, or a mapping" in got
    assert "write the number unquoted" in got or seeds != "4"


def test_dropping_an_arm_a_seeds_map_names_drops_its_count_too() -> None:
    # paper_wall gives end_only its own count; dropping it used to fail as a seeds typo
    raw = _edited(lambda c: c["scales"].update(paper={"drop_arms": {"paper_wall": ["end_only"]}}))
    exp = config.resolve(raw | {"scale": "paper"})["experiments"]["paper_wall"]
    assert "end_only" not in exp["arms"] and "end_only" in exp["skipped"]["arms"]
    assert exp["seeds"] == {"default": 10}
    assert RAW["experiments"]["paper_wall"]["seeds"] == {"default": 10, "end_only": 5}


def test_an_error_of_the_config_as_written_carries_no_scale_prefix() -> None:
    # smoke replaces the grid, so only the paper re-check sees the base config's [4, 4]; the
    # paper scale rewrites nothing, so the error is the config's, not scales.paper's
    cfg = _edited(lambda c: c["experiments"]["capacity"]["grid"].update(values=[4, 4]))
    message = _error(cfg | {"scale": "smoke"})
    assert message.startswith("experiments.capacity.grid.values: [4, 4] repeats a value (in the")
    assert "scales.paper" not in message
    assert "which scale paper runs unchanged; found while planning scale smoke" in message
    # a scale with rewrites is still named
    cfg["experiments"]["capacity"]["grid"]["values"] = [4, 8]
    cfg["scales"]["demo"]["set"]["experiments.capacity.grid.values"] = [4, 4]
    assert _error(cfg | {"scale": "smoke"}).startswith(
        "scales.demo: experiments.capacity.grid.values: [4, 4] repeats a value"
    )
