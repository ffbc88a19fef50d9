"""The key-value benchmark's memory model: its saved-activation count matches what autograd
really saves in a tiny step, its evaluation memory is linear in the length (so the 10^7-token
sweep fits one GPU), the long run's every rung fits one GPU under its token budget, and bad
inputs name the key. (`benchmarks/kvbench_memory.py` measures it against a process's peak.)"""

from __future__ import annotations

import pytest
import torch

from arbench.models.dropout import drawing_from, row_generators
from arbench.models.kvbench import KVModelConfig, KVTransformer
from arbench.models.kvbench_memory import (
    eval_bytes,
    n_parameters,
    saved_activation_bytes,
    step_flops,
    train_step_bytes,
)
from arbench.tasks.base import IGNORE, Signal
from arbench.tasks.kvbench import KVBenchTask, KVConfig
from arbench.train.step import masked_loss

GPU_BYTES = 141 * 10**9
PAPER = KVModelConfig(variant="hybrid_square", d_model=256, layers=16, heads=4, kv_heads=4,
                      head_dim=64, ffn_hidden=1024, dropout=0.1)  # fmt: skip
TINY = KVModelConfig(variant="hybrid_square", d_model=16, layers=2, heads=2, kv_heads=2,
                     head_dim=8, ffn_hidden=32, dropout=0.1)  # fmt: skip


def _saved_by_autograd(cfg: KVModelConfig, batch: int, load: int) -> tuple[int, int]:
    """Bytes of the distinct non-parameter storages autograd saves in one step of the long
    run's task (7-digit mutant keys) at ``load`` keys, and the sequence length."""
    torch.manual_seed(0)
    model = KVTransformer(cfg).train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    task = KVBenchTask(KVConfig(n=8, key_digits=7, value_digits=3, mutant_j=7, mutant_mix=0.5))
    tokens, targets = task.train_batch(0, 0, batch, Signal(load=load)).tensors("cpu")
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in params:
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    gens = row_generators(0, 0, range(batch))  # dropout's masks, as training draws them
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), drawing_from(model, gens):
        loss, _ = masked_loss(model, tokens, targets)
    assert (targets != IGNORE).sum() > 0 and loss.requires_grad
    return sum(storages.values()), tokens.shape[1]


@pytest.mark.parametrize("batch, load", [(4, 16), (1, 64)])
def test_saved_activations_match_autograd_within_20_percent(batch: int, load: int) -> None:
    saved, seq_len = _saved_by_autograd(TINY, batch, load)
    predicted = saved_activation_bytes(TINY, batch, seq_len)
    assert abs(predicted - saved) / saved < 0.2, (predicted, saved)


def test_parameter_count_matches_the_model() -> None:
    assert n_parameters(PAPER) == KVTransformer(PAPER).n_parameters()


def test_evaluation_memory_is_linear_in_the_length_and_fits_one_gpu() -> None:
    """With chunks, equal steps in T add equal bytes (no T^2 term); at 10^7 tokens and the
    paper's width the evaluation fits one 141 GB GPU with half of it to spare."""
    kw = {"tile": 8192, "dtype_bytes": 4, "chunk": 65536}
    a, b, c = (eval_bytes(PAPER, t, **kw) for t in (2 * 10**6, 4 * 10**6, 6 * 10**6))
    assert (c - b) == pytest.approx(b - a, rel=1e-6)
    assert eval_bytes(PAPER, 10**7, **kw) < GPU_BYTES / 2
    # the whole-sequence path (no chunk) holds every activation T wide: it does not fit
    assert eval_bytes(PAPER, 10**7, tile=8192, dtype_bytes=4, chunk=None) > GPU_BYTES


def test_every_rung_of_the_long_run_fits_one_gpu_under_its_token_budget() -> None:
    """The paper-scale token budget (config.yaml) sizes each rung's batch; the largest
    step (196,608 tokens) stays within one 141 GB GPU."""
    budget, cap = 65536, 64  # kvbench_long: train.tokens_per_step, train.batch
    peaks = []
    for load in [2**i for i in range(1, 14)]:
        seq_len = 24 * load
        batch = max(1, min(cap, budget // seq_len))
        peaks.append(train_step_bytes(PAPER, batch, seq_len, 1024))
    assert max(peaks) < GPU_BYTES * 0.7
    # a fixed batch of 64 at the largest rung (the review's finding) would not fit
    assert train_step_bytes(PAPER, 64, 24 * 8192, 1024) > GPU_BYTES


def test_step_flops_grow_with_the_square_of_the_length_at_a_fixed_budget() -> None:
    """Under a token budget the dense work is constant and the global attention's grows
    with the length: doubling T at half the batch costs more."""
    assert step_flops(PAPER, 2, 98304) < step_flops(PAPER, 1, 196608)
    assert step_flops(PAPER, 1, 196608) > 3 * step_flops(PAPER, 1, 24576) * 2


@pytest.mark.parametrize("key", ["batch", "seq_len", "tile"])
def test_bad_inputs_name_the_key(key: str) -> None:
    args = {"batch": 1, "seq_len": 48, "tile": 1024, key: 0}
    with pytest.raises(ValueError, match=key):
        train_step_bytes(TINY, **args)
