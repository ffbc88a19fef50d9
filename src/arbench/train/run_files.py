"""A run's identity and its files: the settings it is fingerprinted by, its checkpoint, its
model file and the lock on its folder.

A run's settings (model, training, task, seed: `run_settings`) are fingerprinted
(`fingerprint`) into its checkpoint and its model file. A checkpoint written under
other settings is discarded, with a log line, instead of resumed; a model file is
loaded only against the settings it was trained with (`load_trained`), so weights
from another config give an error naming what differs, never a wrong score. A checkpoint
torch cannot read, or one that does not fit the run, is set aside (``checkpoint.pt.corrupt``)
with a warning and the run starts afresh, so it never fails every rerun; a model file torch
cannot read is `UnreadableFile`, one line naming it and what to do. One
process trains a run folder at a time (a lock on the folder, where the file system
has locks): a job started while a killed workflow's orphan still trains that run
waits for it instead of mixing their files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import json
import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import torch

import arbench
from arbench.io import atomic_write_bytes
from arbench.mismatch import SettingsMismatch, differences
from arbench.models import LanguageModel, ModelConfig, families
from arbench.tasks.base import Task
from arbench.train.hooks import TrainHook

MODEL_FORMAT = "arbench-model/1"  # model.pt: {"format", "fingerprint", "settings", "weights"}
# training options that change how a run is recorded, never what it computes: resuming
# across a change of these reproduces the same run
NOT_IDENTITY = frozenset({"checkpoint_every"})
# training options added after runs were recorded without them: unset (None), they are left
# out of a run's settings, so the fingerprints of the runs that do not use them stay as they were
UNSET_NOT_IDENTITY = frozenset({"warm_start", "tokens_per_step", "micro_batch_tokens"})
# model settings added after runs were recorded without them, left out the same way while unset
UNSET_MODEL_NOT_IDENTITY = frozenset({"block"})


def versions() -> dict[str, str]:
    """Library versions recorded in every run's JSON."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "arbench": arbench.__version__,
    }


def _unset_load_stop(train: dict[str, Any]) -> dict[str, Any]:
    """``train.load.stop`` came after runs were recorded without it: left out while off, so
    the fingerprints of load-schedule runs that do not stop early stay as they were."""
    load = train.get("load")
    if isinstance(load, dict) and not load.get("stop", False):
        train = {**train, "load": {k: v for k, v in load.items() if k != "stop"}}
    return train


def model_identity(model: dict[str, Any]) -> dict[str, Any]:
    """A model's settings as a run's identity holds them: less `UNSET_MODEL_NOT_IDENTITY`
    while unset."""
    return {k: v for k, v in model.items() if not (k in UNSET_MODEL_NOT_IDENTITY and v is None)}


def run_settings(
    model: dict[str, Any], train: dict[str, Any], task: dict[str, Any], seed: int
) -> dict[str, Any]:
    """What a run's result depends on: its model, training (less `NOT_IDENTITY`) and task
    settings and its seed, as plain JSON data (a final.json's fields give the same). Settings
    added after runs were recorded without them (`UNSET_NOT_IDENTITY`,
    `UNSET_MODEL_NOT_IDENTITY`) are left out while unset."""
    return json.loads(
        json.dumps(
            {
                "model": model_identity(model),
                "train": _unset_load_stop(
                    {
                        k: v
                        for k, v in train.items()
                        if k not in NOT_IDENTITY and not (k in UNSET_NOT_IDENTITY and v is None)
                    }
                ),
                "task": task,
                "seed": int(seed),
            }
        )
    )


def fingerprint(settings: dict[str, Any]) -> str:
    """A stable hash of the settings' canonical JSON (sorted keys, no spaces)."""
    canonical = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def record_settings(record: dict[str, Any]) -> dict[str, Any]:
    """`run_settings` of a run's final.json record."""
    return run_settings(record["model"], record["train"], record["task"], record["seed"])


def task_identity(task: Task) -> dict[str, Any]:
    """The task's settings when the caller gives none: its name and settings dataclass."""
    cfg = getattr(task, "cfg", None)
    settings = dataclasses.asdict(cfg) if dataclasses.is_dataclass(cfg) else {}
    return {"name": task.name, **settings}


@contextlib.contextmanager
def exclusive(run_dir: Path, say: Any):
    """Hold an exclusive lock on the run folder; wait (saying so) while another process holds
    it. Where the file system has no locks (some network mounts) the run goes on without."""
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f"another process is training {run_dir}; waiting for it to finish")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as err:
            say(f"cannot lock {run_dir} ({err}); training without a lock")
        _remove_stale_temps(run_dir, say)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_stale_temps(run_dir: Path, say: Any) -> None:
    """Delete the temp files (`arbench.io`'s ``.<name>.<hex>.tmp``) a killed writer left in
    the run folder: with the folder's lock held no other process is writing them."""
    for tmp in run_dir.glob(".*.tmp"):
        say(f"removing {tmp.name}, left by a process killed while writing it")
        tmp.unlink(missing_ok=True)


# what says nothing about a file's bytes: a checkpoint that met these is kept, not set aside
OUT_OF_MEMORY = (MemoryError, torch.OutOfMemoryError)


class UnreadableFile(RuntimeError):
    """A checkpoint or model file torch cannot read: truncated, overwritten or not torch's.
    Its message is one line naming the file, torch's error and (``advice``) what to do."""

    def __init__(self, path: Path, cause: str, advice: str = "") -> None:
        self.path, self.cause = path, cause
        super().__init__(f"{path}: unreadable ({cause})" + (f"; {advice}" if advice else ""))


def one_line(err: BaseException) -> str:
    """An exception as one short line: its type and its message's first line."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:200]}" if text else type(err).__name__


def _torch_file(path: Path, map_location: Any) -> Any:
    """``torch.load`` of ``path`` (weights only); `UnreadableFile` naming the file when torch
    cannot read it (it raises EOFError, OSError, RuntimeError or UnpicklingError, naming no
    file). A missing file stays a FileNotFoundError."""
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except (FileNotFoundError, *OUT_OF_MEMORY):
        raise
    except Exception as err:
        raise UnreadableFile(path, one_line(err)) from None


def set_aside(path: Path, why: str, note: Any) -> None:
    """Rename a checkpoint that cannot be resumed to ``<name>.corrupt`` (replacing an earlier
    one), saying so: the run starts afresh, and the next attempt does not meet it again."""
    aside = path.with_name(path.name + ".corrupt")
    path.replace(aside)
    note(f"warning: {path} {why}; set aside as {aside.name}, training starts afresh at step 0")


def read_checkpoint(path: Path, device: torch.device, note: Any) -> dict[str, Any] | None:
    """The run's checkpoint, or None where there is none or it is unreadable (set aside)."""
    if not path.exists():
        return None
    try:
        ck = _torch_file(path, device)
    except UnreadableFile as err:
        set_aside(path, f"is unreadable ({err.cause})", note)
        return None
    if not isinstance(ck, dict):
        set_aside(path, f"is not a checkpoint (a {type(ck).__name__})", note)
        return None
    return ck


def save_checkpoint(
    path: Path,
    model,
    opt,
    step: int,
    metrics: list[str],
    settings: dict[str, Any],
    hooks: list[TrainHook],
) -> None:
    """Model, optimizer, step, the metric lines so far, each stateful hook's state (under its
    `state_key`) and the run's settings with their fingerprint, written atomically."""
    buf = io.BytesIO()
    state = {
        "model": model.state_dict(),
        "optim": opt.state_dict(),
        "step": step,
        "fingerprint": fingerprint(settings),
        "settings": json.dumps(settings, sort_keys=True),
    }
    for h in hooks:
        if h.state_key is not None:
            state[h.state_key] = h.state()
    torch.save({**state, "metrics": metrics}, buf)
    atomic_write_bytes(path, buf.getvalue())


def save_model_file(path: Path, model: Any, fp: str, settings: dict[str, Any]) -> None:
    """The trained weights (on the CPU) with the run's settings and their fingerprint ``fp``,
    written atomically as a `MODEL_FORMAT` file (what `load_model_file` reads)."""
    buf = io.BytesIO()
    weights = {k: v.cpu() for k, v in model.state_dict().items()}
    torch.save(
        {
            "format": MODEL_FORMAT,
            "fingerprint": fp,
            "settings": json.dumps(settings, sort_keys=True),
            "weights": weights,
        },
        buf,
    )
    atomic_write_bytes(path, buf.getvalue())


def load_model_file(path: str | Path) -> dict[str, Any]:
    """A model file's contents: "weights" (the state dict), "settings" (the run settings it
    was trained with, a dict) and "fingerprint"; `SettingsMismatch` for a file without them,
    `UnreadableFile` (one line: the file and what to do) for one torch cannot read."""
    path = Path(path)
    try:
        blob = _torch_file(path, "cpu")
    except UnreadableFile as err:
        advice = (
            "the file is truncated or overwritten: delete it and rerun the workflow, which "
            "retrains the run that writes it"
        )
        raise UnreadableFile(path, err.cause, advice) from None
    if not (isinstance(blob, dict) and blob.get("format") == MODEL_FORMAT):
        raise SettingsMismatch(
            f"{path}: not an {MODEL_FORMAT} file (no record of the settings it was trained "
            "with, e.g. written by an older arbench); retrain the run"
        )
    return {**blob, "settings": json.loads(blob["settings"])}


def load_trained(
    run_dir: str | Path,
    model_cfg: ModelConfig,
    settings: dict[str, Any] | None = None,
    expected_from: str = "the expected run settings",
) -> LanguageModel:
    """Rebuild a trained model (on the CPU) from its run directory's final weights.

    With ``settings`` (`run_settings` of the run asked for, e.g. `record_settings` of its
    final.json), a model file trained under other settings is a `SettingsMismatch` naming the
    file and the fields that differ, instead of a model that would score the wrong run.
    """
    path = Path(run_dir) / "model.pt"
    blob = load_model_file(path)
    if settings is not None and blob["fingerprint"] != fingerprint(settings):
        raise SettingsMismatch(
            f"{path} was trained with other settings than {expected_from} "
            f"(model file vs expected: {differences(blob['settings'], settings)})"
        )
    model = families.instantiate(model_cfg)
    model.load_state_dict(blob["weights"])
    model.eval()
    return model
