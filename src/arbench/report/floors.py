"""The floors table: one row per distinct task block the harness trains on, each floor from
that task's own calculator (`Task.floors`), so a new task or grid point gets its row by
construction."""

from __future__ import annotations

import json
from typing import Any

from arbench.tasks import build_task
from arbench.tasks.base import FLOOR_COLUMNS


def floor_rows(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the floors table from (experiment, task block) pairs: identical blocks share a
    row that lists every experiment using it; rows keep first-seen order within each task."""
    rows: dict[str, dict[str, Any]] = {}
    for block in blocks:
        settings = block["task"]
        key = json.dumps(settings, sort_keys=True)
        if key not in rows:
            task = build_task(settings)
            floors = task.floors()
            rows[key] = {
                "task": settings["name"],
                "summary": task.summary(),
                "floors": {c: floors.get(c) for c in FLOOR_COLUMNS},
                "other": {k: v for k, v in floors.items() if k not in FLOOR_COLUMNS},
                "experiments": [],
            }
        if block["experiment"] not in rows[key]["experiments"]:
            rows[key]["experiments"].append(block["experiment"])
    order = list(dict.fromkeys(r["task"] for r in rows.values()))
    return sorted(rows.values(), key=lambda r: order.index(r["task"]))
