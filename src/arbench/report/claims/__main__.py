"""``python -m arbench.report.claims --root results/demo --scale demo``."""

from arbench.report.claims import main

raise SystemExit(main())
