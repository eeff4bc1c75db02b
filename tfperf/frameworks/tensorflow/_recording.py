"""Finds, and overrides, the tf.data calls in the user's own files while a dataset is built.

`recording(root, overrides)` wraps tf.data's public entry points for the duration of a block:
`Dataset.map`, `interleave`, `batch`, `padded_batch`, `shuffle`, `prefetch`, and the readers
`TFRecordDataset`, `TextLineDataset`, `FixedLengthRecordDataset` (their `num_parallel_reads`),
in `tf.data` and in `tf.compat.v1.data` alike.
Each call is traced to the frame that made it:

- a frame in the user's files (the pipeline's folder, not site-packages) is a *call site*:
  its tunable arguments are recorded with the exact span of the call (Python 3.11 positions),
  and an override for its name replaces the value before tf.data sees it;
- a frame inside tf.data itself is tf.data's own work (a reader interleaving its files) and
  is ignored;
- a frame inside AutoGraph means the call ran in a function tf.data traced (an `interleave`
  function building a dataset per file): AutoGraph's source map gives the user's line back;
- any other frame is a library (Keras, TFDS, ...). Its calls are listed as not tunable, with
  the user's line that reached them: tfperf rewrites only the user's files.

Everything is restored when the block ends, also when it raises. Not thread-safe: the wrapped
methods are process-wide, so build one dataset at a time.

Example:
    >>> with recording(Path("."), {"map@pipeline.py:23.num_parallel_calls": 8}) as recorder:
    ...     dataset = make_dataset()  # doctest: +SKIP
    >>> recorder.discovery().sites  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tfperf.frameworks import Place, SiteRecorder, call_span
from tfperf.frameworks.tensorflow import _tf
from tfperf.frameworks.tensorflow._callers import (
    Caller,
    argument_form,
    autograph_origin,
    call_ordinal,
    call_text,
    calls_on_line,
    classify,
    library_path,
    plain_value,
    single_file,
    user_line,
)
from tfperf.frameworks.tensorflow._edits import EditRecorder
from tfperf.frameworks.tensorflow._seen import (
    Run,
    Seen,
    inserted_site,
    seen_order,
    seen_text,
    site_of,
    varies,
)
from tfperf.frameworks.tensorflow._structure import AfterInterleave, added_prefetch, feeds_a_map
from tfperf.knobs import AUTOTUNE, TUNABLE
from tfperf.results.discovery import CallSite, Discovery, Untunable

logger = logging.getLogger(__name__)


class Recorder(SiteRecorder):
    """Collects the call sites of one build and applies `overrides` (site name -> value)."""

    during = "the dataset is built"

    def __init__(self, root: Path, overrides: Mapping[str, int | None]) -> None:
        super().__init__(root, overrides)
        self._seen: dict[tuple[Place, str, str], Seen] = {}
        self._untunable: dict[tuple[str, str], tuple[Untunable, list[Run]]] = {}
        self._running: list[Run] = []
        self._end: Place | None = None  # where the dataset is handed over
        self._arrays = False  # ... as arrays, which Keras makes the dataset of
        self._inserted: CallSite | None = None  # the prefetch tfperf may add there
        self._interleaves: dict[Place, AfterInterleave] = {}
        self._pending: dict[int, AfterInterleave] = {}  # id of a run -> its interleave
        self._structure: list[CallSite] = []  # the structure edits found for this dataset
        self.edits = EditRecorder(self.overrides, self._used)  # cache, swaps: _edits.py

    def discovery(self, dataset: Any = None) -> Discovery:
        """The sites (named, in file order) and the untunable calls of this build.

        Args:
            dataset: the dataset tfperf measures. When given, only calls that built it are
                kept: a validation set built beside it has nothing to tune for the measurement.
        """
        chain = _chain_ids(dataset) if dataset is not None else None

        def kept(runs: list[Run]) -> bool:
            return chain is None or any(run.feeds(chain) for run in runs)

        sites, untunable = [], [item for item, runs in self._untunable.values() if kept(runs)]
        for seen in sorted(self._seen.values(), key=seen_order):
            if not kept(seen.runs):
                continue
            name = seen.place.name(seen.method, seen.argument)
            reason = seen.problem or varies(seen.values)
            if reason:
                where = f"{seen.place.file}:{seen.place.line}"
                untunable.append(Untunable(seen_text(seen), where, None, reason))
            else:
                sites.append(site_of(name, seen))
        sites.extend(self._structure)
        sites.extend(self.edits.sites)
        if self._inserted is not None:
            sites.append(self._inserted)
        end = f"{self._end.file}:{self._end.line}" if self._end is not None else None
        return Discovery(
            sites=tuple(sites), untunable=tuple(untunable), end=end, fit_gets_arrays=self._arrays
        )

    def finish(self, dataset: Any, filename: str, line: int, *, arrays: bool = False) -> Any:
        """The dataset handed over at `filename:line` (a script's `fit` call, a plain file's
        `def make_dataset`), with the prefetch tfperf may add at the end of the pipeline.
        `arrays`: `fit` got arrays there, and `dataset` is the one Keras builds from them.

        When the pipeline is built in the user's files and does not end with a `prefetch`,
        a site for one is recorded there (`prefetch@FILE:LINE.buffer_size`, written value 0:
        none, `calls` 0: the code has no such call), and an override for it is applied.
        """
        self.edits.finish(dataset)
        if classify(filename, self.root) is not Caller.USER:
            return dataset
        place = Place(self._relative(filename), line)
        self._end = place
        self._arrays = arrays
        built = list(_tf.walk_inputs(dataset))
        self._structure = [c.site() for c in self._interleaves.values() if feeds_a_map(c, built)]
        chain = {id(each) for each in built}
        built_here = any(any(run.feeds(chain) for run in seen.runs) for seen in self._seen.values())
        if not built_here or _ends_with_prefetch(dataset):
            return dataset
        name = place.name("prefetch", "buffer_size")
        self._inserted = inserted_site(name, place)
        if self.takes(name):
            value = self.overrides[name]
            if value is not None and (value > 0 or value == AUTOTUNE):
                return dataset.prefetch(value)
        return dataset

    def sites_of(self, dataset: Any) -> tuple[str, ...]:
        """The names of the sites whose call returned `dataset` (a stage of the chain)."""
        return tuple(
            seen.place.name(seen.method, seen.argument)
            for seen in sorted(self._seen.values(), key=seen_order)
            if any(any(result is dataset for result in run.results) for run in seen.runs)
        )

    def on_call(
        self,
        method: str,
        signature: inspect.Signature,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        caller: types.FrameType,
    ) -> tuple[tuple[Any, ...], dict[str, Any], Run | None]:
        """Records one tf.data call: its arguments with any override applied, and its run.

        The run is None when the call is not recorded (tf.data's own, or nothing tunable).
        """
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs, None  # tf.data raises its own, clearer, error for this call
        arguments = [a for m, a in TUNABLE if m == method and self._worth(method, a, bound)]
        if not arguments:
            return args, kwargs, None
        run = Run(tuple(self._running))
        place = self._locate(caller, method, lambda: call_text(method, arguments, bound), run)
        if place is None:
            return args, kwargs, run
        for argument in arguments:
            self._record(place, method, argument, signature, bound, kwargs, run)
            self._apply(place, method, argument, bound)
        self.edits.saw(run, place, method)
        if method == "interleave":
            self._after_interleave(caller.f_code.co_filename, place, run)
        return bound.args, bound.kwargs, run

    def after_call(self, run: Run, result: Any) -> Any:
        """What the call of `run` hands on: `result`, or the prefetch an override adds after
        an interleave (see `_structure`)."""
        candidate = self._pending.pop(id(run), None)
        if candidate is None:
            return result
        candidate.outputs.append(result)
        if not self.takes(candidate.name):
            return result
        added = added_prefetch(result, self.overrides[candidate.name])
        if added is None:
            return result
        candidate.added.append(added)
        run.results.append(result)
        return added

    def _after_interleave(self, filename: str, place: Place, run: Run) -> None:
        if place.col is None or place.end_line is None or place.end_col is None:
            return  # in a traced function: no columns to append a call at
        if calls_on_line(filename, "prefetch", place.line):
            return  # the line's own prefetch has the name a candidate would take
        candidate = self._interleaves.get(place)
        if candidate is None:
            candidate = AfterInterleave(place)
            self._interleaves[place] = candidate
        self._pending[id(run)] = candidate

    @contextlib.contextmanager
    def running(self, run: Run) -> Iterator[None]:
        """Marks `run` as in progress, so calls made inside it (a traced function) know it."""
        self._running.append(run)
        try:
            yield
        finally:
            self._running.pop()

    def _worth(self, method: str, argument: str, bound: inspect.BoundArguments) -> bool:
        if argument in bound.arguments:
            return True
        if not TUNABLE[(method, argument)][1]:
            return False
        # One file cannot be read in parallel: an absent `num_parallel_reads` is no knob there.
        return not (argument == "num_parallel_reads" and single_file(bound.arguments))

    def _record(
        self,
        place: Place,
        method: str,
        argument: str,
        signature: inspect.Signature,
        bound: inspect.BoundArguments,
        kwargs: dict[str, Any],
        run: Run,
    ) -> None:
        form, index = argument_form(argument, signature, bound, kwargs)
        value, problem = plain_value(bound.arguments.get(argument), argument)
        key = (place, method, argument)
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = Seen(place, argument, form, index, [value], problem, method, [run])
        else:
            seen.runs.append(run)
            seen.again(value, problem)

    def _apply(
        self, place: Place, method: str, argument: str, bound: inspect.BoundArguments
    ) -> None:
        name = place.name(method, argument)
        if self.takes(name):
            value = self.overrides[name]
            if value is not None or argument in bound.arguments:
                bound.arguments[argument] = value

    def _locate(
        self, caller: types.FrameType, method: str, call: Callable[[], str], run: Run
    ) -> Place | None:
        filename = caller.f_code.co_filename
        who = classify(filename, self.root)
        if who is Caller.USER:
            line, end_line, col, end_col = call_span(caller)
            nth = call_ordinal(filename, method, line, end_line, end_col)
            return Place(self._relative(filename), line, col, end_line, end_col, nth)
        if who is Caller.AUTOGRAPH:
            return self._autograph_place(call, run)
        reached = user_line(caller, self.root) if who is Caller.LIBRARY else None
        if reached is not None:  # without one, a library's own dataset: nothing of the user's
            where = f"{self._relative(reached[0])}:{reached[1]}"
            self._library_call(call(), filename, caller.f_lineno, where, run)
        return None

    def _autograph_place(self, call: Callable[[], str], run: Run) -> Place | None:
        """The user's line of a call made inside a function AutoGraph converted (no columns)."""
        try:
            origin = autograph_origin()
        except (ImportError, AttributeError):  # TensorFlow's internals moved: do not guess
            logger.debug("could not map an AutoGraph frame back to source", exc_info=True)
            reason = (
                "made in a function tf.data traced with AutoGraph, and this TensorFlow's "
                "stack cannot be mapped back to your line"
            )
            self._remember(Untunable(call(), "a traced function", None, reason), run)
            return None
        if origin is None:
            return None
        filename, line = origin
        if classify(filename, self.root) is Caller.USER:
            return Place(self._relative(filename), line)
        self._library_call(call(), filename, line, None, run)
        return None

    def _library_call(
        self, call: str, filename: str, line: int | None, reached_from: str | None, run: Run
    ) -> None:
        library = library_path(filename)
        where = library + (f":{line}" if line else "")
        reason = (
            f"called inside {library.split('/')[0]}/ (a library): tfperf rewrites only files "
            f"in {self.root.name}/, next to the pipeline"
        )
        self._remember(Untunable(call, where, reached_from, reason), run)

    def _remember(self, item: Untunable, run: Run) -> None:
        self._untunable.setdefault((item.call, item.where), (item, []))[1].append(run)


@contextlib.contextmanager
def recording(root: Path, overrides: Mapping[str, int | None] | None = None) -> Iterator[Recorder]:
    """Records (and overrides) tf.data call sites in files under `root` for the block.

    Args:
        root: the pipeline's folder; calls made from files below it are the user's.
        overrides: site name -> value to pass instead of the one written.
    """
    recorder = Recorder(root, overrides or {})
    wrap = functools.partial(_wrapper, recorder)
    with _tf.intercept(wrap), _tf.intercept_v1(wrap):
        yield recorder


def _wrapper(
    recorder: Recorder, method: _tf.Method, original: Callable[..., Any]
) -> Callable[..., Any]:
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        args, kwargs, run = recorder.on_call(method.name, signature, args, kwargs, caller)
        if run is None:
            return original(*args, **kwargs)
        with recorder.running(run):
            made_here = recorder.edits.call(method.name, run, original, args, kwargs)
            result = recorder.after_call(run, made_here)
        made = args[0] if result is None else result  # a reader's __init__ returns None
        # A tf.compat.v1 call returns an adapter; the chain holds it, or the dataset inside.
        run.results.extend({id(each): each for each in (made, _tf.unwrap_v1(made))}.values())
        return result

    return wrapper


def _ends_with_prefetch(dataset: Any) -> bool:
    """Whether the last stage of `dataset` (below tf.data's own options wrappers, and a
    `tf.compat.v1` adapter) prefetches."""
    current = _tf.unwrap_v1(dataset)
    while _tf.added_by_tf_data(current):
        below = _tf.inputs(current)
        if len(below) != 1:
            break
        current = below[0]
    return _tf.method_of(current).name == "prefetch"


def _chain_ids(dataset: Any) -> set[int]:
    """The ids of `dataset` and of every dataset it reads from."""
    return {id(current) for current in _tf.walk_inputs(dataset)}
