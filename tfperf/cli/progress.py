"""Progress bars on stderr for long steps (warm-up, measurement); silent when asked."""

from __future__ import annotations

import sys
import threading
import time

from tfperf.measure import Progress
from tfperf.results import Phase

_LABELS = {
    Phase.END_TO_END: "end to end",
    Phase.PIPELINE_ONLY: "pipeline only",
    Phase.COMPUTE_ONLY: "compute only",
}


def waiting_words(name: str, seconds: float) -> str:
    """The line shown until the first step: what the run waits for, and for how long.

    A training script's start-up (imports, opening its data) can take minutes before its
    first batch, and no step reports progress until then.

    >>> waiting_words("train.py", 12.4)
    'waiting for train.py to reach its first batch (12 s)'
    """
    return f"waiting for {name} to reach its first batch ({seconds:.0f} s)"


class ProgressDisplay:
    """A `Progress` callback drawing one tqdm bar per phase: warm-up, then measured steps;
    with `waiting` (the file's name), a line saying what it waits for until the first."""

    def __init__(self, enabled: bool = True, waiting: str | None = None) -> None:
        self.enabled = enabled
        self.waiting = waiting
        self._bar: object | None = None
        self._key: tuple[Phase, bool] | None = None
        self._reported = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, progress: Progress) -> None:
        self._stop_waiting()
        if not self.enabled:
            return
        from tqdm import tqdm

        key = (progress.phase, progress.warming_up)
        if key != self._key:
            self.close()
            self._key = key
            stage = "warming up" if progress.warming_up else "measuring"
            total = None if progress.warming_up else progress.target_steps
            self._bar = tqdm(
                total=total,
                desc=f"{_LABELS[progress.phase]:>13}: {stage}",
                unit="step",
                file=sys.stderr,
                leave=False,
                dynamic_ncols=True,
                disable=None,  # off when stderr is not a terminal (CI logs, pipes)
            )
        bar = self._bar
        assert isinstance(bar, tqdm)
        if progress.warming_up:
            bar.update(1)
        else:
            bar.update(progress.measured_steps - bar.n)

    def _wait_line(self, name: str) -> None:
        """Redraws the waiting line each second until the first progress report."""
        from tqdm import tqdm

        started = time.monotonic()
        line = tqdm(bar_format="{desc}", file=sys.stderr, leave=False, disable=None)
        while True:
            line.set_description_str(waiting_words(name, time.monotonic() - started))
            if self._reported.wait(1.0):
                break
        line.close()

    def _stop_waiting(self) -> None:
        self._reported.set()
        if self._ticker is not None:
            self._ticker.join()  # its line is gone before a phase's bar is drawn
            self._ticker = None

    def close(self) -> None:
        self._stop_waiting()
        if self._bar is not None:
            self._bar.close()  # type: ignore[attr-defined]
            self._bar = None

    def __enter__(self) -> ProgressDisplay:
        if self.enabled and self.waiting is not None and not self._reported.is_set():
            self._ticker = threading.Thread(
                target=self._wait_line, args=(self.waiting,), name="tfperf-waiting", daemon=True
            )
            self._ticker.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
