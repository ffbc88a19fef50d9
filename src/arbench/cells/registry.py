"""Import every cell module so each registers its name with `build_cell`."""

from arbench.cells import (  # noqa: F401
    additive,  # additive
    attention,  # attention (absolute or rotary positions)
    bidirectional,  # bidirectional (forward + backward scan of any cell)
    factorial,  # delta_rule, diagonal, gated_deltanet
    kda,  # kda (Kimi Delta Attention)
    mamba2,  # mamba2
    rwkv7,  # rwkv7
)
