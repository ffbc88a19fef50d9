"""Sequence mixers (layers). Importing this package registers every cell by name.

A cell projects and gates its input, runs a recurrence kernel from `arbench.kernels` (or, for
attention and the bidirectional wrapper, its own forward) and maps the result back to d_model.
"""

from arbench.cells.base import CELLS, SequenceMixer, build_cell, count_parameters, register

__all__ = ["CELLS", "SequenceMixer", "build_cell", "count_parameters", "register"]

from arbench.cells import registry  # noqa: E402,F401  (registers every cell)
