"""The release's data checks as a new user meets them: each damage a shard can suffer on disk
(another split's or config's shard in its place, a duplicated or reseeded row, wrong column
types, a truncated file, a stray shard, a shard swapped after validation) is rejected with a
line naming the file, and validation itself never changes the release."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arbench import run
from arbench.tasks.passkey_swar import task as T
from arbench.tasks.passkey_swar.generator import Params
from arbench.tasks.passkey_swar.release import PasskeySwarRelease, write_split

RELEASE = PasskeySwarRelease()
SETTINGS = {
    "params": {},
    "split_seeds": {"train": 1, "validation": 2, "test": 3},
    "train_configs": [32],
    "eval_configs": [64],
    "examples": {"train": 12, "validation": 6, "test": 6},
}
VAL = "data/n64/validation-00000-of-00001.parquet"
TEST = "data/n64/test-00000-of-00001.parquet"


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small release written as the workflow writes it: split by split, then the index."""
    root = tmp_path_factory.mktemp("release")
    for subset, split in RELEASE.splits(SETTINGS):
        RELEASE.write_split(root, subset, split, RELEASE.split_settings(SETTINGS, subset, split))
    RELEASE.write_index(root, RELEASE.validate_settings(SETTINGS))
    return root


@pytest.fixture
def ds(clean: Path, tmp_path: Path) -> Path:
    """A fresh copy of the clean release to damage."""
    return Path(shutil.copytree(clean, tmp_path / "ds"))


def _validate(root: Path) -> dict:
    return RELEASE.validate(root, RELEASE.validate_settings(SETTINGS))


def _reasons(report: dict) -> set[str]:
    return set(report["failure_reasons"])


def _rewrite(path: Path, edit) -> None:
    """Read a shard's rows, let ``edit`` change the list of dicts, write it back (same schema)."""
    schema = pq.read_schema(path)
    rows = pq.read_table(path).to_pylist()
    edit(rows)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_clean_release_passes_and_validation_writes_nothing(ds: Path) -> None:
    before = _files(ds)
    report = _validate(ds)
    assert report["ok"], report["errors"] + report["failures"][:2]
    assert report["examples_checked"] == 12 + 6 + 6
    assert _files(ds) == before  # the validation job's only output is the report it returns
    entry = next(e for e in report["checked"] if e["path"] == VAL)
    assert len(entry["sha256"]) == 64 and entry["readable"]


def test_test_shard_copied_over_the_validation_shard_is_rejected_by_name(ds: Path) -> None:
    shutil.copy(ds / TEST, ds / VAL)
    report = _validate(ds)
    assert not report["ok"]
    assert {"seed does not encode the split", "sequence also in split test"} <= _reasons(report)
    assert any(e.startswith(f"{VAL} (n64/validation): 6 examples") for e in report["errors"])


def test_shard_of_another_config_is_rejected(ds: Path, tmp_path: Path) -> None:
    write_split(tmp_path / "other", 32, "validation", 6, Params())
    shutil.copy(tmp_path / "other/data/n32/validation-00000-of-00001.parquet", ds / VAL)
    report = _validate(ds)
    assert "n_writes differs from its config folder n64" in _reasons(report)
    assert "input_ids differs from the example regenerated from its seed" in _reasons(report)


def test_shard_of_another_release_config_is_rejected(ds: Path, tmp_path: Path) -> None:
    # valid data the independent oracle accepts, but generated with another drift rate:
    # only regenerating each example from its seed with the release's params catches it
    write_split(tmp_path / "other", 64, "validation", 6, Params(drift_rate=0.5))
    shutil.copy(tmp_path / "other/data/n64/validation-00000-of-00001.parquet", ds / VAL)
    report = _validate(ds)
    reasons = _reasons(report)
    assert "input_ids differs from the example regenerated from its seed" in reasons
    assert all(r.endswith("regenerated from its seed") for r in reasons)
    # and another split seed for the same split
    write_split(tmp_path / "seeds", 64, "validation", 6, split_seeds={"validation": 7})
    shutil.copy(tmp_path / "seeds/data/n64/validation-00000-of-00001.parquet", ds / VAL)
    assert "seed does not encode the split" in _reasons(_validate(ds))


def test_duplicate_rows_and_seeds_within_a_split_are_rejected(ds: Path, clean: Path) -> None:
    def duplicate(rows: list[dict]) -> None:  # row 1 twice, row 3 gone
        rows[3] = dict(rows[1])

    _rewrite(ds / VAL, duplicate)
    report = _validate(ds)
    assert {"seed repeated within the split", "sequence repeated within the split"} <= _reasons(
        report
    )
    assert any(e.startswith(VAL) and "1 planned seeds missing" in e for e in report["errors"])

    shutil.copy(clean / VAL, ds / VAL)

    def copy_row(rows: list[dict]) -> None:  # row 1's content under row 3's own seed
        rows[3] = {**rows[1], "seed": rows[3]["seed"]}

    _rewrite(ds / VAL, copy_row)
    report = _validate(ds)
    assert {
        "sequence repeated within the split",
        "input_ids differs from the example regenerated from its seed",
    } <= _reasons(report)
    assert report["failed_examples"] == 1


def test_a_row_whose_content_is_not_its_seeds_is_rejected(ds: Path) -> None:
    # swap two rows' seeds: every row is still a valid example with a seed of this split
    # (the independent oracle passes it); regenerating from the stored seed does not
    def swap(rows: list[dict]) -> None:
        rows[0]["seed"], rows[1]["seed"] = rows[1]["seed"], rows[0]["seed"]

    _rewrite(ds / VAL, swap)
    report = _validate(ds)
    assert not report["ok"] and report["failed_examples"] == 2 and not report["errors"]
    assert _reasons(report) == {
        "input_ids differs from the example regenerated from its seed",
        "labels differs from the example regenerated from its seed",
        "answer_type differs from the example regenerated from its seed",
    }


def test_column_types_follow_the_card(ds: Path) -> None:
    table = pq.read_table(ds / VAL)
    wide = table.set_column(0, "input_ids", table.column("input_ids").cast(pa.list_(pa.int64())))
    pq.write_table(wide, ds / VAL)
    report = _validate(ds)
    assert (
        f"{VAL}: column input_ids is list<int64>, the card says list<int16>" in (report["errors"])
    )
    assert report["failed_examples"] == 0  # the content itself is fine


def test_damaged_parquet_is_one_line_naming_the_file_and_the_report_is_written(
    ds: Path, tmp_path: Path
) -> None:
    data = (ds / VAL).read_bytes()
    (ds / VAL).write_bytes(data[: len(data) // 2])
    report = _validate(ds)
    damaged = [e for e in report["errors"] if e.startswith(f"{VAL}: not a readable parquet file")]
    assert len(damaged) == 1 and "\n" not in damaged[0]
    assert report["examples_checked"] == 12 + 6  # every other file is still checked
    copy = tmp_path / "logs/validate_report.json"
    with pytest.raises(run.DataRejected) as err:
        run.validate_release(
            "passkey_swar", RELEASE.validate_settings(SETTINGS), ds, report_copy=copy
        )
    line = str(err.value)
    assert "\n" not in line and VAL in line and "not a readable parquet file" in line
    assert str(copy) in line
    recorded = run.read_json(copy)
    assert recorded["ok"] is False and damaged[0] in recorded["errors"]


def test_a_stray_shard_beside_the_release_is_rejected(ds: Path) -> None:
    shutil.copy(ds / VAL, ds / "data/n64/validation-00001-of-00002.parquet")
    report = _validate(ds)
    assert "seed repeated within the split" in _reasons(report)
    write_split(ds, 128, "test", 3)  # a config the release does not plan
    errors = _validate(ds)["errors"]
    assert any("(n128/test): not part of the release" in e for e in errors)


def test_a_shard_swapped_after_validation_is_an_error_when_read(ds: Path) -> None:
    report = _validate(ds)
    run.atomic_write_json(ds / T.REPORT, report)
    T.load_split.cache_clear()
    assert len(T.load_split(str(ds), 64, "validation").tokens) == 6
    # replaced with its timestamp kept (cp -p, rsync -t): the DAG cannot see it
    stat = (ds / VAL).stat()
    shutil.copy(ds / TEST, ds / VAL)
    os.utime(ds / VAL, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    T.load_split.cache_clear()
    with pytest.raises(T.ShardChanged, match=f"{VAL}: changed since .* validated it"):
        T.load_split(str(ds), 64, "validation")
    T.load_split.cache_clear()


def test_list_rows_differ_flags_length_and_value() -> None:
    from arbench.tasks.passkey_swar.check import _list_rows_differ

    a = pa.array([[1, 2], [3, 4], [5]], pa.list_(pa.int16()))
    b = pa.array([[1, 2], [3, 5], [5, 6]], pa.list_(pa.int16()))
    assert _list_rows_differ(a, b).tolist() == [False, True, True]
    assert not np.any(_list_rows_differ(a, a))
