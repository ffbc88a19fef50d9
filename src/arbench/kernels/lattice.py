"""Lattice-addressed memory: a grid of value slots written and read at learned 2-D addresses.

Each head owns a square lattice of `side` x `side` cells, side = 2s + 3 for the address scale s,
with cell centres at -s-1, ..., s+1 on each axis; the state is one d_v vector per cell,
(B, H, side^2, d_v), whatever the sequence length. A token t carries an address a_t in [-s, s]^2
(clamped there), a write strength beta_t in [0, 1], a value v_t and a log-retention l_t <= 0.

Kernel (`lattice_taps`): the quadratic B-spline on the 3x3 neighbourhood of the nearest cell.
Per axis, with u in [-1/2, 1/2] the offset of the coordinate from its nearest centre, the three
cells (nearest - 1, nearest, nearest + 1) get weights ((1/2 - u)^2 / 2, 3/4 - u^2,
(1/2 + u)^2 / 2), which sum to 1 and are continuous with a continuous derivative as the
coordinate crosses from one cell to the next; a 2-D tap is the product of its two axes' weights.
The same taps serve the read (weights w, summing to 1) and the write, whose per-cell gain is
either the weight itself (gain "kernel") or the weight over the largest weight of the 3x3
neighbourhood (gain "peak", the default): the nearest cell is then fully overwritten when
beta = 1, and an isolated key written twice reads back mostly its second value.

Recurrence, per head, for t = 0..T-1 (read before write):
    o_t   = sum_c w_c(a_t) S_c                            (the state after step t-1)
    S_c  <- r_t S_c                                        for every cell, r_t = e^{l_t}
    S_c  <- S_c + g_c(a_t) beta_t (v_t - S_c)             for the nine cells at a_t
i.e. S_c <- r_t (1 - beta_t g_c) S_c + beta_t g_c v_t on the written cells: an overwrite
("last write wins") that retention then fades. A read at t does not see the write at t, so a
query token reads the stored value before its own write can touch it.

`lattice_recurrent` is the step-by-step reference. `lattice_chunked` is time-parallel with no
loop over time: the B*H*T*9 write events are sorted (stably) by (batch, head, cell), so each
cell's writes are a contiguous, time-ordered segment. Between consecutive writes e-1, e of one
cell, with g_e the write gain times beta and L the cumulative log-retention,
    S_e = A_e S_{e-1} + B_e,  A_e = (1 - g_e) e^{L(t_e) - L(t_{e-1})},  B_e = g_e v_{t_e}
(differences of L only: never a division by a cumulative product that can underflow). The
first write of a segment folds the carried state into B and gets A = 0, so one unsegmented
inclusive scan over all events is the segmented scan: Hillis-Steele doubling in
ceil(log2(longest segment)) rounds that only multiplies numbers in [0, 1] (`segment_scan`;
fused with the event gathers and reads, and a hand-written backward that is the same scan
reversed, in `_Events`). A token reads exactly the cells it writes, so the state its read sees
at a cell is that of the previous event of the cell's segment (the carried state for the first),
decayed to t-1: no search for the latest earlier write is needed. A cell's final state is its
last event's, decayed to the end of the piece; untouched cells keep the decayed carried state.

Untied reads (``read_addr``, the lattice protocol module's ``read_tie=False``): each token reads
at its own read address, apart from the one it writes at. `lattice_recurrent` reads the read
taps' cells; `lattice_chunked` then adds a read-only event per read tap (gain 0) to the sorted
events, ordered before a write of the same cell at the same step, whose state is the cell's
decayed to t-1 (no retention of its own step): the same scan, with reads that need not be
writes.

`spread_loss` is the address-spread regulariser: the negative entropy of each row's
kernel-weighted histogram of key addresses, weighted by a detached factor that grows with how
much the keys' kernels overlap, estimated on a subsample of keys drawn from a given generator.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.autograd.function import once_differentiable

TAPS = 9  # cells a write or read touches: the 3x3 neighbourhood of the nearest cell
GAINS = ("peak", "kernel")


def grid_side(scale: float) -> int:
    """Cells per axis, 2s + 3, for address scale s; raises unless s >= 0 and 2s + 3 is whole."""
    if not isinstance(scale, int | float) or not math.isfinite(scale) or scale < 0:
        raise ValueError(f"addr_scale must be a finite number >= 0, got {scale!r}")
    side = 2.0 * scale + 3.0
    if abs(side - round(side)) > 1e-9:
        raise ValueError(f"addr_scale must make 2*addr_scale+3 a whole number, got {scale!r}")
    return round(side)


def _axis_taps(
    coord: torch.Tensor, scale: float, side: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(cell index, weight, peak gain) of the three taps on one axis, each (..., 3)."""
    pos = coord.clamp(-scale, scale) + (scale + 1.0)  # in [1, side - 2] cell units
    near = pos.detach().round().clamp_(1, side - 2)
    u = pos - near  # in [-1/2, 1/2]
    left, right = 0.5 - u, 0.5 + u
    centre = 0.75 - u * u  # >= 1/2: the largest of the three weights
    w = torch.stack([0.5 * left * left, centre, 0.5 * right * right], dim=-1)
    offsets = torch.arange(-1, 2, device=coord.device)
    return near.long().unsqueeze(-1) + offsets, w, w / centre.unsqueeze(-1)


def lattice_taps(
    addr: torch.Tensor, scale: float, gain: str = "peak"
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cells, read weights and write gains of addresses (..., 2): three (..., 9) tensors.

    Cells are flat indices x * side + y into the side^2 lattice, nine distinct ones per address;
    read weights sum to 1; gains (before beta) are the weights ("kernel") or the weights over
    their maximum ("peak"). Gradients reach `addr` through the offsets from the nearest cell.
    """
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {GAINS}, got {gain!r}")
    side = grid_side(scale)
    ix, wx, px = _axis_taps(addr[..., 0], scale, side)
    iy, wy, py = _axis_taps(addr[..., 1], scale, side)
    flat = addr.shape[:-1] + (TAPS,)
    cells = (ix.unsqueeze(-1) * side + iy.unsqueeze(-2)).reshape(flat)
    w = (wx.unsqueeze(-1) * wy.unsqueeze(-2)).reshape(flat)
    if gain == "kernel":
        return cells, w, w
    return cells, w, (px.unsqueeze(-1) * py.unsqueeze(-2)).reshape(flat)


def _prepare(
    addr: torch.Tensor,
    beta: torch.Tensor,
    v: torch.Tensor,
    log_retention: torch.Tensor | None,
    initial_state: torch.Tensor | None,
    scale: float,
    gain: str,
) -> tuple[tuple[int, int, int, int, int], torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validate a lattice kernel's arguments; return ((B, H, T, dv, cells), the initial state
    (zeros when None), and the taps' cells, read weights and beta-scaled write gains)."""
    if v.dim() != 4:
        raise ValueError(f"v must be (B,H,T,dv), got {tuple(v.shape)}")
    b, h, t, dv = v.shape
    cells = grid_side(scale) ** 2
    if addr.shape != (b, h, t, 2):
        raise ValueError(f"addr must be (B,H,T,2)={(b, h, t, 2)}, got {tuple(addr.shape)}")
    for name, x in (("beta", beta), ("log_retention", log_retention)):
        if x is not None and x.shape != (b, h, t):
            raise ValueError(f"{name} must be (B,H,T)={(b, h, t)}, got {tuple(x.shape)}")
    if initial_state is not None and initial_state.shape != (b, h, cells, dv):
        want = (b, h, cells, dv)
        raise ValueError(f"initial_state must be {want}, got {tuple(initial_state.shape)}")
    s0 = v.new_zeros(b, h, cells, dv) if initial_state is None else initial_state
    where, w, g = lattice_taps(addr, scale, gain)
    return (b, h, t, dv, cells), s0, where, w, g * beta.unsqueeze(-1)


def _read_taps(
    read_addr: torch.Tensor | None, addr: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Cells and weights (..., 9) of untied read addresses (None: reads are the writes')."""
    if read_addr is None:
        return None
    if read_addr.shape != addr.shape:
        raise ValueError(f"read_addr must be {tuple(addr.shape)}, got {tuple(read_addr.shape)}")
    cells, w, _ = lattice_taps(read_addr, scale)
    return cells, w


def lattice_recurrent(
    addr: torch.Tensor,
    beta: torch.Tensor,
    v: torch.Tensor,
    log_retention: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    *,
    scale: float,
    gain: str = "peak",
    read_addr: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Step-by-step lattice memory (read, retain, overwrite): the obviously-correct reference.

    Shapes: addr (B,H,T,2); beta, log_retention (B,H,T) (None: retention 1); v (B,H,T,dv);
    state (B,H,side^2,dv); read_addr (B,H,T,2), where each token reads (None: at ``addr``).
    Returns outputs (B,H,T,dv) and the final state.
    """
    (b, h, t, dv, _), s, cells, w, g = _prepare(
        addr, beta, v, log_retention, initial_state, scale, gain
    )
    untied = _read_taps(read_addr, addr, scale)
    r_cells, r_w = (cells, w) if untied is None else untied
    keep = [None] * t if log_retention is None else log_retention.exp().unbind(2)
    outs = []
    for c_t, w_t, g_t, v_t, r_t, rc_t in zip(
        cells.unbind(2),
        r_w.unbind(2),
        g.unbind(2),
        v.unbind(2),
        keep,
        r_cells.unbind(2),
        strict=True,
    ):
        index = c_t.unsqueeze(-1).expand(b, h, TAPS, dv)
        seen = s.gather(2, index)  # (B,H,9,dv): the state after step t-1 at the nine cells
        if untied is None:
            outs.append((w_t.unsqueeze(-1) * seen).sum(2))
        else:  # the read taps' own cells, before this step's write
            read = s.gather(2, rc_t.unsqueeze(-1).expand(b, h, TAPS, dv))
            outs.append((w_t.unsqueeze(-1) * read).sum(2))
        if r_t is not None:
            r = r_t[..., None, None]
            s, seen = s * r, seen * r
        new = seen + g_t.unsqueeze(-1) * (v_t.unsqueeze(2) - seen)
        s = s.scatter(2, index, new)
    o = torch.stack(outs, dim=2) if outs else v.new_zeros(b, h, 0, dv)
    return o, s


def _hillis_steele(
    a: torch.Tensor, b: torch.Tensor, span: int, reverse: bool, own: bool = False
) -> torch.Tensor:
    """x_e = a_e x_{e-1} + b_e (x_{e+1} when `reverse`) over axis 0, given that a is zero at
    least once in every `span` consecutive entries (segment starts): ceil(log2 span) rounds of
    doubling, each multiplying only already-composed coefficients; no autograd. With `own`, b
    is a scratch buffer the scan may overwrite (one allocation fewer)."""
    n, d = b.shape[0], 1
    rounds = max(0, (min(span, n) - 1).bit_length())
    if rounds == 0:
        return b if own else b.clone()
    x, x2 = (b if own else b.clone()), torch.empty_like(b)
    a, a2 = a.clone(), torch.empty_like(a)
    for i in range(rounds):
        keep, new, src = (slice(n - d, n), slice(0, n - d), slice(d, n))
        if not reverse:
            keep, new, src = slice(0, d), slice(d, n), slice(0, n - d)
        x2[keep] = x[keep]
        torch.addcmul(x[new], a[new].unsqueeze(-1), x[src], out=x2[new])
        if i + 1 < rounds:  # the composed coefficients are needed by another round
            a2[keep] = a[keep]
            torch.mul(a[new], a[src], out=a2[new])
            a, a2 = a2, a
        x, x2 = x2, x
        d *= 2
    return x


def _shifted_next(a: torch.Tensor) -> torch.Tensor:
    """a_{e+1} (0 past the end): the coefficients of the reverse (gradient) scan."""
    return torch.cat([a[1:], a.new_zeros(1)])


def _dot_previous(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """g_e . x_{e-1} per entry (0 at e = 0): the gradient of a coefficient of x_{e-1}."""
    out = g.new_zeros(g.shape[0])
    out[1:] = torch.linalg.vecdot(g[1:], x[:-1])
    return out


class _SegmentScan(torch.autograd.Function):
    """x_e = a_e x_{e-1} + b_e over axis 0 (a (E,), b (E, d)) with a hand-written backward:
    g_e = dx_e + a_{e+1} g_{e+1} (the same scan, reversed), db = g, da_e = g_e . x_{e-1}."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor, span: int) -> torch.Tensor:
        x = _hillis_steele(a, b, span, reverse=False)
        ctx.span = span
        ctx.save_for_backward(a, x)
        return x

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
        a, x = ctx.saved_tensors
        g = _hillis_steele(_shifted_next(a), d_x, ctx.span, reverse=True)
        return _dot_previous(g, x), g, None


def segment_scan(a: torch.Tensor, b: torch.Tensor, span: int | None = None) -> torch.Tensor:
    """Inclusive scan x_e = a_e x_{e-1} + b_e (x_{-1} = 0) along axis 0 of b (E, d), a (E,).

    `span` bounds the distance from any entry back to the nearest zero of a at or before it
    (a segment's length, when a is zero at each segment start); None means E (no bound).
    """
    n = b.shape[0]
    span = n if span is None else max(1, min(span, n))
    if n == 0:
        return b.clone()
    return _SegmentScan.apply(a, b, span)


class _Events(torch.autograd.Function):
    """The sorted write events of `lattice_chunked`, fused with a hand-written backward.

    Inputs per event e (sorted by segment, then time): stay_e (the A of the scan, 0 at segment
    starts), gain_e, read_e (the read weight times the decay since the previous write, 0 at
    segment starts: those reads see the carried state, handled outside), token_e (which row of
    v and o the event belongs to); `opening` (one row per segment start: its carried-state
    term). Forward: writes_e = gain_e v[token_e] (+ opening at starts), the scan
    state_e = stay_e state_{e-1} + writes_e, outputs o[token] += read_e state_{e-1} and the
    state at the `last` events. Backward: the reads' gradient joins the state gradient, one
    reverse scan gives G = d writes, and every other gradient is a dot product or gather.
    """

    @staticmethod
    def forward(
        ctx: Any,
        stay: torch.Tensor,
        gain: torch.Tensor,
        v: torch.Tensor,
        read: torch.Tensor,
        opening: torch.Tensor,
        token: torch.Tensor,
        starts: torch.Tensor,
        last: torch.Tensor,
        span: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        writes = v.index_select(0, token).mul_(gain.unsqueeze(-1))
        writes.index_add_(0, starts, opening)
        state = _hillis_steele(stay, writes, span, reverse=False, own=True)
        o = v.new_zeros(v.shape).index_add_(0, token[1:], state[:-1] * read[1:].unsqueeze(-1))
        ctx.span = span
        ctx.save_for_backward(stay, gain, v, read, token, starts, last, state)
        return o, state.index_select(0, last)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_o: torch.Tensor, d_last: torch.Tensor) -> tuple[Any, ...]:
        stay, gain, v, read, token, starts, last, state = ctx.saved_tensors
        d_seen = d_o.index_select(0, token)  # (E, dv): the gradient of each event's read
        d_read = _dot_previous(d_seen, state)
        d_state = d_seen  # reuse the buffer: d_state_{e-1} = read_e d_seen_e, plus d_last
        d_state[:-1] = d_seen[1:] * read[1:].unsqueeze(-1)
        d_state[-1] = 0.0
        d_state.index_add_(0, last, d_last)
        g = _hillis_steele(_shifted_next(stay), d_state, ctx.span, reverse=True, own=True)
        d_stay = _dot_previous(g, state)
        d_gain = torch.linalg.vecdot(g, v.index_select(0, token))
        d_opening = g.index_select(0, starts)
        d_v = v.new_zeros(v.shape).index_add_(0, token, g.mul_(gain.unsqueeze(-1)))
        return d_stay, d_gain, d_v, d_read, d_opening, None, None, None, None


def _scan_events(
    stay: torch.Tensor,
    g_e: torch.Tensor,
    read: torch.Tensor,
    v: torch.Tensor,
    s0: torch.Tensor,
    key: torch.Tensor,
    token: torch.Tensor,
    first: torch.Tensor,
    starts: torch.Tensor,
    span: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The segmented scan over events in (cell, time) order, each segment (one cell) opened
    by the cell's carried state: every token's read sum (n tokens, dv), each segment's last
    state, and each segment's last event index. Shared by the tied and untied forms."""
    b, h, t, dv = v.shape
    n_cells = s0.shape[-2]
    carried = s0.reshape(b * h * n_cells, dv).index_select(0, key[starts])  # segment openings
    last = torch.cat([starts[1:] - 1, starts.new_full((1,), key.numel() - 1)])
    o, state_last = _Events.apply(
        stay.masked_fill(first, 0.0),
        g_e,
        v.reshape(b * h * t, dv),
        read.masked_fill(first, 0.0),
        stay[starts].unsqueeze(-1) * carried,
        token,
        starts,
        last,
        span,
    )
    o = o.index_add(0, token[starts], read[starts].unsqueeze(-1) * carried)  # carried reads
    return o, state_last, last


def lattice_chunked(
    addr: torch.Tensor,
    beta: torch.Tensor,
    v: torch.Tensor,
    log_retention: torch.Tensor | None = None,
    initial_state: torch.Tensor | None = None,
    *,
    scale: float,
    gain: str = "peak",
    read_addr: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Time-parallel lattice memory (sorted write events, segmented scan); same result as
    `lattice_recurrent`, with the same arguments."""
    (b, h, t, dv, n_cells), s0, cells, w, g = _prepare(
        addr, beta, v, log_retention, initial_state, scale, gain
    )
    if t == 0 or b * h == 0:
        return v.new_zeros(b, h, t, dv), s0
    untied = _read_taps(read_addr, addr, scale)
    if untied is not None:
        return _chunked_untied(cells, g, untied, v, log_retention, s0, n_cells)
    bh = b * h
    lr = v.new_zeros(b, h, t) if log_retention is None else log_retention
    cum = lr.cumsum(-1)  # L(t): log-retention from the piece's start through t
    before = cum - lr  # L(t-1), with L(-1) = 0

    # events in (batch*head, cell, time) order: a stable sort of the time-major layout
    key = (torch.arange(bh, device=v.device).view(b, h, 1, 1) * n_cells + cells).flatten()
    order = torch.argsort(key, stable=True)
    key = key[order]
    token = order.div(TAPS, rounding_mode="floor")  # flat (batch*head, time) index
    first = torch.ones_like(key, dtype=torch.bool)
    first[1:] = key[1:] != key[:-1]
    starts = first.nonzero().squeeze(-1)
    span = int(torch.diff(starts, append=starts.new_full((1,), key.numel())).max())

    g_e, w_e = g.flatten()[order], w.flatten()[order]
    cum_e, before_e = cum.flatten()[token], before.flatten()[token]
    prev_cum = torch.cat([cum_e.new_zeros(1), cum_e[:-1]]).masked_fill(first, 0.0)
    lag = (before_e - prev_cum).exp()  # retention from the cell's last write up to t-1
    stay = (1.0 - g_e) * lr.flatten()[token].exp() * lag  # kept fraction of what the read sees
    read = w_e * lag
    o, state_last, last = _scan_events(stay, g_e, read, v, s0, key, token, first, starts, span)

    end = cum[..., -1].reshape(bh)
    final = s0.reshape(bh, n_cells, dv) * end.exp()[:, None, None]
    to_end = (end[key[last] // n_cells] - cum_e[last]).exp().unsqueeze(-1)
    final = final.reshape(bh * n_cells, dv).index_put((key[last],), state_last * to_end)
    return o.view(b, h, t, dv), final.view(b, h, n_cells, dv)


def _chunked_untied(
    cells: torch.Tensor,
    g: torch.Tensor,
    reads: tuple[torch.Tensor, torch.Tensor],
    v: torch.Tensor,
    log_retention: torch.Tensor | None,
    s0: torch.Tensor,
    n_cells: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`lattice_chunked` with untied reads: write events (gain g, no read) and read-only
    events (gain 0, read weight w) in one (cell, time) order, a step's read before its write.
    An event's "clock" is L(t) for a write and L(t-1) for a read (a read sees the cell before
    step t's retention), so the decay between consecutive events of a cell is the difference
    of their clocks, and a write's own retention r_t applies once."""
    b, h, t, dv = v.shape
    bh = b * h
    r_cells, r_w = reads
    lr = v.new_zeros(b, h, t) if log_retention is None else log_retention
    cum = lr.cumsum(-1)
    before = cum - lr
    base = torch.arange(bh, device=v.device).view(b, h, 1, 1) * n_cells
    step = torch.arange(t, device=v.device).view(1, 1, t, 1).expand(b, h, t, TAPS)
    cell_key = torch.cat([(base + r_cells).flatten(), (base + cells).flatten()])
    kind = torch.cat(  # 0: read, 1: write (a step's read comes first)
        [
            torch.zeros(r_cells.numel(), dtype=torch.long, device=v.device),
            torch.ones(cells.numel(), dtype=torch.long, device=v.device),
        ]
    )
    when = torch.cat([step.flatten(), step.flatten()])
    order = torch.argsort((cell_key * t + when) * 2 + kind)  # unique: no stability needed
    key = cell_key[order]
    token = (torch.cat([torch.arange(bh * t * TAPS, device=v.device)] * 2)[order]).div(
        TAPS, rounding_mode="floor"
    )
    is_write = kind[order].bool()
    first = torch.ones_like(key, dtype=torch.bool)
    first[1:] = key[1:] != key[:-1]
    starts = first.nonzero().squeeze(-1)
    span = int(torch.diff(starts, append=starts.new_full((1,), key.numel())).max())

    zeros = g.new_zeros(r_w.numel())
    g_e = torch.cat([zeros, g.flatten()])[order]
    w_e = torch.cat([r_w.flatten(), g.new_zeros(g.numel())])[order]
    clock = torch.where(is_write, cum.flatten()[token], before.flatten()[token])
    prev = torch.cat([clock.new_zeros(1), clock[:-1]]).masked_fill(first, 0.0)
    lag = (before.flatten()[token] - prev).exp()  # decay from the cell's last event to t-1
    own = torch.where(is_write, lr.flatten()[token].exp(), torch.ones_like(lag))
    stay = (1.0 - g_e) * own * lag
    read = w_e * lag
    o, state_last, last = _scan_events(stay, g_e, read, v, s0, key, token, first, starts, span)

    end = cum[..., -1].reshape(bh)
    final = s0.reshape(bh, n_cells, dv) * end.exp()[:, None, None]
    to_end = (end[key[last] // n_cells] - clock[last]).exp().unsqueeze(-1)
    final = final.reshape(bh * n_cells, dv).index_put((key[last],), state_last * to_end)
    return o.view(b, h, t, dv), final.view(b, h, n_cells, dv)


def spread_terms(
    addresses: torch.Tensor,
    scale: float,
    subsample: int = 2048,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(entropy, weight) per row of key addresses (..., N, 2): the two factors of `spread_loss`.

    entropy: of the row's histogram over the lattice, each key spreading its kernel weights (so
    the histogram is smooth in the addresses), normalised to sum 1. weight: 0.3 + 0.7 *
    clamp(overlap - 0.05, 0, 1), detached, where overlap is the mean cosine similarity of the
    kernel footprints of two distinct keys (1 at one shared address, 0 for disjoint 3x3
    neighbourhoods) over at most `subsample` keys per row, drawn from `generator` (a fresh one
    seeded 0 when None; the global RNG is never used). The mean over pairs is
    (|sum_i u_i|^2 - M) / (M (M - 1)) for the M unit footprints u_i, so no M x M matrix is formed.
    """
    if addresses.dim() < 2 or addresses.shape[-1] != 2:
        raise ValueError(f"addresses must be (..., N, 2), got {tuple(addresses.shape)}")
    if subsample < 2:
        raise ValueError(f"subsample must be >= 2, got {subsample}")
    n = addresses.shape[-2]
    rows = addresses.reshape(-1, n, 2)
    r = rows.shape[0]
    n_cells = grid_side(scale) ** 2
    cells, w, _ = lattice_taps(rows, scale, "kernel")
    mass = rows.new_zeros(r, n_cells).scatter_add(1, cells.flatten(1), w.flatten(1)) / max(n, 1)
    entropy = -(mass * mass.clamp_min(1e-30).log()).sum(-1)
    with torch.no_grad():
        cells, w = cells.detach(), w.detach()
        if n > subsample:
            if generator is None:
                generator = torch.Generator().manual_seed(0)
            draw = torch.rand(r, n, generator=generator, device=generator.device)
            pick = draw.argsort(-1)[:, :subsample, None].to(rows.device).expand(-1, -1, TAPS)
            cells, w = cells.gather(1, pick), w.gather(1, pick)
        m = cells.shape[1]
        unit = w / torch.linalg.vector_norm(w, dim=-1, keepdim=True)
        total = rows.new_zeros(r, n_cells).scatter_add_(1, cells.flatten(1), unit.flatten(1))
        overlap = (total.square().sum(-1) - m) / max(m * (m - 1), 1)
        weight = 0.3 + 0.7 * (overlap - 0.05).clamp(0.0, 1.0)
    return entropy, weight


def spread_loss(
    addresses: torch.Tensor,
    scale: float,
    subsample: int = 2048,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Address-spread regulariser mean(weight * -entropy) over rows of key addresses (..., N, 2)
    (see `spread_terms`): lower when keys spread over the lattice, pushed hardest when they
    overlap. A scalar; gradients reach the addresses through the entropy only."""
    entropy, weight = spread_terms(addresses, scale, subsample, generator)
    return (weight * -entropy).mean()
