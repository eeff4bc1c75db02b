"""Evidence about a trial that tfperf did not see happen: OOM kills, folders of dead tuners.

A child killed by SIGKILL was killed by someone: the kernel's out-of-memory killer leaves a
count behind (`/proc/vmstat`, the cgroup's memory events), a user's `kill -9` does not. A tuner
killed outright leaves its trial folder in the temporary folder; its name holds the tuner's
process id, so the next run can tell it is stale and remove it.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

#: Trial folders are named tfperf-trial-<pid of the tuner>-<random>, so stale ones can be found.
FOLDER_PREFIX = "tfperf-trial-"


def oom_kill_count() -> int | None:
    """Out-of-memory kills the kernel has counted (system-wide and in this cgroup), summed.

    Read from /proc/vmstat and the cgroup's `memory.events` (v2) or `memory.oom_control` (v1);
    None when none of them is readable (not Linux, an old kernel, a locked-down container).
    """
    counts = [count for count in map(_counter_in, _oom_counter_files()) if count is not None]
    return sum(counts) if counts else None


def reap_stale_folders() -> list[Path]:
    """Removes trial folders whose tuner died (SIGKILL leaves them); returns those removed."""
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*-*"):
        owner = folder.name[len(FOLDER_PREFIX) :].split("-", 1)[0]
        if not owner.isdigit() or psutil.pid_exists(int(owner)) or not folder.is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            removed.append(folder)
            logger.info("removed %s, left by a tuner that was killed", folder)
    return removed


def oom_since(before: int | None) -> bool | None:
    after = oom_kill_count()
    return None if before is None or after is None else after > before


def _oom_counter_files() -> list[Path]:
    files = [Path("/proc/vmstat")]
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="utf-8").splitlines()
    except OSError:
        return files
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            files.append(Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.events")
        elif "memory" in controllers.split(","):
            files.append(Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.oom_control")
    return files


def _counter_in(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None
