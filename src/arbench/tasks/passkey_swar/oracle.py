"""Independent oracle for passkey_swar: re-derives labels and answer types from tokens alone.

Written apart from the generator (shares no code with it): it parses
``BOS PK p1..p4 (W k v | Q k a)* PKQ p1..p4 EOS``, tracks every key's latest write and its
age, and decides each answer (age <= w: the latest value; never written or age > 2w: NULL;
w < age <= 2w: an error, the gray zone is never queried). The parse is vectorised over a
whole Arrow batch (flat token arrays plus offsets), so the paper-scale release is checked in
minutes. `check_example` is a plain-Python brute-force twin used to cross-check it.

On disk (`validate_files`) it also checks each shard's column types against the card, that
each example sits in its own config's folder and split, that no seed or token sequence
repeats within a split or appears in two splits, and records each file's SHA-256, so a
consumer can tell a shard that changed after validation. A file that is not readable parquet
is one error naming it; the other files are still checked. Checks that need the generator
(regenerating each example from its seed) come in through ``extra`` (`check.validate`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE

# vocabulary as the card states it (the oracle does not read the generator's constants)
TOK = {"PAD": 0, "BOS": 1, "EOS": 2, "PK": 3, "PKQ": 4, "W": 5, "Q": 6, "NULL": 7}
N_KEYS, N_VALUES, FIRST_KEY = 16, 16, 8
FIRST_VALUE = FIRST_KEY + N_KEYS
TYPE_NAMES = ("ar_valid", "ar_expired", "passkey")
MAX_REPORTED = 50
BATCH_TOKENS = 4_000_000  # tokens per checked batch: bounds the parse's memory (~1 GB)


def batch_rows_for(config: str) -> int:
    """Rows per batch for config 'n{N}' so a batch holds about BATCH_TOKENS tokens."""
    digits = config.lstrip("n")
    N = int(digits) if digits.isdigit() else 256
    return max(1, BATCH_TOKENS // (12 + 4 * N))


def _is_key(t: np.ndarray) -> np.ndarray:
    return (t >= FIRST_KEY) & (t < FIRST_KEY + N_KEYS)


def _is_value(t: np.ndarray) -> np.ndarray:
    return (t >= FIRST_VALUE) & (t < FIRST_VALUE + N_VALUES)


@dataclass
class Parsed:
    """Per-query and per-write facts re-derived from well-formed examples."""

    n_examples: int
    lengths: np.ndarray  # tokens per example
    q_row: np.ndarray  # example index of each query
    q_age: np.ndarray  # age of the queried key (-1 never written)
    q_gap: np.ndarray  # writes since the previous query in the example (or since start)
    q_expected: np.ndarray  # the oracle's answer token (-1 in the gray zone)
    w_row: np.ndarray  # example index of each write
    w_interval: np.ndarray  # writes since the same key's previous write (-1 first write)
    w_key: np.ndarray


@dataclass
class Report:
    """Outcome of an oracle run: counts plus the first failures with reasons."""

    examples: int = 0
    failed_examples: int = 0
    reasons: Counter = field(default_factory=Counter)
    failures: list[dict[str, Any]] = field(default_factory=list)
    checked: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # dataset-level problems

    @property
    def ok(self) -> bool:
        return self.failed_examples == 0 and not self.errors and self.examples > 0

    def add(self, where: dict[str, Any], reasons: list[list[str]], seeds: np.ndarray) -> None:
        """Merge per-example reason lists from one checked batch."""
        self.examples += len(reasons)
        for i, rs in enumerate(reasons):
            if not rs:
                continue
            self.failed_examples += 1
            self.reasons.update(rs)
            if len(self.failures) < MAX_REPORTED:
                self.failures.append({**where, "row": i, "seed": int(seeds[i]), "reasons": rs})

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "examples_checked": self.examples,
            "failed_examples": self.failed_examples,
            "failure_reasons": dict(self.reasons),
            "failures": self.failures,
            "errors": self.errors,
            "checked": self.checked,
        }


def check_arrays(
    tokens: np.ndarray,
    offsets: np.ndarray,
    labels: np.ndarray,
    label_offsets: np.ndarray,
    type_codes: np.ndarray,
    type_offsets: np.ndarray,
    n_writes: np.ndarray,
    seeds: np.ndarray,
    w: int = 16,
    split_seed: int | None = None,
    n_config: int | None = None,
) -> tuple[list[list[str]], Parsed]:
    """Check a batch given as flat arrays + offsets; return reasons per example and the parse.

    ``type_codes`` index TYPE_NAMES (-1 for an unknown string); ``split_seed`` and
    ``n_config`` (the N of the config folder the batch was read from) also check that each
    example belongs where it was found.
    """
    tokens, labels = np.asarray(tokens), np.asarray(labels)  # any int dtype; gathers widen
    offsets, label_offsets = np.asarray(offsets, np.int64), np.asarray(label_offsets, np.int64)
    type_offsets = np.asarray(type_offsets, np.int64)
    n = len(offsets) - 1
    reasons: list[list[str]] = [[] for _ in range(n)]
    bad = np.zeros(n, dtype=bool)

    def flag(mask: np.ndarray, why: str) -> None:
        for i in np.flatnonzero(mask):
            reasons[i].append(why)
        bad[:] |= mask

    L = np.diff(offsets)
    flag(np.diff(label_offsets) != L, "labels length differs from input_ids")
    seeds = np.asarray(seeds, dtype=np.int64)
    n_writes = np.asarray(n_writes, dtype=np.int64)
    flag((seeds // 10**6) % 10**6 != n_writes, "seed does not encode n_writes")
    if split_seed is not None:
        flag(seeds // 10**12 != split_seed, "seed does not encode the split")
    if n_config is not None:
        flag(n_writes != n_config, f"n_writes differs from its config folder n{n_config}")
    shape_ok = (L >= 12) & ((L - 12) % 3 == 0) & ~bad
    flag(~shape_ok & ~bad, "length is not 12 + 3*items")
    start, end = offsets[:-1], offsets[1:]
    s, e = start[shape_ok], end[shape_ok]
    ok_rows = np.flatnonzero(shape_ok)
    hdr = tokens[s[:, None] + np.arange(6)].astype(np.int64)
    tlr = tokens[e[:, None] - 6 + np.arange(6)].astype(np.int64)
    sub = np.zeros(n, dtype=bool)
    sub[ok_rows] = (
        (hdr[:, 0] != TOK["BOS"]) | (hdr[:, 1] != TOK["PK"]) | ~_is_value(hdr[:, 2:]).all(1)
    )
    flag(sub, "bad header (BOS PK p1..p4)")
    sub[:] = False
    sub[ok_rows] = (
        (tlr[:, 0] != TOK["PKQ"]) | ~_is_value(tlr[:, 1:5]).all(1) | (tlr[:, 5] != TOK["EOS"])
    )
    flag(sub, "bad trailer (PKQ p1..p4 EOS)")
    sub[:] = False
    sub[ok_rows] = (tlr[:, 1:5] != hdr[:, 2:]).any(1)
    flag(sub, "recalled passkey differs from passkey")

    # items: one (op, key, arg) triple per write or query
    T = np.where(shape_ok, (L - 12) // 3, 0)
    item_start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(T, out=item_start[1:])
    i_row = np.repeat(np.arange(n), T)
    base = start[i_row] + 6 + 3 * (np.arange(item_start[-1]) - item_start[i_row])
    op = tokens[base].astype(np.int64)
    key = tokens[base + 1].astype(np.int64)
    arg = tokens[base + 2].astype(np.int64)
    is_w, is_q = op == TOK["W"], op == TOK["Q"]
    item_bad = ~(is_w | is_q) | ~_is_key(key)
    item_bad |= is_w & ~_is_value(arg)
    item_bad |= is_q & ~(_is_value(arg) | (arg == TOK["NULL"]))
    flag(np.bincount(i_row, item_bad, minlength=n) > 0, "malformed item (not W k v / Q k a)")
    first_q = np.zeros(n, dtype=bool)
    has = T > 0
    first_q[has] = is_q[item_start[:-1][has]]
    flag(first_q, "query before the first write")
    writes = np.bincount(i_row, is_w, minlength=n).astype(np.int64)
    flag(shape_ok & (writes != n_writes), "number of writes differs from n_writes")

    # ages: latest write of the same key, via a stable sort by key and a running maximum
    gw = np.cumsum(is_w)  # global write counter (at a write: its own 1-based number)
    first_gw = np.zeros(n, dtype=np.int64)
    np.cumsum(writes[:-1], out=first_gw[1:])  # writes before this example
    big = np.int64(1) << 40
    kk = key - FIRST_KEY
    by_key = np.argsort(np.clip(kk, -1, N_KEYS).astype(np.int8), kind="stable")
    code = kk[by_key] * big + np.where(is_w[by_key], gw[by_key], 0)
    run = np.maximum.accumulate(code) if code.size else code
    prev = np.empty_like(gw)
    prev[by_key] = run - kk[by_key] * big  # latest write of this key up to and including item
    own = np.empty_like(gw)  # latest write of the same key strictly before each write
    shifted = np.concatenate([[0], run[:-1]]) - kk[by_key] * big if run.size else run
    own[by_key] = np.where(shifted < 0, 0, shifted)
    never = prev <= first_gw[i_row]
    age = np.where(never, -1, gw - prev + 1)
    write_arg = np.zeros(gw[-1] + 1 if gw.size else 1, dtype=np.int64)
    write_arg[gw[is_w]] = arg[is_w]
    latest_val = write_arg[np.where(never, 0, prev)]
    expected = np.where(never | (age > 2 * w), TOK["NULL"], np.where(age <= w, latest_val, -1))

    q = np.flatnonzero(is_q)
    q_row, q_arg, q_exp, q_age = i_row[q], arg[q], expected[q], age[q]
    gray = q_exp == -1
    flag(np.bincount(q_row, gray, minlength=n) > 0, "query on a gray-zone key")
    ok_q = ~gray
    null_due = ok_q & (q_exp == TOK["NULL"])
    flag(
        np.bincount(q_row, null_due & (q_arg != TOK["NULL"]), minlength=n) > 0,
        "value given where NULL is due",
    )
    flag(
        np.bincount(q_row, ok_q & ~null_due & (q_arg == TOK["NULL"]), minlength=n) > 0,
        "NULL given where a value is due",
    )
    flag(
        np.bincount(q_row, ok_q & ~null_due & (q_arg != TOK["NULL"]) & (q_arg != q_exp), n) > 0,
        "wrong answer value",
    )

    # labels: -100 everywhere except each query's answer and the 4 recalled passkey tokens;
    # checked as "right count of set labels" plus "right value at every due position"
    lab_rows = (np.diff(label_offsets) == L) & shape_ok
    set_cum = np.zeros(len(labels) + 1, dtype=np.int64)
    np.cumsum(labels != IGNORE, out=set_cum[1:])
    n_set = set_cum[label_offsets[1:]] - set_cum[label_offsets[:-1]]
    shift = label_offsets[:-1] - offsets[:-1]
    due_q = ~gray & lab_rows[q_row]
    q_lab_pos = base[q][due_q] + 2 + shift[q_row[due_q]]
    q_wrong = labels[q_lab_pos].astype(np.int64) != q_exp[due_q]
    bad_lab = np.bincount(q_row[due_q], q_wrong, minlength=n) > 0
    pk_rows = np.flatnonzero(lab_rows[ok_rows])
    pk_pos = e[pk_rows, None] - 5 + np.arange(4) + shift[ok_rows[pk_rows], None]
    pk_bad = (labels[pk_pos].astype(np.int64) != hdr[pk_rows, 2:]).any(1)
    bad_lab[ok_rows[pk_rows]] |= pk_bad
    due_n = np.bincount(q_row, ~gray, minlength=n) + 4
    bad_lab |= lab_rows & (n_set != due_n)
    flag(bad_lab, "labels disagree with the oracle")

    # answer_type: per query ar_valid/ar_expired in order, then passkey x4
    n_q = np.bincount(q_row, minlength=n)
    type_len = np.diff(type_offsets)
    tl_bad = shape_ok & (type_len != n_q + 4)
    flag(tl_bad, "answer_type length differs from queries + 4")
    rows_t = shape_ok & ~tl_bad
    exp_codes = np.full(len(type_codes), -2, dtype=np.int64)
    q_rank = np.arange(q.size) - (np.cumsum(n_q) - n_q)[q_row]
    sel = rows_t[q_row]
    exp_codes[type_offsets[q_row[sel]] + q_rank[sel]] = np.where(q_exp[sel] == TOK["NULL"], 1, 0)
    pk_t = type_offsets[1:][rows_t][:, None] - 4 + np.arange(4)
    exp_codes[pk_t.ravel()] = 2
    t_row = np.repeat(np.arange(n), type_len)
    keep_t = rows_t[t_row]
    t_mism = np.asarray(type_codes, np.int64)[keep_t] != exp_codes[keep_t]
    flag(np.bincount(t_row[keep_t], t_mism, minlength=n) > 0, "answer_type disagrees")

    gaps = _query_gaps(gw, q, q_row, first_gw)
    w_idx = np.flatnonzero(is_w)
    w_row = i_row[w_idx]
    w_prev = own[w_idx]
    w_int = np.where(w_prev <= first_gw[w_row], -1, gw[w_idx] - w_prev)
    parsed = Parsed(n, L, q_row, q_age, gaps, q_exp, w_row, w_int, kk[w_idx])
    return reasons, parsed


def _query_gaps(
    gw: np.ndarray, q: np.ndarray, q_row: np.ndarray, first_gw: np.ndarray
) -> np.ndarray:
    """Writes between each query and the previous query of the same example (or its start)."""
    if q.size == 0:
        return np.zeros(0, dtype=np.int64)
    at = gw[q]
    prev = np.concatenate([[0], at[:-1]])
    new_row = np.concatenate([[True], q_row[1:] != q_row[:-1]])
    prev = np.where(new_row, first_gw[q_row], prev)
    return at - prev


def check_table(
    table: Any, w: int = 16, split_seed: int | None = None, n_config: int | None = None
) -> tuple[list, Parsed]:
    """Check a pyarrow Table/RecordBatch with the card's columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    def flat(col: Any) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        off = col.offsets.to_numpy().astype(np.int64)
        return col.flatten().to_numpy(zero_copy_only=False), off - off[0]

    ids, off = flat(table.column("input_ids"))
    lab, loff = flat(table.column("labels"))
    col = table.column("answer_type")
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    toff = col.offsets.to_numpy().astype(np.int64)
    codes = pc.index_in(col.flatten(), value_set=pa.array(list(TYPE_NAMES))).fill_null(-1)
    return check_arrays(
        ids,
        off,
        lab,
        loff,
        codes.to_numpy(zero_copy_only=False),
        toff - toff[0],
        table.column("n_writes").to_numpy(),
        table.column("seed").to_numpy(),
        w=w,
        split_seed=split_seed,
        n_config=n_config,
    )


def check_examples(examples: Sequence[dict[str, Any]], w: int = 16) -> list[list[str]]:
    """Check a list of example dicts (convenience for tests); reasons per example."""
    lens = [len(x["input_ids"]) for x in examples]
    llens = [len(x["labels"]) for x in examples]
    tlens = [len(x["answer_type"]) for x in examples]
    cum = lambda v: np.concatenate([[0], np.cumsum(v)]).astype(np.int64)
    cat = lambda k: np.concatenate([np.asarray(x[k], np.int64) for x in examples] or [[]])
    codes = [
        TYPE_NAMES.index(t) if t in TYPE_NAMES else -1 for x in examples for t in x["answer_type"]
    ]
    reasons, _ = check_arrays(
        cat("input_ids"),
        cum(lens),
        cat("labels"),
        cum(llens),
        np.asarray(codes, np.int64),
        cum(tlens),
        np.array([x["n_writes"] for x in examples]),
        np.array([x["seed"] for x in examples]),
        w=w,
    )
    return reasons


def check_example(ex: dict[str, Any], w: int = 16) -> list[str]:
    """Brute-force, one-example oracle in plain Python (reference for `check_arrays`)."""
    ids, labels = list(ex["input_ids"]), list(ex["labels"])
    if len(ids) != len(labels) or len(ids) < 12 or (len(ids) - 12) % 3:
        return ["bad shape"]
    val = lambda t: FIRST_VALUE <= t < FIRST_VALUE + N_VALUES
    if ids[:2] != [TOK["BOS"], TOK["PK"]] or ids[-6] != TOK["PKQ"] or ids[-1] != TOK["EOS"]:
        return ["bad frame"]
    out: list[str] = []
    if ids[2:6] != ids[-5:-1] or not all(val(t) for t in ids[2:6]):
        out.append("bad passkey")
    want = [IGNORE] * len(ids)
    types: list[str] = []
    last: dict[int, tuple[int, int]] = {}
    t = 0
    for m in range(6, len(ids) - 6, 3):
        op, k, a = ids[m : m + 3]
        if op == TOK["W"]:
            t += 1
            last[k] = (t, a)
            continue
        if op != TOK["Q"] or t == 0:
            out.append("bad item")
            continue
        age = t - last[k][0] + 1 if k in last else None
        if age is not None and w < age <= 2 * w:
            out.append("gray zone")
            continue
        ans = last[k][1] if age is not None and age <= w else TOK["NULL"]
        if a != ans:
            out.append("wrong answer")
        want[m + 2] = ans
        types.append("ar_valid" if ans != TOK["NULL"] else "ar_expired")
    want[-5:-1] = ids[2:6]
    if t != ex["n_writes"]:
        out.append("n_writes")
    if labels != want:
        out.append("labels")
    if list(ex["answer_type"]) != types + ["passkey"] * 4:
        out.append("answer_type")
    return out


# --------------------------------------------------------------------------- datasets on disk


def _split_seed_of(split: str, split_seeds: dict[str, int] | None) -> int | None:
    return (split_seeds or {}).get(split)


def _config_N(config: str) -> int | None:
    """256 for a folder named 'n256'; None for a folder that names no config."""
    digits = config[1:] if config.startswith("n") else ""
    return int(digits) if digits.isdigit() else None


# column types as the card states them (integer: any integer type; n_writes is "int")
CARD_TYPES = {
    "input_ids": "list<int16>",
    "labels": "list<int16>",
    "answer_type": "list<string>",
    "n_writes": "integer",
    "seed": "int64",
}


def schema_problems(schema: Any) -> list[str]:
    """Columns missing or of another type than the card's (`CARD_TYPES`), one line each."""
    import pyarrow as pa

    def is_card(name: str, t: Any) -> bool:
        want = CARD_TYPES[name]
        if want == "integer":
            return pa.types.is_integer(t)
        if want == "int64":
            return t == pa.int64()
        if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
            return False
        v = t.value_type
        return v == pa.int16() if want == "list<int16>" else pa.types.is_string(v)

    def spelled(t: Any) -> str:  # list<int64>, as the card spells types
        nested = pa.types.is_list(t) or pa.types.is_large_list(t)
        return f"list<{t.value_type}>" if nested else str(t)

    out = []
    for name, want in CARD_TYPES.items():
        idx = schema.get_field_index(name)
        if idx < 0:
            out.append(f"column {name} missing (the card has {want})")
        elif not is_card(name, schema.field(idx).type):
            out.append(f"column {name} is {spelled(schema.field(idx).type)}, the card says {want}")
    return out


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes (what a consumer compares before reading it)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


Extra = Callable[[str, str, Any], list[list[str]]]  # (config, split, batch) -> reasons per row


def validate_files(
    files: Iterable[tuple[str, str, Path]],
    w: int = 16,
    split_seeds: dict[str, int] | None = None,
    progress: Any = None,
    extra: Extra | None = None,
) -> Report:
    """Run the oracle over parquet shards given as (config, split, path).

    Besides each example's own checks: the card's column types, each example's n_writes
    against its config folder, no seed or token sequence twice within a split or in two
    splits of one config. A file that cannot be read as parquet is one error naming it (its
    rows read before the damage are still checked). ``extra`` adds per-row reasons.
    """
    import pyarrow.parquet as pq

    report = Report()
    digests: dict[str, dict[bytes, str]] = {}
    seen_seeds: dict[tuple[str, str], set[int]] = {}
    for config, split, path in files:
        rel = "/".join(Path(path).parts[-3:])  # data/<config>/<file>
        n0, f0 = report.examples, report.failed_examples
        seen = digests.setdefault(config, {})
        seeds_here = seen_seeds.setdefault((config, split), set())
        entry: dict[str, Any] = {"config": config, "split": split, "file": Path(path).name}
        entry.update(path=rel, bytes=Path(path).stat().st_size, sha256=file_sha256(path))
        n_config = _config_N(config)
        if n_config is None:
            report.errors.append(f"{rel}: folder {config!r} names no config (n<N>)")
        try:
            pf = pq.ParquetFile(path)
            problems = schema_problems(pf.schema_arrow)
            report.errors += [f"{rel}: {problem}" for problem in problems]
            batches = pf.iter_batches(batch_size=batch_rows_for(config))
            if any(pf.schema_arrow.get_field_index(name) < 0 for name in CARD_TYPES):
                batches = iter(())  # a column the checks read is absent
            for rb in batches:
                reasons, _ = check_table(
                    rb, w=w, split_seed=_split_seed_of(split, split_seeds), n_config=n_config
                )
                seeds = rb.column("seed").to_numpy()
                col = rb.column("input_ids")
                off = col.offsets.to_numpy().astype(np.int64)
                off = off - off[0]
                raw = col.flatten().to_numpy().astype(np.int16).tobytes()
                for i in range(len(reasons)):
                    d = hashlib.blake2b(raw[2 * off[i] : 2 * off[i + 1]], digest_size=16).digest()
                    other = seen.get(d)
                    if other == split:
                        reasons[i].append("sequence repeated within the split")
                    elif other is not None:
                        reasons[i].append(f"sequence also in split {other}")
                    seen.setdefault(d, split)
                    seed = int(seeds[i])
                    if seed in seeds_here:
                        reasons[i].append("seed repeated within the split")
                    seeds_here.add(seed)
                if extra is not None:
                    for i, more in enumerate(extra(config, split, rb)):
                        reasons[i] += more
                report.add({"config": config, "split": split, "file": rel}, reasons, seeds)
            entry["readable"] = True
        except (OSError, ValueError, KeyError) as err:  # ArrowInvalid/ArrowIOError are these
            first = str(err).strip().splitlines()[0] if str(err).strip() else ""
            report.errors.append(
                f"{rel}: not a readable parquet file ({type(err).__name__}: {first})"
            )
            entry["readable"] = False
        entry.update(examples=report.examples - n0, failed=report.failed_examples - f0)
        report.checked.append(entry)
        if progress:
            progress(f"checked {config}/{split} {Path(path).name}: {report.examples - n0} examples")
    return report


def validate_dir(
    out_dir: str | Path,
    w: int = 16,
    split_seeds: dict[str, int] | None = None,
    progress: Any = None,
    extra: Extra | None = None,
) -> Report:
    """Validate every data/{config}/{split}-*.parquet under a dataset directory."""
    root = Path(out_dir)
    files = []
    for path in sorted(root.glob("data/*/*.parquet")):
        split = path.name.split("-", 1)[0]
        files.append((path.parent.name, split, path))
    report = validate_files(files, w=w, split_seeds=split_seeds, progress=progress, extra=extra)
    vpath = root / "vocab.json"
    if vpath.exists():
        v = json.loads(vpath.read_text())
        want = {**TOK}
        want.update({f"k{i}": FIRST_KEY + i for i in range(N_KEYS)})
        want.update({f"v{i}": FIRST_VALUE + i for i in range(N_VALUES)})
        if v != want:
            report.errors.append("vocab.json differs from the card's vocabulary")
    else:
        report.errors.append("vocab.json missing")
    if not files:
        report.errors.append("no parquet files found")
    return report
