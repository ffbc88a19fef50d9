"""The passkey_swar task adapter: label shift, answer types, batches, streaming eval, and
the release contract the workflow drives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from arbench.models import ModelConfig, build_model
from arbench.tasks import IGNORE, build_task, task_class
from arbench.tasks.base import Signal
from arbench.tasks.passkey_swar.generator import Params
from arbench.tasks.passkey_swar.oracle import check_table
from arbench.tasks.passkey_swar.release import write_split
from arbench.tasks.passkey_swar.task import TYPES, answer_types, load_split


def _settings(train: list[int], held_out: list[int], **extra) -> dict:
    return {
        "name": "passkey_swar",
        "release": "passkey_swar",
        "train_configs": train,
        "eval_configs": held_out,
        "params": {},
        **extra,
    }


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("psw")
    for N, split, n in [(32, "train", 16), (64, "train", 16), (128, "validation", 12)]:
        write_split(out, N, split, n, Params())
    return out


def test_targets_are_labels_shifted_left(data: Path) -> None:
    split = load_split(str(data), 128, "validation")
    table = pq.read_table(sorted((data / "data" / "n128").glob("validation-*.parquet")))
    for r, labels in enumerate(table.column("labels").to_pylist()):
        ids = table.column("input_ids")[r].as_py()
        L = len(ids)
        assert split.tokens[r, :L].tolist() == ids
        assert split.targets[r, : L - 1].tolist() == labels[1:]
        assert (split.targets[r, L - 1 :] == IGNORE).all()


def test_answer_types_agree_with_the_oracle(data: Path) -> None:
    split = load_split(str(data), 128, "validation")
    kinds = answer_types(split.tokens, split.targets, w=16)
    table = pq.read_table(sorted((data / "data" / "n128").glob("validation-*.parquet")))
    _, parsed = check_table(table, w=16)
    expired = parsed.q_expected == 7  # NULL
    assert (kinds == TYPES.index("ar_expired_never")).sum() == (expired & (parsed.q_age < 0)).sum()
    assert (kinds == TYPES.index("ar_expired_stale")).sum() == (expired & (parsed.q_age > 0)).sum()
    assert (kinds == TYPES.index("ar_valid")).sum() == (~expired).sum()
    assert (kinds == TYPES.index("passkey")).sum() == 4 * len(split.tokens)
    assert (kinds >= 0).sum() == (split.targets != IGNORE).sum()


def test_batches_are_pure_functions_of_seed_and_step(data: Path) -> None:
    task = build_task(_settings([32, 64], [128]), data)
    a, b = task.train_batch(3, 5, 8), task.train_batch(3, 5, 8)
    assert (a.tokens == b.tokens).all() and (a.targets == b.targets).all()
    assert (a.targets != IGNORE).any()
    tokens, targets = a.tensors()
    assert tokens.dtype == targets.dtype == torch.int64


def _reference_batch(data: Path, configs: list[int], seed: int, step: int, batch: int):
    """The draw as it was before the load signal: config, then rows, from (seed, step)."""
    rng = np.random.default_rng(np.random.SeedSequence([0, seed, step]))
    N = configs[int(rng.integers(len(configs)))]
    split = load_split(str(data), N, "train")
    rows = rng.integers(0, len(split.tokens), size=batch)
    width = int(split.lengths[rows].max())
    return N, split.tokens[rows, :width], split.targets[rows, :width]


def test_without_a_load_batches_are_unchanged(data: Path) -> None:
    """No signal, or a signal without a load: byte-identical to the pre-signal draw."""
    task = build_task(_settings([32, 64], [128]), data)
    assert task.signals == frozenset({"load"})
    seen = set()
    for step in range(12):
        N, tokens, targets = _reference_batch(data, [32, 64], 3, step, 8)
        seen.add(N)
        for b in (task.train_batch(3, step, 8), task.train_batch(3, step, 8, Signal())):
            assert b.tokens.dtype == tokens.dtype and b.tokens.tobytes() == tokens.tobytes()
            assert b.targets.tobytes() == targets.tobytes()
    assert seen == {32, 64}


def test_a_load_restricts_the_configs_drawn(data: Path) -> None:
    """load = the largest N a batch may draw: 32 -> n32 only; 64 (or more) -> all configs."""
    task = build_task(_settings([32, 64], [128]), data)
    for step in range(12):
        _, tokens, targets = _reference_batch(data, [32], 3, step, 8)
        b = task.train_batch(3, step, 8, Signal(load=32))
        assert b.tokens.tobytes() == tokens.tobytes() and b.targets.tobytes() == targets.tobytes()
        for load in (64, 128):
            _, tokens, _ = _reference_batch(data, [32, 64], 3, step, 8)
            assert task.train_batch(3, step, 8, Signal(load=load)).tokens.tobytes() == (
                tokens.tobytes()
            )
    with pytest.raises(ValueError, match="train.load: load 16 is below every"):
        task.train_batch(3, 0, 8, Signal(load=16))


def test_streaming_evaluation_equals_one_pass(data: Path) -> None:
    task = build_task(_settings([32], [128], piece=64), data)
    model = build_model(
        ModelConfig(vocab_size=task.vocab_size, d_model=16, cell="delta_rule", cell_options={}), 0
    )
    streamed = task.evaluate(model)["per_config"]["n128"]
    task.piece = 100_000
    whole = task.evaluate(model)["per_config"]["n128"]
    for t in TYPES:
        assert streamed[t] == whole[t]
    assert np.isfinite(streamed["all"])
    assert task.evaluate(model, max_writes=64)["per_config"] == {}
    assert task.evaluate(model, examples=3)["per_config"]["n128"]["examples"] == 3
    assert task.evaluate(model, examples=10**6)["per_config"]["n128"]["examples"] == 12


def test_declares_a_release_read_through_its_settings() -> None:
    cls = task_class("passkey_swar")
    assert (cls.data, cls.layout) == ("release", "sweep")
    assert set(cls.release_keys) == {"params", "train_configs", "eval_configs"}
    assert cls.eval_option_names() == {"max_writes"}
    with pytest.raises(ValueError, match="unknown key 'data'"):
        build_task(_settings([32], [64], data="somewhere"))
    with pytest.raises(ValueError, match="the release's folder"):
        build_task(_settings([32], [64])).train_batch(0, 0, 2)


def test_release_contract_splits_settings_and_runtime() -> None:
    release = task_class("passkey_swar").release
    settings = {
        "task": "passkey_swar",
        "params": {},
        "split_seeds": {"train": 1, "validation": 2, "test": 3},
        "train_configs": [32, 64],
        "eval_configs": [128],
        "examples": {"train": 10, "validation": 4, "test": 4},
    }
    assert release.splits(settings) == [
        ("n32", "train"),
        ("n64", "train"),
        ("n128", "validation"),
        ("n128", "test"),
    ]
    one = release.split_settings(settings, "n128", "test")
    assert one == {"params": {}, "split_seeds": {"test": 3}, "examples": 4}
    assert release.runtime_minutes(settings, "n128", "test") >= 10
    assert release.validate_settings(settings) == {k: v for k, v in settings.items() if k != "task"}
