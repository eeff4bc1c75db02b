"""What a build of a plain file or script found: its tunable call sites, and the calls made
inside libraries, which are not tunable there.
"""

from __future__ import annotations

from tfperf.results._discovery import (
    ArgumentForm,
    CallSite,
    Discovery,
    SlowStage,
    Untunable,
    describe_discovery,
)

__all__ = [
    "ArgumentForm",
    "CallSite",
    "Discovery",
    "SlowStage",
    "Untunable",
    "describe_discovery",
]
