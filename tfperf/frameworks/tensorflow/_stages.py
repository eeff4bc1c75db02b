"""Which stage limits a pipeline: each stage measured by running the pipeline cut after it.

`analyse_stages(dataset)` recovers the chain of stages (`_chain`), then runs prefixes of it
for a short warm-up and a measured window, counting examples and process CPU time.
`tfperf.measure._bottleneck` turns the figures into what each stage adds per example, names the
stage that adds the most, and writes the advice.

The budget may end before every prefix is measured, so the prefixes that find the limit come
first (`cut_order`): the full pipeline, then a bisection over the cut points (cut in the middle,
go on into the half that loses the most time per example) down to the stage where the time
jumps and the cut right before it, then the rest from the output down. A stage the budget left
unmeasured is listed (`StageReport.unmeasured`) and no conclusion is drawn about it, nor about
the stage measured next above it, whose difference would hold its cost too. The stage about
to be named the limit runs a second window (`CONFIRMATIONS`), and the faster of the two counts.

How a prefix is driven matters, because Python's `next()` costs ~20-50 µs per element: enough
to make a fast stage look slow. Stages whose elements are examples are therefore gathered into
chunks inside TensorFlow (`batch`, or `padded_batch` for shapes that vary) so Python wakes up
once per chunk. The chunk is sized from the rate of the stage above, measured just before (a
prefix is never slower than the longer pipeline built on it, except above a filled `cache`),
so one chunk takes about `CHUNK_TARGET_S` and a slow stage cannot stall the analysis. Batched
stages and stages under a cache are driven element by element: their elements are few.

See docs/stages.md for the definitions, the cost and the limits.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tfperf.frameworks import StageNode
from tfperf.frameworks.tensorflow._chain import recover_chain
from tfperf.frameworks.tensorflow._tf import short_tf_message
from tfperf.measure import batch_examples, find_bottleneck, stage_report, with_added_costs
from tfperf.results.stages import StageKind, StageReport, StageStat, StageUnit

logger = logging.getLogger(__name__)

Clock = Callable[[], float]

#: How long one gathered chunk should take at the rate of the stage above.
CHUNK_TARGET_S = 0.02
#: Largest chunk: bounds the memory one chunk of big elements can take.
MAX_CHUNK = 1024
#: A cut pipeline whose first element took longer than this is not started a second time to
#: time a warm restart: the first start stands, so a slow fill is not paid twice.
RESTART_AGAIN_S = 2.0
#: Warm starts timed per cut pipeline; the fastest is its time to a first element.
RESTART_STARTS = 2
#: A cut after a `cache()` this many times faster than the cut before it was served from the
#: filled cache: the stages below run in the first epoch only, and limit none after it.
CACHE_SERVES = 2.0
#: Second windows, at most, for the stage named the costliest: other work on the machine only
#: slows a window, so the faster of a cut's two windows counts, and a cheap stage whose one
#: window was slowed is not named the limit. Repeated while the costliest moves to a stage
#: measured once.
CONFIRMATIONS = 2


@dataclasses.dataclass(frozen=True)
class StageMeasurement:
    """What one cut pipeline delivered in its measured window (after warm-up)."""

    elements: int
    examples: int | None
    duration_s: float
    cpu_s: float
    note: str | None = None
    #: Seconds from a fresh start to the first element (a restart's wait up to this stage).
    first_element_s: float | None = None


class NothingToMeasure(Exception):
    """The cut pipeline ended before yielding anything (repeated, it can only be empty)."""


#: Seconds of each cut's run, after its first element, left out of its window (autotuning
#: ramps up, buffers fill).
WARMUP_S = 0.2


def analyse_stages(
    dataset: Any,
    consumption_examples_per_sec: float | None = None,
    *,
    seconds_per_stage: float = 0.5,
    warmup_s: float = WARMUP_S,
    budget_s: float = 30.0,
    clock: Clock = time.perf_counter,
    cpu_clock: Clock = time.process_time,
) -> StageReport:
    """Measures every stage of `dataset` and names the one that limits it.

    Args:
        dataset: the built `tf.data.Dataset`, options applied, as the profile iterated it.
        consumption_examples_per_sec: what the model consumes (compute-only phase), drawn
            against the stages and used to say whether the limiting stage matters.
        seconds_per_stage: measured window per stage, after warm-up.
        warmup_s: per stage, time after the first element that is not measured (autotuning
            ramps up, buffers fill).
        budget_s: once the analysis has run this long, the stages not yet measured are
            left unmeasured and listed (each cut pipeline starts from scratch, so a shuffle
            buffer of slow elements is refilled for every stage after it); `cut_order` puts
            the cuts that find the limit first.
        clock: wall seconds; cpu_clock: this process's CPU seconds (all threads).

    Returns:
        A `StageReport`. A stage that cannot be measured keeps `None` figures and a note; the
        analysis itself does not raise for it.

    Example:
        >>> report = analyse_stages(make_dataset(knobs), 13_500.0)  # doctest: +SKIP
        >>> report.bottleneck.label  # doctest: +SKIP
        'map(parse_jpeg)'
    """
    if seconds_per_stage <= 0 or warmup_s < 0 or budget_s <= 0:
        raise ValueError(
            "`seconds_per_stage > 0`, `warmup_s >= 0` and `budget_s > 0` must hold, but got "
            f"(seconds_per_stage={seconds_per_stage}, warmup_s={warmup_s}, budget_s={budget_s})"
        )
    started = clock()
    chain = recover_chain(dataset)
    options = dataset.options()
    measurements: dict[int, StageMeasurement] = {}

    def measure(index: int) -> StageMeasurement:
        node = chain.stages[index]
        chunk = _chunk_size(node, _rate_above(chain.stages, index, measurements))
        logger.info("measuring stage %d, %s (chunk %d)", node.index, node.label, chunk)
        return _measure(node, options, chunk, seconds_per_stage, warmup_s, clock, cpu_clock)

    for index in cut_order(chain.stages, measurements):
        if clock() - started > budget_s:
            break
        measurements[index] = measure(index)
    unmeasured = [node.index for node in chain.stages if node.index not in measurements]
    for index in unmeasured:
        measurements[index] = _unmeasured(budget_s)
    confirmed: set[int] = set()
    while len(confirmed) < CONFIRMATIONS and clock() - started <= budget_s:
        costliest = find_bottleneck(_stats(chain.stages, measurements, unmeasured))
        if costliest is None or costliest in confirmed:
            break
        measurements[costliest] = _faster(measurements[costliest], measure(costliest))
        confirmed.add(costliest)
    report = stage_report(
        _stats(chain.stages, measurements, unmeasured),
        consumption_examples_per_sec,
        seconds_per_stage=seconds_per_stage,
        warmup_s=warmup_s,
        duration_s=clock() - started,
        note=chain.note,
    )
    return dataclasses.replace(report, unmeasured=unmeasured)


def cut_order(
    stages: Sequence[StageNode], measured: Mapping[int, StageMeasurement]
) -> Iterator[int]:
    """The indices of `stages` in the order to measure them, the limit's cuts first.

    The full pipeline first; then a bisection over the cut points that count examples: with
    the time per example known at both ends of a span (0 before the source), the cut in its
    middle is measured and the bisection goes on into the half that loses the most time, until
    the span is one stage, measured with the cut before it. Stages below the last `cache()` are
    left to the end: from the second epoch on they do not run. Then every other stage, from the
    output down. `measured` is read as the caller fills it, so each cut follows from the ones
    before; a cut that gives no rate ends the bisection.
    """
    if not stages:
        return
    done: set[int] = set()
    for index in itertools.chain([stages[-1].index], _bisection(stages, measured)):
        if index not in done:
            done.add(index)
            yield index
    for stage in reversed(stages):
        if stage.index not in done:
            done.add(stage.index)
            yield stage.index


def _bisection(
    stages: Sequence[StageNode], measured: Mapping[int, StageMeasurement]
) -> Iterator[int]:
    caches = [s.index for s in stages if s.kind is StageKind.CACHE]
    floor = max(caches) if caches else 0
    points = [s.index for s in stages if s.unit is not StageUnit.INPUT and s.index >= floor]
    low, high = -1, stages[-1].index
    while True:
        inside = [point for point in points if low < point < high]
        if not inside:
            return
        middle = inside[len(inside) // 2]
        yield middle
        times = [_time_per_example(measured.get(index)) for index in (low, middle, high)]
        if low < 0:
            times[0] = 0.0
        if any(time is None for time in times):
            return
        before, at, after = (time or 0.0 for time in times)
        low, high = (middle, high) if after - at > at - before else (low, middle)


def _time_per_example(measured: StageMeasurement | None) -> float | None:
    if measured is None or not measured.examples or measured.duration_s <= 0:
        return None
    return measured.duration_s / measured.examples


def _rate_above(
    stages: Sequence[StageNode], index: int, measured: Mapping[int, StageMeasurement]
) -> float | None:
    """Examples/s of the nearest measured cut above stage `index`: a lower bound on the rate
    of the cut at `index` (a prefix is never slower than a longer pipeline built on it), but
    for a `cache()` in between, which serves elements far faster than they were made."""
    for stage in stages[index + 1 :]:
        if stage.kind is StageKind.CACHE:
            return None
        found = measured.get(stage.index)
        if found is not None:
            return _rate_for_next(stage, found)
    return None


def _stats(
    stages: Sequence[StageNode],
    measurements: Mapping[int, StageMeasurement],
    unmeasured: Sequence[int],
) -> list[StageStat]:
    """Every stage's record from its measurement, with what it adds per example."""
    stats = [_stat(node, measurements[node.index]) for node in stages]
    return _served_by_cache(_without_gaps(with_added_costs(stats), unmeasured))


def _faster(first: StageMeasurement, second: StageMeasurement) -> StageMeasurement:
    """The window of one cut that delivered more per second (the first on a tie)."""

    def rate(measured: StageMeasurement) -> float:
        count = measured.examples if measured.examples is not None else measured.elements
        return count / measured.duration_s if count and measured.duration_s > 0 else 0.0

    return second if rate(second) > rate(first) else first


def _unmeasured(budget_s: float) -> StageMeasurement:
    return StageMeasurement(
        0,
        None,
        0.0,
        0.0,
        note=(
            f"not measured: the stage analysis's {budget_s:g} s budget ended first, spent on "
            "the cuts that find the limit; nothing is concluded about this stage (a larger "
            "--budget measures it)"
        ),
    )


def _without_gaps(stats: list[StageStat], unmeasured: Sequence[int]) -> list[StageStat]:
    """`stats`, with no added cost for a stage measured next above an unmeasured one: the
    difference from the stage measured before holds the unmeasured stage's cost too."""
    result, gap = [], False
    for stat in stats:
        if stat.index in unmeasured and stat.unit is not StageUnit.INPUT:
            gap = True
        elif gap and stat.added_s_per_example is not None:
            below = "a stage below it was not measured, so what it adds is not known"
            stat = dataclasses.replace(
                stat, added_s_per_example=None, added_cpu_s_per_example=None, note=below
            )
            gap = False
        result.append(stat)
    return result


def _served_by_cache(stats: list[StageStat]) -> list[StageStat]:
    """`stats`, with no added cost for the stages below a `cache()` measured to serve its
    elements (`CACHE_SERVES` times faster than the cut before it): after the first epoch they
    do not run, so they limit nothing then."""
    caches = [stat for stat in stats if stat.kind is StageKind.CACHE]
    if not caches:
        return stats
    cache = caches[-1]
    below = next((s for s in reversed(stats[: cache.index]) if s.examples_per_sec), None)
    if below is None or not cache.examples_per_sec or below.examples_per_sec is None:
        return stats
    if cache.examples_per_sec < CACHE_SERVES * below.examples_per_sec:
        return stats
    once = f"runs in the first epoch only: {cache.label} serves its elements after it"
    return [
        dataclasses.replace(s, added_s_per_example=None, added_cpu_s_per_example=None, note=once)
        if s.index < cache.index and s.added_s_per_example is not None
        else s
        for s in stats
    ]


def _stat(node: StageNode, measured: StageMeasurement) -> StageStat:
    """The plain record of one stage; its added costs are filled in by `bottleneck`."""
    seconds = measured.duration_s
    elements, examples = measured.elements, measured.examples
    return StageStat(
        index=node.index,
        kind=node.kind,
        label=node.label,
        location=node.location,
        parameters=node.parameters,
        unit=node.unit,
        elements_per_sec=elements / seconds if elements and seconds > 0 else None,
        examples_per_sec=examples / seconds if examples and seconds > 0 else None,
        cpu_s_per_element=measured.cpu_s / elements if elements else None,
        cpu_s_per_example=measured.cpu_s / examples if examples else None,
        added_s_per_example=None,
        added_cpu_s_per_example=None,
        elements=elements,
        duration_s=seconds,
        note=measured.note,
        calls_python=node.calls_python,
        draws_random=node.draws_random,
        first_element_s=measured.first_element_s,
    )


def _chunk_size(node: StageNode, rate_above: float | None) -> int:
    """Elements gathered per pull: 1 (element by element) unless elements are examples."""
    if node.unit is not StageUnit.EXAMPLE or rate_above is None:
        return 1
    return max(1, min(MAX_CHUNK, int(rate_above * CHUNK_TARGET_S)))


def _rate_for_next(node: StageNode, measured: StageMeasurement) -> float | None:
    # Above a cache, the rate says nothing about the stages below it: once filled, the cache
    # serves elements far faster than they were made.
    if node.kind is StageKind.CACHE or measured.examples is None or measured.duration_s <= 0:
        return None
    return measured.examples / measured.duration_s


def _measure(
    node: StageNode,
    options: Any,
    chunk: int,
    seconds: float,
    warmup_s: float,
    clock: Clock,
    cpu_clock: Clock,
) -> StageMeasurement:
    try:
        driven, chunk = _driven(node, options, chunk)
        measured = measure_pulls(
            _pulls(iter(driven), node.unit, chunk), seconds, warmup_s, clock, cpu_clock
        )
        measured = _restarted(measured, driven, clock)
    except NothingToMeasure:
        return StageMeasurement(0, None, 0.0, 0.0, note="the pipeline cut here yields nothing")
    except Exception as error:  # one stage that cannot run must not cost the whole analysis
        logger.info("stage %s could not be measured", node.label, exc_info=True)
        message = (short_tf_message(error).splitlines() or [""])[0]
        return StageMeasurement(
            0, None, 0.0, 0.0, note=f"could not be measured: {type(error).__name__}: {message}"
        )
    measured = _first_element(measured, chunk)
    # Elements of an input stage (file names) are not examples: they have no examples/s.
    return (
        dataclasses.replace(measured, examples=None) if node.unit is StageUnit.INPUT else measured
    )


def _restarted(measured: StageMeasurement, driven: Any, clock: Clock) -> StageMeasurement:
    """`measured` with the first element timed again on a fresh iterator, now that the
    process is warm, as a restart of the dataset is: the first iterator of a pipeline also
    pays one-time costs (functions instantiated, thread pools started) that a restart
    does not. The faster of `RESTART_STARTS` starts counts, so one start a busy machine
    delayed does not name its stage. Skipped when the first start took over
    `RESTART_AGAIN_S`."""
    if measured.first_element_s is None or measured.first_element_s > RESTART_AGAIN_S:
        return measured
    times = []
    for _ in range(RESTART_STARTS):
        started = clock()
        next(iter(driven))
        times.append(clock() - started)
    return dataclasses.replace(measured, first_element_s=min(times))


def _first_element(measured: StageMeasurement, chunk: int) -> StageMeasurement:
    """The first pull brought `chunk` elements: the first of them came the steady time of the
    other `chunk - 1` earlier."""
    if measured.first_element_s is None or chunk <= 1 or not measured.elements:
        return measured
    rest = (chunk - 1) * measured.duration_s / measured.elements
    return dataclasses.replace(measured, first_element_s=max(0.0, measured.first_element_s - rest))


def _driven(node: StageNode, options: Any, chunk: int) -> tuple[Any, int]:
    """The cut pipeline as measured: the whole pipeline's options, repeated, maybe gathered."""
    prefix = node.dataset
    try:
        prefix = prefix.with_options(options)
    except (ValueError, TypeError):  # options conflicting with ones set inside: keep its own
        logger.info("stage %s keeps its own options", node.label)
    # Repeating inside TensorFlow restarts a finite prefix without a trip through Python, as
    # the profiler restarts the full pipeline at the end of an epoch.
    repeated = prefix.repeat()
    if chunk > 1:
        gathered = _gather(repeated, chunk)
        if gathered is not None:
            return gathered, chunk
    return repeated, 1


def _gather(dataset: Any, chunk: int) -> Any:
    """`dataset` in chunks of `chunk` elements, or None if its elements cannot be stacked."""
    import tensorflow as tf

    leaves = tf.nest.flatten(dataset.element_spec)
    dense = [leaf for leaf in leaves if isinstance(leaf, tf.TensorSpec)]
    if len(dense) < len(leaves):  # ragged or sparse parts: batch stacks them, padding cannot
        return dataset.batch(chunk, drop_remainder=True) if not dense else None
    if any(leaf.shape.rank is None for leaf in dense):
        return None
    if all(leaf.shape.is_fully_defined() for leaf in dense):
        return dataset.batch(chunk, drop_remainder=True)
    return dataset.padded_batch(chunk, drop_remainder=True)


def _pulls(iterator: Iterator[Any], unit: StageUnit, chunk: int) -> Iterator[tuple[int, int]]:
    """(elements, examples) per `next()`: a chunk of examples, or one element."""
    while True:
        try:
            element = next(iterator)
        except StopIteration:
            return
        if unit is StageUnit.BATCH:
            yield 1, batch_examples(element)
        else:
            yield chunk, chunk


def measure_pulls(
    pulls: Iterator[tuple[int, int]],
    seconds: float,
    warmup_s: float,
    clock: Clock,
    cpu_clock: Clock,
) -> StageMeasurement:
    """Drives `pulls` ((elements, examples) per pull): warms up, then measures a window.

    Warm-up runs from the first pull until `warmup_s` later; the window then lasts at least
    `seconds` and at least one pull, so a stage slower than the window still gets a figure.
    The first pull is timed as `first_element_s`.

    Raises:
        NothingToMeasure: `pulls` ended (the cut pipeline yields nothing).
    """
    started = clock()
    if next(pulls, None) is None:
        raise NothingToMeasure
    first = clock() - started
    warm_until = clock() + warmup_s
    while clock() < warm_until:
        if next(pulls, None) is None:
            raise NothingToMeasure
    start, cpu_start = clock(), cpu_clock()
    elements = examples = 0
    now = start
    while now - start < seconds or elements == 0:
        pulled = next(pulls, None)
        if pulled is None:
            raise NothingToMeasure
        elements, examples = elements + pulled[0], examples + pulled[1]
        now = clock()
    return StageMeasurement(
        elements, examples, now - start, cpu_clock() - cpu_start, first_element_s=first
    )
