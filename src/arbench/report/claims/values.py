"""How a claim's values read in its report's cells: below both the verdicts (whose reasons
quote values) and the rendering, so neither imports the other for it."""

from __future__ import annotations

import math
from typing import Any


def fmt(value: Any, signed: bool = False) -> str:
    """A value for a table cell: yes/no, integers as they are, floats to 3 decimals (1 above
    100, scientific below 0.001)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if value != 0 and abs(value) < 1e-3:
            text = f"{value:.1e}"
        elif abs(value) >= 100 and value.is_integer():
            text = f"{value:,.0f}"
        elif abs(value) >= 100:
            text = f"{value:,.1f}"
        else:
            text = f"{value:.3f}"
        return f"+{text}" if signed and value > 0 else text
    return str(value)
