"""Recurrence kernels, one family per module: each holds the family's step-by-step recurrent
reference, its chunkwise-parallel form and the autograd Functions behind it.

    scalar_decay   S_t = a_t S_{t-1} + k_t v_t^T (additive linear attention, Mamba-2 / SSD)
    delta_rule     S_t = a_t (I - b_t k_t k_t^T) S_{t-1} + b_t k_t v_t^T (WY/UT chunk form)
    gla            S_t = Diag(e^{d_t}) S_{t-1} + k_t v_t^T (per-channel decays)
    diagonal       the delta rule's diagonal ablation, run on the GLA kernels
    dplr           S_t = (Diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T (RWKV-7)
    kda            Kimi Delta Attention, DPLR with a = alpha k, b = -beta k

Shared pieces: `common` (argument checks, chunking, masks, middle-relative decays), `scan`
(chunk-to-chunk state carries), `triangular` (the WY/UT forms' unit-lower inverse) and
`pairwise_tree` (decayed pairwise products for per-channel decays). Kernels take (B,H,T,.)
tensors and an optional (B,H,dk,dv) initial state and return (outputs, final state); the cells
in `arbench.cells` map a layer's input onto them.
"""
