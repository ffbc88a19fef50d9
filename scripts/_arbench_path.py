"""Make `src/arbench` importable from a job's script process (conda envs, clusters).

Snakemake puts this folder on sys.path for `script:` rules; importing this module
first lets every script find the library without installing it.
"""

import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
