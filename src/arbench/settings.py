"""The two checks every settings block shares, written once: a block read into its dataclass
with an unknown key named (`settings_block`), and a whole number at least a minimum
(`whole_number`), each failing early in one line that names the key."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

T = TypeVar("T")


def settings_block(
    cls: type[T], block: Mapping[str, Any], where: str, drop: Collection[str] = ()
) -> T:
    """Dataclass ``cls`` from a settings ``block`` (its keys in ``drop`` left out); a key the
    dataclass has no field for is a ValueError naming ``where`` and the key, listing the
    known ones."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    given = {k: v for k, v in block.items() if k not in drop}
    unknown = sorted(set(given) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; known: {sorted(known)}")
    return cls(**given)


def whole_number(value: Any, where: str, minimum: int = 1) -> int:
    """``value`` when it is an integer (not a bool) of at least ``minimum``; else a ValueError
    naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{where} must be an integer >= {minimum}, got {value!r}")
    return value
