"""Import every cell module of this package, so each registers its name with `register`: a new
cell is one new module in `arbench/cells/`, nothing else to edit. Modules load in name order,
which is the order `CELLS` (and so the benchmark and the cell table) lists them."""

import importlib
import pkgutil

import arbench.cells as _package

for _module in sorted(m.name for m in pkgutil.iter_modules(_package.__path__)):
    if _module != "registry":
        importlib.import_module(f"{_package.__name__}.{_module}")
