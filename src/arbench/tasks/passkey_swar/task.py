"""The passkey_swar task adapter: training and evaluation on the released dataset.

A "release" task: the workflow writes the release (`release.PasskeySwarRelease`) and validates
it with the independent oracle before any run trains; the experiment block names the release
and takes its generation params and train/eval configs from it.

Reads the released parquet layout (``data/n{N}/{split}-*.parquet``), turns the card's HF labels
(``labels[t]`` = token at t) into this project's targets (``targets[t]`` = what the model must
emit at t, i.e. ``labels[t + 1]``) and reports accuracy per answer type, with expired queries
split into keys that were never written and stale keys (written, then idle past 2w writes).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from arbench.tasks.base import IGNORE, Batch, Signal, Task, register_task, settings_of
from arbench.tasks.passkey_swar import oracle
from arbench.tasks.passkey_swar.generator import Params, vocab
from arbench.tasks.passkey_swar.release import PasskeySwarRelease

TYPES = ("ar_valid", "ar_expired_never", "ar_expired_stale", "passkey")


def _padded(column: Any, pad: int) -> tuple[np.ndarray, np.ndarray]:
    """A list<int16> Arrow column as a right-padded (n, max_len) int16 array and lengths."""
    col = column.combine_chunks()
    offsets = col.offsets.to_numpy()
    values = col.values.to_numpy().astype(np.int16)
    lengths = np.diff(offsets)
    out = np.full((len(lengths), int(lengths.max())), pad, dtype=np.int16)
    idx = np.arange(len(values)) - np.repeat(offsets[:-1], lengths)
    out[np.repeat(np.arange(len(lengths)), lengths), idx] = values
    return out, lengths


REPORT = "oracle_report.json"  # the validation job's report in the release folder


class ShardChanged(ValueError):
    """A shard differs from the one the release's validation checked."""


def check_validated(data_dir: str | Path, config: str, split: str, files: list[Path]) -> None:
    """When the folder holds a validation report, the shards of (config, split) must be the
    ones it checked, byte for byte (SHA-256), none missing. Snakemake reruns the validation
    when a shard gets newer than its report, but not when one is replaced keeping its
    timestamp (cp -p, rsync -t) or deleted (a missing intermediate file reruns nothing), so
    this is what keeps a swapped shard from silently changing a score."""
    report_path = Path(data_dir) / REPORT
    if not report_path.exists():
        return
    entries = json.loads(report_path.read_text()).get("checked", [])
    prefix = f"data/{config}/{split}-"
    checked = {e.get("path"): e.get("sha256") for e in entries}
    present = {"/".join(f.parts[-3:]): f for f in files}
    for rel in sorted(r for r in checked if r and r.startswith(prefix) and r not in present):
        raise ShardChanged(
            f"{Path(data_dir) / rel}: missing since {report_path} validated it; ask snakemake "
            "for that file to regenerate it"
        )
    for rel, f in present.items():
        if rel not in checked:
            raise ShardChanged(f"{f}: not among the files {report_path} validated; rerun it")
        if oracle.file_sha256(f) != checked[rel]:
            raise ShardChanged(
                f"{f}: changed since {report_path} validated it (SHA-256 differs); "
                "rerun the release's validation (snakemake --forcerun release_validate)"
            )


@cache
def load_split(data_dir: str, N: int, split: str) -> Batch:
    """Load (and cache) one config/split of the released dataset as a right-padded Batch.

    Tokens are padded with PAD and targets with IGNORE, both int16 as in the release: the
    paper-scale train configs hold ~190M positions, so int64 copies would take four times the
    memory; batches are widened on the way out.
    """
    files = sorted((Path(data_dir) / "data" / f"n{N}").glob(f"{split}-*.parquet"))
    check_validated(data_dir, f"n{N}", split, files)
    if not files:
        raise FileNotFoundError(f"no {split} shards for n{N} under {data_dir}/data")
    table = pq.read_table(files, columns=["input_ids", "labels"])
    pad = vocab()["PAD"]
    tokens, lengths = _padded(table.column("input_ids"), pad)
    labels, _ = _padded(table.column("labels"), IGNORE)
    targets = np.full_like(labels, IGNORE)
    targets[:, :-1] = labels[:, 1:]
    return Batch(tokens=tokens, targets=targets, lengths=lengths)


def answer_types(tokens: np.ndarray, targets: np.ndarray, w: int) -> np.ndarray:
    """Per-position answer type code (index into TYPES, -1 unsupervised) from tokens alone.

    A supervised position t holds the query key (``Q k a`` with k at t) or the token
    before a passkey answer. Queries whose answer is NULL are split by whether their key
    was ever written earlier in the sequence.
    """
    v = vocab()
    out = np.full(targets.shape, -1, dtype=np.int8)
    sup = targets != IGNORE
    is_query_key = np.zeros_like(sup)
    is_query_key[:, 1:] = tokens[:, :-1] == v["Q"]
    is_query_key &= sup
    out[sup & ~is_query_key] = TYPES.index("passkey")
    valid = is_query_key & (targets != v["NULL"])
    out[valid] = TYPES.index("ar_valid")
    expired = is_query_key & (targets == v["NULL"])
    # a key was written before position t iff its first "W key" comes earlier
    is_write_key = np.zeros_like(sup)
    is_write_key[:, 1:] = tokens[:, :-1] == v["W"]
    wr, wt = np.nonzero(is_write_key)
    first_write = np.full((len(tokens), len(v)), tokens.shape[1], dtype=np.int64)
    np.minimum.at(first_write, (wr, tokens[wr, wt].astype(np.int64)), wt)
    er, et = np.nonzero(expired)
    written = first_write[er, tokens[er, et].astype(np.int64)] < et
    out[er, et] = np.where(
        written, TYPES.index("ar_expired_stale"), TYPES.index("ar_expired_never")
    )
    return out


@dataclass
class StudySettings:
    """The task block: the release it reads (whose params and configs it takes), the split it
    evaluates on, and the piece length of the streaming evaluator."""

    release: str
    train_configs: list[int]
    eval_configs: list[int]
    params: dict[str, Any] = field(default_factory=dict)
    eval_split: str = "validation"
    piece: int = 4096


@register_task
class PasskeySwarTask(Task):
    """Batches from the released train configs; evaluation over every validation config.

    A load schedule (``train.load``) sets each batch's largest number of writes: the batch
    draws its config from the train configs with N <= load (a length curriculum), e.g.
    ``{values: [32, 64, 128], until: [0.5, 0.75]}`` trains on n32, then n32/n64, then up to
    n128. Without it every train config can be drawn."""

    name = "passkey_swar"
    data = "release"
    layout = "sweep"
    release = PasskeySwarRelease()
    release_keys = ("params", "train_configs", "eval_configs")
    signals = frozenset({"load"})
    settings_class = StudySettings  # its task block's keys and types (the config checks them)

    def __init__(
        self,
        data_dir: str | Path | None,
        train_configs: list[int],
        eval_configs: list[int],
        params: Params | None = None,
        eval_split: str = "validation",
        piece: int = 4096,
    ) -> None:
        self.data_dir = None if data_dir is None else str(data_dir)
        self.train_configs = list(train_configs)
        self.eval_configs = list(eval_configs)
        self.params = params or Params()
        self.eval_split = eval_split
        self.piece = piece

    @classmethod
    def from_settings(
        cls, settings: dict[str, Any], data_dir: str | Path | None = None
    ) -> PasskeySwarTask:
        s = settings_of(StudySettings, settings)
        params = Params.from_dict(s.params)
        return cls(data_dir, s.train_configs, s.eval_configs, params, s.eval_split, s.piece)

    @property
    def vocab_size(self) -> int:
        return self.params.vocab_size

    def _split(self, N: int, split: str) -> Batch:
        if self.data_dir is None:
            raise ValueError("passkey_swar: training and evaluation need the release's folder")
        return load_split(self.data_dir, N, split)

    def train_batch(self, seed: int, step: int, batch: int, signal: Signal | None = None) -> Batch:
        """A batch from one train config, both drawn from (seed, step) alone; a signal's load
        restricts the draw to the train configs with N <= load."""
        rng = np.random.default_rng(np.random.SeedSequence([0, seed, step]))
        configs = self.train_configs
        if signal is not None and signal.load is not None:
            configs = [n for n in configs if n <= signal.load]
            if not configs:
                raise ValueError(
                    f"train.load: load {signal.load} is below every passkey_swar train config "
                    f"{self.train_configs}"
                )
        N = configs[int(rng.integers(len(configs)))]
        split = self._split(N, "train")
        rows = rng.integers(0, len(split.tokens), size=batch)
        width = int(split.lengths[rows].max())
        return Batch(split.tokens[rows, :width], split.targets[rows, :width])

    def summary(self) -> str:
        p = self.params
        return (
            f"{p.n_keys} keys, {p.n_values} values, window {p.w}, "
            f"valid fraction {p.valid_frac}, {self.eval_split} split"
        )

    def floors(self) -> dict[str, float]:
        """Chance levels from the params: uniform answers, and always answering NULL."""
        return {
            "value_marginal": 1.0 / (self.params.n_values + 1),
            "always_null": 1.0 - self.params.valid_frac,
            "passkey_token": 1.0 / self.params.n_values,
        }

    def evaluate(
        self, model: Any, examples: int | None = None, max_writes: int | None = None
    ) -> dict[str, Any]:
        """Streaming accuracy per eval config and answer type.

        Reads the first ``examples`` of each eval split (all when None or larger than the
        split) and skips configs with more than ``max_writes`` writes.
        """
        from arbench.evaluate.streaming import stream_predictions

        per_config: dict[str, dict[str, Any]] = {}
        for N in self.eval_configs:
            if max_writes is not None and N > max_writes:
                continue
            split = self._split(N, self.eval_split)
            n = min(len(split.tokens), examples or len(split.tokens))
            tokens, targets = split.tokens[:n], split.targets[:n]
            hits, seconds = stream_predictions(model, tokens, targets, self.piece)
            kinds = answer_types(tokens, targets, self.params.w)
            row: dict[str, Any] = {"examples": int(n), "seconds": seconds}
            for i, name in enumerate(TYPES):
                sel = kinds == i
                row[name] = float(hits[sel].mean()) if sel.any() else None
                row[f"{name}_n"] = int(sel.sum())
            row["all"] = float(hits[kinds >= 0].mean())
            per_config[f"n{N}"] = row
        overall = [r["all"] for r in per_config.values()]
        accuracy = float(np.mean(overall)) if overall else None
        return {"accuracy": accuracy, "per_config": per_config}

    def train_shape(self, train: dict[str, Any]) -> tuple[int, int]:
        """The generator's expected row at the largest train config the load admits
        (`eval_tokens`' length per write), its passkey and queries supervised."""
        load = (train.get("load") or {}).get("values")
        configs = [n for n in self.train_configs if not load or n <= max(load)]
        return self._expected_row(max(configs or self.train_configs))

    def eval_shape(self, max_writes: int | None = None, **options: Any) -> tuple[int, int]:
        """Evaluation streams each sequence ``piece`` tokens at a time (one row at once)."""
        configs = [n for n in self.eval_configs if max_writes is None or n <= max_writes]
        length, supervised = self._expected_row(max(configs or self.eval_configs))
        return min(length, self.piece), max(1, supervised * min(length, self.piece) // length)

    def _expected_row(self, N: int) -> tuple[int, int]:
        """(tokens, supervised answers) of a row of N writes, as the generator expects: the
        passkey's head and tail, 3 tokens a write and 3 a query, N x query_rate queries."""
        from arbench.tasks.passkey_swar.generator import PASSKEY_LEN

        per_write = 3 * (1 + self.params.query_rate)
        queries = self.params.query_rate * N
        return int(2 * (2 + PASSKEY_LEN) + per_write * N), int(queries + PASSKEY_LEN)

    def eval_tokens(self, examples: int, max_writes: int | None = None, **options: Any) -> int:
        """Tokens the streaming sweep reads (an upper bound: the split may hold fewer):
        ``examples`` sequences of every eval config it scores, each of the generator's
        expected length (passkey head and tail, N writes, N x query_rate queries)."""
        return sum(
            int(examples) * self._expected_row(N)[0]
            for N in self.eval_configs
            if max_writes is None or N <= max_writes
        )
