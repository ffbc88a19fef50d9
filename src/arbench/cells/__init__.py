"""Sequence mixers. Importing this package registers every cell by name."""

from arbench.cells.base import CELLS, SequenceMixer, build_cell, count_parameters, register

__all__ = ["CELLS", "SequenceMixer", "build_cell", "count_parameters", "register"]

from arbench.cells import registry  # noqa: E402,F401  (registers every cell)
