"""A script's own training loop over a tf.data dataset: found as it trains, then served.

Many TensorFlow scripts never call `fit`: they iterate a dataset in Python and call a step of
their own (`with tf.GradientTape() ...; optimizer.apply_gradients(...)`, often inside a
`tf.function`). While `_script` runs such a script, every iteration of a `tf.data.Dataset`
that the user's code starts in eager mode is watched (`Watch`): the loop gets the dataset's
own batches through a `_Watched` iterator, which remembers that it handed one out last.

When the script first trains (a tape's `gradient`, the optimizer's `apply_gradients` or
`apply`, or `train_on_batch`, the same hooks that stop a script that trains before `fit`),
the dataset whose iterator handed out the latest batch, and is not yet exhausted, is the
loop's input. A look at one batch first (`for x, y in ds.take(1): print(x.shape)`) ends
before training and is not taken for it. Then:

- to find the sites (`LoopSession` absent): the script stops there, before the step;
- to profile (`LoopSession`): the step goes on, and from the next batch on the loop is served
  the profiler's phases (`tfperf.measure.served`) from the dataset as the knobs build it
  (options, a prefetch at the end); each later `iter()` of the same dataset continues the
  stream, as a new epoch.

A loop that iterates its dataset inside a `tf.function`, or a distributed dataset (iterated by
TensorFlow's own code), is not watched: tfperf then stops the script at its first step and
says so. A loop that reads a second dataset in step with the served one (`zip(a, b)` in
Python) is stopped once that shows (`ServedLoop.beside`): the other's batches would be timed
as the model's. A second dataset read between passes (a validation loop) is its own business.
"""

from __future__ import annotations

import dataclasses
import sys
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tfperf.frameworks.tensorflow._callers import inside_tensorflow
from tfperf.measure.served import Continued, Passes, ServedLoop, cycled_at
from tfperf.tracebacks import user_frame, user_place


@dataclasses.dataclass(frozen=True)
class LoopCall:
    """The dataset a script's own loop trains on, as it iterates it, and where the loop
    starts the iteration (`filename`, `line`; `where` for people, `train.py:40`); `cycled`:
    where it hands the dataset to `itertools.cycle` (`served.cycled_at`), if it does."""

    dataset: Any
    where: str
    filename: str
    line: int
    cycled: str | None = None


class IteratorTraced(BaseException):
    """Stops a script whose `tf.function` takes the dataset's iterator and calls `next()` in
    it: the traced graph would read batches tfperf never sees, and train to the end."""

    def __init__(self, call: LoopCall) -> None:
        super().__init__(call.where)
        self.call = call


class _Watched:
    """The iterator a user's eager `iter(dataset)` gets: the dataset's own, until the loop
    is found to train on it; from then on the profiler's stream (`switch`)."""

    def __init__(self, watch: Watch, dataset: Any, inner: Iterator[Any], call: LoopCall) -> None:
        self._watch = watch
        self.dataset = dataset
        self.call = call
        self._inner: Iterator[Any] | None = inner
        self._served: Continued | None = None
        self.taken = 0
        self.exhausted = False

    def __iter__(self) -> _Watched:
        return self

    def __next__(self) -> Any:
        import tensorflow as tf

        if tf.inside_function():  # a graph would read the dataset's own iterator, unseen
            raise IteratorTraced(self.call)
        if self._served is not None:
            return next(self._served)
        assert self._inner is not None
        try:
            batch = next(self._inner)
        except StopIteration:
            self.exhausted = True
            raise
        self.taken += 1
        self._watch.handed(self)
        return batch

    def switch(self, served: Continued) -> None:
        """From the next batch on, hand out `served`; the batches this pass took count."""
        served.taken = self.taken
        self._served, self._inner = served, None

    def get_next(self) -> Any:
        return self.__next__()

    def __getattr__(self, name: str) -> Any:
        if self._inner is None:
            raise AttributeError(name)
        return getattr(self._inner, name)


class Watch:
    """Which of the datasets the user's code iterates handed out the latest batch."""

    def __init__(self, user_paths: tuple[Path, ...], session: LoopSession | None = None) -> None:
        self.user_paths = user_paths
        self.session = session  # serves the loop once found; None: stop at its first step
        self.last: weakref.ref[_Watched] | None = None

    def iterating(self, dataset: Any, original: Callable[[Any], Iterator[Any]]) -> Any:
        """What `iter(dataset)` hands its caller."""
        import tensorflow as tf

        caller = sys._getframe(2)  # past the patched `__iter__`
        if not tf.executing_eagerly() or inside_tensorflow(caller.f_code.co_filename):
            return original(dataset)  # TensorFlow's own: a distributed dataset's, say
        session = self.session
        if session is not None and session.dataset is dataset:
            return session.served.serve()  # a new epoch of the loop's
        frame = user_frame(caller, self.user_paths)
        if frame is None:
            return original(dataset)
        where = user_place(frame, self.user_paths)
        call = LoopCall(
            dataset, where, frame.f_code.co_filename, frame.f_lineno, cycled_at(frame, dataset)
        )
        return _Watched(self, dataset, original(dataset), call)

    def handed(self, watched: _Watched) -> None:
        """`watched` handed out a batch: the latest, and, beside a served loop, counted."""
        self.last = weakref.ref(watched)
        if self.session is not None and self.session.serving:
            self.session.served.beside(watched.dataset)

    def training(self) -> _Watched | None:
        """The iterator the loop trains on, as it first trains: the one that handed out the
        latest batch and is not exhausted; None where no watched loop is under way."""
        watched = self.last() if self.last is not None else None
        return watched if watched is not None and not watched.exhausted else None


class LoopSession:
    """Serves the script's training loop the profiler's phases, once `Watch` finds it.

    Args:
        served: the core's server of the phases (`ServedLoop`), its profiler entered.
        prepare: the dataset to measure -> what the profiler iterates for it (the runner's
            own records: the stages, AUTOTUNE's readout, the epoch); called once, outside any
            `tf.function` being traced.

    `finish_input` is the build's: the loop's dataset as the script built it, and where the
    loop iterates it -> the raw dataset, its sites recorded, and the dataset to measure (the
    knobs' options and a prefetch at the end applied).
    """

    def __init__(self, served: ServedLoop, prepare: Callable[[Any], Any]) -> None:
        self.served = served
        self.prepare = prepare
        #: Set by the build, which records the sites (`_build.build_parts`).
        self.finish_input: Callable[[LoopCall], tuple[Any, Any]] | None = None
        self.call: LoopCall | None = None
        self.raw: Any = None  # the loop's dataset, its sites recorded
        self.measured: Any = None  # the dataset the profiler iterates

    @property
    def dataset(self) -> Any:
        """The script's own dataset object, once found."""
        return self.call.dataset if self.call is not None else None

    @property
    def serving(self) -> bool:
        return self.call is not None

    def chose(self, watched: _Watched) -> None:
        """`watched` is the loop's: serve it the phases from its next batch on."""
        import tensorflow as tf

        assert self.finish_input is not None, "the build sets finish_input"
        self.call = watched.call
        with tf.init_scope():  # a step traced by tf.function trains first: build eagerly
            self.raw, self.measured = self.finish_input(watched.call)
            data = self.prepare(self.measured)
        self.served.start(watched.dataset, Passes(data))
        self.served.batches += watched.taken  # those the loop took before it was found
        watched.switch(self.served.serve())


def own_loop_needs_step(shown: str) -> str:
    """Why a script with its own training loop cannot be built as a dataset and a step."""
    return (
        f"{shown} trains in its own loop, so it has no train step tfperf can call itself. "
        "tfperf measures such a loop as the script runs it (`tfperf profile`, `tfperf tune`), "
        "but not under a strategy of tfperf's (--strategy, --cpu-replicas), an emulated step "
        "(--step-time), tf.data service sizing (tfperf offload), or with the model timed alone "
        "under another batch size or precision. For those, write a pipeline file with "
        "`make_dataset()` and `make_train_step()` (see docs/zero-change.md)."
    )
