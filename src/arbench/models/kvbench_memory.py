"""Memory and compute model of the key-value benchmark's transformer (`arbench.models.kvbench`),
for the resource planner: peak bytes of one training step, peak bytes of evaluating one
sequence the way the pipeline does, and the FLOPs of one step.

The model counts tensors, it does not guess: every term below is a tensor the code keeps
alive, named where it is counted. Training (fp32, AdamW):

* state: parameters, gradients and AdamW's two moments, 16 bytes per parameter, plus one
  parameter-sized temporary while clipping and stepping;
* activations autograd saves, per token and block: the block input and both LayerNorm
  outputs (d_model each) and their statistics, the FFN's gate, SiLU, up and product (4 x
  ffn_hidden), dropout's masks (one byte per element), and the attention layer's own: queries,
  keys, values and the output projection's input, plus per form
  - windowed layers (`attention_banded`): the (heads x window) pre-square scores and
    probabilities, keys and values padded by window - 1 positions;
  - global layers (`attention_tiled`, PyTorch's fused kernel alike): the output and one
    log-sum-exp per head (with gradients the dispatcher never takes the plain T x T form);
* the backward pass's excess over the saved tensors, in the last block (where it starts
  with everything saved still alive): the FFN's (one ffn_hidden of gradients net of what it
  frees), or the tiled kernel's dq, dk, dv and rescaled queries plus one (tile x tile) block
  of scores per head (`BACKWARD_BLOCK` bytes an element), net of the block's FFN tensors
  freed by then;
* the batch's token ids and targets (int64).

Evaluation (`KVTransformer.hidden_chunked`, no gradients): the residual stream (T x d_model),
the token ids, the supervision mask and the predictions throughout; inside a layer, that
layer's keys and values for all T positions plus one chunk's work, its attention (queries,
output, one block of tile x tile scores per head) or its FFN, whichever is larger; after the
last layer (its keys and values freed) the final normalised states (T x d_model) and the
states and logits at the scored positions. The peak is the larger of the two phases.
``dtype_bytes`` is the width of those whole-sequence tensors (4: fp32, what the pipeline
runs).

`benchmarks/kvbench_memory.py` measures both against these numbers (fresh process, peak
resident set above its baseline); `tests/models/test_kvbench_memory.py` keeps the structure.
"""

from __future__ import annotations

import math
from typing import Any

from arbench.models.kvbench import TRAIN_TILE, KVModelConfig, LayerSpec
from arbench.settings import whole_number

F32 = 4
INT64 = 8
# the long-context task's scored fraction of positions: 3 value digits of each key's second
# entry, per 2 entries of 12 tokens (7-digit keys); 3 / 16 with 3-digit keys
SCORED_FRACTION = 3 / 24
# bytes per (query, key) element of the one block of scores alive at a time: the tiled
# backward's scores (turned into probabilities in place), pre-square scores and their
# gradient (in place), and two boolean masks on diagonal blocks; the forward's scores, their
# pre-square copy (squared scores only) and the masks
BACKWARD_BLOCK = 3 * F32 + 2


def _forward_block(square: bool) -> int:
    return (2 if square else 1) * F32 + 2


def n_parameters(cfg: KVModelConfig) -> int:
    """Parameters of the model, counted from its shapes (softmax-attention layers; a KDA
    layer is counted as an attention layer of the same projections, a lower bound)."""
    d, a_q, a_kv, f, v = _dims(cfg)
    per_block = d * a_q + 2 * d * a_kv + a_q * d + 3 * d * f + 2 * d  # + two LayerNorms
    return v * d + cfg.layers * per_block + d + d * v  # embedding, blocks, final norm, head


def _dims(cfg: KVModelConfig) -> tuple[int, int, int, int, int]:
    return (
        cfg.d_model,
        cfg.heads * cfg.head_dim,
        cfg.kv_heads * cfg.head_dim,
        cfg.ffn_hidden,
        cfg.vocab_size,
    )


def _check(cfg: KVModelConfig, **values: int | None) -> None:
    cfg.validate()
    for key, value in values.items():
        if value is not None:
            whole_number(value, f"kvbench memory model: {key}")


def _form(spec: LayerSpec, seq_len: int) -> str:
    """Which attention path a layer takes with gradients (`tiled_attention.attention`)."""
    if spec.window is None and not spec.square:
        return "fused"
    if spec.window is not None and spec.window < seq_len:
        return "banded"
    return "tiled"


def _saved_attention(cfg: KVModelConfig, spec: LayerSpec, seq_len: int) -> float:
    """Bytes per token an attention layer saves for the backward pass (queries, keys, values,
    the output projection's input, and its form's own)."""
    _, a_q, a_kv, _, _ = _dims(cfg)
    base = (2 * a_q + 2 * a_kv) * F32
    if _form(spec, seq_len) == "banded":
        w = spec.window or 0
        pad = (w - 1) / seq_len  # keys and values padded by window - 1 positions
        return base + 2 * a_kv * pad * F32 + 2 * cfg.heads * w * F32 + w  # + the mask
    return base + a_q * F32 + cfg.heads * F32  # the output and its log-sum-exp


def saved_activation_bytes(cfg: KVModelConfig, batch: int, seq_len: int) -> int:
    """Bytes of the activations autograd saves for one fp32 training step's backward pass
    (parameters excluded): the ``saved`` term of `train_step_bytes`."""
    _check(cfg, batch=batch, seq_len=seq_len)
    d, _, _, f, v = _dims(cfg)
    drop = 2 * d if cfg.dropout > 0 else 0  # two dropout masks per block, one byte each
    per_block = (4 * d + 4 + 4 * f) * F32 + drop  # input, 2 LN outputs + stats, FFN
    saved = sum(per_block + _saved_attention(cfg, s, seq_len) for s in cfg.specs())
    scored = SCORED_FRACTION * (d + 2 * v) * F32  # final states, logits, log-softmax
    return int(batch * seq_len * (saved + (2 * d + 2) * F32 + scored) + d * F32)


def train_step_bytes(cfg: KVModelConfig, batch: int, seq_len: int, tile: int) -> int:
    """Peak bytes of one fp32 training step (forward, backward, clip, AdamW) of ``batch``
    sequences of ``seq_len`` tokens, attention tiled at ``tile``: parameters, gradients,
    AdamW's m and v, saved activations, the backward's transient and the attention
    workspace (module docstring)."""
    _check(cfg, batch=batch, seq_len=seq_len, tile=tile)
    d, a_q, a_kv, f, _ = _dims(cfg)
    tokens = batch * seq_len
    state = 5 * F32 * n_parameters(cfg)  # weights, grads, m, v, one update temporary
    drop = 2 * d if cfg.dropout > 0 else 0
    saved_bytes = saved_activation_bytes(cfg, batch, seq_len)
    specs = cfg.specs()
    # the backward pass starts with every saved tensor alive; its largest excess over them
    # comes in the last block: the FFN's (the gradients of SiLU's output and of the up
    # projection alive while the product's input is freed: one ffn_hidden net, plus the
    # residual's gradient), or later the tiled kernel's (dq, dk, dv, rescaled q, dO and its
    # tile blocks), by when that block's FFN tensors are freed
    ffn_transient = (f + 2 * d) * F32 * tokens
    ffn_saved = ((d + 4 * f) * F32 + drop // 2) * tokens
    forms = {_form(s, seq_len) for s in specs}
    block = min(tile, seq_len)
    workspace = BACKWARD_BLOCK * batch * cfg.heads * block * block if "tiled" in forms else 0
    attn_transient = (3 * a_q + 2 * a_kv + 2 * d) * F32 * tokens + workspace - ffn_saved
    data = 2 * INT64 * tokens  # token ids and targets
    return int(state + saved_bytes + max(ffn_transient, attn_transient) + data)


def eval_bytes(
    cfg: KVModelConfig,
    seq_len: int,
    *,
    tile: int,
    dtype_bytes: int,
    chunk: int | None,
) -> int:
    """Peak bytes of evaluating one sequence of ``seq_len`` tokens as the pipeline does
    (`arbench.tasks.kvbench.sweep` -> `predict` -> `KVTransformer.hidden`): layer by layer,
    ``chunk`` positions at a time when the sequence is longer than ``chunk``, whole-sequence
    tensors ``dtype_bytes`` wide; without ``chunk`` (or a sequence within one chunk) the
    whole sequence at once, whose activations are ``seq_len`` wide (module docstring)."""
    _check(cfg, seq_len=seq_len, tile=tile, chunk=chunk, dtype_bytes=dtype_bytes)
    d, a_q, a_kv, f, v = _dims(cfg)
    params = F32 * n_parameters(cfg)
    ids = (INT64 + 1 + INT64 + INT64) * seq_len  # tokens, mask, predictions (+ host copy)
    scored = math.ceil(SCORED_FRACTION * seq_len) * (d + 2 * v) * F32
    width = seq_len if chunk is None or seq_len <= chunk else chunk
    block = min(tile, width)
    squared_global = any(s.square and s.window is None for s in cfg.specs())
    scores = cfg.heads * block * block * _forward_block(squared_global)
    if width == seq_len:  # one pass over the whole sequence, every activation T wide
        acts = (3 * d + 2 * a_q + 2 * a_kv + 3 * f) * F32 * seq_len
        return int(params + ids + scored + acts + scores)
    stream = d * dtype_bytes * seq_len  # the residual stream, alive throughout
    cache = 2 * a_kv * dtype_bytes * seq_len  # one layer's keys and values
    # one chunk's work, attention and FFN in turn (never both): its normalised input, queries
    # (RoPE'd and rescaled), the attention output and its reshaped copy, the projection and
    # one block of scores; or the FFN's normalised input, gate, SiLU, up and product
    attn_work = (2 * d + 4 * a_q + a_kv) * F32 * width + scores
    ffn_work = (2 * d + 4 * f) * F32 * width
    in_layers = cache + max(attn_work, ffn_work)
    # after the last layer (its cache freed): the final normalised states, then the read-out
    at_end = d * dtype_bytes * seq_len + scored
    return int(params + ids + stream + max(in_layers, at_end))


def step_flops(cfg: KVModelConfig, batch: int, seq_len: int) -> float:
    """Forward + backward FLOPs of one training step (multiply-adds x 2): three times the
    forward's for the projections, FFN and head; for attention the forward's two causal
    matmuls (scores, weighted sum) and the backward's five (recomputed scores, dv, dp, dq,
    dk), over the causal half for global layers and ``window`` keys for windowed ones."""
    _check(cfg, batch=batch, seq_len=seq_len)
    d, a_q, a_kv, f, v = _dims(cfg)
    dense = 2 * (d * a_q + 2 * d * a_kv + a_q * d + 3 * d * f)  # per token and block
    total = 3 * batch * seq_len * (cfg.layers * dense + 2 * d * v)
    for spec in cfg.specs():
        keys = seq_len / 2 if spec.window is None else min(spec.window, seq_len)
        total += 7 * 2 * batch * seq_len * keys * a_q  # 2 forward + 5 backward matmuls
    return float(total)


# ---------------------------------------- what the resource planner reads of this family
# (`arbench.models.families.MEMORY_MODELS`: `train_work`, `eval_work`, `n_parameters`)


def _ops(cfg: KVModelConfig, length: int, tile: int) -> float:
    """Operators one training step of the key-value transformer dispatches: about 200 per
    block (projections, norms, FFN, their backward), and a global layer's tiled attention
    about 60 per (query tile, key tile) pair beyond ``tile`` tokens (its forward, recompute
    and backward). An order of magnitude, for a step's launch cost."""
    tiles = -(-length // tile)
    pairs = tiles * (tiles + 1) / 2 if length > tile else 0
    global_layers = sum(1 for s in cfg.specs() if s.window is None)
    return 200.0 * cfg.layers + 60.0 * pairs * global_layers


def train_work(cfg: KVModelConfig, rows: int, length: int) -> dict[str, float]:
    """Peak device bytes, FLOPs and operators of one training step of ``rows`` sequences of
    ``length`` tokens (training attends in tiles of `TRAIN_TILE`)."""
    return {
        "bytes": float(train_step_bytes(cfg, rows, length, TRAIN_TILE)),
        "flops": float(step_flops(cfg, rows, length)),
        "ops": _ops(cfg, length, TRAIN_TILE),
    }


def eval_work(cfg: KVModelConfig, length: int, options: dict[str, Any]) -> dict[str, float]:
    """Peak device bytes of evaluating one sequence of ``length`` tokens under the evaluation
    ``options`` (its own ``tile``, default 4096, and ``chunk``), and the FLOPs and operators
    of a training step of that sequence at that tile (an evaluation does their forward share)."""
    tile = int(options.get("tile", 4096))
    chunk = options.get("chunk")
    return {
        "bytes": float(
            eval_bytes(
                cfg, length, tile=tile, dtype_bytes=4, chunk=None if chunk is None else int(chunk)
            )
        ),
        "flops": float(step_flops(cfg, 1, length)),
        "ops": _ops(cfg, length, tile),
    }
