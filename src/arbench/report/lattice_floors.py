"""The floor of an updated key's query and how a floor line looks, shared by the lattice
report's figure and the grid figure (`arbench.report.figures`), so both draw the same floor
for the same number in the same style, and neither imports the other for it."""

from __future__ import annotations

from typing import Any


def updated_floor(task: dict[str, Any], overwrite: float) -> float | None:
    """No-binding floor of an updated query, 1/M for the M = round(P * overwrite) updated
    keys (a guess among the update pass's values); None when nothing is updated."""
    m = int(round(task["pairs"] * overwrite))
    return 1.0 / m if m else None


def updated_floors(pairs: list[int], overwrites: list[float]) -> list[float | None]:
    """The no-binding floor of an updated query at each (P, overwrite) point, 1/M
    (`updated_floor`): one function for every panel, so the same M draws the same floor."""
    return [
        updated_floor({"pairs": int(p)}, float(o)) for p, o in zip(pairs, overwrites, strict=True)
    ]


# each floor's line style and legend words
FLOOR_STYLES = {
    "best": ("-.", "best no-binding, all queries"),
    # dash-dot-dot: apart from every floor style of the grid figures (":", "--", "-.")
    "updated": ((0, (4, 1.5, 1, 1.5, 1, 1.5)), "no-binding, updated keys (1/M)"),
}
