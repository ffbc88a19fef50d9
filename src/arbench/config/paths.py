"""Where the repository lies: relative paths in the config (schemas, reference files) resolve
against it, whatever the working directory."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
