"""What a profile says, as records: findings with their evidence, and conflicts resolved.

The rules that make them are `tfperf.findings`'; every renderer reads these records.

Example:
    >>> from tfperf.results.findings import Level
    >>> Level("caution").name
    'CAUTION'
"""

from __future__ import annotations

from tfperf.results._findings import Conflict, Evidence, Finding, Level, introduced_hazards

__all__ = ["Conflict", "Evidence", "Finding", "Level", "introduced_hazards"]
