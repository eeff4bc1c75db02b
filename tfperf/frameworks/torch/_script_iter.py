"""The iterators a measured script's loop gets: the step clock inside `iter(loader)`.

`_script` runs the user's script with `DataLoader.__iter__` replaced (`measuring`): the first
loader the loop iterates that the user's code made (or called a library to make) is the
measured one, an evaluation pass ahead of training aside (`LoaderRecorder.evaluates_first`),
and its `iter(loader)` hands the loop one of these instead of torch's own:

- `Timer` and `_Timed` (`_script.run_script`): the loop's own batches, each `next()` timed
  here as waiting and the time between two as computing, one `ScriptMode` a run;
- `Profiled` (`_script.profile_script`): the core's `ServedLoop`
  (`tfperf.measure.served`), which serves the loop the profiler's phases, with the loader's
  passes made by torch (`_Restartable`).

Either stops the script with `Stop` (a `BaseException`, so the script's `except Exception`
lets it through) once its steps are measured. A library that iterates the loader in its own
code (a prefetching wrapper's `__iter__`) gets the same iterator, and is stopped alike.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf.frameworks.torch._sites import LoaderRecorder
from tfperf.frameworks.torch._torch import forget_iterator
from tfperf.measure.served import Passes, ServedLoop, Stop, cycled_at
from tfperf.tracebacks import user_frame

if TYPE_CHECKING:
    from tfperf.measure import Profiler


class ScriptMode(str, Enum):
    """What a run of the script measures."""

    DISCOVER = "discover"
    END_TO_END = "end_to_end"
    COMPUTE_ONLY = "compute_only"
    LOADER_ONLY = "loader_only"


class Profiled(ServedLoop):
    """The measured loader's batches, served to the script through the core's profiler."""

    def __init__(
        self,
        profiler: Profiler,
        steps: int,
        min_seconds: float,
        on_loader: Callable[[Any, str | None], None],
        phase_s: Callable[[], float | None],
        *,
        measure_pipeline: bool = True,
        measure_compute: bool = True,
    ) -> None:
        super().__init__(
            profiler,
            steps,
            min_seconds,
            phase_s,
            sync=cuda_sync,  # the step's queued GPU work belongs to its compute
            measure_pipeline=measure_pipeline,
            measure_compute=measure_compute,
        )
        self.on_loader = on_loader
        #: The loop that builds the measured loader anew for each pass (`_anew`), if any.
        self.anew: str | None = None
        #: Where the script hands the measured loader to `itertools.cycle`, if so.
        self.cycled: str | None = None

    @property
    def loader(self) -> Any:
        return self.data

    def iterating(self, loader: Any, recorder: LoaderRecorder, original: Any) -> Any:
        if self.data is None and _measured(loader, recorder):
            self.anew, self.cycled = recorder.built_anew(loader), _cycled(loader, recorder)
            self.start(loader, _Restartable(loader, original, anew=self.anew is not None))
            self.on_loader(loader, self.anew)
        if self.data is None:
            return original(loader)
        if loader is not self.data:  # read beside the served loop: counted (`beside`)
            return _Beside(self, loader, original(loader))
        return self.serve()


class _Beside:
    """Another loader's iterator while the measured one is served: torch's own, each batch
    told to the served loop, which stops a loop that reads the two in step (`zip`)."""

    def __init__(self, served: ServedLoop, loader: Any, inner: Iterator[Any]) -> None:
        self._served, self._loader, self._inner = served, loader, inner

    def __iter__(self) -> _Beside:
        return self

    def __next__(self) -> Any:
        batch = next(self._inner)
        self._served.beside(self._loader)
        return batch

    def __len__(self) -> int:
        return len(self._inner)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class _Restartable(Passes):
    """The measured loader as the profiler iterates it: each pass a new iterator of torch's
    (not the timed one the script gets), each kept to shut its workers down at the end.
    `anew`: the script builds a new loader for each pass, so no pass keeps the last one's
    workers, whatever `persistent_workers` says."""

    def __init__(
        self, loader: Any, original: Callable[[Any], Iterator[Any]], *, anew: bool = False
    ) -> None:
        super().__init__(loader)
        self.original = original
        self.anew = anew
        self.made: list[Iterator[Any]] = []

    def fresh(self) -> Iterator[Any]:
        # A new pass: the last pass's workers go first, as they would once torch collected
        # its iterator (this list would keep them alive). A persistent loader's iterator is
        # the same object again, and is kept, unless the script builds its loader anew.
        if self.anew or not getattr(self.data, "persistent_workers", False):
            self.close()
        iterator = self.original(self.data)
        if not any(iterator is made for made in self.made):
            self.made.append(iterator)
        return iterator

    def close(self) -> None:
        while self.made:
            _shut_down(self.made.pop(), self.data)


class Timer:
    """The step clock of the measured loader, across every `iter(loader)` of the run."""

    def __init__(
        self,
        mode: ScriptMode,
        total: int,
        clock: Callable[[], float],
        sync: Callable[[], None],
    ) -> None:
        self.mode = mode
        self.total = total
        self.clock = clock
        self.sync = sync
        self.loader: Any = None
        self.original_iter: Callable[[Any], Iterator[Any]] | None = None
        self.waits: list[float] = []
        self.computes: list[float] = []
        self._returned: float | None = None  # when the last batch was handed over
        self._started: float | None = None  # when a new pass's `iter(loader)` was called
        self._cached: list[Any] = []  # COMPUTE_ONLY: the one batch served again
        self._inners: list[Iterator[Any]] = []

    def iterating(self, loader: Any, recorder: LoaderRecorder, original: Any) -> Any:
        """What `iter(loader)` hands the script: a timed iterator for the measured loader."""
        if self.loader is None and _measured(loader, recorder):
            self.loader, self.original_iter = loader, original
            if self.mode in (ScriptMode.DISCOVER, ScriptMode.LOADER_ONLY):
                raise Stop
        if loader is not self.loader:
            return original(loader)
        if self.mode is ScriptMode.COMPUTE_ONLY and self._cached:
            return _Timed(self, iter(()))
        return _Timed(self, self.fresh(original))

    def fresh(self, original: Callable[[Any], Iterator[Any]]) -> Iterator[Any]:
        """A new pass of torch's over the measured loader.

        The last pass's workers go first, as they would once torch collected its iterator
        (the list kept here would keep them alive); a persistent loader hands back the same
        iterator, which is kept.
        """
        if not getattr(self.loader, "persistent_workers", False):
            self.close()
        # torch starts the workers here, in `iter(loader)`, not in the first `next()`: the
        # pass's first wait runs from now, so an epoch's start-up is clocked as the loop pays it.
        self._started = self.clock()
        inner = original(self.loader)
        if not any(inner is made for made in self._inners):
            self._inners.append(inner)
        return inner

    def next(self, inner: Iterator[Any]) -> Any:
        self.sync()  # the step's queued GPU work belongs to its compute, not to the wait
        start = self.clock()
        if self._returned is not None:
            self.computes.append(start - self._returned)
            self._returned = None
        if len(self.computes) >= self.total:
            raise Stop
        if self._started is not None:
            start, self._started = min(start, self._started), None
        if self._cached:
            batch = self._cached[0]
        else:
            batch = next(inner)  # StopIteration ends the epoch, as it would
            if self.mode is ScriptMode.COMPUTE_ONLY:
                self._cached.append(batch)
                self.close()  # the workers are no longer needed
        end = self.clock()
        self.waits.append(end - start)
        self._returned = end
        return batch

    def close(self) -> None:
        """Shuts down the workers of every iterator this run made."""
        while self._inners:
            _shut_down(self._inners.pop(), self.loader)


class _Timed:
    """The iterator the script's loop gets for the measured loader."""

    def __init__(self, timer: Timer, inner: Iterator[Any]) -> None:
        self._timer = timer
        self._inner = inner

    def __iter__(self) -> _Timed:
        return self

    def __next__(self) -> Any:
        return self._timer.next(self._inner)

    def __len__(self) -> int:
        return len(self._timer.loader)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def iterate_alone(timer: Timer) -> None:
    """Iterates the measured loader with nothing between batches, epoch after epoch."""
    assert timer.original_iter is not None
    timer.mode = ScriptMode.END_TO_END
    while True:
        timed = _Timed(timer, timer.fresh(timer.original_iter))
        before = len(timer.waits)
        try:
            for _ in timed:
                pass
        except Stop:
            return
        if len(timer.waits) == before:
            return  # an empty loader: no epoch ever ends with a batch


@contextlib.contextmanager
def measuring(recorder: LoaderRecorder, timer: Timer | Profiled) -> Iterator[None]:
    from torch.utils.data import DataLoader

    original = DataLoader.__iter__

    @functools.wraps(original)
    def iterate(self: Any) -> Any:
        try:
            return timer.iterating(self, recorder, original)
        finally:
            recorder.iterated(self)

    DataLoader.__iter__ = iterate  # type: ignore[method-assign]
    try:
        yield
    finally:
        DataLoader.__iter__ = original  # type: ignore[method-assign]


def _measured(loader: Any, recorder: LoaderRecorder) -> bool:
    """Whether `loader`, iterated before any other was measured, is the one to measure: one
    of the user's, and not an evaluation pass ahead of the training loop."""
    return recorder.measurable(loader) and not recorder.evaluates_first(loader)


def _cycled(loader: Any, recorder: LoaderRecorder) -> str | None:
    """Where the user's code asking for `loader`'s iterator hands it to `itertools.cycle`."""
    frame = user_frame(sys._getframe(1), (recorder.root,))
    return cycled_at(frame, loader) if frame is not None else None


def cuda_sync() -> None:
    """`torch.cuda.synchronize()` when this process has used CUDA; else nothing."""
    import torch

    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        torch.cuda.synchronize()


def _shut_down(iterator: Any, loader: Any) -> None:
    """Stops a DataLoader iterator's worker processes now, not when it is collected.

    torch's multiprocessing iterator shuts its workers down in `_shutdown_workers` (what its
    `__del__` calls); a persistent loader keeps the iterator, so collection would not, and
    its next `iter(loader)` would reuse the stopped one: the loader lets it go
    (`_torch.forget_iterator`), so a later pass (the checked one) starts workers anew.
    """
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()
    forget_iterator(loader, iterator)
