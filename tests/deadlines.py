"""How long a test waits before it calls a process hung.

Every wait in the suite is a hang guard, never a performance check: a loaded 2-core machine
(another suite beside this one, a CPU-bound process on each core) makes a TensorFlow import, a
trial or a browser render several times slower than on a quiet one, and a test must pass there
all the same. A wait that bounds behaviour the test asserts (a `--trial-timeout` meant to
fire) is not one of these: it is set by that test and waits for something that never comes.
"""

from __future__ import annotations

#: Seconds a test waits for a process, a file or a server before it fails as hung.
HANG_S = 900.0
#: The same, for Playwright's waits, which take milliseconds.
HANG_MS = HANG_S * 1000
