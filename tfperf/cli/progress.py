"""Progress bars on stderr for long steps (warm-up, measurement); silent when asked."""

from __future__ import annotations

import sys
from types import TracebackType

from tfperf.measure import Progress
from tfperf.results import Phase

_LABELS = {
    Phase.END_TO_END: "end to end",
    Phase.PIPELINE_ONLY: "pipeline only",
    Phase.COMPUTE_ONLY: "compute only",
}


class ProgressDisplay:
    """A `Progress` callback drawing one tqdm bar per phase: warm-up, then measured steps."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._bar: object | None = None
        self._key: tuple[Phase, bool] | None = None

    def __call__(self, progress: Progress) -> None:
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

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()  # type: ignore[attr-defined]
            self._bar = None

    def __enter__(self) -> ProgressDisplay:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
