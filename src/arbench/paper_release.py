"""Our paper-scale runs as a release in the repository: one small JSON record per finished run.

A record (``references/arbench_paper_runs/<experiment>/<run arm>/seed<N>.json``, format
`FORMAT`) holds what one paper-scale evaluation scored (its eval JSON's ``scores``, verbatim:
held-out, rebound, per-slot or per-length where the task has them) and what identifies and
produced the run: its fingerprint (the training loop's hash of its settings), the hash of
its run-table identity (`arbench.experiment.RunTable.identity`, so a report can tell a record
of the run the config plans from a stale one without importing torch), the sha256 of its
``model.pt``, the commit it was trained at, the machine, torch threads and versions, wall
time and time per step. No checkpoints.

* `publish` writes a record for every finished paper-scale run under a results root that
  the config plans, idempotently: a record already published for the same run and scores is
  left as it is; one whose scores or model bytes differ for the same fingerprint, or whose
  fingerprint differs (the run's settings changed), is refused, naming the file and the key.
* `load_record` / `load_release` validate records; a bad one fails in one line naming the
  file and the key (`ReleaseError`).
* `compare` sets a retrained run beside its record, key by key, to the last bit.

``tools/paper_release.py`` is the command line (publish, check, retrain).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arbench.config.paths import ROOT
from arbench.experiment import Run, RunTable
from arbench.io import atomic_write_text, sha256_file

FORMAT = "arbench-paper-run/1"
RELEASE_DIR = ROOT / "references" / "arbench_paper_runs"
PAPER = "paper"
HEX40 = frozenset("0123456789abcdef")


class ReleaseError(ValueError):
    """A release record problem, in one line naming the file and the key."""


# every key of a record and the JSON types it takes (int is not a float's stand-in for bool)
FIELDS: dict[str, tuple[type, ...]] = {
    "format": (str,),
    "experiment": (str,),
    "arm": (str,),  # the run arm (``<arm>-<leaf><value>`` in a grid)
    "seed": (int,),
    "scale": (str,),
    "scores": (dict,),  # the eval JSON's scores, verbatim
    "fingerprint": (str,),  # final.json's: the hash of the run's settings (train.run_files)
    "identity": (str,),  # sha256[:16] of the run table's identity of the row
    "model_sha256": (str,),
    "trained_as": (dict,),  # {experiment, arm}: the shared run's owner, whose folder holds it
    "commit": (str,),
    "commit_dirty": (bool,),
    "machine": (dict,),  # {platform, cpu, cpus}
    "device": (str,),
    "threads": (int,),  # torch intra-op threads of the training
    "versions": (dict,),
    "wall_time_s": (float, int),
    "steps": (int,),  # optimiser steps the recorded wall time covers
    "s_per_step": (float, int),
    "n_parameters": (int,),
    "state_size_per_layer": (int,),
    "resumed_from_step": (int,),
    "stopped_early_at": (int, type(None)),
    "provenance": (str,),
}
# what must agree between two records of one run for them to be the same result
RESULT_KEYS = ("fingerprint", "scores", "model_sha256")


def _fail(where: str, key: str, problem: str) -> ReleaseError:
    return ReleaseError(f"{where}: {key}: {problem}")


def check_record(doc: Any, where: str) -> dict[str, Any]:
    """A record's document, validated (every key of `FIELDS` present, typed, none other; the
    scores with a numeric ``accuracy``); `ReleaseError` names ``where`` and the key."""
    if not isinstance(doc, dict):
        raise ReleaseError(f"{where}: expected a JSON object")
    for key, types in FIELDS.items():
        if key not in doc:
            raise _fail(where, key, "missing")
        value = doc[key]
        if isinstance(value, bool) and bool not in types:
            raise _fail(where, key, f"expected {_names(types)}, got {value!r}")
        if not isinstance(value, types):
            raise _fail(where, key, f"expected {_names(types)}, got {type(value).__name__}")
    unknown = sorted(set(doc) - set(FIELDS))
    if unknown:
        raise _fail(where, unknown[0], "unknown key")
    if doc["format"] != FORMAT:
        raise _fail(where, "format", f"expected {FORMAT!r}, got {doc['format']!r}")
    if doc["scale"] != PAPER:
        raise _fail(where, "scale", f"a paper-scale release holds scale {PAPER!r} only")
    acc = doc["scores"].get("accuracy")
    if isinstance(acc, bool) or not isinstance(acc, int | float) or not 0 <= acc <= 1:
        raise _fail(where, "scores.accuracy", f"expected a number in [0, 1], got {acc!r}")
    for key in ("model_sha256",):
        if len(doc[key]) != 64 or set(doc[key]) - HEX40:
            raise _fail(where, key, "expected 64 lower-case hex digits")
    if len(doc["commit"]) != 40 or set(doc["commit"]) - HEX40:
        raise _fail(where, "commit", "expected a 40-digit commit hash")
    for block, keys in (("trained_as", ("experiment", "arm")), ("machine", ("platform", "cpu"))):
        for key in keys:
            if not isinstance(doc[block].get(key), str):
                raise _fail(where, f"{block}.{key}", "missing (expected text)")
    if doc["seed"] < 0 or doc["steps"] < 1 or doc["threads"] < 1:
        bad = next(k for k in ("seed", "steps", "threads") if doc[k] < (0 if k == "seed" else 1))
        raise _fail(where, bad, f"out of range: {doc[bad]}")
    return doc


def _names(types: tuple[type, ...]) -> str:
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def record_path(release_dir: str | Path, experiment: str, arm: str, seed: int) -> Path:
    """Where the record of (experiment, run arm, seed) lies in a release folder."""
    return Path(release_dir) / experiment / arm / f"seed{int(seed)}.json"


def load_record(path: str | Path) -> dict[str, Any]:
    """One validated record; its experiment, arm and seed must be those its path names."""
    path = Path(path)
    if not path.is_file():
        raise ReleaseError(f"{path}: no such record")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ReleaseError(f"{path}: not valid JSON: {err.msg} (line {err.lineno})") from None
    check_record(doc, str(path))
    named = (path.parent.parent.name, path.parent.name, path.name)
    for key, want in zip(("experiment", "arm", "seed"), named, strict=True):
        got = f"seed{doc['seed']}.json" if key == "seed" else doc[key]
        if got != want:
            raise _fail(str(path), key, f"{doc[key]!r} does not match the file's path")
    return doc


def load_release(release_dir: str | Path = RELEASE_DIR) -> dict[tuple[str, str, int], dict]:
    """Every record of a release folder by (experiment, run arm, seed); {} for no folder."""
    out = {}
    for path in sorted(Path(release_dir).glob("*/*/seed*.json")):
        doc = load_record(path)
        out[(doc["experiment"], doc["arm"], doc["seed"])] = doc
    return out


def identity_hash(table: RunTable, row: Run) -> str:
    """The hash a record keeps of its row's run-table identity (task, model, train blocks and
    any warm-start base): it changes exactly when the config would retrain the run."""
    return hashlib.sha256(table.identity(row).encode()).hexdigest()[:16]


def as_evaluation(record: Mapping[str, Any]) -> dict[str, Any]:
    """A record as the evaluation `experiment_stats` reads: its eval JSON's fields and its
    training's wall time (`arbench.report.experiment.with_training`)."""
    return {
        "experiment": record["experiment"],
        "arm": record["arm"],
        "seed": record["seed"],
        "scores": record["scores"],
        "n_parameters": record["n_parameters"],
        "state_size_per_layer": record["state_size_per_layer"],
        "train_wall_time_s": record["wall_time_s"],
    }


def canonical(value: Any) -> str:
    """JSON text that is equal exactly when the values are equal to the last bit (Python
    writes the shortest repr that round-trips each float; NaN equals NaN here)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def machine() -> dict[str, Any]:
    """This host: platform, CPU model and logical CPUs (no host name)."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"platform": platform.platform(), "cpu": cpu, "cpus": os.cpu_count() or 0}


def git_commit(path: str | Path) -> tuple[str, bool]:
    """(HEAD, whether tracked files differ from it) of the git checkout holding ``path``;
    `ReleaseError` when ``path`` is in none."""
    cwd = Path(path).resolve()
    cwd = cwd if cwd.is_dir() else cwd.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        raise ReleaseError(f"{path}: not in a git checkout; give the commit (--commit)") from None
    return head, bool(dirty)


def steps_trained(final: Mapping[str, Any]) -> int:
    """The optimiser steps a final.json's wall time covers (a resumed run's, since resuming)."""
    last = final.get("stopped_early_at") or final["train"]["steps"]
    return max(1, int(last) - int(final.get("resumed_from_step") or 0))


def build_record(
    ev: Mapping[str, Any],
    final: Mapping[str, Any],
    model_sha256: str,
    *,
    identity: str,
    trained_as: tuple[str, str],
    commit: str,
    dirty: bool,
    host: Mapping[str, Any],
    provenance: str,
) -> dict[str, Any]:
    """The record of one evaluation (its eval JSON) of a trained run (its final.json)."""
    steps = steps_trained(final)
    return {
        "format": FORMAT,
        "experiment": ev["experiment"],
        "arm": ev["arm"],
        "seed": int(ev["seed"]),
        "scale": final.get("scale", PAPER),
        "scores": ev["scores"],
        "fingerprint": final["fingerprint"],
        "identity": identity,
        "model_sha256": model_sha256,
        "trained_as": {"experiment": trained_as[0], "arm": trained_as[1]},
        "commit": commit,
        "commit_dirty": bool(dirty),
        "machine": dict(host),
        "device": str(final.get("device", "cpu")),
        "threads": int(final["threads"]),
        "versions": dict(final.get("versions") or {}),
        "wall_time_s": float(final["wall_time_s"]),
        "steps": steps,
        "s_per_step": float(final["wall_time_s"]) / steps,
        "n_parameters": int(final["n_parameters"]),
        "state_size_per_layer": int(final["state_size_per_layer"]),
        "resumed_from_step": int(final.get("resumed_from_step") or 0),
        "stopped_early_at": final.get("stopped_early_at"),
        "provenance": provenance,
    }


def render(record: Mapping[str, Any]) -> str:
    """A record's file text: indented, sorted keys, one trailing newline."""
    return json.dumps(record, indent=1, sort_keys=True) + "\n"


def conflict(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """What makes ``new`` another result than the published ``old`` (None: the same run and
    result, whatever the machine or wall time): a changed fingerprint, or the same
    fingerprint with other scores or model bytes, each key named."""
    if old["fingerprint"] != new["fingerprint"]:
        return (
            f"fingerprint: published {old['fingerprint']}, this run {new['fingerprint']} "
            "(the run's settings changed)"
        )
    for key in RESULT_KEYS[1:]:
        if canonical(old[key]) != canonical(new[key]):
            what = _diff(key, old[key], new[key])
            return f"{key} differs for the same fingerprint {old['fingerprint']} ({what})"
    return None


def _diff(key: str, a: Any, b: Any) -> str:
    """The first differing leaf of two values, as 'key: published vs now'."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in sorted(set(a) | set(b)):
            if canonical(a.get(k)) != canonical(b.get(k)):
                return _diff(f"{key}.{k}", a.get(k), b.get(k))
    return f"{key}: published {a!r}, now {b!r}"


@dataclass
class PublishReport:
    """What one `publish` did: paths written and left unchanged, records refused (path,
    why) and evaluations skipped (path, why)."""

    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    refused: list[tuple[Path, str]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)

    def lines(self) -> list[str]:
        """One line per action, then the counts."""
        out = [f"wrote {p}" for p in self.written]
        out += [f"REFUSED {p}: {why}" for p, why in self.refused]
        out += [f"skipped {p}: {why}" for p, why in self.skipped]
        out.append(
            f"{len(self.written)} written, {len(self.unchanged)} unchanged, "
            f"{len(self.refused)} refused, {len(self.skipped)} skipped"
        )
        return out


SettingsCheck = Callable[[Run, int, Mapping[str, Any]], str | None]


def expected_settings(row: Run, seed: int, final: Mapping[str, Any]) -> dict[str, Any]:
    """The settings (`arbench.train.run_files.run_settings`) the training job of ``row`` at
    ``seed`` gives its run, built as `arbench.run.train_run` builds them (a warm start's base
    fingerprint taken from the record): what the run's own final.json must match."""
    from dataclasses import asdict

    from arbench.models import families
    from arbench.tasks import build_task
    from arbench.train.run_files import run_settings
    from arbench.train.settings import TrainConfig

    adapter = build_task(row.task)
    positions = getattr(adapter, "positions", lambda: None)()
    model_cfg = families.model_config(row.model, adapter.vocab_size, positions=positions)
    training = dict(row.train)
    if training.get("warm_start"):
        base = (final.get("train", {}).get("warm_start") or {}).get("base")
        training["warm_start"] = {**training["warm_start"], "base": base}
    cfg = TrainConfig.from_dict(training)
    return run_settings(asdict(model_cfg), asdict(cfg), row.task, seed)


def settings_check(row: Run, seed: int, final: Mapping[str, Any]) -> str | None:
    """Why a run's final.json is not the run ``row`` plans at ``seed`` (None: it is)."""
    from arbench.mismatch import differences
    from arbench.train.run_files import fingerprint, record_settings

    ours = expected_settings(row, seed, final)
    if fingerprint(ours) == final["fingerprint"]:
        return None
    return (
        "trained under other settings than this config plans (run vs config: "
        f"{differences(record_settings(dict(final)), ours)})"
    )


@dataclass(frozen=True)
class Stamp:
    """Where and at what commit the runs being published were trained, as the publisher
    knows it (a final.json names neither): the commit, whether the checkout differed from
    it, the host, and a sentence saying how these were obtained."""

    commit: str
    dirty: bool
    host: Mapping[str, Any]
    provenance: str


def publish(
    root: str | Path,
    release_dir: str | Path,
    table: RunTable,
    stamp: Stamp,
    *,
    check: SettingsCheck | None = settings_check,
    replace: bool = False,
    experiments: Iterable[str] | None = None,
) -> PublishReport:
    """Write a record for every finished paper-scale run under the results ``root`` (its
    ``evals/<experiment>/<run arm>/seed<N>.json`` with the run's final.json and model.pt)
    that ``table`` plans. ``check`` (default `settings_check`; None skips it) refuses a run
    trained under other settings than the table's. An existing record of the same result is
    left unchanged; one of another result is refused unless ``replace`` (a changed
    fingerprint only: the same fingerprint with other scores is never overwritten)."""
    root, release_dir = Path(root), Path(release_dir)
    report = PublishReport()
    names = list(experiments) if experiments is not None else list(table.experiments)
    planned = {
        (name, row.name, seed): row
        for name in names
        for row in table.of(name)
        for seed in range(row.seeds)
    }
    for path in sorted(root.glob("evals/*/*/seed*.json")):
        exp, arm, stem = path.parent.parent.name, path.parent.name, path.stem
        if exp not in names:
            continue
        seed = int(stem[4:]) if stem[4:].isdigit() else -1
        row = planned.get((exp, arm, seed))
        if row is None:
            report.skipped.append((path, "not a run this config plans"))
            continue
        why = _publish_one(path, row, seed, root, release_dir, table, stamp, check, replace, report)
        if why:
            report.skipped.append((path, why))
    return report


def _scored_another_model(
    ev: Mapping[str, Any], final: Mapping[str, Any], model_sha256: str, model_path: Path
) -> str | None:
    """Why an eval JSON is not of the model at ``model_path`` (None: it is): its
    ``model_sha256``, the bytes it scored, differs. An eval JSON written before it had one
    is tied to its training by the wall time it then embedded."""
    if "model_sha256" in ev:
        if ev["model_sha256"] == model_sha256:
            return None
        return f"the evaluation scored another model than {model_path}: re-evaluate it"
    if canonical(final.get("wall_time_s")) != canonical(ev.get("train_wall_time_s")):
        return (
            f"the evaluation read another training than {model_path.parent / 'final.json'} "
            f"(its wall time {ev.get('train_wall_time_s')} vs {final.get('wall_time_s')}): "
            "re-evaluate it"
        )
    return None


def _publish_one(
    path: Path,
    row: Run,
    seed: int,
    root: Path,
    release_dir: Path,
    table: RunTable,
    stamp: Stamp,
    check: SettingsCheck | None,
    replace: bool,
    report: PublishReport,
) -> str | None:
    """Publish one evaluation; returns why it was skipped (None: written, unchanged or
    refused, as recorded in ``report``)."""
    owner, owner_arm = table.owner(row.experiment, row.name, seed)
    run_dir = root / "runs" / owner / owner_arm / f"seed{seed}"
    final_path, model_path = run_dir / "final.json", run_dir / "model.pt"
    if not final_path.exists() or not model_path.exists():
        return f"no final.json and model.pt in {run_dir}"
    try:
        ev = json.loads(path.read_text())
        final = json.loads(final_path.read_text())
    except json.JSONDecodeError as err:
        return f"unreadable JSON ({err.msg})"
    if final.get("scale", PAPER) != PAPER:
        return f"{final_path}: scale {final.get('scale')!r}, not {PAPER!r}"
    model_sha256 = sha256_file(model_path)
    why = _scored_another_model(ev, final, model_sha256, model_path)
    if why:
        return why
    if (ev.get("experiment"), ev.get("arm"), ev.get("seed")) != (row.experiment, row.name, seed):
        return "the eval JSON names another run than its path"
    why = check(row, seed, final) if check is not None else None
    if why:
        return why
    record = build_record(
        ev,
        final,
        model_sha256,
        identity=identity_hash(table, row),
        trained_as=(owner, owner_arm),
        commit=stamp.commit,
        dirty=stamp.dirty,
        host=stamp.host,
        provenance=stamp.provenance,
    )
    target = record_path(release_dir, row.experiment, row.name, seed)
    check_record(record, str(target))
    if target.exists():
        old = load_record(target)
        clash = conflict(old, record)
        if clash is None:
            report.unchanged.append(target)
            return None
        same_fp = old["fingerprint"] == record["fingerprint"]
        if same_fp or not replace:
            hint = "" if same_fp else " (--replace publishes the new run)"
            report.refused.append((target, f"published record differs: {clash}{hint}"))
            return None
    atomic_write_text(target, render(record))
    report.written.append(target)
    return None


@dataclass(frozen=True)
class Match:
    """One key of a published record beside the retrained run's value."""

    key: str
    published: Any
    retrained: Any

    @property
    def same(self) -> bool:
        """Equal to the last bit (`canonical`)."""
        return canonical(self.published) == canonical(self.retrained)


def compare(
    record: Mapping[str, Any], ev: Mapping[str, Any], final: Mapping[str, Any], model_sha: str
) -> list[Match]:
    """A retrained run beside its record: the fingerprint, the model's sha256 and every
    score, each key its own row (a score the retrained evaluation lacks compares as None)."""
    scores = dict(record["scores"])
    theirs = dict(ev["scores"])
    keys = sorted(set(scores) | set(theirs))
    return [
        Match("fingerprint", record["fingerprint"], final.get("fingerprint")),
        Match("model_sha256", record["model_sha256"], model_sha),
        *(Match(f"scores.{k}", scores.get(k), theirs.get(k)) for k in keys),
    ]
