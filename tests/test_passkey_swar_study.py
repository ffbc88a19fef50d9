"""The passkey_swar study adapter: label shift, answer types, batches, streaming eval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from arbench.models import ModelConfig, build_model
from arbench.passkey_swar import write_split
from arbench.tasks import make_task
from arbench.tasks.passkey_swar import Params
from arbench.tasks.passkey_swar_oracle import check_table
from arbench.tasks.passkey_swar_study import IGNORE, TYPES, answer_types, load_split


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
    task = make_task(
        {
            "name": "passkey_swar",
            "data": str(data),
            "train_configs": [32, 64],
            "eval_configs": [128],
        }
    )
    a, b = task.train_batch(3, 5, 8), task.train_batch(3, 5, 8)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert (a[1] != IGNORE).any()


def test_streaming_evaluation_equals_one_pass(data: Path) -> None:
    task = make_task(
        {
            "name": "passkey_swar",
            "data": str(data),
            "train_configs": [32],
            "eval_configs": [128],
            "piece": 64,
        }
    )
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
