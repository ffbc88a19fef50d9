"""The passkey_swar release: the Hugging Face layout, offline loading, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arbench.tasks.passkey_swar import oracle as O
from arbench.tasks.passkey_swar.card import STAT_KEYS
from arbench.tasks.passkey_swar.generator import (
    NULL,
    SPLIT_SEEDS,
    Params,
)
from arbench.tasks.passkey_swar.release import write_dataset

P = Params()
WIN = P.w


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


def test_hf_load_offline_and_cli_stats(dataset_dir: Path, tmp_path: Path, h) -> None:
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
    res = _run(["-m", "arbench.tasks.passkey_swar", "stats", str(dataset_dir)])
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


def test_cli_generate_and_validate(tmp_path: Path, h) -> None:
    out = tmp_path / "ds"
    gen = ["-m", "arbench.tasks.passkey_swar", "generate", "--config", "n64", "--split"]
    res = _run([*gen, "validation", "--examples", "12", "--out", str(out)])
    assert res.returncode == 0, res.stderr[-2000:]
    assert (out / "data/n64/validation-00000-of-00001.parquet").exists()
    assert "config_name: n64" in (out / "README.md").read_text()
    res = _run(["-m", "arbench.tasks.passkey_swar", "validate", str(out)])
    assert res.returncode == 0, res.stdout[-2000:]
    # damage one answer on disk: validate must now fail
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = out / "data/n64/validation-00000-of-00001.parquet"
    rows = pq.read_table(path).to_pylist()
    ex = rows[3]
    m, r, _k, a = next(q for q in h.queries(ex) if q[3] != NULL)
    h.set_answer(ex, m, r, NULL, "ar_expired")
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(path)), path)
    res = _run(["-m", "arbench.tasks.passkey_swar", "validate", str(out)])
    assert res.returncode == 1 and "NULL given where a value is due" in res.stdout
