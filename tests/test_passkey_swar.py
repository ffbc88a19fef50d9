"""Tests for the passkey_swar generator, its independent oracle and the HF-layout publisher."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbench.passkey_swar import STAT_KEYS, write_dataset
from arbench.tasks import passkey_swar_oracle as O
from arbench.tasks.passkey_swar import (
    NULL,
    SPLIT_SEEDS,
    Params,
    Q,
    W,
    example_seed,
    generate,
    make_example,
)

P = Params()
WIN = P.w


def _batch_examples(split: str, N: int, n: int) -> list[dict]:
    return [b.example(i) for b in generate(split, N, n, P) for i in range(len(b))]


@pytest.fixture(scope="module")
def examples() -> list[dict]:
    """A mixed bag of clean examples over short and long configs."""
    out = []
    for N, n in ((32, 60), (64, 60), (128, 30), (512, 6)):
        out += _batch_examples("validation", N, n)
    return out


def _items(ex: dict) -> list[tuple[int, int, int, int]]:
    """(position, op, key, arg) of every stream item."""
    ids = ex["input_ids"]
    return [(m, *ids[m : m + 3]) for m in range(6, len(ids) - 6, 3)]


def _ages_after_each_write(ex: dict) -> list[tuple[int, int, dict[int, tuple[int, int]]]]:
    """After each write: (position after its triple, writes so far, key -> (last write, value))."""
    last: dict[int, tuple[int, int]] = {}
    out, t = [], 0
    for m, op, k, a in _items(ex):
        if op == W:
            t += 1
            last[k] = (t, a)
            out.append((m + 3, t, dict(last)))
    return out


def _queries(ex: dict) -> list[tuple[int, int, int, int]]:
    """(position, rank among queries, key, answer) of each query."""
    qs = [(m, k, a) for m, op, k, a in _items(ex) if op == Q]
    return [(m, r, k, a) for r, (m, k, a) in enumerate(qs)]


def _caught(ex: dict) -> tuple[list[str], list[str]]:
    return O.check_examples([ex])[0], O.check_example(ex)


# --------------------------------------------------------------------------- generator


def test_batch_equals_make_example() -> None:
    for split in ("train", "test"):
        for N in (32, 64, 256):
            for b in generate(split, N, 40, P, start=7):
                for i in range(len(b)):
                    seed = int(b.seed[i])
                    assert seed == example_seed(SPLIT_SEEDS[split], N, 7 + i)
                    assert make_example(seed, N, P) == b.example(i)


def test_chunking_does_not_change_examples() -> None:
    whole = next(generate("validation", 64, 30, P))
    parts = list(generate("validation", 64, 30, P, chunk_tokens=2_000))
    assert len(parts) > 1
    flat = [b.example(i) for b in parts for i in range(len(b))]
    assert flat == [whole.example(i) for i in range(30)]


def test_columns_and_dtypes() -> None:
    table = next(generate("train", 32, 5, P)).to_arrow()
    assert table.column_names == ["input_ids", "labels", "answer_type", "n_writes", "seed"]
    assert str(table.schema.field("input_ids").type) == "list<item: int16>"
    assert str(table.schema.field("labels").type) == "list<item: int16>"
    assert str(table.schema.field("seed").type) == "int64"
    ex = table.slice(0, 1).to_pylist()[0]
    n_q = sum(1 for _, op, _, _ in _items(ex) if op == Q)
    assert ex["answer_type"][-4:] == ["passkey"] * 4 and len(ex["answer_type"]) == n_q + 4
    assert ex["labels"][-5:-1] == ex["input_ids"][2:6] == ex["input_ids"][-5:-1]


def test_splits_share_no_example() -> None:
    seqs = {s: {tuple(x["input_ids"]) for x in _batch_examples(s, 32, 300)} for s in SPLIT_SEEDS}
    assert all(len(v) == 300 for v in seqs.values())
    assert not seqs["train"] & seqs["validation"]
    assert not seqs["train"] & seqs["test"]
    assert not seqs["validation"] & seqs["test"]


def test_no_gray_zone_query_and_answers(examples: list[dict]) -> None:
    """Recompute ages here (a third implementation) for every query."""
    for ex in examples:
        state, t, last = 0, 0, {}
        for _m, op, k, a in _items(ex):
            if op == W:
                t += 1
                last[k] = (t, a)
                continue
            state += 1
            age = t - last[k][0] + 1 if k in last else None
            assert age is None or age <= WIN or age > 2 * WIN
            assert a == (last[k][1] if age is not None and age <= WIN else NULL)
        assert t == ex["n_writes"]


def test_statistics_match_card() -> None:
    from arbench.passkey_swar import SplitStats

    card = {  # config: (mean length, queries/ex, stale share of expired, tolerance)
        32: (132, 8.0, 0.0, 0.0),
        64: (252, 16.0, 0.077, 0.015),
        128: (492, 32.0, 0.278, 0.02),
        256: (972, 64.0, 0.535, 0.03),
    }
    for N, n in ((32, 3000), (64, 3000), (128, 2000), (256, 1000)):
        acc = SplitStats(WIN)
        for b in generate("train", N, n, P):
            acc.add(O.check_table(b.to_arrow())[1])
        s = acc.summary()
        length, qpe, stale, tol = card[N]
        assert abs(s["mean_length"] - length) < 0.01 * length
        assert abs(s["queries_per_example"] - qpe) < 0.05 * qpe
        assert abs(s["valid"] - 0.5) < 0.02 and abs(s["valid"] + s["expired"] - 1) < 1e-9
        assert abs(s["stale_share_of_expired"] - stale) <= tol


# --------------------------------------------------------------------------- oracle


def test_oracle_agrees_with_generator(examples: list[dict]) -> None:
    assert O.check_examples(examples) == [[] for _ in examples]
    assert all(O.check_example(ex) == [] for ex in examples)
    for N in (32, 256, 1024):
        reasons, parsed = O.check_table(next(generate("test", N, 20, P)).to_arrow(), split_seed=3)
        assert reasons == [[] for _ in range(20)]
        assert not ((parsed.q_age > WIN) & (parsed.q_age <= 2 * WIN)).any()


def _find(examples: list[dict], pred) -> tuple[dict, tuple]:
    for ex in examples:
        for q in _queries(ex):
            if pred(q):
                return copy.deepcopy(ex), q
    raise AssertionError("no suitable query")


def _set_answer(ex: dict, pos: int, rank: int, token: int, typ: str | None = None) -> None:
    ex["input_ids"][pos + 2] = token
    ex["labels"][pos + 2] = token
    if typ:
        ex["answer_type"][rank] = typ


def test_corruption_wrong_value(examples: list[dict]) -> None:
    ex, (m, r, _k, a) = _find(examples, lambda q: q[3] != NULL)
    other = P.value0 + (a - P.value0 + 1) % P.n_values
    _set_answer(ex, m, r, other)
    vec, brute = _caught(ex)
    assert "wrong answer value" in vec and brute


def test_corruption_null_where_value_due(examples: list[dict]) -> None:
    ex, (m, r, _k, _a) = _find(examples, lambda q: q[3] != NULL)
    _set_answer(ex, m, r, NULL, "ar_expired")
    vec, brute = _caught(ex)
    assert "NULL given where a value is due" in vec and brute


def test_corruption_value_where_null_due(examples: list[dict]) -> None:
    stale = lambda q: q[3] == NULL
    ex, (m, r, _k, _a) = _find(examples, stale)
    _set_answer(ex, m, r, P.value0 + 3, "ar_valid")
    vec, brute = _caught(ex)
    assert "value given where NULL is due" in vec and brute


def test_corruption_gray_zone_query(examples: list[dict]) -> None:
    """Insert a well-formed query (latest value as answer) on a key aged w < age <= 2w."""
    for ex in examples:
        for pos, t, last in _ages_after_each_write(ex):
            gray = [k for k, (s, _v) in last.items() if WIN < t - s + 1 <= 2 * WIN]
            if gray:
                k = gray[0]
                ex = copy.deepcopy(ex)
                rank = sum(1 for q in _queries(ex) if q[0] < pos)
                ex["input_ids"][pos:pos] = [Q, k, last[k][1]]
                ex["labels"][pos:pos] = [-100, -100, last[k][1]]
                ex["answer_type"].insert(rank, "ar_valid")
                vec, brute = _caught(ex)
                assert vec[0] == "query on a gray-zone key", vec
                assert "gray zone" in brute
                return
    raise AssertionError("no gray-zone key found")


def test_corruption_passkey(examples: list[dict]) -> None:
    ex = copy.deepcopy(examples[0])
    ex["labels"][-3] = P.value0 + (ex["labels"][-3] - P.value0 + 5) % P.n_values
    vec, brute = _caught(ex)
    assert vec == ["labels disagree with the oracle"] and brute
    ex = copy.deepcopy(examples[1])
    ex["labels"][-4] = -100  # passkey label dropped
    assert _caught(ex)[0] == ["labels disagree with the oracle"]
    ex = copy.deepcopy(examples[2])
    new = P.value0 + (ex["input_ids"][-2] - P.value0 + 1) % P.n_values
    ex["input_ids"][-2] = ex["labels"][-2] = new  # recalled passkey altered consistently
    vec, brute = _caught(ex)
    assert "recalled passkey differs from passkey" in vec and brute


def test_corruption_labels_and_types(examples: list[dict]) -> None:
    ex = copy.deepcopy(examples[3])
    ex["labels"][7] = ex["input_ids"][7]  # supervising a write's key
    assert _caught(ex)[0] == ["labels disagree with the oracle"]
    ex = copy.deepcopy(examples[4])
    ex["answer_type"][0] = "ar_expired" if ex["answer_type"][0] == "ar_valid" else "ar_valid"
    assert _caught(ex)[0] == ["answer_type disagrees"]
    ex = copy.deepcopy(examples[5])
    ex["answer_type"].pop(0)
    assert _caught(ex)[0] == ["answer_type length differs from queries + 4"]


@pytest.mark.parametrize(
    "damage",
    ["drop_token", "bos", "eos", "op", "key_range", "n_writes", "label_len", "seed", "lead_query"],
)
def test_corruption_structure(examples: list[dict], damage: str) -> None:
    ex = copy.deepcopy(examples[6])
    ids = ex["input_ids"]
    if damage == "drop_token":
        del ids[20]
        del ex["labels"][20]
    elif damage == "bos":
        ids[0] = 0
    elif damage == "eos":
        ids[-1] = 0
    elif damage == "op":
        ids[9] = 3  # PK where W/Q belongs
    elif damage == "key_range":
        ids[10] = P.value0  # a value where a key belongs
    elif damage == "n_writes":
        ex["n_writes"] += 1
    elif damage == "label_len":
        ex["labels"].append(-100)
    elif damage == "seed":
        ex["seed"] += 10**6
    elif damage == "lead_query":
        ids[6] = Q
    vec, brute = _caught(ex)
    assert vec, damage
    if damage not in ("seed",):
        assert brute, damage


def test_every_corrupted_row_is_flagged_in_a_batch(examples: list[dict]) -> None:
    """Corrupt every second example of a batch; exactly those rows are reported."""
    batch = copy.deepcopy(examples[:40])
    for ex in batch[::2]:
        qs = [q for q in _queries(ex) if q[3] != NULL]
        m, r, _k, _a = qs[len(qs) // 2]
        _set_answer(ex, m, r, NULL, "ar_expired")
    reasons = O.check_examples(batch)
    assert [bool(x) for x in reasons] == [i % 2 == 0 for i in range(40)]


# --------------------------------------------------------------------------- publishing


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("passkey_swar")
    write_dataset(out, [32, 256], ["train", "validation"], {"train": 60, "validation": 25}, P)
    write_dataset(out, [512], ["test"], 9, P, shard_rows=4)
    return out


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", **env}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=full, timeout=120
    )


def test_layout_files(dataset_dir: Path) -> None:
    names = sorted(p.relative_to(dataset_dir).as_posix() for p in dataset_dir.glob("data/*/*"))
    assert "data/n256/train-00000-of-00001.parquet" in names
    assert [n for n in names if n.startswith("data/n512/")] == [
        f"data/n512/test-{i:05d}-of-00003.parquet" for i in range(3)
    ]
    readme = (dataset_dir / "README.md").read_text()
    assert readme.startswith("---\n") and "- config_name: n256" in readme
    assert "path: data/n512/test-*.parquet" in readme
    assert len(json.loads((dataset_dir / "vocab.json").read_text())) == 40
    stats_md = (dataset_dir / "stats.md").read_text()
    assert "| n256 | train | 60 |" in stats_md and "age of stale queries" in stats_md
    report = O.validate_dir(dataset_dir, split_seeds=SPLIT_SEEDS)
    assert report.ok and report.examples == 2 * 60 + 2 * 25 + 9


def test_hf_load_offline_and_cli_stats(dataset_dir: Path, tmp_path: Path) -> None:
    code = f"""
import json, datasets
d = {str(dataset_dir)!r}
a = datasets.load_dataset("parquet", data_files={{"train": d + "/data/n32/train-*.parquet"}},
                          cache_dir={str(tmp_path / "c1")!r})
b = datasets.load_dataset(d, "n256", cache_dir={str(tmp_path / "c2")!r})
c = datasets.load_dataset(d, "n512", split="test", cache_dir={str(tmp_path / "c3")!r})
print(json.dumps([a["train"].num_rows, b["train"].num_rows, b["validation"].num_rows,
                  c.num_rows, str(b["train"].features["input_ids"].feature.dtype),
                  b["train"][0]["input_ids"][:2]]))
"""
    res = _run(["-c", code], HF_HOME=str(tmp_path / "hf"))
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.strip().splitlines()[-1]) == [60, 60, 25, 9, "int16", [1, 3]]
    res = _run(["-m", "arbench.passkey_swar", "stats", str(dataset_dir)])
    assert res.returncode == 0, res.stderr[-2000:]
    rows = json.loads(res.stdout)
    assert [(r["config"], r["split"]) for r in rows] == [
        ("n32", "train"),
        ("n32", "validation"),
        ("n256", "train"),
        ("n256", "validation"),
        ("n512", "test"),
    ]
    assert all(set(r) == set(STAT_KEYS) for r in rows)


def test_cli_generate_and_validate(tmp_path: Path) -> None:
    out = tmp_path / "ds"
    gen = ["-m", "arbench.passkey_swar", "generate", "--config", "n64", "--split"]
    res = _run([*gen, "validation", "--examples", "12", "--out", str(out)])
    assert res.returncode == 0, res.stderr[-2000:]
    assert (out / "data/n64/validation-00000-of-00001.parquet").exists()
    assert "config_name: n64" in (out / "README.md").read_text()
    res = _run(["-m", "arbench.passkey_swar", "validate", str(out)])
    assert res.returncode == 0, res.stdout[-2000:]
    # damage one answer on disk: validate must now fail
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = out / "data/n64/validation-00000-of-00001.parquet"
    rows = pq.read_table(path).to_pylist()
    ex = rows[3]
    m, r, _k, a = next(q for q in _queries(ex) if q[3] != NULL)
    _set_answer(ex, m, r, NULL, "ar_expired")
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    res = _run(["-m", "arbench.passkey_swar", "validate", str(out)])
    assert res.returncode == 1 and "NULL given where a value is due" in res.stdout
