"""`python -m benchmarks`: see `benchmarks.command`."""

from __future__ import annotations

import sys

from benchmarks.command import main

sys.exit(main())
