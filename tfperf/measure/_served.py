"""A script's own training loop as the profiler's train step: the batches it is served.

A training script has no step tfperf can call: its loop is the step. So the profiler is
turned inside out. Once the framework has found the loop's input (the measured data), each
`iter()` of it hands the loop one `Continued` stream of the profiler's batches
(`tfperf.Profiler.iterate`): the end-to-end phase first, then one batch of each shape it saw,
as often as it came (`Profiler.shapes`), for the compute-only ceiling, then `Stop` (a
`BaseException`, so the script's `except Exception` lets it through). The time inside
`next()` is the wait for the input, the time between two `next()` calls the step. After the
script is stopped, the input is iterated alone (`ServedLoop.input_alone`).

Frameworks differ only in how they find the measured data and what a pass of it is (`Passes`):
PyTorch starts a `DataLoader`'s workers per pass, tf.data makes a new iterator.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from tfperf.errors import PipelineFileError
from tfperf.probes import MemorySampler
from tfperf.results import Phase
from tfperf.results.stages import EpochSource
from tfperf.units import format_seconds

if TYPE_CHECKING:
    from tfperf.measure._profiler import Profiler


#: A second input that handed out batches beside this many served batches in a row is read in
#: step with the loop's (`zip(a, b)`); one read between passes only (validation) never is.
IN_STEP = 3


class Stop(BaseException):
    """Stops the script: its steps are measured, or its loop reached the input."""


class InStep(BaseException):
    """Stops a served loop that reads a second input in step with the served one, as
    `zip(a, b)` does: the other's batches would be timed as the model's computing."""


class Passes:
    """The measured data as the profiler iterates it: one pass a `fresh()` iterator, cut after
    `pass_steps` batches once the script's own epoch is known."""

    def __init__(self, data: Iterable[Any]) -> None:
        self.data = data
        #: Batches a pass yields at most: the script's own epoch, once seen; None: all.
        self.pass_steps: int | None = None

    def fresh(self) -> Iterator[Any]:
        """A new pass of the data's own (not the stream the script gets)."""
        return iter(self.data)

    def __iter__(self) -> Iterator[Any]:
        # A new object each pass: the profiler takes a pass that hands back the iterator it
        # just finished for a one-shot iterator.
        return self._pass(self.fresh())

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
        """Releases what the passes hold; nothing by default."""


class Continued:
    """What one `iter()` of the measured data gives the script's loop: the one stream of
    measured batches, and how many of them this loop took."""

    def __init__(self, stream: Iterator[Any], data: Any) -> None:
        self._stream = stream
        self._data = data
        self.taken = 0

    def __iter__(self) -> Continued:
        return self

    def __next__(self) -> Any:
        batch = next(self._stream)
        self.taken += 1
        return batch

    def __len__(self) -> int:
        return len(self._data)


class ServedLoop:
    """The measured data's batches, served to the script's loop through the core's profiler.

    Args:
        profiler: a `tfperf.Profiler`, entered, that records the phases.
        steps, min_seconds: each phase's measured steps and least seconds.
        phase_s: each phase's longest run, asked once the loop is reached (`script_phase_s`).
        sync: waits for the device's queued work after each step, so a step's device time is
            clocked as computing, not as the next wait.
        measure_pipeline, measure_compute: whether those phases run.
    """

    def __init__(
        self,
        profiler: Profiler,
        steps: int,
        min_seconds: float,
        phase_s: Callable[[], float | None],
        *,
        sync: Callable[[], None] = lambda: None,
        measure_pipeline: bool = True,
        measure_compute: bool = True,
    ) -> None:
        self.profiler = profiler
        self.steps = steps
        self.min_seconds = min_seconds
        self.phase_s = phase_s
        self.sync = sync
        self.measure_pipeline = measure_pipeline
        self.measure_compute = measure_compute
        self.data: Any = None  # the measured data, once found
        self.completed = False
        self.batches = 0  # batches the script's loop took from the measured data
        self.served_all = False  # the served phases ran to their end
        self._max_seconds: float | None = None  # each phase's, once the loop is reached
        self._source: Passes | None = None
        self._stream: Iterator[Any] | None = None
        self._served: Continued | None = None  # what the script's loop iterates now
        #: The script's own epoch: the batches its loop took before it started the data
        #: again, a pass unfinished (`break` after N steps); None where it never did.
        self.epoch_steps: int | None = None
        self.memory = MemorySampler()  # from the first batch to the end of the last phase
        self._beside: dict[int, list[int]] = {}  # another input -> served batches it read by
        self.replayed = 0  # batches served again for the compute-only phase

    def start(self, data: Any, source: Passes) -> None:
        """`data` is the measured input, iterated by the profiler as `source`."""
        self.data, self._source = data, source
        self._max_seconds = self.phase_s()
        self.memory.start()
        self._stream = self._batches(source)

    def serve(self) -> Continued:
        """What a new `iter()` of the measured data hands the loop: a new epoch of the
        script's, on the one stream."""
        assert self._stream is not None, "start() first"
        if self._served is not None and self._served.taken > 0:
            self._ended_epoch(self._served.taken)
        self._served = Continued(self._stream, self.data)
        return self._served

    def _ended_epoch(self, taken: int) -> None:
        """The script started the data again after `taken` batches of a pass (the stream
        never ends a pass in its loop): as in training, each pass of the profiler's is cut
        there too, and the profile's epoch is that long unless `--epoch-steps` said."""
        assert self._source is not None
        self.epoch_steps = taken if self.epoch_steps is None else min(self.epoch_steps, taken)
        self._source.pass_steps = self.epoch_steps
        epoch = self.profiler.epoch
        if epoch is not None and epoch.source is not EpochSource.GIVEN:
            self.profiler.epoch = dataclasses.replace(
                epoch, steps=self.epoch_steps, source=EpochSource.LOOP
            )

    def _batches(self, source: Passes) -> Iterator[Any]:
        shapes, last = self.profiler.shapes, None
        for batch in self._window(source, Phase.END_TO_END):
            if last is not None:  # its step closed when the loop asked for this batch
                step = self.profiler.last_step(Phase.END_TO_END)
                shapes.add(last, step.examples, step.compute_s)
            last = batch
            self.batches += 1
            yield batch
            self.sync()
        if not self.measure_compute:
            self.served_all = True
            raise Stop
        # The batches of each shape the loop saw, as often as it saw them (a pass's short
        # last batch among them), as `profile` replays them; the last one where none closed.
        replay = shapes.replay() if shapes.batches() else itertools.repeat(last)
        for batch in self._window(replay, Phase.COMPUTE_ONLY):
            self.batches += 1
            self.replayed += 1
            yield batch
            self.sync()
        self.served_all = True
        raise Stop

    def beside(self, other: object) -> None:
        """`other`, an input that is not the served one, handed out a batch now.

        Raises:
            InStep: it did so beside `IN_STEP` served batches in a row.
        """
        seen = self._beside.setdefault(id(other), [])
        if seen[-1:] != [self.batches]:
            seen.append(self.batches)
        last = seen[-IN_STEP:]
        if len(last) == IN_STEP and last[-1] - last[0] == IN_STEP - 1:
            raise InStep

    def finish(self, shown: str) -> None:
        """After the script ran: the pipeline-only phase, where its loop was found.

        Raises:
            PipelineFileError: the loop ended (its epochs done) before the served phases did,
                so the script's code after it ran and the figures rest on part of a window.
        """
        if self.data is None:
            return
        if not self.served_all:
            least, shorter = f"{self.steps} steps", "fewer steps (--steps)"
            if self.min_seconds > 0:
                least += f" and {format_seconds(self.min_seconds)}"
                shorter = "fewer steps (--steps) or a shorter least time (--min-seconds)"
            when = "before tfperf had measured it"
            if self.replayed:
                when = (
                    f"while tfperf timed its step on its batches again ({self.replayed:,} "
                    "of them, after the end-to-end window)"
                )
            raise PipelineFileError(
                f"{shown}'s training loop took {self.batches:,} batches in all and then ended, "
                f"{when}; each phase takes at least {least}, so the code after the loop ran. "
                "Run the script longer (its own arguments after `--`: more epochs or steps) or "
                f"measure {shorter}."
            )
        self.input_alone()

    def _window(self, data: Iterable[Any], phase: Phase) -> Iterator[Any]:
        """The profiler's batches of `phase` from `data`, within the phase's steps and time."""
        return self.profiler.iterate(
            data,
            steps=self.steps,
            min_seconds=self.min_seconds,
            phase=phase,
            max_seconds=self._max_seconds,
        )

    def input_alone(self) -> None:
        """The pipeline-only phase: the measured data with nothing between batches."""
        assert self._source is not None
        if self.measure_pipeline:
            for _ in self._window(self._source, Phase.PIPELINE_ONLY):
                pass
        self.completed = True

    def close(self) -> None:
        if self._source is not None:
            self.memory.stop()  # before the input's workers go
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
    from tfperf.measure._window import Budget

    share = Budget(budget_s).phase_s
    if share is None or budget_s is None:
        return None
    return min(share, max(budget_s - start_up_s, 0.0) / 3)
