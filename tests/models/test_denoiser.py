"""The denoiser family: parameter count from its parts, the merge starting as the average,
bidirectional vs causal, the constant timestep offset, the tied head, seeded builds, the
task's positions filling max_len, one-line errors and the record round trip; the full
direction and the adaLN-Zero block of the paper's attention control (its equations against
the paper's model: tests/models/test_paper_attention.py)."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, replace

import pytest
import torch

from arbench.cells import build_cell, count_parameters
from arbench.models import families
from arbench.models.denoiser import Denoiser, DenoiserConfig, timestep_features

D, V, L = 32, 64, 72
BASE = dict(vocab_size=V, max_len=L, d_model=D, layers=1, cell="delta_rule")


def _cfg(**kw) -> DenoiserConfig:
    return DenoiserConfig(**{**BASE, **kw})


def _tokens(b: int = 2, t: int = 20, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, V, (b, t), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    ("direction", "merge"),
    [("bidirectional", "static"), ("bidirectional", "average"), ("forward", "static")],
)
def test_parameter_count_from_the_parts(direction: str, merge: str) -> None:
    model = families.build(_cfg(direction=direction, merge=merge), 0)
    cell = count_parameters(build_cell("delta_rule", D))
    embeddings = V * D + L * D
    time = D * D + D
    norms = 3 * 2 * D  # two in the block, the final one; weight and bias each
    ffn = (D * 4 * D + 4 * D) + (4 * D * D + D)
    cells = (2 if direction == "bidirectional" else 1) * cell
    merge_params = 2 * D * D + D if (direction, merge) == ("bidirectional", "static") else 0
    assert model.n_parameters() == embeddings + time + norms + ffn + cells + merge_params


def test_the_static_merge_starts_as_the_exact_average() -> None:
    static = families.build(_cfg(merge="static"), 1)
    average = families.build(_cfg(merge="average"), 2)
    missing, unexpected = average.load_state_dict(static.state_dict(), strict=False)
    assert missing == [] and set(unexpected) == {"blocks.0.mixer.merge.weight",
                                                 "blocks.0.mixer.merge.bias"}  # fmt: skip
    w = static.blocks[0].mixer.merge.weight
    assert torch.equal(w, torch.cat([0.5 * torch.eye(D)] * 2, dim=1))
    assert torch.equal(static.blocks[0].mixer.merge.bias, torch.zeros(D))
    tok = _tokens()
    with torch.no_grad():
        a, _ = static.hidden(tok)
        b, _ = average.hidden(tok)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("direction", ["bidirectional", "forward"])
def test_later_tokens_reach_earlier_positions_only_when_bidirectional(direction: str) -> None:
    model = families.build(_cfg(direction=direction), 0).eval()
    tok = _tokens(t=16)
    changed = tok.clone()
    changed[:, 12] = (changed[:, 12] + 1) % V
    with torch.no_grad():
        a, _ = model.hidden(tok)
        b, _ = model.hidden(changed)
    early = (a[:, :12] - b[:, :12]).abs().max().item()
    if direction == "bidirectional":
        assert early > 1e-4
    else:
        assert early == 0.0
    assert (a[:, 12] - b[:, 12]).abs().max().item() > 1e-4  # the changed position itself


def test_a_forward_denoiser_streams_and_a_bidirectional_one_refuses() -> None:
    fwd = families.build(_cfg(direction="forward"), 0).eval()
    tok = _tokens(t=23)
    with torch.no_grad():
        whole, _ = fwd(tok)
        first, state = fwd(tok[:, :10])
        rest, state = fwd(tok[:, 10:], state)
    assert state["offset"] == 23
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, rtol=1e-5, atol=1e-6)
    bi = families.build(_cfg(), 0)
    h, state = bi.hidden(tok[:, :10])
    assert state is None
    with pytest.raises(ValueError, match="bidirectional denoiser cannot stream"):
        bi.hidden(tok[:, 10:], {"offset": 10, "layers": [None]})
    with pytest.raises(ValueError, match="model.max_len is 72"):
        bi.hidden(_tokens(t=L + 1))


def test_the_timestep_is_one_learned_offset_at_every_position_and_sequence() -> None:
    model = families.build(_cfg(), 0)
    tok = _tokens(b=3, t=30)
    with torch.no_grad():
        x = model.inputs(tok)
        rest = x - model.embed(tok) - model.pos_embed(torch.arange(30))
    offset = model.time_offset()
    assert offset.shape == (D,) and offset.abs().max() > 0
    torch.testing.assert_close(rest, offset.detach().expand(3, 30, D), rtol=0, atol=1e-6)
    feats = timestep_features(0.5, D)
    freqs = torch.linspace(0.0, math.log(1000.0), D // 2, dtype=torch.float64).exp()
    angles = 0.5 * freqs  # 16 frequencies from 1 to 1000: sin then cos
    torch.testing.assert_close(feats, torch.cat([angles.sin(), angles.cos()]).float())
    odd = timestep_features(0.5, 33)
    assert odd.shape == (33,) and odd[-1].item() == 0.5
    plain = families.build(_cfg(timestep=None, positions="none", max_len=None), 0)
    assert plain.time_offset() is None and plain.pos_embed is None
    assert plain.n_parameters() == model.n_parameters() - (D * D + D) - L * D
    with torch.no_grad():
        torch.testing.assert_close(plain.inputs(tok), plain.embed(tok))


def test_the_head_is_the_token_embedding() -> None:
    model = families.build(_cfg(), 0)
    assert abs(model.embed.weight.std().item() - 1.0) < 0.1  # PyTorch's N(0, 1)
    h = torch.randn(5, D)
    torch.testing.assert_close(model.logits(h), h @ model.embed.weight.t())
    model.logits(h).sum().backward()
    assert model.embed.weight.grad is not None
    vocab_shaped = [n for n, p in model.named_parameters() if p.shape[0] == V]
    assert vocab_shaped == ["embed.weight"]  # no separate read-out matrix


def test_seeded_builds_are_deterministic_and_leave_the_global_rng_alone() -> None:
    cfg = _cfg()
    before = torch.random.get_rng_state()
    a, b, c = families.build(cfg, 3), families.build(cfg, 3), families.build(cfg, 4)
    assert torch.equal(before, torch.random.get_rng_state())
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)


def test_model_config_fills_max_len_from_the_positions_and_round_trips() -> None:
    settings = {"family": "denoiser", "d_model": D, "cell": "delta_rule", "cell_options": {}}
    cfg = families.model_config(settings, V, positions=L)
    assert isinstance(cfg, DenoiserConfig) and cfg.max_len == L and cfg.family == "denoiser"
    assert families.model_config({**settings, "max_len": 100}, V, positions=L).max_len == 100
    assert families.model_config(settings, V).max_len is None
    lm = families.model_config({"d_model": 16, "cell": "delta_rule"}, 10, positions=L)
    assert not hasattr(lm, "max_len")  # a family without the field ignores the positions
    assert families.config_from_record(json.loads(json.dumps(asdict(cfg)))) == cfg
    assert "max_len" in families.fields_of("denoiser")
    model = families.build(cfg, 0)
    again = families.instantiate(families.config_from_record(json.loads(json.dumps(asdict(cfg)))))
    again.load_state_dict(model.state_dict())
    tok = _tokens()
    with torch.no_grad():
        assert torch.equal(model.hidden(tok)[0], again.hidden(tok)[0])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"direction": "sideways"}, "model.direction: unknown 'sideways'"),
        ({"merge": "max"}, "model.merge: unknown 'max'"),
        ({"positions": "rotary"}, "model.positions: unknown 'rotary'"),
        ({"max_len": None}, "model.max_len: missing"),
        ({"max_len": 0}, "model.max_len must be"),
        ({"cell": "nope"}, "model.cell: unknown 'nope'"),
        ({"d_model": 0}, "model.d_model must be"),
        ({"timestep": "half"}, "model.timestep must be"),
        ({"block": "dit"}, "model.block: unknown 'dit'"),
        ({"block": "adaln_zero", "timestep": None}, "model.block: adaln_zero conditions"),
        ({"direction": "full"}, "model.direction: full runs one non-causal cell"),
        ({"cell": "full_attention"}, "model.direction: cell 'full_attention' is non-causal"),
        (
            {"cell": "full_attention", "direction": "forward"},
            "model.direction: cell 'full_attention' is non-causal",
        ),
    ],
)
def test_bad_settings_fail_with_one_line_naming_the_key(change: dict, message: str) -> None:
    cfg = replace(_cfg(), **change)
    with pytest.raises(ValueError, match=message) as err:
        cfg.validate()
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=message):
        Denoiser(cfg)


def test_state_sizes_count_both_directions() -> None:
    one = build_cell("delta_rule", D).state_size()
    bi = families.build(_cfg(layers=2), 0)
    fwd = families.build(_cfg(layers=2, direction="forward"), 0)
    assert bi.state_size_per_layer() == 2 * one and bi.state_size() == 4 * one
    assert fwd.state_size_per_layer() == one and fwd.state_size() == 2 * one


def test_a_denoiser_run_trains_sized_by_the_task_and_is_scored(tmp_path) -> None:
    from arbench import run
    from arbench.tasks import build_task

    task = {"name": "mqar", "pairs": 4, "n_keys": 8, "n_values": 8}
    model = {"family": "denoiser", "d_model": 16, "cell": "delta_rule", "cell_options": {}}
    train = {"steps": 4, "batch": 4, "lr": 3e-3, "warmup": 1, "log_every": 2}
    positions = getattr(build_task(task), "positions", lambda: None)()
    if positions is None:
        pytest.skip("the task does not say its longest sequence yet")
    run.write_eval_set(task, 8, tmp_path / "data" / "eval.npz")
    record = run.train_run(task, model, train, 0, tmp_path / "run")
    assert record["model"]["family"] == "denoiser" and record["model"]["max_len"] == positions
    scores = run.evaluate_run(tmp_path / "run", task, data_dir=tmp_path / "data")["scores"]
    assert 0.0 <= scores["accuracy"] <= 1.0


@pytest.mark.parametrize("direction", ["bidirectional", "forward"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize(
    ("cell", "options"),
    [
        ("deltanet_ref", {"decay": True, "conv": True}),
        ("rwkv7_ref", {"conv": True}),
        ("mamba2_ref", {}),
    ],
)
def test_hidden_at_equals_the_full_pass_at_the_marked_positions(
    direction: str, layers: int, cell: str, options: dict
) -> None:
    """The last layer computed only where the marked positions need it (the training loss and
    the evaluator's path) gives the full pass's values, for the answer slot alone and for
    scattered marks; values and gradients."""
    from arbench.tasks import build_task
    from arbench.tasks.base import IGNORE

    task = build_task({"name": "paper_mqar", "pairs": 8})
    tokens, targets = task.train_batch(0, 0, 6).tensors()
    answer = targets != IGNORE
    scattered = answer.clone()
    scattered[1, 2] = scattered[4, 15] = True
    settings = {
        "family": "denoiser",
        "d_model": 16,
        "layers": layers,
        "cell": cell,
        "cell_options": options,
        "direction": direction,
    }
    cfg = families.model_config(settings, task.vocab_size, positions=task.positions())
    model = families.build(cfg, 0).double()
    for sel in (answer, scattered):
        full = model.hidden(tokens)[0][sel]
        part = model.hidden_at(tokens, sel)
        assert torch.allclose(part, full, atol=1e-12, rtol=0)
        w = torch.randn(full.shape, dtype=full.dtype, generator=torch.Generator().manual_seed(1))
        g_full = torch.autograd.grad((full * w).sum(), list(model.parameters()), allow_unused=True)
        g_part = torch.autograd.grad(
            (model.hidden_at(tokens, sel) * w).sum(), list(model.parameters()), allow_unused=True
        )
        for a, b in zip(g_part, g_full, strict=True):
            if b is None:
                assert a is None or not a.any()
            else:
                assert torch.allclose(a, b, atol=1e-12, rtol=0)


ATTENTION = dict(cell="full_attention", cell_options={"heads": 2}, direction="full")


@pytest.mark.parametrize("block", [None, "adaln_zero"])
def test_full_attention_parameter_count_from_the_parts(block: str | None) -> None:
    model = families.build(_cfg(**ATTENTION, block=block, layers=2), 0)
    cell = (D * 3 * D + 3 * D) + (D * D + D)
    ffn = (D * 4 * D + 4 * D) + (4 * D * D + D)
    embeddings, time, final_norm = V * D + L * D, D * D + D, 2 * D
    if block is None:  # affine pre-norms, no modulation
        per_block = 2 * 2 * D + cell + ffn
    else:  # affine-free norms; SiLU + Linear(d, 6d)
        per_block = cell + ffn + (D * 6 * D + 6 * D)
    assert model.n_parameters() == embeddings + time + final_norm + 2 * per_block
    assert model.state_size_per_layer() == 0  # the keys and values grow with the length


@pytest.mark.parametrize("block", [None, "adaln_zero"])
def test_a_full_denoiser_reads_both_ways_and_refuses_a_state(block: str | None) -> None:
    model = families.build(_cfg(**ATTENTION, block=block), 0).eval()
    tok = _tokens(t=16)
    changed = tok.clone()
    changed[:, 12] = (changed[:, 12] + 1) % V
    with torch.no_grad():
        for p in model.parameters():  # the modulation starts at zero: every block the identity
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(2)))
        a, state = model.hidden(tok)
        b, _ = model.hidden(changed)
    assert state is None and (a[:, :12] - b[:, :12]).abs().max().item() > 1e-4
    with pytest.raises(ValueError, match="full-attention denoiser cannot stream"):
        model.hidden(tok, {"offset": 0, "layers": [None]})


def test_under_adaln_zero_the_timestep_conditions_the_blocks_and_is_no_input() -> None:
    model = families.build(_cfg(**ATTENTION, block="adaln_zero"), 0)
    tok = _tokens(t=10)
    with torch.no_grad():
        x = model.inputs(tok)
    torch.testing.assert_close(x, model.embed(tok) + model.pos_embed(torch.arange(10)))
    cond = model.condition()
    torch.testing.assert_close(cond, model.time_offset())
    mod = model.blocks[0].modulations(cond)
    assert len(mod) == 6 and all(not m.any() for m in mod)  # zero-initialised
    assert families.build(_cfg(), 0).condition() is None  # the pre-norm block: an input offset
    no_ffn = families.build(_cfg(**ATTENTION, block="adaln_zero", mlp_ratio=0), 0)
    assert len(no_ffn.blocks[0].modulations(no_ffn.condition())) == 3


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("block", [None, "adaln_zero"])
def test_hidden_at_equals_the_full_pass_for_full_attention(layers: int, block: str | None) -> None:
    from arbench.tasks import build_task
    from arbench.tasks.base import IGNORE

    task = build_task({"name": "paper_haystack", "pairs": 4, "seq_len": 32})
    tokens, targets = task.train_batch(0, 0, 5).tensors()
    sel = targets != IGNORE
    sel[1, 3] = sel[2, 17] = True
    settings = {"family": "denoiser", "d_model": 16, "layers": layers, "block": block, **ATTENTION}
    cfg = families.model_config(settings, task.vocab_size, positions=task.positions())
    model = families.build(cfg, 0).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape, generator=torch.Generator().manual_seed(4)))
    full = model.hidden(tokens)[0][sel]
    assert torch.allclose(model.hidden_at(tokens, sel), full, atol=1e-12, rtol=0)
    w = torch.randn(full.shape, dtype=full.dtype, generator=torch.Generator().manual_seed(1))
    g_full = torch.autograd.grad((full * w).sum(), list(model.parameters()))
    g_part = torch.autograd.grad((model.hidden_at(tokens, sel) * w).sum(), list(model.parameters()))
    for a, b in zip(g_part, g_full, strict=True):
        assert torch.allclose(a, b, atol=1e-12, rtol=0)


def test_an_unset_block_leaves_the_runs_identity_as_it_was() -> None:
    """``block`` came after runs were recorded without it: unset (None) it is no part of a
    run's settings, so their fingerprints and model files still match; set, it is."""
    from arbench.train.run_files import fingerprint, run_settings

    before = {k: v for k, v in asdict(_cfg()).items() if k != "block"}
    assert run_settings(asdict(_cfg()), {}, {}, 0) == run_settings(before, {}, {}, 0)
    dit = asdict(_cfg(**ATTENTION, block="adaln_zero"))
    assert run_settings(dit, {}, {}, 0)["model"]["block"] == "adaln_zero"
    assert fingerprint(run_settings(dit, {}, {}, 0)) != fingerprint(
        run_settings({**dit, "block": None}, {}, {}, 0)
    )
