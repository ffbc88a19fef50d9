"""Tasks: one module or package per task, each with its generator, independent oracle, floor
calculator and adapter. Importing this package imports every task module in it, so each
adapter registers its name (`register_task`): a new task is one new module here."""

import importlib
import pkgutil

from arbench.tasks.base import IGNORE, TASKS, Batch, Task, build_task, register_task, task_class

__all__ = ["IGNORE", "TASKS", "Batch", "Task", "build_task", "register_task", "task_class"]

for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "base"):
    importlib.import_module(f"{__name__}.{_module}")
