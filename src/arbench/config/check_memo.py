"""A memo, shared by processes, of the other scales' checks that passed.

`arbench.config.resolve` checks every scale's rewrites whichever scale is planned, so that a
typo in another scale's overrides fails any plan. That costs every Snakemake start about
1.6 CPU-s at this config's size, and `make test` starts Snakemake a hundred times on the same
config. A check that passed is recorded under a key made of everything it reads: the raw
config, the scale, the library's source and schema, and each reference file the config names.
Only passes are recorded; a failing scale is checked again each time, so its error is never
stale. Where the cache folder cannot be written the check simply runs.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from arbench.config.paths import ROOT

LIBRARY = Path(__file__).resolve().parents[1]  # src/arbench


def cache_dir() -> Path:
    """Where passes are recorded: $ARBENCH_CACHE, else the user's cache folder."""
    base = os.environ.get("ARBENCH_CACHE") or os.environ.get("XDG_CACHE_HOME")
    return Path(base or Path.home() / ".cache") / "arbench" / "scale-checks"


@functools.cache
def _library_digest(library: Path = LIBRARY) -> str:
    """One hash of every module of the library and of the config schema (what a check runs)."""
    h = hashlib.sha256(sys.version.encode())
    for path in sorted(library.rglob("*.py")):
        h.update(str(path.relative_to(library)).encode() + b"\0" + path.read_bytes())
    from arbench.config.validation import SCHEMA

    h.update(SCHEMA.read_bytes())
    return h.hexdigest()


def key(raw: str, scale: str) -> str:
    """The memo's key of ``scale``'s check of the raw config (JSON text)."""
    h = hashlib.sha256(_library_digest().encode())
    h.update(raw.encode() + b"\0" + scale.encode())
    experiments: dict[str, Any] = json.loads(raw).get("experiments") or {}
    files = {str(e["reference"]["file"]) for e in experiments.values() if e.get("reference")}
    for name in sorted(files):
        path = Path(name) if Path(name).is_absolute() else ROOT / name
        h.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"missing"))
    return h.hexdigest()


def passed(raw: str, scale: str) -> bool:
    """Whether this exact check is recorded as passed."""
    try:
        return (cache_dir() / key(raw, scale)).is_file()
    except OSError:
        return False


def record_pass(raw: str, scale: str) -> None:
    """Record that the check passed (silently nothing where the folder cannot be written)."""
    try:
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / key(raw, scale)).write_text(f"scale {scale}: resolves\n")
    except OSError:
        pass
