"""The release of our paper-scale runs: records validated in one line naming the file and the
key, publish idempotent and refusing a conflicting record, a retrained run compared to the
last bit; on one tiny real training in tmp_path (its final.json and model.pt)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arbench.experiment import RunTable
from arbench.io import sha256_file
from arbench.paper_release import (
    FORMAT,
    ReleaseError,
    Stamp,
    compare,
    load_record,
    load_release,
    publish,
    record_path,
    render,
    settings_check,
)

ROOT = Path(__file__).resolve().parents[1]
EXP = {
    "task": {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 20},
    "model": {"d_model": 16, "layers": 1},
    "train": {"steps": 2, "batch": 4, "lr": 1e-3, "warmup": 1},
    "eval": {"examples": 50},
    "seeds": 2,
    "arms": {"armed": {"cell": "delta_rule", "conv": True}},
}
STAMP = Stamp("a" * 40, False, {"platform": "test", "cpu": "test", "cpus": 1}, "a test")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A results root holding one real paper-scale run (2 steps) and its evaluation."""
    from arbench.run import train_run

    root = tmp_path_factory.mktemp("results")
    row = RunTable({"x": EXP}, set()).row("x", "armed")
    run_dir = root / "runs" / "x" / "armed" / "seed0"
    train_run(row.task, row.model, row.train, 0, run_dir, record={"scale": "paper", "arm": "armed"})
    _write_eval(root, {"accuracy": 0.25, "rebinding_accuracy": 0.0625})
    return root


def _write_eval(root: Path, scores: dict[str, Any], **tie: Any) -> Path:
    """An eval JSON as `arbench.run.evaluate_run` writes it: tied to the model it scored by
    its sha256 (that of the run's model.pt unless ``tie`` says otherwise)."""
    path = root / "evals" / "x" / "armed" / "seed0.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    ev = {"experiment": "x", "arm": "armed", "seed": 0, "scores": scores}
    ev |= {"n_parameters": 1, "state_size_per_layer": 1}
    ev |= tie or {"model_sha256": sha256_file(root / "runs/x/armed/seed0/model.pt")}
    path.write_text(json.dumps(ev))
    return path


@pytest.fixture
def results(trained: Path, tmp_path: Path) -> Path:
    """A private copy of the trained results root (a test may edit it)."""
    return Path(shutil.copytree(trained, tmp_path / "results"))


def _publish(root: Path, release: Path, **kw: Any):
    return publish(root, release, RunTable({"x": EXP}, set()), STAMP, **kw)


def test_publish_writes_a_valid_record_and_is_idempotent(results: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    first = _publish(results, release)
    assert [p.name for p in first.written] == ["seed0.json"] and not first.refused
    path = record_path(release, "x", "armed", 0)
    record = load_record(path)
    assert record["format"] == FORMAT and record["scores"]["rebinding_accuracy"] == 0.0625
    assert record["steps"] == 2 and record["s_per_step"] == record["wall_time_s"] / 2
    assert len(record["model_sha256"]) == 64 and record["commit"] == "a" * 40
    assert path.read_text() == render(record)  # sorted keys, as written
    before = path.read_bytes()
    again = _publish(results, release)
    assert not again.written and again.unchanged == [path] and path.read_bytes() == before
    assert set(load_release(release)) == {("x", "armed", 0)}


def test_publish_refuses_other_scores_for_the_same_fingerprint(
    results: Path, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    _publish(results, release)
    before = record_path(release, "x", "armed", 0).read_bytes()
    _write_eval(results, {"accuracy": 0.5, "rebinding_accuracy": 0.0625})
    for replace in (False, True):  # never overwritten, even with --replace
        report = _publish(results, release, replace=replace)
        (path, why), *_ = report.refused
        assert "scores.accuracy" in why and "same fingerprint" in why and "0.25" in why
        assert path.read_bytes() == before


def test_a_changed_fingerprint_needs_replace(results: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    _publish(results, release)
    final_path = results / "runs/x/armed/seed0/final.json"
    final = json.loads(final_path.read_text())
    final_path.write_text(json.dumps({**final, "fingerprint": "0" * 16}))
    refused = _publish(results, release, check=None)
    assert "fingerprint" in refused.refused[0][1] and "--replace" in refused.refused[0][1]
    replaced = _publish(results, release, check=None, replace=True)
    assert replaced.written and load_record(replaced.written[0])["fingerprint"] == "0" * 16


def test_publish_skips_a_run_of_other_settings_or_a_stale_evaluation(results: Path) -> None:
    row = RunTable({"x": EXP}, set()).row("x", "armed")
    final = json.loads((results / "runs/x/armed/seed0/final.json").read_text())
    assert settings_check(row, 0, final) is None  # the training loop's own fingerprint
    other = RunTable({"x": {**EXP, "train": {**EXP["train"], "lr": 2e-3}}}, set())
    assert "train.lr" in settings_check(other.row("x", "armed"), 0, final)
    _write_eval(results, {"accuracy": 0.25}, model_sha256="0" * 64)  # of another model
    (path, why), *_ = _publish(results, results / "release").skipped
    assert path.name == "seed0.json" and "scored another model" in why
    # an eval JSON of before model_sha256 is tied by the training wall time it embedded
    _write_eval(results, {"accuracy": 0.25}, train_wall_time_s=final["wall_time_s"] + 1)
    (path, why), *_ = _publish(results, results / "release").skipped
    assert "another training" in why
    _write_eval(results, {"accuracy": 0.25}, train_wall_time_s=final["wall_time_s"])
    assert _publish(results, results / "release").written


def _record(tmp_path: Path, results: Path) -> tuple[Path, dict[str, Any]]:
    _publish(results, tmp_path / "release")
    path = record_path(tmp_path / "release", "x", "armed", 0)
    return path, json.loads(path.read_text())


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (lambda d: d.pop("fingerprint"), "fingerprint: missing"),
        (lambda d: d.update(threads="1"), "threads: expected int"),
        (lambda d: d.update(commit_dirty=0), "commit_dirty: expected bool"),
        (lambda d: d["scores"].update(accuracy=1.5), "scores.accuracy"),
        (lambda d: d.update(model_sha256="xyz"), "model_sha256"),
        (lambda d: d.update(extra=1), "extra: unknown key"),
        (lambda d: d.update(scale="demo"), "scale"),
        (lambda d: d["machine"].pop("cpu"), "machine.cpu"),
        (lambda d: d.update(seed=1), "seed: 1 does not match the file's path"),
    ],
)
def test_the_loader_rejects_a_bad_record_naming_file_and_key(
    results: Path, tmp_path: Path, edit: Any, key: str
) -> None:
    path, doc = _record(tmp_path, results)
    edit(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(ReleaseError) as err:
        load_release(tmp_path / "release")
    assert str(err.value).startswith(f"{path}: ") and key in str(err.value)
    assert "\n" not in str(err.value)


def test_compare_is_to_the_last_bit(results: Path, tmp_path: Path) -> None:
    _, record = _record(tmp_path, results)
    final = {"fingerprint": record["fingerprint"]}
    ev = {"scores": dict(record["scores"])}
    assert all(m.same for m in compare(record, ev, final, record["model_sha256"]))
    ev["scores"]["accuracy"] = float(np.nextafter(record["scores"]["accuracy"], 1.0))
    rows = {m.key: m.same for m in compare(record, ev, final, "0" * 64)}
    assert rows == {
        "fingerprint": True,
        "model_sha256": False,
        "scores.accuracy": False,
        "scores.rebinding_accuracy": True,
    }


def test_retrain_dry_run_names_the_command(results: Path, tmp_path: Path, capsys) -> None:
    _record(tmp_path, results)
    spec = importlib.util.spec_from_file_location(
        "paper_release_tool", ROOT / "tools/paper_release.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    argv = ["--release", str(tmp_path / "release"), "retrain", "x/armed/seed0", "--dry-run"]
    assert tool.main(argv) == 0
    out = capsys.readouterr().out
    assert "--cores 1" in out and "results/evals/x/armed/seed0.json" in out and "a" * 40 in out
    assert tool.main(["--release", str(tmp_path / "release"), "retrain", "x/armed/seed1"]) == 1
