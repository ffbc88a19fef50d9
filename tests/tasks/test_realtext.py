"""Real-text recall: mining on a synthetic corpus with a known successor table, the row
generator vs its independent oracle, corruption, determinism, floors and the adapter."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from arbench.tasks import IGNORE, build_task
from arbench.tasks.base import save_eval_set, stream_rng
from arbench.tasks.realtext import (
    RealTextConfig,
    draw_keys,
    floors,
    generate,
    heldout,
    mine,
    mined,
    oracle_check,
)

N_WORDS = 20


def _pair_counts() -> dict[tuple[int, int], int]:
    """The designed bigram counts between words w00..w19."""
    pairs: Counter = Counter()
    for i in range(N_WORDS):
        pairs[i, (i + 1) % N_WORDS] += 12 + i  # the main successor
        pairs[i, (i + 3) % N_WORDS] += 5  # a competitor
    pairs[5, 6] = 6  # a successor bigram below 10, above min_bigram (4): still a key
    pairs[7, 7] = 40  # its own successor: never a key
    pairs[9, 10], pairs[9, 12] = 3, 2  # below min_bigram: no successor at all
    pairs[11, 12], pairs[11, 14] = 15, 15  # a tie: the more frequent word wins
    return dict(pairs)


def _word(i: int) -> str:
    return f"w{i:02d}"


def _write_corpus(path: Path) -> list[str]:
    """Each designed bigram as ``a b`` followed by a unique out-of-vocabulary word (which
    breaks adjacency), in a shuffled order, some words capitalised; returns the text's words."""
    rng = np.random.default_rng(0)
    items = [pair for pair, c in _pair_counts().items() for _ in range(c)]
    words: list[str] = []
    for n, j in enumerate(rng.permutation(len(items))):
        a, b = items[j]
        words += [_word(a).upper() if n % 7 == 0 else _word(a), _word(b), f"oov{n}"]
    lines = [" ".join(words[i : i + 11]) for i in range(0, len(words), 11)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return words


def _expected(rank_lo: float, rank_hi: float, min_count: int = 10) -> dict:
    """The successor table and keys, derived from the designed counts by the stated rules."""
    pairs = _pair_counts()
    count = Counter()
    for (a, b), c in pairs.items():
        count[a] += c
        count[b] += c
    order = sorted(range(N_WORDS), key=lambda w: (-count[w], _word(w)))
    rank = {w: r for r, w in enumerate(order)}
    successor = {}
    for w in range(N_WORDS):
        options = [(c, -rank[b], b) for (a, b), c in pairs.items() if a == w]
        c, _, b = max(options)
        if c >= 4:
            successor[w] = (b, c)
    having = sorted(successor, key=rank.get)
    n = len(having)
    band = having[int(np.floor(rank_lo * n + 1e-9)) : int(np.floor(rank_hi * n + 1e-9))]
    # the protocol's filter: the successor word's own corpus count, not the bigram's
    keys = [w for w in band if successor[w][0] != w and count[successor[w][0]] >= min_count]
    return {"count": count, "rank": rank, "successor": successor, "keys": keys}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "synthetic.txt"
    _write_corpus(path)
    return path


def _cfg(corpus: Path, **kw) -> RealTextConfig:
    cfg = RealTextConfig(corpus=str(corpus), vocab_words=N_WORDS, **kw)
    cfg.validate()
    return cfg


def test_mining_recovers_the_designed_successor_table(corpus: Path) -> None:
    m = mine(corpus, vocab_words=N_WORDS)
    want = _expected(0.02, 0.95)
    ids = {w: want["rank"][w] for w in range(N_WORDS)}
    assert m.words == tuple(_word(w) for w in sorted(ids, key=ids.get))  # lowercased, by rank
    assert [int(m.counts[ids[w]]) for w in range(N_WORDS)] == [want["count"][w] for w in range(20)]
    for w in range(N_WORDS):
        if w in want["successor"]:
            b, c = want["successor"][w]
            assert (m.successor[ids[w]], m.successor_count[ids[w]]) == (ids[b], c)
        else:
            assert m.successor[ids[w]] == -1 and m.successor_count[ids[w]] == 0
    assert sorted(m.keys.tolist()) == m.keys.tolist() == sorted(ids[w] for w in want["keys"])
    assert m.successor[ids[11]] == min(ids[12], ids[14])  # the tie: the more frequent
    keys = {m.words[k] for k in m.keys}
    assert {"w07", "w09"}.isdisjoint(keys)  # self-successor, none
    assert len(m.sha256) == 64


def test_keys_filter_on_the_successor_words_own_count(corpus: Path) -> None:
    """min_successor_count filters the successor word's corpus count (the protocol's
    ``cnt[vocab[v]] >= 10``), never the successor bigram's."""
    want = _expected(0.02, 0.95)
    succ_counts = sorted({want["count"][want["successor"][w][0]] for w in want["keys"]})
    cut = succ_counts[len(succ_counts) // 2]  # a threshold between the successors' counts
    m = mine(corpus, vocab_words=N_WORDS, min_successor_count=cut)
    strict = _expected(0.02, 0.95, min_count=cut)
    assert 0 < len(strict["keys"]) < len(want["keys"])
    assert m.keys.tolist() == sorted(strict["rank"][w] for w in strict["keys"])


def test_rank_cutoffs(corpus: Path) -> None:
    m = mine(corpus, vocab_words=N_WORDS, rank_lo=0.1, rank_hi=0.9)
    want = _expected(0.1, 0.9)
    ranked = sorted(want["successor"], key=want["rank"].get)  # 19 words have a successor
    assert len(ranked) == 19
    band = ranked[1:17]  # floor(1.9) = 1, floor(17.1) = 17
    assert m.keys.tolist() == sorted(want["rank"][w] for w in want["keys"])
    assert set(want["keys"]) <= set(band) and ranked[0] not in want["keys"]
    default = mine(corpus, vocab_words=N_WORDS)  # 2%..95% of 19: ranks [0, 18)
    last = want["rank"][ranked[-1]]
    assert last not in default.keys.tolist() and len(default.keys) > len(m.keys)


def test_zipf_weights_and_sampling(corpus: Path) -> None:
    m = mine(corpus, vocab_words=N_WORDS, zipf_power=0.75)
    w = m.counts[m.keys] ** 0.75
    assert m.weights == pytest.approx(w / w.sum())
    n = 40000
    rng = np.random.default_rng(1)
    drawn = np.bincount(draw_keys(m.weights, n, 1, rng)[:, 0], minlength=len(m.keys)) / n
    assert drawn == pytest.approx(m.weights, abs=0.01)
    uniform = np.bincount(draw_keys(m.weights, n, 1, rng, zipf=False)[:, 0]) / n
    assert uniform == pytest.approx(np.full(len(m.keys), 1 / len(m.keys)), abs=0.01)
    rows = draw_keys(m.weights, 200, len(m.keys) - 1, rng)
    assert all(len(set(r)) == len(r) for r in rows.tolist())  # without replacement
    full = draw_keys(m.weights, 5, len(m.keys), rng)
    assert (np.sort(full, axis=1) == np.arange(len(m.keys))).all()


def test_filler_is_the_corpus_stream_in_contiguous_runs(corpus: Path) -> None:
    words = [w.lower() for w in corpus.read_text().split()]
    cfg = _cfg(corpus, pairs=6, filler=4, overwrite=0.5)
    m = mined(cfg)
    index = {w: i for i, w in enumerate(m.words)}
    assert m.filler.tolist() == [index[w] for w in words if w in index]
    windows = np.lib.stride_tricks.sliding_window_view(m.filler, cfg.filler)
    runs = {tuple(r) for r in windows.tolist()}
    b = generate(cfg, 16, stream_rng(0, 0))
    fill = b.tokens[:, : cfg.write_len].reshape(16, -1, cfg.block)[:, :, : cfg.filler]
    assert all(tuple(r) in runs for r in fill.reshape(-1, cfg.filler).tolist())
    # the protocol's passage: one running pointer through the stream, block after block,
    # shared by every row of the batch
    passage = fill[0].reshape(-1)
    assert (fill.reshape(16, -1) == passage).all()
    start = next(
        i for i in range(len(m.filler)) if np.array_equal(m.filler[i : i + len(passage)], passage)
    )
    assert start >= 0
    # another batch reads another passage (a random offset per batch)
    other = generate(cfg, 16, stream_rng(0, 1)).tokens[0, : cfg.write_len]
    assert not np.array_equal(other.reshape(-1, cfg.block)[:, : cfg.filler].reshape(-1), passage)


def test_held_out_keys_are_uniform_and_training_keys_zipf(corpus: Path) -> None:
    """Training draws keys with the Zipf weights, the held-out set uniformly (the protocol's
    scoring default), unless eval_zipf; the held-out set takes one passage per PASSAGE_ROWS."""
    from arbench.tasks.realtext import PASSAGE_ROWS

    cfg = _cfg(corpus, pairs=1, filler=2)
    m = mined(cfg)
    first = int(np.argmax(m.weights))
    n = 4000
    held = heldout(cfg, n)
    share = (held.tokens[:, cfg.filler] == m.keys[first]).mean()
    assert abs(share - 1 / len(m.keys)) < 0.02  # uniform
    train = generate(cfg, n, stream_rng(0, 0))
    assert abs((train.tokens[:, cfg.filler] == m.keys[first]).mean() - m.weights[first]) < 0.02
    zipf_held = heldout(_cfg(corpus, pairs=1, filler=2, eval_zipf=True), n)
    assert abs((zipf_held.tokens[:, cfg.filler] == m.keys[first]).mean() - m.weights[first]) < 0.02
    fill = held.tokens[:, : cfg.filler]
    assert (fill[:PASSAGE_ROWS] == fill[0]).all()
    assert len({tuple(r) for r in fill[::PASSAGE_ROWS].tolist()}) > 1
    assert oracle_check(held.tokens, held.targets, cfg) == []


CASES = [
    {"pairs": 6},
    {"pairs": 6, "filler": 3},
    {"pairs": 8, "overwrite": 0.5},
    {"pairs": 8, "overwrite": 0.25, "filler": 2, "queries": 5},
    {"pairs": 8, "overwrite": 0.5, "zipf": False, "queries": 99},
]


@pytest.mark.parametrize("case", CASES)
def test_oracle_accepts_generated(corpus: Path, case: dict) -> None:
    cfg = _cfg(corpus, **case)
    b = generate(cfg, 32, stream_rng(3, 7))
    assert b.tokens.shape == b.targets.shape == (32, cfg.length)
    assert oracle_check(b.tokens, b.targets, cfg) == []
    at = np.nonzero(b.targets != IGNORE)
    assert (b.tokens[at] < cfg.word_span).all()  # the answer is read at the query key
    assert (b.tokens[at[0], at[1] + 1] == cfg.sep_id).all()
    assert ((b.targets != IGNORE).sum(1) == cfg.n_queries).all()


def test_the_answer_can_be_read_at_sep(corpus: Path) -> None:
    """answer: sep moves every target one slot on, to the SEP after its query key; the oracle
    and the updated/untouched split follow it."""
    at_key = _cfg(corpus, pairs=8, overwrite=0.5, filler=2)
    at_sep = _cfg(corpus, pairs=8, overwrite=0.5, filler=2, answer="sep")
    a, b = generate(at_key, 16, stream_rng(1, 2)), generate(at_sep, 16, stream_rng(1, 2))
    assert (a.tokens == b.tokens).all()
    assert (np.roll(a.targets, 1, axis=1) == b.targets).all()
    assert (b.tokens[b.targets != IGNORE] == at_sep.sep_id).all()
    assert oracle_check(b.tokens, b.targets, at_sep) == []
    assert oracle_check(a.tokens, a.targets, at_sep) != []
    info = at_sep.query_info(b.tokens)
    assert (b.targets[np.arange(16)[:, None], info.answer_pos] != IGNORE).all()
    with pytest.raises(ValueError, match="task.answer must be one of"):
        _cfg(corpus, answer="mask")


def test_rows_hold_successors_and_last_write_wins(corpus: Path) -> None:
    cfg = _cfg(corpus, pairs=8, overwrite=0.5, filler=1)
    m = mined(cfg)
    P, M, f, B, VS = cfg.pairs, cfg.n_updates, cfg.filler, cfg.block, cfg.word_span
    b = generate(cfg, 32, stream_rng(0, 2))
    info = cfg.query_info(b.tokens)
    assert (info.updated.sum(1) == M).all()
    for r in range(len(b)):
        w = b.tokens[r, : cfg.write_len].reshape(P + M, B)
        keys, values = w[:, f], w[:, f + 1]
        assert (values[:P] == VS + m.successor[keys[:P]]).all()
        assert (values[P:] != VS + m.successor[keys[P:]]).all()  # the value always changes
        assert set(values[P:]) <= set(values[:P])  # another stored pair's successor
        latest = dict(zip(keys.tolist(), values.tolist(), strict=True))
        assert [latest[k] for k in info.key[r]] == b.targets[r, info.answer_pos[r]].tolist()


def test_streams_are_pure_functions_and_disjoint(corpus: Path) -> None:
    cfg = _cfg(corpus, pairs=6, overwrite=0.5, filler=2)
    a = generate(cfg, 8, stream_rng(1, 5))
    again = generate(cfg, 8, stream_rng(1, 5))
    assert (a.tokens == again.tokens).all() and (a.targets == again.targets).all()
    assert not (a.tokens == generate(cfg, 8, stream_rng(1, 6)).tokens).all()
    assert not (heldout(cfg, 8).tokens == generate(cfg, 8, stream_rng(0, 0)).tokens).all()


def _corrupt(kind: str, tok: np.ndarray, tgt: np.ndarray, cfg: RealTextConfig) -> None:
    P, f, B = cfg.pairs, cfg.filler, cfg.block
    info = cfg.query_info(tok[:1])
    at = info.answer_pos[0]

    def value(i: int) -> int:  # position of write block i's value
        return i * B + f + 1

    if kind == "flip_target":
        tgt[0, at[0]] = cfg.word_span + (tgt[0, at[0]] - cfg.word_span + 1) % cfg.vocab_words
    elif kind == "swap_values":
        i = next(i for i in range(1, P) if tok[0, value(i)] != tok[0, value(0)])
        tok[0, [value(0), value(i)]] = tok[0, [value(i), value(0)]]
    elif kind == "duplicate_key":
        tok[0, B + f] = tok[0, f]
    elif kind == "first_write_wins":
        q = np.flatnonzero(info.updated[0])[0]
        tgt[0, at[q]] = tok[0, value(int(info.store_index[0, q]))]
    elif kind == "update_with_own_successor":
        i = int(info.store_index[0, np.flatnonzero(info.updated[0])[0]])
        j = P + list(tok[0, P * B + f :: B][: cfg.n_updates]).index(tok[0, i * B + f])
        tok[0, value(j)] = tok[0, value(i)]
    elif kind == "reserved_filler":
        tok[0, 0] = cfg.word_span - 1
    elif kind == "filler_not_a_passage":  # two blocks' filler swapped: words, but no passage
        tok[0, [0, B]] = tok[0, [B, 0]]
    elif kind == "query_repeated":
        tok[0, at[1]] = tok[0, at[0]]
    elif kind == "sep_missing":
        tok[0, at[0] + 1] = 0
    elif kind == "missing_target":
        tgt[0, at[-1]] = IGNORE


@pytest.mark.parametrize(
    "kind",
    [
        "flip_target",
        "swap_values",
        "duplicate_key",
        "first_write_wins",
        "update_with_own_successor",
        "reserved_filler",
        "filler_not_a_passage",
        "query_repeated",
        "sep_missing",
        "missing_target",
    ],
)
def test_oracle_rejects_corruption(corpus: Path, kind: str) -> None:
    cfg = _cfg(corpus, pairs=8, overwrite=0.5, filler=2)
    b = generate(cfg, 4, stream_rng(0, 1))
    assert oracle_check(b.tokens, b.targets, cfg) == []
    _corrupt(kind, b.tokens, b.targets, cfg)
    problems = oracle_check(b.tokens, b.targets, cfg)
    assert problems and all(p.startswith("row 0") for p in problems)


def test_floors(corpus: Path) -> None:
    cfg = _cfg(corpus, pairs=8, overwrite=0.25)
    f = floors(cfg)
    assert f["value_marginal"] == pytest.approx(1 / N_WORDS)
    assert f["best_no_binding"] == pytest.approx((8 - 2 + 1) / 8)
    assert floors(_cfg(corpus, pairs=8))["best_no_binding"] == 1.0
    # the strategy: the corpus successor when untouched, an update-pass value otherwise
    m = mined(cfg)
    b = generate(cfg, 4000, stream_rng(0, 3))
    info = cfg.query_info(b.tokens)
    rows = np.arange(len(b))[:, None]
    truth = b.targets[rows, info.answer_pos]
    prior = cfg.word_span + m.successor[info.key]
    assert (truth[~info.updated] == prior[~info.updated]).all()
    upd = b.tokens[:, cfg.pairs * cfg.block + 1 :: cfg.block][:, : cfg.n_updates]
    guess = upd[rows, np.random.default_rng(0).integers(0, cfg.n_updates, info.key.shape)]
    hit = np.where(info.updated, guess == truth, prior == truth)
    assert hit.mean() >= f["best_no_binding"] - 0.01  # a lower bound: successors repeat


def test_mining_is_cached_per_corpus_and_settings(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    _write_corpus(path)
    cfg = _cfg(path, pairs=4)
    assert mined(cfg) is mined(cfg)
    assert mined(_cfg(path, pairs=4, zipf_power=0.5)) is not mined(cfg)
    before = mined(cfg)
    path.write_text(path.read_text() + " w00 w01\n")
    assert mined(cfg) is not before and mined(cfg).sha256 != before.sha256


@pytest.mark.parametrize(
    ("task", "needle"),
    [
        ({"corpus": ""}, "task.corpus"),
        ({"vocab_words": 40000}, "task.vocab_words"),
        ({"rank_lo": 0.5, "rank_hi": 0.4}, "task.rank_lo"),
        ({"pairs": 0}, "task.pairs"),
        ({"overwrite": 1.0}, "task.overwrite"),
        ({"filler": -1}, "task.filler"),
        ({"min_bigram": 0}, "task.min_bigram"),
        ({"corpuz": "x"}, "unknown key 'corpuz'"),
    ],
)
def test_bad_settings_name_the_key(corpus: Path, task: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle) as err:
        build_task({"name": "realtext", "corpus": str(corpus), **task})
    assert "\n" not in str(err.value)


def test_a_missing_corpus_plans_but_fails_at_first_read_naming_the_key(tmp_path: Path) -> None:
    """A config may name a corpus a rule has yet to build (rules/corpus.smk): the task builds,
    sizes its evaluation and names the file it needs from the settings alone, and reading a
    batch without the file is one line naming task.corpus."""
    missing = tmp_path / "not_yet.txt"
    task = build_task({"name": "realtext", "corpus": str(missing), "pairs": 8})
    assert task.input_files() == [str(missing)]
    assert task.eval_tokens(10) == 10 * task.cfg.length
    with pytest.raises(ValueError, match="task.corpus: cannot read") as err:
        task.train_batch(0, 0, 2)
    assert "\n" not in str(err.value)


def test_batches_mark_the_store_pass_keys(corpus: Path) -> None:
    cfg = _cfg(corpus, pairs=6, filler=3, overwrite=0.5)
    batch = generate(cfg, 4, np.random.default_rng(0))
    assert batch.key_positions.shape == (4, 6)
    assert (batch.key_positions == np.arange(6) * cfg.block + 3).all()
    rows = np.arange(4)[:, None]
    stored = batch.tokens[rows, batch.key_positions]
    assert (stored == batch.tokens[:, 3 : cfg.pairs * cfg.block : cfg.block]).all()


def test_too_many_pairs_names_the_key(corpus: Path) -> None:
    task = build_task({"name": "realtext", "corpus": str(corpus), "vocab_words": N_WORDS})
    with pytest.raises(ValueError, match=r"task.pairs=64 exceeds the \d+ keys mined"):
        task.train_batch(0, 0, 2)


def test_adapter_scores_updated_and_untouched(corpus: Path, tmp_path: Path, monkeypatch) -> None:
    settings = {
        "name": "realtext",
        "corpus": str(corpus),
        "vocab_words": N_WORDS,
        "pairs": 8,
        "overwrite": 0.25,
        "filler": 2,
    }
    task = build_task(settings, tmp_path)
    assert task.vocab_size == 2 * (N_WORDS + 1) + 2
    held = task.eval_set(6)
    save_eval_set(held, tmp_path / "eval.npz")
    assert task.oracle(task.held_out()) == [] and task.oracle(task.train_batch(0, 1, 3)) == []
    info = task.cfg.query_info(held.tokens)

    def right_when_untouched(model, tokens, targets, batch=256):
        pred = np.full(targets.shape, -1)
        rows, pos = np.arange(len(tokens))[:, None], info.answer_pos
        pred[rows, pos] = np.where(info.updated, -1, targets[rows, pos])
        return pred

    monkeypatch.setattr("arbench.evaluate.recall.predict", right_when_untouched)
    scores = task.evaluate(object())
    assert scores["accuracy_untouched"] == 1.0 and scores["accuracy_updated"] == 0.0
    assert scores["accuracy"] == pytest.approx(6 / 8) and scores["updated_queries"] == 12
    assert "synthetic.txt" in task.summary()


def test_corpus_tool_turns_the_bible_dump_into_one_verse_per_line() -> None:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "tools" / "corpus.py"
    spec = importlib.util.spec_from_file_location("corpus_tool", path)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    dump = (
        "\nGenesis 1\n\n  1 In the beginning God created the heaven and the earth.\n"
        "  2 And the earth was without form, and void; and darkness was upon the face of\n"
        "the deep 2\n\n1 Kings 3\n\n  1 And Solomon (the king) said: Amen!\n"
    )
    verses = [tool.clean(v) for v in tool.verses(dump)]
    assert verses == [
        "In the beginning God created the heaven and the earth .",
        "And the earth was without form , and void ; and darkness was upon the face of the deep 2",
        "And Solomon ( the king ) said : Amen !",
    ]
