"""Import every cell module of this package, so each registers its name with `register`: a new
cell is one new module in `arbench/cells/`, nothing else to edit. Modules load in name order,
which is the order `CELLS` (and so the benchmark and the cell table) lists them. The package
is found from this file's folder, not imported, so the package and this module form no
import cycle."""

import importlib
import pkgutil
from pathlib import Path

_PACKAGE = __name__.rpartition(".")[0]

for _module in sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)])):
    if _module != "registry":
        importlib.import_module(f"{_PACKAGE}.{_module}")
