"""passkey_swar: passkey retention plus sliding-window associative recall (generator).

One sequence is ``BOS PK p1..p4 <stream> PKQ p1..p4 EOS``. The stream holds N writes
``W k v``; after each write a geometric number of queries ``Q k a`` follows (continue with
probability q/(1+q), so N*q queries on average). A query asks a *valid* key (age <= w, the
answer is the latest value) or an *expired* key (never written, or age > 2w; the answer is
NULL). Keys with w < age <= 2w (gray zone) are never queried. Age counts writes since the
key's latest write; the write just before a query has age 1.

Randomness: every draw is a counter-based hash of (example seed, step, purpose, sub-index)
(SplitMix64 finaliser), so the scalar `make_example` and the vectorised `generate` consume
identical numbers and agree bit for bit; no global RNG is touched. Per-example seed is
``split_seed * 10**12 + N * 10**6 + index``.

Choices the card leaves open (recorded in docs/passkey_swar.md too):

* Active-set size is drawn once per example, uniform on active_min..active_max, and stays
  fixed; the initial members are a uniform random subset of the keys.
* Each write draws its key uniformly from the active set and its value uniformly from all
  values. After the write's queries, with probability drift_rate one uniformly chosen active
  key is swapped for one uniformly chosen inactive key.
* A query is valid with probability valid_frac. A valid query asks a key drawn uniformly
  among keys with age <= w (never empty: the key just written has age 1). An expired query
  asks a key drawn uniformly among the union of never-written and stale (age > 2w) keys, so
  the stale share grows with N as keys get written and go idle. If that union is empty (all
  keys written within the last 2w writes) the query falls back to a valid query.
* Queries only follow writes (none before the first write); the passkey is 4 values drawn
  uniformly with replacement.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from arbench.tasks.base import IGNORE

PASSKEY_LEN = 4
PAD, BOS, EOS, PK, PKQ, W, Q, NULL = range(8)
KEY0 = 8
SPLIT_SEEDS: dict[str, int] = {"train": 1, "validation": 2, "test": 3}
ANSWER_TYPES = ("ar_valid", "ar_expired", "passkey")

# draw purposes: each random decision has its own counter lane
_P_PASSKEY, _P_ASIZE, _P_APERM, _P_WKEY, _P_WVAL = 0, 1, 2, 3, 4
_P_DCOIN, _P_DOUT, _P_DIN, _P_QCOIN, _P_QTYPE, _P_QKEY = 5, 6, 7, 8, 9, 10

_M64 = (1 << 64) - 1
_GAMMA, _C1, _C2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB
_ONE53 = 1 << 53


@dataclass(frozen=True)
class Params:
    """Generation knobs, defaults from the dataset card."""

    w: int = 16
    n_keys: int = 16
    n_values: int = 16
    query_rate: float = 0.25
    valid_frac: float = 0.5
    drift_rate: float = 0.1
    active_min: int = 6
    active_max: int = 8

    def validate(self) -> None:
        """Reject settings the generator cannot honour."""
        if not 1 <= self.active_min <= self.active_max < self.n_keys:
            raise ValueError("need 1 <= active_min <= active_max < n_keys")
        if self.w < 1 or self.n_values < 2 or self.query_rate < 0:
            raise ValueError("need w >= 1, n_values >= 2, query_rate >= 0")
        if not (0 <= self.valid_frac <= 1 and 0 <= self.drift_rate <= 1):
            raise ValueError("valid_frac and drift_rate must lie in [0, 1]")

    @property
    def value0(self) -> int:
        return KEY0 + self.n_keys

    @property
    def vocab_size(self) -> int:
        return KEY0 + self.n_keys + self.n_values

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Params:
        p = cls(**d)
        p.validate()
        return p

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def vocab(params: Params | None = None) -> dict[str, int]:
    """Token name -> id (40 tokens with the card's defaults)."""
    p = params or Params()
    names = ["PAD", "BOS", "EOS", "PK", "PKQ", "W", "Q", "NULL"]
    v = {n: i for i, n in enumerate(names)}
    v.update({f"k{i}": KEY0 + i for i in range(p.n_keys)})
    v.update({f"v{i}": p.value0 + i for i in range(p.n_values)})
    return v


def example_seed(split_seed: int, N: int, index: int) -> int:
    """Per-example seed split_seed*10^12 + N*10^6 + index (index, N < 10^6)."""
    if not (0 <= index < 10**6 and 0 < N < 10**6):
        raise ValueError("index and N must lie in [0, 10^6)")
    return split_seed * 10**12 + N * 10**6 + index


def _thr(p: float) -> int:
    """Bernoulli(p) threshold on a 53-bit uniform integer."""
    return int(round(p * _ONE53))


# --------------------------------------------------------------------------- scalar path


def _mix(z: int) -> int:
    """SplitMix64 step on a Python int (the scalar reference of `_mix_np`)."""
    z = (z + _GAMMA) & _M64
    z = ((z ^ (z >> 30)) * _C1) & _M64
    z = ((z ^ (z >> 27)) * _C2) & _M64
    return z ^ (z >> 31)


def _counter(step: int, purpose: int, sub: int = 0) -> int:
    return _mix((step << 24) | (purpose << 16) | sub)


def _u53(sk: int, step: int, purpose: int, sub: int = 0) -> int:
    """53-bit uniform integer for one (example, step, purpose, sub) draw."""
    return _mix(sk ^ _counter(step, purpose, sub)) >> 11


def make_example(seed: int, N: int, params: Params | None = None) -> dict[str, Any]:
    """Build one example from its seed with a plain Python loop (reference for `generate`)."""
    p = params or Params()
    sk = _mix(seed & _M64)
    u = lambda step, purpose, sub=0: _u53(sk, step, purpose, sub)
    pick = lambda r, n: (r * n) >> 53
    v0 = p.value0
    passkey = [v0 + pick(u(0, _P_PASSKEY, i), p.n_values) for i in range(PASSKEY_LEN)]
    size = p.active_min + pick(u(0, _P_ASIZE), p.active_max - p.active_min + 1)
    order = sorted(range(p.n_keys), key=lambda k: (u(0, _P_APERM, k), k))
    active = sorted(order[:size])
    last = [0] * p.n_keys  # write index (1-based) of each key's latest write, 0 = never
    value = [0] * p.n_keys
    q_thr, valid_thr, drift_thr = (
        _thr(p.query_rate / (1 + p.query_rate)),
        _thr(p.valid_frac),
        _thr(p.drift_rate),
    )
    ids = [BOS, PK, *passkey]
    labels = [IGNORE] * len(ids)
    types: list[str] = []
    for t in range(1, N + 1):
        k = active[pick(u(t, _P_WKEY), len(active))]
        v = pick(u(t, _P_WVAL), p.n_values)
        last[k], value[k] = t, v
        ids += [W, KEY0 + k, v0 + v]
        labels += [IGNORE] * 3
        j = 0
        while u(t, _P_QCOIN, j) < q_thr:
            ages = [t - last[x] + 1 if last[x] else None for x in range(p.n_keys)]
            valid = [x for x in range(p.n_keys) if ages[x] is not None and ages[x] <= p.w]
            expired = [x for x in range(p.n_keys) if ages[x] is None or ages[x] > 2 * p.w]
            want_valid = u(t, _P_QTYPE, j) < valid_thr or not expired
            cand = valid if want_valid else expired
            qk = cand[pick(u(t, _P_QKEY, j), len(cand))]
            ans = v0 + value[qk] if want_valid else NULL
            ids += [Q, KEY0 + qk, ans]
            labels += [IGNORE, IGNORE, ans]
            types.append("ar_valid" if want_valid else "ar_expired")
            j += 1
        if u(t, _P_DCOIN) < drift_thr:
            inactive = [x for x in range(p.n_keys) if x not in active]
            out = active[pick(u(t, _P_DOUT), len(active))]
            inn = inactive[pick(u(t, _P_DIN), len(inactive))]
            active = sorted([x for x in active if x != out] + [inn])
    ids += [PKQ, *passkey, EOS]
    labels += [IGNORE, *passkey, IGNORE]
    types += ["passkey"] * PASSKEY_LEN
    return {
        "input_ids": ids,
        "labels": labels,
        "answer_type": types,
        "n_writes": N,
        "seed": seed,
    }


# --------------------------------------------------------------------------- vectorised path


def _mix_np(z: np.ndarray) -> np.ndarray:
    """SplitMix64 step on a uint64 array (wrapping arithmetic)."""
    z = z + np.uint64(_GAMMA)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(_C1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_C2)
    return z ^ (z >> np.uint64(31))


def _pick_np(r: np.ndarray, n: np.ndarray | int) -> np.ndarray:
    """Uniform index in [0, n) from 53-bit integers, exactly as the scalar path."""
    return ((r * np.asarray(n, dtype=np.uint64)) >> np.uint64(53)).astype(np.int64)


def _nth_true(mask: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Column of the idx-th (0-based) True in each row of a boolean matrix."""
    return (np.cumsum(mask, axis=1) <= idx[:, None]).sum(axis=1)


@dataclass
class Examples:
    """Generated examples as flat arrays plus offsets (the layout of an Arrow list column);
    the release writes them as one Arrow table per chunk."""

    input_ids: np.ndarray  # int16, all tokens back to back
    offsets: np.ndarray  # int64, n+1 token offsets (labels share them)
    labels: np.ndarray  # int16, aligned with input_ids
    type_codes: np.ndarray  # int8 codes into ANSWER_TYPES
    type_offsets: np.ndarray  # int64, n+1
    n_writes: np.ndarray  # int32
    seed: np.ndarray  # int64
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.seed)

    def example(self, i: int) -> dict[str, Any]:
        """Example i as a dict of Python lists (same shape as `make_example`)."""
        a, b = self.offsets[i], self.offsets[i + 1]
        c, d = self.type_offsets[i], self.type_offsets[i + 1]
        return {
            "input_ids": self.input_ids[a:b].tolist(),
            "labels": self.labels[a:b].tolist(),
            "answer_type": [ANSWER_TYPES[x] for x in self.type_codes[c:d]],
            "n_writes": int(self.n_writes[i]),
            "seed": int(self.seed[i]),
        }

    def to_arrow(self) -> Any:
        """A pyarrow Table with the card's columns (int16 list columns)."""
        import pyarrow as pa

        off = pa.array(self.offsets.astype(np.int32))
        toff = pa.array(self.type_offsets.astype(np.int32))
        names = pa.array(list(ANSWER_TYPES), pa.string())
        types = pa.DictionaryArray.from_arrays(pa.array(self.type_codes), names).cast(pa.string())
        return pa.table(
            {
                "input_ids": pa.ListArray.from_arrays(off, pa.array(self.input_ids)),
                "labels": pa.ListArray.from_arrays(off, pa.array(self.labels)),
                "answer_type": pa.ListArray.from_arrays(toff, types),
                "n_writes": pa.array(self.n_writes.astype(np.int32)),
                "seed": pa.array(self.seed.astype(np.int64)),
            }
        )


def generate_seeds(seeds: np.ndarray, N: int, params: Params | None = None) -> Examples:
    """Build the examples for an array of seeds at once (loop over writes, vectorised over rows)."""
    p = params or Params()
    seeds = np.asarray(seeds, dtype=np.int64)
    n, K = len(seeds), p.n_keys
    rows = np.arange(n)
    sk = _mix_np(seeds.astype(np.uint64))

    def u(step: int, purpose: int, sub: int = 0, at: np.ndarray | None = None) -> np.ndarray:
        key = sk if at is None else sk[at]
        return _mix_np(key ^ np.uint64(_counter(step, purpose, sub))) >> np.uint64(11)

    v0 = p.value0
    passkey = np.stack([_pick_np(u(0, _P_PASSKEY, i), p.n_values) for i in range(PASSKEY_LEN)], 1)
    size = p.active_min + _pick_np(u(0, _P_ASIZE), p.active_max - p.active_min + 1)
    perm_r = np.stack([u(0, _P_APERM, k) for k in range(K)], 1)
    rank = np.argsort(np.argsort(perm_r, axis=1, kind="stable"), axis=1, kind="stable")
    active = rank < size[:, None]
    last = np.zeros((n, K), dtype=np.int64)
    value = np.zeros((n, K), dtype=np.int64)
    wkey = np.zeros((n, N), dtype=np.int8)
    wval = np.zeros((n, N), dtype=np.int8)
    qcount = np.zeros((n, N), dtype=np.int32)
    q_rows, q_t, q_j, q_key, q_ans, q_valid = [], [], [], [], [], []
    q_thr, valid_thr = (
        np.uint64(_thr(p.query_rate / (1 + p.query_rate))),
        np.uint64(_thr(p.valid_frac)),
    )
    drift_thr = np.uint64(_thr(p.drift_rate))
    block = max(1, 1_000_000 // max(n, 1))  # steps whose state-free draws are hashed at once
    for t in range(1, N + 1):
        b = (t - 1) % block
        if b == 0:  # draws that do not depend on the state, for the next `block` writes
            ts = range(t, min(t + block, N + 1))
            r_key, r_val, r_q0, r_drift = (
                _mix_np(sk[:, None] ^ np.array([_counter(x, pur) for x in ts], np.uint64))
                >> np.uint64(11)
                for pur in (_P_WKEY, _P_WVAL, _P_QCOIN, _P_DCOIN)
            )
            r_key = _pick_np(r_key, size[:, None])
            r_val = _pick_np(r_val, p.n_values)
            r_q0, r_drift = r_q0 < q_thr, r_drift < drift_thr
        k = _nth_true(active, r_key[:, b])
        v = r_val[:, b]
        last[rows, k], value[rows, k] = t, v
        wkey[:, t - 1], wval[:, t - 1] = k, v
        alive = np.flatnonzero(r_q0[:, b])
        if alive.size:
            age = t - last[alive] + 1
            valid_m = (last[alive] > 0) & (age <= p.w)
            exp_m = (last[alive] == 0) | (age > 2 * p.w)
            has_exp = exp_m.any(1)
            idx = np.arange(alive.size)  # rows of `alive` still asking
            j = 0
            while idx.size:
                at = alive[idx]
                want_valid = (u(t, _P_QTYPE, j, at) < valid_thr) | ~has_exp[idx]
                cand = np.where(want_valid[:, None], valid_m[idx], exp_m[idx])
                qk = _nth_true(cand, _pick_np(u(t, _P_QKEY, j, at), cand.sum(1)))
                q_rows.append(at)
                q_t.append(np.full(at.size, t))
                q_j.append(np.full(at.size, j))
                q_key.append(qk)
                q_ans.append(np.where(want_valid, v0 + value[at, qk], NULL))
                q_valid.append(want_valid)
                qcount[at, t - 1] += 1
                j += 1
                idx = idx[u(t, _P_QCOIN, j, at) < q_thr]
        drift = np.flatnonzero(r_drift[:, b])
        if drift.size:
            act = active[drift]
            out = _nth_true(act, _pick_np(u(t, _P_DOUT, 0, drift), act.sum(1)))
            inn = _nth_true(~act, _pick_np(u(t, _P_DIN, 0, drift), (~act).sum(1)))
            active[drift, out] = False
            active[drift, inn] = True

    cat = lambda xs: np.concatenate(xs) if xs else np.zeros(0, dtype=np.int64)
    q_rows, q_t, q_j = cat(q_rows), cat(q_t), cat(q_j)
    q_key, q_ans, q_valid = cat(q_key), cat(q_ans), cat(q_valid).astype(bool)
    nq = qcount.sum(1, dtype=np.int64)
    lengths = 2 * (2 + PASSKEY_LEN) + 3 * N + 3 * nq
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    before = np.cumsum(qcount, axis=1, dtype=np.int32) - qcount  # queries before write t
    ids = np.full(offsets[-1], PAD, dtype=np.int16)
    labels = np.full(offsets[-1], IGNORE, dtype=np.int16)
    start = offsets[:-1]
    head = start[:, None] + np.arange(2 + PASSKEY_LEN)
    ids[head] = np.concatenate([np.full((n, 2), [BOS, PK]), v0 + passkey], axis=1)
    wpos = start[:, None] + 2 + PASSKEY_LEN + 3 * np.arange(N) + 3 * before
    ids[wpos], ids[wpos + 1], ids[wpos + 2] = W, KEY0 + wkey, v0 + wval
    qpos = start[q_rows] + 2 + PASSKEY_LEN + 3 * q_t + 3 * before[q_rows, q_t - 1] + 3 * q_j
    ids[qpos], ids[qpos + 1], ids[qpos + 2] = Q, KEY0 + q_key, q_ans
    labels[qpos + 2] = q_ans
    tail = offsets[1:, None] - (2 + PASSKEY_LEN) + np.arange(2 + PASSKEY_LEN)
    ids[tail] = np.concatenate([np.full((n, 1), PKQ), v0 + passkey, np.full((n, 1), EOS)], 1)
    labels[tail[:, 1:-1]] = v0 + passkey

    type_offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(nq + PASSKEY_LEN, out=type_offsets[1:])
    codes = np.full(type_offsets[-1], 2, dtype=np.int8)
    order = np.argsort(qpos, kind="stable")  # queries in sequence order
    r_sorted = q_rows[order]
    qstart = np.cumsum(nq) - nq
    rank_in_row = np.arange(order.size) - qstart[r_sorted]
    codes[type_offsets[r_sorted] + rank_in_row] = np.where(q_valid[order], 0, 1)
    return Examples(
        input_ids=ids,
        offsets=offsets,
        labels=labels,
        type_codes=codes,
        type_offsets=type_offsets,
        n_writes=np.full(n, N, dtype=np.int32),
        seed=seeds,
    )


def generate(
    split: str,
    N: int,
    n_examples: int,
    params: Params | None = None,
    *,
    split_seeds: dict[str, int] | None = None,
    start: int = 0,
    chunk_tokens: int = 32_000_000,
) -> Iterator[Examples]:
    """Yield Examples covering examples start..start+n_examples-1 of one config/split.

    Chunks hold about ``chunk_tokens`` tokens so memory stays bounded at any N.
    """
    p = params or Params()
    p.validate()
    split_seed = (split_seeds or SPLIT_SEEDS)[split]
    per_chunk = max(1, chunk_tokens // int(12 + 3 * N * (1 + p.query_rate)))
    for a in range(start, start + n_examples, per_chunk):
        b = min(a + per_chunk, start + n_examples)
        seeds = np.array([example_seed(split_seed, N, i) for i in range(a, b)], dtype=np.int64)
        yield generate_seeds(seeds, N, p)
