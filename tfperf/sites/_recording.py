"""Finds, and overrides, the tf.data calls in the user's own files while a dataset is built.

`recording(root, overrides)` wraps tf.data's public entry points for the duration of a block:
`Dataset.map`, `interleave`, `batch`, `padded_batch`, `shuffle`, `prefetch`, and the readers
`TFRecordDataset`, `TextLineDataset`, `FixedLengthRecordDataset` (their `num_parallel_reads`).
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
import dataclasses
import functools
import inspect
import logging
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tfperf import _tf
from tfperf.errors import KnobError
from tfperf.knobs import TUNABLE, SiteName, format_site_value
from tfperf.results import ArgumentForm, CallSite, Discovery, Untunable
from tfperf.sites._callers import (
    Caller,
    argument_form,
    autograph_origin,
    call_ordinal,
    call_span,
    call_text,
    classify,
    library_path,
    plain_value,
    single_file,
    user_line,
)

__all__ = ["Recorder", "recording"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class _Place:
    """Where in the user's files a call was made; columns None when only the line is known.

    `nth` tells apart calls of one method on one line (1, 2, ... in the order they end),
    None when the line holds one.
    """

    file: str
    line: int
    col: int | None = None
    end_line: int | None = None
    end_col: int | None = None
    nth: int | None = None

    def name(self, method: str, argument: str) -> str:
        return str(SiteName(method, self.file, self.line, self.nth, argument))


@dataclasses.dataclass(eq=False)
class _Run:
    """One run of a recorded call: what it returned, and the recorded calls it ran inside.

    A call made while tf.data traces an `interleave` function runs inside that interleave:
    it feeds the measured dataset when the interleave does, though no input of it leads there.
    """

    parents: tuple[_Run, ...]
    results: list[Any] = dataclasses.field(default_factory=list)

    def feeds(self, chain: set[int]) -> bool:
        return any(id(result) in chain for result in self.results) or any(
            parent.feeds(chain) for parent in self.parents
        )


@dataclasses.dataclass
class _Seen:
    """One argument of one call site, over every time the call ran."""

    place: _Place
    method: str
    argument: str
    form: ArgumentForm
    index: int | None
    values: list[int | None]
    problem: str | None
    runs: list[_Run]


class Recorder:
    """Collects the call sites of one build and applies `overrides` (site name -> value)."""

    def __init__(self, root: Path, overrides: Mapping[str, int | None]) -> None:
        self.root = root.resolve()
        self.overrides = dict(overrides)
        self._seen: dict[tuple[_Place, str, str], _Seen] = {}
        self._untunable: dict[tuple[str, str], tuple[Untunable, list[_Run]]] = {}
        self._used: set[str] = set()
        self._running: list[_Run] = []

    def discovery(self, dataset: Any = None) -> Discovery:
        """The sites (named, in file order) and the untunable calls of this build.

        Args:
            dataset: the dataset tfperf measures. When given, only calls that built it are
                kept: a validation set built beside it has nothing to tune for the measurement.
        """
        chain = _chain_ids(dataset) if dataset is not None else None

        def kept(runs: list[_Run]) -> bool:
            return chain is None or any(run.feeds(chain) for run in runs)

        sites, untunable = [], [item for item, runs in self._untunable.values() if kept(runs)]
        for seen in sorted(self._seen.values(), key=_order):
            if not kept(seen.runs):
                continue
            name = seen.place.name(seen.method, seen.argument)
            reason = seen.problem or _varies(seen.values)
            if reason:
                where = f"{seen.place.file}:{seen.place.line}"
                untunable.append(Untunable(_seen_text(seen), where, None, reason))
            else:
                sites.append(_site(name, seen))
        return Discovery(sites=tuple(sites), untunable=tuple(untunable))

    def sites_of(self, dataset: Any) -> tuple[str, ...]:
        """The names of the sites whose call returned `dataset` (a stage of the chain)."""
        return tuple(
            seen.place.name(seen.method, seen.argument)
            for seen in sorted(self._seen.values(), key=_order)
            if any(any(result is dataset for result in run.results) for run in seen.runs)
        )

    def check_overrides(self, shown: str) -> None:
        """Raises `KnobError` for an override that matched no call, listing the sites found."""
        unused = sorted(set(self.overrides) - self._used)
        if unused:
            found = ", ".join(site.name for site in self.discovery().sites) or "none"
            raise KnobError(
                f"{shown}: no call matches {', '.join(repr(name) for name in unused)} while "
                f"the dataset is built, so that value cannot be applied. Sites found: {found}. "
                "Line numbers change when the file is edited: run `tfperf profile` for the "
                "current names."
            )

    def on_call(
        self,
        method: str,
        signature: inspect.Signature,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        caller: types.FrameType,
    ) -> tuple[tuple[Any, ...], dict[str, Any], _Run | None]:
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
        run = _Run(tuple(self._running))
        place = self._locate(caller, method, lambda: call_text(method, arguments, bound), run)
        if place is None:
            return args, kwargs, run
        for argument in arguments:
            self._record(place, method, argument, signature, bound, kwargs, run)
            self._apply(place, method, argument, bound)
        return bound.args, bound.kwargs, run

    @contextlib.contextmanager
    def running(self, run: _Run) -> Iterator[None]:
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
        place: _Place,
        method: str,
        argument: str,
        signature: inspect.Signature,
        bound: inspect.BoundArguments,
        kwargs: dict[str, Any],
        run: _Run,
    ) -> None:
        form, index = argument_form(argument, signature, bound, kwargs)
        value, problem = plain_value(bound.arguments.get(argument), argument)
        key = (place, method, argument)
        seen = self._seen.get(key)
        if seen is None:
            self._seen[key] = _Seen(place, method, argument, form, index, [value], problem, [run])
            return
        seen.runs.append(run)
        if value not in seen.values:
            seen.values.append(value)
        seen.problem = seen.problem or problem

    def _apply(
        self, place: _Place, method: str, argument: str, bound: inspect.BoundArguments
    ) -> None:
        name = place.name(method, argument)
        if name in self.overrides:
            self._used.add(name)
            value = self.overrides[name]
            if value is not None or argument in bound.arguments:
                bound.arguments[argument] = value

    def _locate(
        self, caller: types.FrameType, method: str, call: Callable[[], str], run: _Run
    ) -> _Place | None:
        filename = caller.f_code.co_filename
        who = classify(filename, self.root)
        if who is Caller.USER:
            line, end_line, col, end_col = call_span(caller)
            nth = call_ordinal(filename, method, line, end_line, end_col)
            return _Place(self._relative(filename), line, col, end_line, end_col, nth)
        if who is Caller.AUTOGRAPH:
            return self._autograph_place(call, run)
        reached = user_line(caller, self.root) if who is Caller.LIBRARY else None
        if reached is not None:  # without one, a library's own dataset: nothing of the user's
            where = f"{self._relative(reached[0])}:{reached[1]}"
            self._library_call(call(), filename, caller.f_lineno, where, run)
        return None

    def _relative(self, filename: str) -> str:
        return Path(os.path.realpath(filename)).relative_to(self.root).as_posix()

    def _autograph_place(self, call: Callable[[], str], run: _Run) -> _Place | None:
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
            return _Place(self._relative(filename), line)
        self._library_call(call(), filename, line, None, run)
        return None

    def _library_call(
        self, call: str, filename: str, line: int | None, reached_from: str | None, run: _Run
    ) -> None:
        library = library_path(filename)
        where = library + (f":{line}" if line else "")
        reason = (
            f"called inside {library.split('/')[0]}/ (a library): tfperf rewrites only files "
            f"in {self.root.name}/, next to the pipeline"
        )
        self._remember(Untunable(call, where, reached_from, reason), run)

    def _remember(self, item: Untunable, run: _Run) -> None:
        self._untunable.setdefault((item.call, item.where), (item, []))[1].append(run)


@contextlib.contextmanager
def recording(root: Path, overrides: Mapping[str, int | None] | None = None) -> Iterator[Recorder]:
    """Records (and overrides) tf.data call sites in files under `root` for the block.

    Args:
        root: the pipeline's folder; calls made from files below it are the user's.
        overrides: site name -> value to pass instead of the one written.
    """
    recorder = Recorder(root, overrides or {})
    with _tf.intercept(functools.partial(_wrapper, recorder)):
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
            result = original(*args, **kwargs)
        run.results.append(args[0] if result is None else result)  # __init__ returns None
        return result

    return wrapper


def _site(name: str, seen: _Seen) -> CallSite:
    place = seen.place
    return CallSite(
        name=name,
        file=place.file,
        line=place.line,
        col=place.col,
        end_line=place.end_line,
        end_col=place.end_col,
        method=seen.method,
        argument=seen.argument,
        form=seen.form,
        index=seen.index,
        value=seen.values[0],
        calls=len(seen.runs),
    )


def _chain_ids(dataset: Any) -> set[int]:
    """The ids of `dataset` and of every dataset it reads from."""
    return {id(current) for current in _tf.walk_inputs(dataset)}


def _varies(values: list[int | None]) -> str | None:
    if len(values) < 2:
        return None
    shown = ", ".join(format_site_value(value) for value in values)
    return f"takes different values on different calls ({shown}); tfperf tunes one value per call"


def _seen_text(seen: _Seen) -> str:
    return f"{seen.method}({seen.argument}=...)"


def _order(seen: _Seen) -> tuple[str, int, int, int, str]:
    """File, line, then where the call ends: `ds.shuffle(9).batch(4)` lists shuffle first."""
    place = seen.place
    end_line = place.end_line if place.end_line is not None else place.line
    return place.file, place.line, end_line, place.end_col or -1, seen.argument
