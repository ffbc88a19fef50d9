"""The names of the report layouts, in a leaf module below the tasks: `arbench.report.layouts`
declares each (and checks it declares exactly these), a task's adapter is checked against
them when it registers (`arbench.tasks.base.register_task`), without tasks importing report.
"""

from __future__ import annotations

# every layout `arbench.report.layouts.LAYOUTS` registers, in its order
LAYOUT_NAMES: tuple[str, ...] = ("bars", "sweep", "grid", "lockin", "frontier", "kvbench")

# the layout the plan gives an experiment with a grid (`arbench.plan.Plan.layout`): an
# experiment's, never a task's own declaration
GRID_LAYOUT = "grid"

# the layouts a task may declare as its own (`Task.layout`)
TASK_LAYOUTS: tuple[str, ...] = tuple(n for n in LAYOUT_NAMES if n != GRID_LAYOUT)
