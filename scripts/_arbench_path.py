"""Make this checkout's `src/arbench` the one a job's script process imports.

Snakemake puts this folder on sys.path for `script:` rules; importing this module first lets
every script find the library without installing it. The checkout's src/ is moved to the
front even when it is already on the path: a job inherits the parent's path *after* the
interpreter's own entries, so an environment with arbench installed from another checkout
(an editable install in a shared venv or conda env) would otherwise win silently.
"""

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
while SRC in sys.path:
    sys.path.remove(SRC)
sys.path.insert(0, SRC)
_loaded = sys.modules.get("arbench")
if _loaded is not None and not str(Path(_loaded.__file__).resolve()).startswith(SRC):
    raise ImportError(f"arbench was imported from {_loaded.__file__} before {SRC} took effect")
