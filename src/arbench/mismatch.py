"""A run's settings against the settings it was asked for: the error and its one-line diff.

Torch-free, so the jobs that only check records (an evaluation's task check, the data jobs'
run layer) say what differs without importing the training loop.
"""

from __future__ import annotations

from typing import Any


class SettingsMismatch(RuntimeError):
    """A checkpoint or model file was written by other run settings than the ones asked for."""


def differences(ours: dict[str, Any], theirs: dict[str, Any], limit: int = 6) -> str:
    """The dotted keys whose values differ, as 'key: ours vs theirs', at most ``limit``."""
    a, b = _flatten(ours), _flatten(theirs)
    keys = sorted(set(a) | set(b))
    found = [
        f"{k}: {_shown(a, k)} vs {_shown(b, k)}"
        for k in keys
        if a.get(k, _UNSET) != b.get(k, _UNSET)
    ]
    more = f" and {len(found) - limit} more" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more if found else "no field differs"


_UNSET = object()


def _shown(flat: dict[str, Any], key: str) -> str:
    return repr(flat[key]) if key in flat else "(unset)"


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict):
        return {prefix: d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out
