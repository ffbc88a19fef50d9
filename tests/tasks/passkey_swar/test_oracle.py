"""The independent passkey_swar oracle: it accepts what the generator writes and flags every
kind of corruption."""

from __future__ import annotations

import copy

import pytest

from arbench.tasks.passkey_swar import oracle as O
from arbench.tasks.passkey_swar.generator import (
    NULL,
    Params,
    Q,
    generate,
)

P = Params()
WIN = P.w


def test_oracle_agrees_with_generator(examples: list[dict]) -> None:
    assert O.check_examples(examples) == [[] for _ in examples]
    assert all(O.check_example(ex) == [] for ex in examples)
    for N in (32, 256, 1024):
        reasons, parsed = O.check_table(next(generate("test", N, 20, P)).to_arrow(), split_seed=3)
        assert reasons == [[] for _ in range(20)]
        assert not ((parsed.q_age > WIN) & (parsed.q_age <= 2 * WIN)).any()


def test_corruption_wrong_value(examples: list[dict], h) -> None:
    ex, (m, r, _k, a) = h.find(examples, lambda q: q[3] != NULL)
    other = P.value0 + (a - P.value0 + 1) % P.n_values
    h.set_answer(ex, m, r, other)
    vec, brute = h.caught(ex)
    assert "wrong answer value" in vec and brute


def test_corruption_null_where_value_due(examples: list[dict], h) -> None:
    ex, (m, r, _k, _a) = h.find(examples, lambda q: q[3] != NULL)
    h.set_answer(ex, m, r, NULL, "ar_expired")
    vec, brute = h.caught(ex)
    assert "NULL given where a value is due" in vec and brute


def test_corruption_value_where_null_due(examples: list[dict], h) -> None:
    stale = lambda q: q[3] == NULL
    ex, (m, r, _k, _a) = h.find(examples, stale)
    h.set_answer(ex, m, r, P.value0 + 3, "ar_valid")
    vec, brute = h.caught(ex)
    assert "value given where NULL is due" in vec and brute


def test_corruption_gray_zone_query(examples: list[dict], h) -> None:
    """Insert a well-formed query (latest value as answer) on a key aged w < age <= 2w."""
    for ex in examples:
        for pos, t, last in h.ages_after_each_write(ex):
            gray = [k for k, (s, _v) in last.items() if WIN < t - s + 1 <= 2 * WIN]
            if gray:
                k = gray[0]
                ex = copy.deepcopy(ex)
                rank = sum(1 for q in h.queries(ex) if q[0] < pos)
                ex["input_ids"][pos:pos] = [Q, k, last[k][1]]
                ex["labels"][pos:pos] = [-100, -100, last[k][1]]
                ex["answer_type"].insert(rank, "ar_valid")
                vec, brute = h.caught(ex)
                assert vec[0] == "query on a gray-zone key", vec
                assert "gray zone" in brute
                return
    raise AssertionError("no gray-zone key found")


def test_corruption_passkey(examples: list[dict], h) -> None:
    ex = copy.deepcopy(examples[0])
    ex["labels"][-3] = P.value0 + (ex["labels"][-3] - P.value0 + 5) % P.n_values
    vec, brute = h.caught(ex)
    assert vec == ["labels disagree with the oracle"] and brute
    ex = copy.deepcopy(examples[1])
    ex["labels"][-4] = -100  # passkey label dropped
    assert h.caught(ex)[0] == ["labels disagree with the oracle"]
    ex = copy.deepcopy(examples[2])
    new = P.value0 + (ex["input_ids"][-2] - P.value0 + 1) % P.n_values
    ex["input_ids"][-2] = ex["labels"][-2] = new  # recalled passkey altered consistently
    vec, brute = h.caught(ex)
    assert "recalled passkey differs from passkey" in vec and brute


def test_corruption_labels_and_types(examples: list[dict], h) -> None:
    ex = copy.deepcopy(examples[3])
    ex["labels"][7] = ex["input_ids"][7]  # supervising a write's key
    assert h.caught(ex)[0] == ["labels disagree with the oracle"]
    ex = copy.deepcopy(examples[4])
    ex["answer_type"][0] = "ar_expired" if ex["answer_type"][0] == "ar_valid" else "ar_valid"
    assert h.caught(ex)[0] == ["answer_type disagrees"]
    ex = copy.deepcopy(examples[5])
    ex["answer_type"].pop(0)
    assert h.caught(ex)[0] == ["answer_type length differs from queries + 4"]


@pytest.mark.parametrize(
    "damage",
    ["drop_token", "bos", "eos", "op", "key_range", "n_writes", "label_len", "seed", "lead_query"],
)
def test_corruption_structure(examples: list[dict], damage: str, h) -> None:
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
    vec, brute = h.caught(ex)
    assert vec, damage
    if damage not in ("seed",):
        assert brute, damage


def test_every_corrupted_row_is_flagged_in_a_batch(examples: list[dict], h) -> None:
    """Corrupt every second example of a batch; exactly those rows are reported."""
    batch = copy.deepcopy(examples[:40])
    for ex in batch[::2]:
        qs = [q for q in h.queries(ex) if q[3] != NULL]
        m, r, _k, _a = qs[len(qs) // 2]
        h.set_answer(ex, m, r, NULL, "ar_expired")
    reasons = O.check_examples(batch)
    assert [bool(x) for x in reasons] == [i % 2 == 0 for i in range(40)]
