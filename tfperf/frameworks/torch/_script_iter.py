"""The iterators a measured script's loop gets: the step clock inside `iter(loader)`.

`_script` runs the user's script with `DataLoader.__iter__` replaced (`measuring`): the first
loader the loop iterates that the user's code made (or called a library to make) is the
measured one, an evaluation pass ahead of training aside (`LoaderRecorder.evaluates_first`),
and its `iter(loader)` hands the loop one of these instead of torch's own:

- `Timer` and `_Timed` (`_script.run_script`): the loop's own batches, each `next()` timed
  here as waiting and the time between two as computing, one `ScriptMode` a run;
- `Profiled` and `_Continued` (`_script.profile_script`): the batches of the core profiler's
  phases (`tfperf.Profiler.iterate`), end to end, then the last batch again and again for the
  compute-only ceiling; the loader alone is iterated after the script is stopped. The
  phases' length comes from the budget, less the script's start-up (`script_phase_s`).

Either stops the script with `Stop` (a `BaseException`, so the script's `except Exception`
lets it through) once its steps are measured. A library that iterates the loader in its own
code (a prefetching wrapper's `__iter__`) gets the same iterator, and is stopped alike.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator
from enum import Enum
from typing import TYPE_CHECKING, Any

from tfperf.frameworks.torch._sites import LoaderRecorder
from tfperf.frameworks.torch._torch import forget_iterator
from tfperf.probes import MemorySampler
from tfperf.results import Phase
from tfperf.results.stages import EpochSource

if TYPE_CHECKING:
    from tfperf.measure import Profiler


class ScriptMode(str, Enum):
    """What a run of the script measures."""

    DISCOVER = "discover"
    END_TO_END = "end_to_end"
    COMPUTE_ONLY = "compute_only"
    LOADER_ONLY = "loader_only"


class Stop(BaseException):
    """Stops the script: the steps are measured, or the loop reached the loader."""


class Profiled:
    """The measured loader's batches, served to the script through the core's profiler."""

    def __init__(
        self,
        profiler: Profiler,
        steps: int,
        min_seconds: float,
        on_loader: Callable[[Any], None],
        phase_s: Callable[[], float | None],
        *,
        measure_pipeline: bool = True,
        measure_compute: bool = True,
    ) -> None:
        self.profiler = profiler
        self.measure_pipeline = measure_pipeline
        self.measure_compute = measure_compute
        self.steps = steps
        self.min_seconds = min_seconds
        self.on_loader = on_loader
        self.phase_s = phase_s
        self._max_seconds: float | None = None  # each phase's, once the loop is reached
        self.loader: Any = None
        self.completed = False
        self._source: _Restartable | None = None
        self._stream: Iterator[Any] | None = None
        self._served: _Continued | None = None  # what the script's loop iterates now
        #: The script's own epoch: the batches its loop took before it started the loader
        #: again, a pass unfinished (`break` after N steps); None where it never did.
        self.epoch_steps: int | None = None
        self.memory = MemorySampler()  # from the first batch to the end of the last phase

    def iterating(self, loader: Any, recorder: LoaderRecorder, original: Any) -> Any:
        if self.loader is None and _measured(loader, recorder):
            self.loader, self._source = loader, _Restartable(loader, original)
            self._max_seconds = self.phase_s()
            self.on_loader(loader)
            self.memory.start()
            self._stream = self._batches(self._source)
        if loader is not self.loader or self._stream is None:
            return original(loader)
        if self._served is not None and self._served.taken > 0:
            self._ended_epoch(self._served.taken)
        self._served = _Continued(self._stream, loader)  # a new epoch of the script's
        return self._served

    def _ended_epoch(self, taken: int) -> None:
        """The script started the loader again after `taken` batches of a pass (the stream
        never ends a pass in its loop): as in training, each pass of the profiler's is cut
        there too, and the profile's epoch is that long unless `--epoch-steps` said."""
        assert self._source is not None
        self.epoch_steps = taken if self.epoch_steps is None else min(self.epoch_steps, taken)
        self._source.pass_steps = self.epoch_steps
        epoch = self.profiler.epoch
        if epoch is not None and epoch.source is not EpochSource.GIVEN:
            self.profiler.epoch = dataclasses.replace(
                epoch, steps=self.epoch_steps, source=EpochSource.OBSERVED
            )

    def _batches(self, source: _Restartable) -> Iterator[Any]:
        last = None
        for batch in self.profiler.iterate(
            source,
            steps=self.steps,
            min_seconds=self.min_seconds,
            phase=Phase.END_TO_END,
            max_seconds=self._max_seconds,
        ):
            last = batch
            yield batch
            cuda_sync()  # the step's queued GPU work belongs to its compute
        if not self.measure_compute:
            raise Stop
        for batch in self.profiler.iterate(
            itertools.repeat(last),
            steps=self.steps,
            min_seconds=self.min_seconds,
            phase=Phase.COMPUTE_ONLY,
            max_seconds=self._max_seconds,
        ):
            yield batch
            cuda_sync()
        raise Stop

    def loader_alone(self) -> None:
        assert self._source is not None
        if self.measure_pipeline:
            for _ in self.profiler.iterate(
                self._source,
                steps=self.steps,
                min_seconds=self.min_seconds,
                phase=Phase.PIPELINE_ONLY,
                max_seconds=self._max_seconds,
            ):
                pass
        self.completed = True

    def close(self) -> None:
        if self._source is not None:
            self.memory.stop()  # before the workers go
            self._source.close()


def script_phase_s(budget_s: float | None, start_up_s: float) -> float | None:
    """The longest each of a script's three phases may run: the phase's share of the budget
    (`tfperf.measure.Budget`), cut to a third of what the script's start-up left of it, so
    the budget bounds the start-up too; None: no budget.

    A start-up that takes the whole budget leaves each phase its fewest steps (the
    profiler's `MIN_BUDGET_STEPS`): a script is never stopped before its loop, whose first
    batch can take as long as its data takes to open.

    Example:
        >>> script_phase_s(120.0, 90.0)  # a quarter would be 30 s; 30 s are left for three
        10.0
    """
    from tfperf.measure import Budget

    share = Budget(budget_s).phase_s
    if share is None or budget_s is None:
        return None
    return min(share, max(budget_s - start_up_s, 0.0) / 3)


class _Restartable:
    """The measured loader as the profiler iterates it: each pass a new iterator of torch's
    (not the timed one the script gets), each kept to shut its workers down at the end."""

    def __init__(self, loader: Any, original: Callable[[Any], Iterator[Any]]) -> None:
        self.loader = loader
        self.original = original
        self.made: list[Iterator[Any]] = []
        #: Batches a pass yields at most: the script's own epoch, once seen; None: all.
        self.pass_steps: int | None = None

    def __iter__(self) -> Iterator[Any]:
        # A new pass: the last pass's workers go first, as they would once torch collected
        # its iterator (this list would keep them alive). A persistent loader's iterator is
        # the same object again, and is kept.
        persistent = getattr(self.loader, "persistent_workers", False)
        if not persistent:
            self.close()
        iterator = self.original(self.loader)
        if not any(iterator is made for made in self.made):
            self.made.append(iterator)
        # A new object each pass: the profiler takes a pass that hands back the iterator it
        # just finished for a one-shot iterator, and a persistent loader's is the same object.
        return self._pass(iterator)

    def _pass(self, iterator: Iterator[Any]) -> Iterator[Any]:
        """One pass of `iterator`, ended after `pass_steps` batches (read at each batch, so a
        pass under way ends where the script's epoch does)."""
        taken = 0
        while self.pass_steps is None or taken < self.pass_steps:
            try:
                batch = next(iterator)
            except StopIteration:
                return
            taken += 1
            yield batch

    def close(self) -> None:
        while self.made:
            _shut_down(self.made.pop(), self.loader)


class _Continued:
    """What `iter(loader)` gives the script's loop: the one stream of measured batches, and
    how many of them this loop took."""

    def __init__(self, stream: Iterator[Any], loader: Any) -> None:
        self._stream = stream
        self._loader = loader
        self.taken = 0

    def __iter__(self) -> _Continued:
        return self

    def __next__(self) -> Any:
        batch = next(self._stream)
        self.taken += 1
        return batch

    def __len__(self) -> int:
        return len(self._loader)


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
