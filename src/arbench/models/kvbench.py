"""The key-value benchmark's transformer and its nine attention variants.

Backbone (the benchmark's published spec): decoder-only, ``x += Attn(LN(x))`` then
``x += FFN(LN(x))`` per block, LayerNorm learnable without bias, no biases anywhere, a SwiGLU
FFN, grouped-query attention, PyTorch's default initialisation. The variants differ only in
their attention layers, per layer:

* positions: RoPE on a fraction of each head's dimensions (1.0, 0.5) or none (NoPE);
* window: each query sees the ``window`` most recent tokens, or the whole prefix;
* scores: softmax(scores) or softmax(scores^2);
* mixer: softmax attention, or Kimi Delta Attention (`arbench.cells.kda`) as the local memory.

Hybrids alternate a local layer (even index) with a global NoPE layer (odd index). Attention
runs through `arbench.kernels.tiled_attention.attention`, whose every path keeps memory linear
in the length, in training (with gradients) as in evaluation: PyTorch's fused kernel for
plain global layers, a (T, window) band of scores for windowed layers, and a flash-style
tiled kernel (recompute backward) for global squared-score layers beyond ``tile`` tokens.

Evaluation at lengths far beyond training (`KVTransformer.hidden` without gradients and with
``chunk``) runs layer by layer over the whole sequence: a layer's keys and values for every
position first, then its queries and FFN ``chunk`` positions at a time, updating the
residual stream in place. Peak memory is then the residual stream and one layer's keys and
values (all fp32: 12 d_model bytes per token with kv_heads x head_dim = d_model, about
3.4 KB per token at the long run's width with the rest), plus one chunk's work;
`arbench.models.kvbench_memory` models it. RoPE angles are computed in float64, so
positions in the millions keep their precision. Dropout (``dropout``, on both residual
branches) draws its masks from the generators the training loop derives from the run's seed
(`arbench.models.dropout`), never from torch's global RNG.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from arbench.kernels.tiled_attention import attention
from arbench.models.dropout import SeededDropout


@dataclass(frozen=True)
class LayerSpec:
    """One mixing layer: ``kind`` "attention" or "kda"; for attention its RoPE fraction,
    window (None: global) and whether scores are squared."""

    kind: str = "attention"
    rope_fraction: float = 1.0
    window: int | None = None
    square: bool = False


def _uniform(rope: float, square: bool) -> list[LayerSpec]:
    return [LayerSpec(rope_fraction=rope, square=square)]


def _hybrid(window: int | None, square: bool, local: str = "attention") -> list[LayerSpec]:
    first = LayerSpec(kind=local, rope_fraction=1.0, window=window, square=square)
    return [first, LayerSpec(rope_fraction=0.0, square=square)]


WINDOW = 10
# the attention tile of training (`KVTransformer.hidden`'s default): small enough that its
# (tile x tile) blocks stay a small workspace at any batch a token budget gives
TRAIN_TILE = 1024
# name -> the repeating pattern of layer specs (layer i uses pattern[i % len(pattern)])
VARIANTS: dict[str, list[LayerSpec]] = {
    "rope": _uniform(1.0, False),
    "rope_square": _uniform(1.0, True),
    "partial_rope": _uniform(0.5, False),
    "partial_rope_square": _uniform(0.5, True),
    "hybrid": _hybrid(WINDOW, False),
    "hybrid_square": _hybrid(WINDOW, True),
    "hybrid_nowindow": _hybrid(None, False),
    "hybrid_square_nowindow": _hybrid(None, True),
    "hybrid_square_kda": _hybrid(None, True, local="kda"),
}


@dataclass(frozen=True)
class KVModelConfig:
    """Shape of the benchmark's model (defaults: the 9-variant runs, about 2.1M parameters)."""

    variant: str = "hybrid_square"
    family: str = "kvbench"
    vocab_size: int = 12
    d_model: int = 128
    layers: int = 8
    heads: int = 4
    kv_heads: int = 4
    head_dim: int = 32
    ffn_hidden: int = 512
    dropout: float = 0.0
    rope_base: float = 10000.0

    def validate(self) -> None:
        """Raise ValueError naming the setting when this shape cannot be built."""
        self.specs()
        for key in ("d_model", "layers", "heads", "kv_heads", "head_dim", "ffn_hidden"):
            if getattr(self, key) < 1:
                raise ValueError(f"model.{key} must be >= 1, got {getattr(self, key)}")
        if self.heads % self.kv_heads:
            raise ValueError(
                f"model.heads={self.heads} is not a multiple of kv_heads={self.kv_heads}"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"model.dropout must be in [0, 1), got {self.dropout}")

    def specs(self) -> list[LayerSpec]:
        if self.variant not in VARIANTS:
            raise ValueError(f"model.variant: unknown {self.variant!r}; known: {sorted(VARIANTS)}")
        pattern = VARIANTS[self.variant]
        return [pattern[i % len(pattern)] for i in range(self.layers)]


def rope(x: torch.Tensor, offset: int, fraction: float, base: float) -> torch.Tensor:
    """Rotate the first ``fraction`` of each head's dims of (B, H, T, D) by their positions
    offset .. offset + T - 1 (pairs (i, i + r/2) of the r rotated dims); angles in float64."""
    rot = int(round(x.shape[-1] * fraction)) // 2 * 2
    if rot == 0:
        return x
    half = rot // 2
    inv = base ** (-torch.arange(half, dtype=torch.float64, device=x.device) * 2.0 / rot)
    pos = torch.arange(offset, offset + x.shape[-2], dtype=torch.float64, device=x.device)
    ang = pos[:, None] * inv
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    x1, x2, rest = x[..., :half], x[..., half:rot], x[..., rot:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos, rest], dim=-1)


class Attention(nn.Module):
    """Grouped-query causal attention with this layer's positions, window and scores."""

    def __init__(self, cfg: KVModelConfig, spec: LayerSpec) -> None:
        super().__init__()
        if cfg.heads % cfg.kv_heads:
            raise ValueError(f"model.heads={cfg.heads} is not a multiple of kv_heads")
        self.cfg, self.spec = cfg, spec
        self.q = nn.Linear(cfg.d_model, cfg.heads * cfg.head_dim, bias=False)
        self.k = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v = nn.Linear(cfg.d_model, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o = nn.Linear(cfg.heads * cfg.head_dim, cfg.d_model, bias=False)

    def project(self, x: torch.Tensor, which: str, offset: int = 0) -> torch.Tensor:
        """Queries ("q"), keys ("k") or values ("v") of positions offset .. offset + T - 1,
        (B, heads, T, head_dim), with this layer's RoPE on queries and keys."""
        B, T, _ = x.shape
        c = self.cfg
        heads = c.heads if which == "q" else c.kv_heads
        y = getattr(self, which)(x).view(B, T, heads, c.head_dim).transpose(1, 2)
        return y if which == "v" else rope(y, offset, self.spec.rope_fraction, c.rope_base)

    def forward(self, x: torch.Tensor, tile: int) -> torch.Tensor:
        B, T, _ = x.shape
        q, k, v = (self.project(x, w) for w in "qkv")
        y = attention(q, k, v, window=self.spec.window, square=self.spec.square, tile=tile)
        return self.o(y.transpose(1, 2).reshape(B, T, -1))

    @torch.no_grad()
    def chunked(self, h: torch.Tensor, x: torch.Tensor, tile: int, chunk: int) -> None:
        """Add this layer's output to the residual stream ``x`` in place, ``chunk`` queries at
        a time; ``h(t0, t1)`` gives the layer's normalised input at positions t0 .. t1 - 1
        (read from ``x`` before those positions are updated). Keys and values of every
        position are computed first, so each chunk attends its whole causal window."""
        B, T = x.shape[:2]
        c, w = self.cfg, self.spec.window
        k = x.new_empty(B, c.kv_heads, T, c.head_dim)
        v = torch.empty_like(k)
        for t0 in range(0, T, chunk):  # filled in place: no second copy of the cache
            t1 = min(t0 + chunk, T)
            part = h(t0, t1)
            k[:, :, t0:t1] = self.project(part, "k", t0)
            v[:, :, t0:t1] = self.project(part, "v")
        for t0 in range(0, T, chunk):
            t1 = min(t0 + chunk, T)
            q = self.project(h(t0, t1), "q", t0)
            lo = 0 if w is None else max(0, t0 - w + 1)
            y = attention(
                q, k[:, :, lo:t1], v[:, :, lo:t1], window=w, square=self.spec.square,
                tile=tile, offset=t0 - lo,
            )  # fmt: skip
            x[:, t0:t1] += self.o(y.transpose(1, 2).reshape(x.shape[0], t1 - t0, -1))


class KDALayer(nn.Module):
    """Kimi Delta Attention from the cell zoo as a local memory (heads x head_dim)."""

    def __init__(self, cfg: KVModelConfig) -> None:
        super().__init__()
        from arbench.cells import build_cell

        self.cell = build_cell(
            "kda", cfg.d_model, heads=cfg.heads, d_k=cfg.head_dim, d_v=cfg.head_dim
        )

    def forward(self, x: torch.Tensor, tile: int) -> torch.Tensor:
        y, _ = self.cell(x, None, form="chunked")
        return y


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, cfg: KVModelConfig, spec: LayerSpec) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.d_model, bias=False)
        self.mix = KDALayer(cfg) if spec.kind == "kda" else Attention(cfg, spec)
        self.norm2 = nn.LayerNorm(cfg.d_model, bias=False)
        self.ffn = SwiGLU(cfg.d_model, cfg.ffn_hidden)
        self.drop = SeededDropout(cfg.dropout)  # masks from the run's generators

    def forward(self, x: torch.Tensor, tile: int) -> torch.Tensor:
        x = x + self.drop(self.mix(self.norm1(x), tile))
        return x + self.drop(self.ffn(self.norm2(x)))


class KVTransformer(nn.Module):
    """Token ids (B, T) -> final hidden states; `logits` reads out selected positions."""

    def __init__(self, cfg: KVModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg, s) for s in cfg.specs())
        self.norm = nn.LayerNorm(cfg.d_model, bias=False)
        self.head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)

    def hidden(
        self,
        tokens: torch.Tensor,
        state: None = None,
        form: str = "chunked",
        tile: int = TRAIN_TILE,
        chunk: int | None = None,
    ) -> tuple[torch.Tensor, None]:
        """Final normalised hidden states and no carried state (the `LanguageModel` call, so
        the training loop and evaluation take either). Every attention path keeps memory
        linear in T (blocks of at most ``tile x tile`` scores; the training loop runs the
        default tile, 1,024, whose workspace stays small under a token budget). With
        ``chunk`` and no gradients, sequences longer than ``chunk`` run layer by layer,
        ``chunk`` positions at a time (`hidden_chunked`), so no activation wider than the
        residual stream is held for the whole sequence."""
        if chunk is not None and chunk < 1:
            raise ValueError(f"eval chunk must be >= 1, got {chunk}")
        if chunk is not None and tokens.shape[1] > chunk and not torch.is_grad_enabled():
            if all(isinstance(b.mix, Attention) for b in self.blocks):
                return self.hidden_chunked(tokens, tile, chunk), None
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x, tile)
        return self.norm(x), None

    @torch.no_grad()
    def hidden_chunked(self, tokens: torch.Tensor, tile: int, chunk: int) -> torch.Tensor:
        """`hidden` without gradients, layer by layer over the whole sequence, ``chunk``
        positions at a time: the residual stream (B, T, d_model) is updated in place, and
        beside it only one attention layer's keys and values for all T positions and one
        chunk's activations are alive (dropout is off: evaluation)."""
        B, T = tokens.shape
        x = self.embed.weight.new_empty(B, T, self.cfg.d_model)
        for t0 in range(0, T, chunk):  # filled in place: never a second copy of the stream
            x[:, t0 : t0 + chunk] = self.embed(tokens[:, t0 : t0 + chunk])
        for block in self.blocks:
            norm1 = block.norm1
            block.mix.chunked(lambda a, b, n=norm1: n(x[:, a:b]), x, tile, chunk)
            for t0 in range(0, T, chunk):
                part = x[:, t0 : t0 + chunk]
                part += block.ffn(block.norm2(part))
        out = torch.empty_like(x)
        for t0 in range(0, T, chunk):
            out[:, t0 : t0 + chunk] = self.norm(x[:, t0 : t0 + chunk])
        return out

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        return self.head(h)

    def forward(self, tokens: torch.Tensor, tile: int = TRAIN_TILE) -> torch.Tensor:
        return self.logits(self.hidden(tokens, tile=tile)[0])

    def n_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def state_size_per_layer(self) -> int:
        """No fixed recurrent state: global attention's KV cache grows with the length."""
        return 0
