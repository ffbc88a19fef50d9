"""The address-spread regulariser in training (train.spread): it changes the gradient, draws
its subsample from (seed, step) only, resumes bit for bit, and fails early, naming
train.spread, where it cannot apply (no lattice layer, no key positions), at config time too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from arbench import config as arbench_config
from arbench.kernels.lattice import spread_loss
from arbench.models import ModelConfig, build_model
from arbench.tasks import build_task
from arbench.tasks.base import Batch
from arbench.train.loop import train
from arbench.train.run_files import load_model_file
from arbench.train.settings import TrainConfig
from arbench.train.spread import (
    AddressTap,
    SpreadConfig,
    generator,
    lattice_layers,
    regularised,
)
from arbench.train.step import masked_loss

TASK = {"name": "lattice_recall", "pairs": 6, "n_keys": 16, "n_values": 16, "filler": 1}
CELL = {"heads": 2, "d_v": 4, "addr_scale": 1.5, "conv_size": 2}
MODEL = {"d_model": 16, "layers": 2, "cell": "lattice", "cell_options": CELL}
# subsample 4 < 6 keys: the overlap estimate draws from the generator every step
SPREAD = {"weight": 0.5, "subsample": 4}
TRAIN = {
    "steps": 12,
    "batch": 4,
    "lr": 3e-3,
    "warmup": 2,
    "checkpoint_every": 5,
    "log_every": 3,
    "spread": SPREAD,
}


def _model(seed: int = 0):
    task = build_task(TASK)
    return task, build_model(ModelConfig(vocab_size=task.vocab_size, **MODEL), seed)


def _run(run_dir: Path, training=TRAIN, model=MODEL, task=TASK, **kw) -> dict:
    adapter = build_task(task)
    mc = ModelConfig(vocab_size=adapter.vocab_size, **model)
    return train(adapter, mc, TrainConfig.from_dict(training), 3, run_dir, task_settings=task, **kw)


def _grads(model, loss) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_batches_mark_their_store_pass_keys() -> None:
    task = build_task(TASK)
    batch = task.train_batch(0, 0, 3)
    cfg = task.cfg
    assert batch.key_positions.shape == (3, cfg.pairs)
    assert (batch.key_positions == np.arange(cfg.pairs) * cfg.block + cfg.filler).all()
    keys = np.take_along_axis(batch.tokens, batch.key_positions, axis=1)
    assert ((keys >= 0) & (keys < cfg.n_keys)).all()
    assert all(len(set(row)) == cfg.pairs for row in keys)  # the P distinct stored keys
    assert Batch(batch.tokens, batch.targets).key_positions is None  # old callers unchanged


def test_the_term_changes_the_gradient_and_is_the_addresses_spread_loss() -> None:
    task, model = _model()
    layers = lattice_layers(model)
    assert len(layers) == 2
    batch = task.train_batch(0, 0, 4)
    tokens, targets = batch.tensors()
    spread = SpreadConfig(**SPREAD)
    plain, _ = masked_loss(model, tokens, targets)
    total, _, reg = regularised(masked_loss, model, layers, batch, tokens, targets, spread, 3, 0)
    # the term is the spread loss of each lattice layer's write addresses at the keys
    positions = torch.from_numpy(batch.key_positions)
    with AddressTap(layers) as tap:
        model.hidden(tokens)
    gen = generator(3, 0)  # one stream, drawn layer after layer
    expected = sum(
        spread_loss(layer.write_addresses(x, positions), layer.addr_scale, 4, gen)
        for layer, x in zip(layers, tap.inputs, strict=True)
    )
    torch.testing.assert_close(reg, expected.detach(), rtol=0, atol=0)
    torch.testing.assert_close(total.detach(), plain.detach() + 0.5 * reg, rtol=0, atol=0)
    g_plain, g_total = _grads(model, plain), _grads(model, total)
    addr = [n for n in g_total if "addr_proj" in n]
    assert addr and any(not torch.equal(g_plain[n], g_total[n]) for n in addr)
    # only what produces the addresses moves: the last block's value path, gates and MLP
    # (nothing the addresses of either lattice layer depend on) keep their gradient
    kept = ("v_proj", "out_proj", "beta_proj", "retention_proj", "mlp")
    for name in g_total:
        if name.startswith("blocks.1.") and any(k in name for k in kept):
            torch.testing.assert_close(g_plain[name], g_total[name], rtol=0, atol=0)
    assert not model.blocks[0].mixer._forward_pre_hooks  # the tap leaves no hook behind


def test_the_subsample_comes_from_seed_and_step_only() -> None:
    task, model = _model()
    layers = lattice_layers(model)
    batch = task.train_batch(0, 0, 4)
    tokens, targets = batch.tensors()
    spread = SpreadConfig(**SPREAD)

    def reg(seed: int, step: int) -> torch.Tensor:
        return regularised(masked_loss, model, layers, batch, tokens, targets, spread, seed, step)[
            2
        ]

    first = reg(3, 5)
    torch.manual_seed(123)  # the global RNG plays no part
    torch.rand(10)
    assert torch.equal(first, reg(3, 5))
    assert torch.equal(
        torch.rand(1, generator=generator(3, 5)), torch.rand(1, generator=generator(3, 5))
    )
    assert not torch.equal(
        torch.rand(4, generator=generator(3, 5)), torch.rand(4, generator=generator(3, 6))
    )
    state = torch.random.get_rng_state()
    reg(3, 5)
    assert torch.equal(state, torch.random.get_rng_state())


def test_training_is_deterministic_differs_from_plain_and_logs_the_term(tmp_path: Path) -> None:
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert a["scores"] == b["scores"]
    assert (tmp_path / "a" / "model.pt").read_bytes() == (tmp_path / "b" / "model.pt").read_bytes()
    plain = _run(tmp_path / "plain", training={k: v for k, v in TRAIN.items() if k != "spread"})
    wa = load_model_file(tmp_path / "a" / "model.pt")["weights"]
    wp = load_model_file(tmp_path / "plain" / "model.pt")["weights"]
    assert any(not torch.equal(wa[k], wp[k]) for k in wa)
    lines = (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()
    assert all('"spread": ' in line for line in lines)
    assert a["train"]["spread"] == SPREAD and plain["train"]["spread"] is None


def test_a_stopped_run_resumes_bit_identically(tmp_path: Path) -> None:
    reference = _run(tmp_path / "ref")
    assert _run(tmp_path / "run", stop_after=7) == {"stopped_at": 7}  # checkpoint at step 5
    resumed = _run(tmp_path / "run")
    assert resumed["resumed_from_step"] == 5
    assert resumed["scores"] == reference["scores"]
    for name in ("model.pt", "metrics.jsonl"):
        assert (tmp_path / "run" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()


def test_a_model_without_a_lattice_layer_fails_before_training(tmp_path: Path) -> None:
    model = {"d_model": 16, "layers": 1, "cell": "delta_rule", "cell_options": {"conv": True}}
    with pytest.raises(ValueError, match=r"^train\.spread: the model \(cell 'delta_rule'\)") as e:
        _run(tmp_path / "run", model=model)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_task_without_key_positions_fails_before_training(tmp_path: Path) -> None:
    task = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
    with pytest.raises(ValueError, match=r"^train\.spread: task 'mqar' gives no key positions"):
        _run(tmp_path / "run", task=task)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_batch_without_key_positions_fails_at_its_step(tmp_path: Path) -> None:
    class Unmarked(type(build_task(TASK))):
        def train_batch(self, seed, step, batch, signal=None):
            drawn = super().train_batch(seed, step, batch, signal)
            return Batch(drawn.tokens, drawn.targets)

    adapter = Unmarked(build_task(TASK).cfg)
    mc = ModelConfig(vocab_size=adapter.vocab_size, **MODEL)
    with pytest.raises(ValueError, match=r"^train\.spread: training batch 0 carries no key_pos"):
        train(adapter, mc, TrainConfig.from_dict(TRAIN), 0, tmp_path / "run", task_settings=TASK)


@pytest.mark.parametrize(
    ("spread", "needle"),
    [
        ({"weight": 0}, "train.spread.weight must be a number > 0"),
        ({"weight": 0.1, "subsample": 1}, "train.spread.subsample must be an integer >= 2"),
        ({"weight": 0.1, "every": 3}, "train.spread: unknown key 'every'"),
        ({"subsample": 8}, "train.spread needs a weight"),
    ],
)
def test_bad_settings_name_the_key(spread: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        TrainConfig.from_dict({**TRAIN, "spread": spread})


def _config(**train_extra) -> dict:
    """A one-experiment config around the repository's, with a lattice arm and a delta arm."""
    raw = arbench_config.load_yaml(arbench_config.ROOT / "config.yaml")
    exp = {
        "task": dict(TASK),
        "model": {"d_model": 16, "layers": 1},
        "train": {"steps": 10, "batch": 4, "lr": 3e-3, "warmup": 2, **train_extra},
        "eval": {"examples": 8},
        "seeds": 1,
        "arms": {"lattice": {"cell": "lattice", **CELL}},
    }
    raw["experiments"] = {"factorial": raw["experiments"]["factorial"], "spread_check": exp}
    raw["scales"] = {name: {} for name in raw["scales"]}  # every scale, none changing it
    raw["studies"] = {}  # the repository's studies name experiments left out here
    raw["resources"].pop("expected_steps", None)  # so does the resource model's expected stop
    return raw


def test_the_config_accepts_spread_where_it_applies() -> None:
    cfg = arbench_config.resolve(_config(spread=SPREAD))
    assert cfg["experiments"]["spread_check"]["train"]["spread"] == SPREAD


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ("cell", "train.spread: the model (cell 'delta_rule') has no lattice layer"),
        ("task", "train.spread: task 'mqar' gives no key positions"),
        ("weight", "config key experiments.spread_check.train.spread.weight"),
    ],
)
def test_the_config_rejects_spread_where_it_cannot_apply(change: str, needle: str) -> None:
    raw = _config(spread=SPREAD if change != "weight" else {"weight": -1})
    exp = raw["experiments"]["spread_check"]
    if change == "cell":
        exp["arms"] = {"delta": {"cell": "delta_rule", "conv": True}}
    if change == "task":
        exp["task"] = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
    with pytest.raises(arbench_config.ConfigError) as err:
        arbench_config.resolve(raw)
    assert needle in str(err.value) and "\n" not in str(err.value)
