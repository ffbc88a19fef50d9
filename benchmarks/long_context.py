"""Long-context evaluation cost of the key-value benchmark's model: one forward pass of a
randomly initialised variant over T tokens, each length in a fresh process (so each peak RSS
is its own), through the tiled attention path. Prints one JSON line per length with seconds,
tokens/s and peak RSS, then the memory growth from the smallest to the largest length.

    .venv/bin/python benchmarks/long_context.py [--variant hybrid_square] [--lengths 1024 4096]
        [--tile 1024] [--threads 1]

Global attention costs T^2 work, so on a CPU core the sweep stops being practical near 10^5
tokens; the memory must grow linearly (never a T x T matrix).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def one(variant: str, length: int, tile: int, threads: int) -> dict:
    """Forward ``length`` random tokens once (no grad) and measure it."""
    import torch

    from arbench.models.kvbench import KVModelConfig, KVTransformer

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = KVTransformer(KVModelConfig(variant=variant)).eval()
    tokens = torch.randint(0, 12, (1, length))
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    with torch.no_grad():
        model.hidden(tokens, tile=tile)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "variant": variant,
        "tokens": length,
        "seconds": round(seconds, 3),
        "tokens_per_s": round(length / seconds, 1),
        "peak_rss_mib": round(peak / 1024, 1),
        "rss_growth_mib": round((peak - base) / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", default="hybrid_square")
    parser.add_argument("--lengths", type=int, nargs="*", default=[1024, 4096, 16384])
    parser.add_argument("--tile", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.variant, args.one, args.tile, args.threads)))
        return
    rows = []
    for length in args.lengths:
        cmd = [sys.executable, __file__, "--variant", args.variant, "--tile", str(args.tile),
               "--threads", str(args.threads), "--one", str(length)]  # fmt: skip
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        print(
            json.dumps(
                {
                    "length_ratio": b["tokens"] / a["tokens"],
                    "rss_growth_ratio": round(
                        b["rss_growth_mib"] / max(a["rss_growth_mib"], 1e-3), 2
                    ),
                    "time_ratio": round(b["seconds"] / a["seconds"], 1),
                }
            )
        )


if __name__ == "__main__":
    main()
