"""Shared by the passkey_swar tests: a bag of clean examples and helpers that read and
damage them."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest

from arbench.tasks.passkey_swar import oracle as O
from arbench.tasks.passkey_swar.generator import Params, Q, W, generate

P = Params()
WIN = P.w


def _batch_examples(split: str, N: int, n: int) -> list[dict]:
    return [b.example(i) for b in generate(split, N, n, P) for i in range(len(b))]


def _examples() -> list[dict]:
    """A mixed bag of clean examples over short and long configs."""
    out = []
    for N, n in ((32, 60), (64, 60), (128, 30), (512, 6)):
        out += _batch_examples("validation", N, n)
    return out


def _items(ex: dict) -> list[tuple[int, int, int, int]]:
    """(position, op, key, arg) of every stream item."""
    ids = ex["input_ids"]
    return [(m, *ids[m : m + 3]) for m in range(6, len(ids) - 6, 3)]


def _ages_after_each_write(ex: dict) -> list[tuple[int, int, dict[int, tuple[int, int]]]]:
    """After each write: (position after its triple, writes so far, key -> (last write, value))."""
    last: dict[int, tuple[int, int]] = {}
    out, t = [], 0
    for m, op, k, a in _items(ex):
        if op == W:
            t += 1
            last[k] = (t, a)
            out.append((m + 3, t, dict(last)))
    return out


def _queries(ex: dict) -> list[tuple[int, int, int, int]]:
    """(position, rank among queries, key, answer) of each query."""
    qs = [(m, k, a) for m, op, k, a in _items(ex) if op == Q]
    return [(m, r, k, a) for r, (m, k, a) in enumerate(qs)]


def _caught(ex: dict) -> tuple[list[str], list[str]]:
    return O.check_examples([ex])[0], O.check_example(ex)


def _find(examples: list[dict], pred) -> tuple[dict, tuple]:
    for ex in examples:
        for q in _queries(ex):
            if pred(q):
                return copy.deepcopy(ex), q
    raise AssertionError("no suitable query")


def _set_answer(ex: dict, pos: int, rank: int, token: int, typ: str | None = None) -> None:
    ex["input_ids"][pos + 2] = token
    ex["labels"][pos + 2] = token
    if typ:
        ex["answer_type"][rank] = typ


@pytest.fixture(scope="session")
def examples() -> list[dict]:
    """A mixed bag of clean examples over short and long configs."""
    return _examples()


@pytest.fixture(scope="session")
def h() -> SimpleNamespace:
    """The helpers, for tests: h.queries(ex), h.find(examples, pred), h.set_answer(...)."""
    return SimpleNamespace(
        P=P,
        batch_examples=_batch_examples,
        items=_items,
        ages_after_each_write=_ages_after_each_write,
        queries=_queries,
        caught=_caught,
        find=_find,
        set_answer=_set_answer,
    )
