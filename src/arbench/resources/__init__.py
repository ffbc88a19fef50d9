"""What each job needs: peak memory (device and host) and time on a named device.

A scheduler needs every job's memory and runtime before it runs, and a job that cannot fit
its device must fail at planning, naming itself, not hours into a queue. This package
predicts both from the job's shapes and from measurements, never from a per-cell formula
typed in:

* a training job's shape comes from its task (`Task.train_shape`: the longest row it trains
  on, its supervised answers) and its train block (rows per step: ``batch``, or
  ``tokens_per_step`` over the row's length);
* its memory and work come from **probes** (`arbench.resources.probe`): one or two real
  training steps of the run's exact model on the CPU, at the job's own length when that is
  at most `PROBE_MAX` tokens, else at `FIT_LENGTHS` and extrapolated by a quadratic in the
  length (exact for the linear-memory kernels, and for attention's T x T terms). The probe
  table (`probes.json` beside this file) is measured once per model and shape by
  ``make paper-plan-probes``; planning reads it and never runs torch;
* the key-value benchmark's transformer (family ``kvbench``) switches attention paths with
  the length, so it has its own model (`arbench.models.kvbench_memory`);
* the device (`Device`, the config's ``devices:``) turns work into time: each dispatched
  operator costs ``op_overhead_us`` and each FLOP ``1 / (tflops x utilisation)``.

`Estimate` is one job's prediction; `check` raises `ResourceError`, one line naming the job,
when its memory exceeds its device's, or when its runtime cannot be served within a partition's
time limit (`PARTITION_MINUTES`, the config's ``resources.partition_minutes``): an evaluation
over the limit (it cannot resume), or a training whose checkpoints lie further apart than the
limit (a timed-out job, submitted again, resumes from its last checkpoint, so each submission
must reach one). A training longer than the limit is checkpoint-chained: every submission asks
for at most the limit (`Estimate.request_minutes`) and the next resumes where it stopped.

A GPU job's host memory is the process's base, the CUDA runtime's host share
(`CUDA_HOST_BYTES`) and the tensors it keeps on the host beside the device's
(`arbench.resources.jobs`: the weights as loaded or checkpointed, a batch's token ids).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROBE_FILE = Path(__file__).with_name("probes.json")
PROBE_MAX = 2048  # a row at most this long is probed at its own length
FIT_LENGTHS = (256, 512, 1024)  # longer rows: probed here, extrapolated (`_fit`)
HOST_BASE_BYTES = 1.5 * 2**30  # a job's Python, torch and data besides its tensors
# what a process that uses CUDA holds on the host besides that: the driver's context, the
# CUDA runtime's, cuBLAS's and cuDNN's loaded kernel images, the caching allocator's
# bookkeeping. An assumption (no GPU has measured it here); `make gpu-check` records a GPU
# process's peak resident set (`peak_rss_mib`) to replace it with
CUDA_HOST_BYTES = 2.0 * 2**30
SAFETY = 1.25  # headroom asked of a scheduler over the prediction
# the longest job a partition takes (minutes): 48 h, a common GPU partition's MaxTime
# (`sinfo -o "%P %l"` shows a site's); a site sets its own as resources.partition_minutes
PARTITION_MINUTES = 48 * 60
START_MINUTES = 5  # what each submission adds to start: Python, torch, the data


class ResourceError(ValueError):
    """A job that cannot run on its declared device, or whose shape was never probed."""


@dataclass(frozen=True)
class Device:
    """A device a job is declared to run on (config ``devices:``)."""

    name: str
    memory_gib: float  # usable device memory
    host_memory_gib: float  # host memory of one job's node share
    tflops: float  # peak fp32 throughput the jobs' precision gets
    utilisation: float  # fraction of ``tflops`` a training step reaches
    op_overhead_us: float  # launch and framework cost of one dispatched operator
    gpu: bool = True
    slurm_gpu_model: str | None = None  # what the SLURM profile asks for (--gpus=<model>:1)

    @classmethod
    def from_config(cls, name: str, block: Mapping[str, Any]) -> Device:
        return cls(name=name, **block)

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * 2**30

    def seconds(self, flops: float, ops: float) -> float:
        """Time of work of ``flops`` FLOPs in ``ops`` dispatched operators."""
        return ops * self.op_overhead_us * 1e-6 + flops / (self.tflops * 1e12 * self.utilisation)


def declared_device(resources: Mapping[str, Any]) -> Device:
    """The device a config's ``resources:`` block declares its jobs on (``device``, one of
    ``devices``); a name it does not declare is a `ResourceError` naming the key."""
    name, devices = resources["device"], resources["devices"]
    if name not in devices:
        raise ResourceError(
            f"resources.device: {name!r}; not one of the declared devices "
            f"(resources.devices: {', '.join(sorted(devices))})"
        )
    return Device.from_config(name, devices[name])


def check_config(cfg: Mapping[str, Any]) -> None:
    """The ``resources:`` block of a resolved config, at every scale (only paper scale
    plans with it, so a typo would otherwise pass every smaller one): its ``device`` is one
    it declares, and ``expected_steps`` names configured experiments. `ResourceError`
    naming the key."""
    block = cfg.get("resources")
    if not block:
        return
    declared_device(block)
    for name in block.get("expected_steps") or {}:
        if name not in cfg["experiments"]:
            raise ResourceError(
                f"resources.expected_steps.{name}: not a configured experiment "
                f"(experiments: {', '.join(sorted(cfg['experiments']))})"
            )


@dataclass(frozen=True)
class Shape:
    """One job's step: ``rows`` sequences of ``length`` tokens, ``supervised`` answers each,
    run as ``parts`` forward-backward passes of at most ``part_rows`` rows
    (``train.micro_batch_tokens``; one pass of every row without it)."""

    rows: int
    length: int
    supervised: int
    parts: int = 1

    @property
    def part_rows(self) -> int:
        """Rows of the largest pass: what a step's activations are sized by."""
        return -(-self.rows // self.parts)


@dataclass(frozen=True)
class Estimate:
    """One job's prediction on its device: ``seconds`` as it is expected to run; where that
    is an expectation below a hard bound (a load schedule's early stop: `arbench.resources.
    jobs.train_estimate`), ``bound_seconds`` is the bound (every declared step at the last
    rung); ``checkpoint_seconds`` is a training's longest time between two checkpoints."""

    job: str
    device: str
    device_bytes: float
    host_bytes: float
    seconds: float
    shape: Shape
    bound_seconds: float | None = None
    checkpoint_seconds: float | None = None

    @property
    def upper_seconds(self) -> float:
        """The longest the job can take: its bound where it has one, else its prediction."""
        return self.seconds if self.bound_seconds is None else self.bound_seconds

    @property
    def mem_mb(self) -> int:
        """Host memory to ask for (MB, with `SAFETY`)."""
        return int(math.ceil(self.host_bytes * SAFETY / 1e6))

    @property
    def device_mem_mb(self) -> int:
        return int(math.ceil(self.device_bytes * SAFETY / 1e6))

    @property
    def runtime_minutes(self) -> int:
        """The job's minutes: the prediction with `SAFETY`, plus `START_MINUTES`, at least
        10 (what a scheduler is asked for, up to a partition's limit: `request_minutes`)."""
        return minutes(self.seconds)

    @property
    def bound_minutes(self) -> int:
        """`runtime_minutes` of the upper bound (`upper_seconds`)."""
        return minutes(self.upper_seconds)

    def request_minutes(self, limit: int = PARTITION_MINUTES, attempt: int = 1) -> int:
        """Minutes one submission asks for: `runtime_minutes`, doubled on each retry (a job
        that ran out of time resumes from its checkpoint with twice as long), never more
        than ``limit``; a job longer than ``limit`` is chained, ``limit`` minutes at a time."""
        return min(int(limit), self.runtime_minutes * 2 ** max(0, int(attempt) - 1))

    def submissions(self, limit: int = PARTITION_MINUTES) -> int:
        """Submissions of at most ``limit`` minutes its expected runtime takes (1 unless
        chained), each after the first resuming from the last checkpoint."""
        return chain_links(self.runtime_minutes, limit)


def minutes(seconds: float) -> int:
    """Minutes to ask for ``seconds`` of predicted work: with `SAFETY`, plus `START_MINUTES`,
    at least 10."""
    return max(10, int(math.ceil(seconds * SAFETY / 60)) + START_MINUTES)


def chain_links(total_minutes: int, limit: int) -> int:
    """Submissions of at most ``limit`` minutes, each losing `START_MINUTES` to starting,
    that ``total_minutes`` (one submission's start included) take."""
    work, per_link = total_minutes - START_MINUTES, max(1, int(limit) - START_MINUTES)
    return max(1, -(-work // per_link))


def check(estimate: Estimate, device: Device, limit: int | None = None) -> None:
    """Raise `ResourceError` naming the job when it needs more memory than its device has
    (or more host memory than a job of that device has beside it); with a partition
    ``limit`` (minutes), also when it cannot be served within it: an evaluation longer than
    the limit (evaluations do not resume), or a training whose checkpoints lie more than the
    limit apart (a submission cut off at the limit would never reach the checkpoint the next
    one resumes from)."""
    if estimate.device_bytes > device.memory_bytes:
        raise ResourceError(
            f"{estimate.job}: needs {estimate.device_bytes / 2**30:,.1f} GiB on {device.name}, "
            f"which has {device.memory_gib:g} GiB ({estimate.shape.part_rows} rows x "
            f"{estimate.shape.length:,} tokens a pass)"
        )
    if estimate.host_bytes > device.host_memory_gib * 2**30:
        raise ResourceError(
            f"{estimate.job}: needs {estimate.host_bytes / 2**30:,.1f} GiB of host memory beside "
            f"{device.name}, whose jobs have {device.host_memory_gib:g} GiB"
        )
    if limit is None:
        return
    if estimate.job.startswith("evaluate ") and estimate.runtime_minutes > limit:
        raise ResourceError(
            f"{estimate.job}: needs {estimate.runtime_minutes:,} minutes on {device.name}, more "
            f"than the partition limit of {limit:,} (resources.partition_minutes), and an "
            "evaluation does not resume: shorten it or raise the limit"
        )
    ckpt = estimate.checkpoint_seconds
    if ckpt is not None and estimate.bound_minutes > limit and minutes(ckpt) > limit:
        raise ResourceError(
            f"{estimate.job}: its checkpoints lie up to {minutes(ckpt):,} minutes apart on "
            f"{device.name}, more than the partition limit of {limit:,} "
            "(resources.partition_minutes) its submissions are chained at: lower "
            "train.checkpoint_every"
        )


# ------------------------------------------------------------------------------ probes


def probe_key(
    model: Mapping[str, Any],
    vocab: int,
    positions: int | None,
    length: int,
    supervised: int,
    rows: int,
) -> str:
    """The identity of one probe: the model it measured and the shape it measured at."""
    blob = json.dumps([dict(model), vocab, positions, length, supervised, rows], sort_keys=True)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ProbeSpec:
    """One probe a prediction needs: the model block, the task's vocabulary and positions,
    and the shape measured."""

    model: Mapping[str, Any]
    vocab: int
    positions: int | None
    length: int
    supervised: int
    rows: int

    @property
    def key(self) -> str:
        return probe_key(
            dict(self.model), self.vocab, self.positions, self.length, self.supervised, self.rows
        )


def probe_specs(
    model: Mapping[str, Any],
    vocab: int,
    positions: int | None,
    lengths: Iterable[int],
    fraction: float,
) -> list[ProbeSpec]:
    """The probes that predict this model at every length of ``lengths`` (rows of which
    ``fraction`` of the tokens are answers): one and two rows at the first length, one row
    at each further one; a length over `PROBE_MAX` is predicted from `FIT_LENGTHS` instead."""
    want = {n for n in lengths if n <= PROBE_MAX}
    if any(n > PROBE_MAX for n in lengths):
        want |= set(FIT_LENGTHS)
    if positions is not None:  # learned positions: never longer than the table
        want = {min(n, positions) for n in want}
    out = []
    for i, length in enumerate(sorted(want)):
        sup = max(1, round(fraction * length))
        for rows in (1, 2) if i == 0 else (1,):
            out.append(ProbeSpec(dict(model), vocab, positions, length, sup, rows))
    return out


class ProbeTable:
    """The measured probes (`PROBE_FILE`), keyed by `ProbeSpec.key`."""

    def __init__(self, path: Path = PROBE_FILE) -> None:
        self.path = Path(path)
        self.rows: dict[str, dict[str, Any]] = (
            json.loads(self.path.read_text()) if self.path.exists() else {}
        )

    def missing(self, specs: Iterable[ProbeSpec]) -> list[ProbeSpec]:
        return [s for s in specs if s.key not in self.rows]

    def add(self, spec: ProbeSpec, measured: Mapping[str, float]) -> None:
        self.rows[spec.key] = {
            "model": dict(spec.model),
            "vocab": spec.vocab,
            "length": spec.length,
            "supervised": spec.supervised,
            "rows": spec.rows,
            **measured,
        }

    def save(self) -> None:
        text = json.dumps(dict(sorted(self.rows.items())), indent=0, sort_keys=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(self.path)

    def get(self, spec: ProbeSpec, job: str) -> dict[str, Any]:
        if spec.key not in self.rows:
            raise ResourceError(
                f"{job}: no probe of its model at {spec.rows} x {spec.length} tokens; run "
                "`make paper-plan-probes` to measure the missing ones"
            )
        return self.rows[spec.key]


CURVED = 0.02  # a work curve is quadratic when its T^2 term is this share at the last probe


def quadratic_share(points: list[tuple[float, float]]) -> float:
    """The share of the value at the last of ``points`` that the least-squares quadratic's
    T^2 term makes (0 with fewer than three points, or a non-positive curvature)."""
    import numpy as np

    if len(points) < 3:
        return 0.0
    xs = np.array([p[0] for p in points], dtype=float)
    ys = np.array([p[1] for p in points], dtype=float)
    c = float(np.polyfit(xs, ys, 2)[0])
    return max(0.0, c * xs[-1] ** 2 / max(float(ys[-1]), 1e-30))


def _fit(points: list[tuple[float, float]], x: float, quadratic: bool = True) -> float:
    """The value at ``x`` from ``points`` (length, value): where measured, the measurement;
    else the least-squares quadratic in the length (``quadratic``; a line through two
    points), or the line through the last two points. Beyond the last point it is never below
    that line (with a slope of at least 0), so a fitted curvature never makes a longer row
    cheaper than the measured trend."""
    import numpy as np

    xs = np.array([p[0] for p in points], dtype=float)
    ys = np.array([p[1] for p in points], dtype=float)
    if x in xs:
        return float(ys[list(xs).index(x)])
    if len(points) == 1:
        raise ValueError(f"one probe at length {xs[0]:g} cannot predict length {x:g}")
    slope = float((ys[-1] - ys[-2]) / (xs[-1] - xs[-2]))
    line = float(ys[-1] + slope * (x - xs[-1]))
    if not quadratic:
        return line if x > xs[-1] else float(np.interp(x, xs, ys))
    value = float(np.polyval(np.polyfit(xs, ys, min(2, len(points) - 1)), x))
    if x <= xs[-1]:
        return value
    return max(value, float(ys[-1] + max(0.0, slope) * (x - xs[-1])))


def predict(table: ProbeTable, specs: list[ProbeSpec], shape: Shape, job: str) -> dict[str, float]:
    """Peak training bytes, peak evaluation bytes, FLOPs and operators of one pass of
    ``shape`` from its probes (`probe_specs`): the per-row part is the one-row probe less the
    fixed part (weights, gradients, moments: one-row minus the two-row slope), fitted over
    the lengths (`_fit`; quadratically only where the FLOPs are, `quadratic_share`)."""
    rows = {(s.length, s.rows): table.get(s, job) for s in specs}
    first = min(length for length, _ in rows)
    one, two = rows[(first, 1)], rows[(first, 2)]

    def per_row(field: str) -> tuple[float, list[tuple[float, float]]]:
        fixed = 2 * one[field] - two[field]
        pts = [(length, r[field] - fixed) for (length, n), r in sorted(rows.items()) if n == 1]
        return fixed, pts

    # memory grows with T^2 only through T x T tensors, and those come with T^2 work: where
    # the step's FLOPs grow linearly, so is memory taken to (a small-T bend of the memory
    # curve, a kernel's fixed buffers, would otherwise be extrapolated as a square)
    quadratic = quadratic_share(per_row("flops")[1]) > CURVED
    out: dict[str, float] = {}
    for field in ("peak_bytes", "eval_peak_bytes", "flops"):
        fixed, pts = per_row(field)
        each = _fit(pts, shape.length, quadratic or field == "flops")
        out[field] = max(0.0, fixed) + shape.rows * each
        out[f"{field}_fixed"] = max(0.0, fixed)
        out[f"{field}_per_row"] = each
    ops = [(length, r["ops"]) for (length, n), r in sorted(rows.items()) if n == 1]
    out["ops"] = _fit(ops, shape.length, False) if len(ops) > 1 else ops[0][1]
    out["parameters"] = one["parameters"]
    return out
