"""The passkey_swar generator: the vectorised path equals the plain one, the card's layout
and statistics hold."""

from __future__ import annotations

from arbench.tasks.passkey_swar import oracle as O
from arbench.tasks.passkey_swar.generator import (
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


def test_columns_and_dtypes(h) -> None:
    table = next(generate("train", 32, 5, P)).to_arrow()
    assert table.column_names == ["input_ids", "labels", "answer_type", "n_writes", "seed"]
    assert str(table.schema.field("input_ids").type) == "list<item: int16>"
    assert str(table.schema.field("labels").type) == "list<item: int16>"
    assert str(table.schema.field("seed").type) == "int64"
    ex = table.slice(0, 1).to_pylist()[0]
    n_q = sum(1 for _, op, _, _ in h.items(ex) if op == Q)
    assert ex["answer_type"][-4:] == ["passkey"] * 4 and len(ex["answer_type"]) == n_q + 4
    assert ex["labels"][-5:-1] == ex["input_ids"][2:6] == ex["input_ids"][-5:-1]


def test_splits_share_no_example(h) -> None:
    seqs = {s: {tuple(x["input_ids"]) for x in h.batch_examples(s, 32, 300)} for s in SPLIT_SEEDS}
    assert all(len(v) == 300 for v in seqs.values())
    assert not seqs["train"] & seqs["validation"]
    assert not seqs["train"] & seqs["test"]
    assert not seqs["validation"] & seqs["test"]


def test_no_gray_zone_query_and_answers(examples: list[dict], h) -> None:
    """Recompute ages here (a third implementation) for every query."""
    for ex in examples:
        state, t, last = 0, 0, {}
        for _m, op, k, a in h.items(ex):
            if op == W:
                t += 1
                last[k] = (t, a)
                continue
            state += 1
            age = t - last[k][0] + 1 if k in last else None
            assert age is None or age <= WIN or age > 2 * WIN
            assert a == (last[k][1] if age is not None and age <= WIN else NULL)
        assert t == ex["n_writes"]


def test_statistics_match_card(h) -> None:
    from arbench.tasks.passkey_swar.card import SplitStats

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


def test_standard_errors_match_a_per_example_recomputation() -> None:
    """Oracle: the accumulated standard errors equal a direct computation over examples
    (mean s/sqrt(n); a share's linearised ratio); corruption: a batch folded in twice shifts
    them, and the errors shrink as examples accumulate."""
    import math

    import numpy as np

    from arbench.tasks.passkey_swar.card import SplitStats

    batches = [
        O.check_table(b.to_arrow())[1] for b in generate("train", 64, 300, P, chunk_tokens=20_000)
    ]
    acc = SplitStats(WIN)
    for parsed in batches:
        acc.add(parsed)
    se = acc.summary()["standard_errors"]
    t = np.concatenate([p.lengths for p in batches]).astype(float)
    q = np.concatenate([np.bincount(p.q_row, minlength=p.n_examples) for p in batches])
    e = np.concatenate(
        [np.bincount(p.q_row, p.q_expected == O.TOK["NULL"], p.n_examples) for p in batches]
    )
    s = np.concatenate(
        [
            np.bincount(p.q_row, (p.q_expected == O.TOK["NULL"]) & (p.q_age > 0), p.n_examples)
            for p in batches
        ]
    )
    n = t.size
    assert math.isclose(se["mean_length"], np.std(t, ddof=1) / math.sqrt(n), rel_tol=1e-9)
    r = s.sum() / e.sum()
    direct = math.sqrt(((s - r * e) ** 2).sum() / (n * (n - 1))) / e.mean()
    assert math.isclose(se["stale_share_of_expired"], direct, rel_tol=1e-9)
    r = e.sum() / q.sum()
    direct = math.sqrt(((e - r * q) ** 2).sum() / (n * (n - 1))) / q.mean()
    assert math.isclose(se["expired"], direct, rel_tol=1e-9)
    assert se["valid"] > 0 and se["queries_per_example"] >= 0
    few = SplitStats(WIN)
    few.add(batches[0])
    assert few.summary()["standard_errors"]["mean_length"] > se["mean_length"]
    twice = SplitStats(WIN)
    for parsed in [*batches, batches[0]]:
        twice.add(parsed)
    assert (
        twice.summary()["standard_errors"]["stale_share_of_expired"] != se["stale_share_of_expired"]
    )
