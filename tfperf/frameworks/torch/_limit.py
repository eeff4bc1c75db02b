"""A DataLoader's limit, the workers that reach it, and the advice that names its items.

The stated limit is the smallest of two terms, raised to the fastest rate measured (no limit
may sit below a rate the machine already ran):

- **compute**: the train step alone on a cached batch (the compute-only phase). Workers load
  items beside the step, so enough of them hide the loading entirely;
- **cpu**: the cores divided by the CPU seconds one example costs: its item's CPU in a worker
  (measured apart in the trainer) and the step's CPU per example. Workers waiting on a read
  cost no CPU, so a blocking `Dataset` never binds here;
- **workers** (`LimitBound.PARALLEL_STAGE`): the most workers a search tries here (the
  `num_workers` knob's declared domain), each loading one item at a time, divided by an
  item's wall time: what binds a `Dataset` whose items wait.

The workers that reach it follow Little's law (`_items.workers_for`): items in flight = rate
x wall time per item, capped where the cores run out (`cores x wall / cpu` workers already
keep every core busy).
"""

from __future__ import annotations

import math

from tfperf.findings import CONTENTION_AT, INPUT_RATES
from tfperf.frameworks.torch._items import ItemTiming, workers_for
from tfperf.frameworks.torch._sites import THREADS_KNOB
from tfperf.knobs import KNOBS
from tfperf.knobs.declare import SearchContext
from tfperf.measure import model_cpu_s_per_example
from tfperf.results import (
    MODERATELY_INPUT_BOUND_AT,
    RATE_NOISE,
    Limit,
    LimitBound,
    LimitTerm,
    ProfileResult,
    Verdict,
)
from tfperf.results.findings import Evidence, Finding, Level
from tfperf.results.stages import LoaderReport

#: Workers tfperf proposes at most: past it, process start-up and RAM cost more than they buy.
WORKER_CAP = 32
#: Workers beyond Little's law's count: each also pickles and sends its batches, and items
#: vary, so a loader sized exactly for the mean rate falls behind at every slow item.
HEADROOM = 2.0


def estimate_workers(timing: ItemTiming, rate: float, cores: int) -> int:
    """Workers that keep `rate` items/s in flight: Little's law (`_items.workers_for`) on
    `HEADROOM` times the rate, rounded up to a power of two (the counts a search tries,
    `knobs.worker_values`) and at most `WORKER_CAP`; for items that compute rather than wait,
    at most the cores (each such worker keeps one busy: more only queue for them)."""
    needed = workers_for(timing, HEADROOM * rate, cores=cores)
    count = min(int(2 ** math.ceil(math.log2(needed))), WORKER_CAP)
    return count if timing.blocks else min(count, cores)


def loader_limit(result: ProfileResult, loader: LoaderReport, cores: int) -> Limit | None:
    """The rate no configuration of this DataLoader pipeline can exceed here; None without a
    compute-only phase. The step's ceiling is the better of the compute-only phase and its
    rate on one operator thread, where that was measured."""
    compute = result.compute_only
    if compute is None or compute.examples_per_sec <= 0:
        return None
    one_thread = loader.one_thread_examples_per_sec
    step = f"the train step alone on a cached batch: {compute.examples_per_sec:,.0f} examples/s"
    rate = compute.examples_per_sec
    if one_thread is not None and one_thread > rate:
        step = f"the train step alone on a cached batch, one thread: {one_thread:,.0f} examples/s"
        rate = one_thread
    terms = [LimitTerm(LimitBound.COMPUTE, rate, step)]
    model_cpu = _step_cpu_s_per_example(result, loader)
    per_item = loader.examples_per_item
    load_cpu = loader.load_cpu_s_per_item
    item_cpu = load_cpu / per_item if load_cpu is not None else None
    if model_cpu is not None and item_cpu is not None and item_cpu + model_cpu > 0:
        item = "item and collate" if loader.collate_cpu_s_per_batch else "item"
        terms.append(
            LimitTerm(
                LimitBound.CPU,
                cores / (item_cpu + model_cpu),
                f"{cores} cores ÷ ({item_cpu * 1e3:.3g} ms {item} + {model_cpu * 1e3:.3g} ms "
                "step CPU per example)",
            )
        )
    terms.extend(_workers_term(loader, cores))
    binding = min(terms, key=lambda term: term.examples_per_sec)
    measured = result.end_to_end.examples_per_sec
    rate = max(binding.examples_per_sec, measured)
    return Limit(
        examples_per_sec=rate,
        bound_by=binding.bound_by,
        explanation=_explanation(
            binding, loader, rate, step_costs_more=(model_cpu or 0.0) > (item_cpu or 0.0)
        ),
        terms=terms,
    )


def _step_cpu_s_per_example(result: ProfileResult, loader: LoaderReport) -> float | None:
    """The step's CPU seconds per example at its cheapest: one operator thread keeps at most
    one core busy, so there the step costs at most 1/rate, often far less than torch's
    default threads spin for (`model_cpu_s_per_example`, the compute-only phase's CPU)."""
    model_cpu = model_cpu_s_per_example(result)
    one_thread = loader.one_thread_examples_per_sec
    if one_thread is None or one_thread <= 0:
        return model_cpu
    return min(model_cpu, 1 / one_thread) if model_cpu is not None else 1 / one_thread


def trainer_threads(result: ProfileResult, loader: LoaderReport) -> int | None:
    """1 where the step on one operator thread outruns the limit `HEADROOM` times over and
    costs less CPU per example than under torch's default threads: one thread then frees
    cores for the workers at no cost in rate, as the limit's CPU term already counts. None
    (keep the trainer's threads) where either was not measured or does not hold."""
    one_thread, limit = loader.one_thread_examples_per_sec, result.limit
    default_cpu = model_cpu_s_per_example(result)
    if one_thread is None or one_thread <= 0 or limit is None or default_cpu is None:
        return None
    fast_enough = one_thread >= HEADROOM * limit.examples_per_sec
    return 1 if fast_enough and 1 / one_thread < default_cpu / (1 + RATE_NOISE) else None


def threads_finding(result: ProfileResult, loader: LoaderReport) -> Finding | None:
    """The step on torch's default threads where one thread would free the cores the workers
    need (`trainer_threads`), the loader has workers, and steps compute slower end to end than
    on cached batches (the cores are contended); None otherwise. Weighed as the contention it
    relieves: the computing part of a step beyond the cached batches' compute, times the
    share of the step's CPU one thread saves."""
    slowdown, one_thread = result.compute_slowdown, loader.one_thread_examples_per_sec
    default_cpu, limit = model_cpu_s_per_example(result), result.limit
    if slowdown is None or slowdown < CONTENTION_AT or result.knobs.get(THREADS_KNOB) is not None:
        return None
    if loader.workers < 1:  # the items load on the trainer's thread: no cores to free
        return None
    if trainer_threads(result, loader) != 1 or one_thread is None or default_cpu is None:
        return None
    assert limit is not None  # `trainer_threads` decides only against a limit
    one_cpu = 1 / one_thread
    compute = result.compute_only
    return Finding(
        "trainer-threads",
        Level.FIX,
        f"The train step runs on torch's default threads, one per core, which spin on the "
        f"cores the workers need: it costs {default_cpu * 1e6:,.3g} µs CPU per example there, "
        f"against {one_cpu * 1e6:,.3g} µs on one thread, where alone it still runs "
        f"{one_thread:,.0f} examples/s, {one_thread / limit.examples_per_sec:.0f}x the limit.",
        "Set `torch.set_num_threads(1)` in the trainer (torch_threads=1), as the estimate "
        "of `tfperf tune` does.",
        Evidence("compute_only", compute.steps if compute is not None else None),
        weight=(1 - result.input_wait_fraction) * (1 - 1 / slowdown) * (1 - one_cpu / default_cpu),
        origin="torch",
    )


def contention_finding(result: ProfileResult, loader: LoaderReport) -> Finding | None:
    """Steps compute slower end to end than on cached batches (`CONTENTION_AT`), in the
    DataLoader's words: with workers, they load items on the cores the step computes on;
    without, nothing runs beside a step (a note, no fix). None below the threshold. Weighed
    as the core's rule: the computing part of a step times the part beyond cached compute."""
    slowdown = result.compute_slowdown
    if slowdown is None or slowdown < CONTENTION_AT:
        return None
    weight = (1 - result.input_wait_fraction) * (1 - 1 / slowdown)
    evidence = Evidence("end_to_end", result.end_to_end.steps)
    slower = f"Steps compute {slowdown:.1f}x slower end to end than on cached batches"
    if loader.workers < 1:
        return Finding(
            "contention",
            Level.NOTE,
            f"{slower}, but with num_workers=0 the DataLoader loads each batch between steps, "
            "never beside one: this is not contention for the cores, the step itself runs "
            "slower after each load.",
            None,
            evidence,
            weight=weight,
            origin="torch",
        )
    workers = f"{loader.workers} worker{'s' * (loader.workers != 1)}"
    if loader.items_wait and loader.wall_s_per_item and loader.cpu_s_per_item is not None:
        # Items that mostly wait take little of the cores: fewer workers would only slow
        # the input, and what slows the step is not what tfperf measured. The figures are
        # the items' own, as the rates finding gives them.
        wall, cpu = loader.wall_s_per_item * 1e3, loader.cpu_s_per_item * 1e3
        return Finding(
            "contention",
            Level.NOTE,
            f"{slower}, though the DataLoader's items mostly wait ({wall:.3g} ms each, "
            f"{cpu:.3g} ms of it CPU), so its {workers} take{'s' * (loader.workers == 1)} little "
            "of the cores: tfperf cannot tell what slows the step here.",
            None,
            evidence,
            weight=weight,
            origin="torch",
        )
    relief = "Cheaper items or fewer workers"
    if trainer_threads(result, loader) == 1:
        relief = (
            "Cheaper items, fewer workers or one operator thread in the trainer (the "
            "trainer-threads finding)"
        )
    return Finding(
        "contention",
        Level.FIX,
        f"{slower}: the DataLoader's {workers} load items on the cores the step computes on.",
        f"{relief} would speed up training too; `tfperf tune` measures num_workers against it.",
        evidence,
        weight=weight,
        origin="torch",
    )


def most_workers(cores: int) -> int:
    """The most workers a search of `num_workers` tries on `cores` cores, read from the knob's
    declaration (a GPU or bf16 does not change it)."""
    context = SearchContext(cpu_count=cores, has_gpu=False, cpu_bf16=False)
    counts = [v for v in KNOBS["num_workers"].domain(None, context) if isinstance(v, int)]
    return max(counts, default=1)


def _workers_term(loader: LoaderReport, cores: int) -> list[LimitTerm]:
    """The rate the most workers a search tries deliver when each loads one item at a time,
    at least an item's wall time each, with its share of collate; none where the items were
    not timed."""
    wall = loader.load_wall_s_per_item
    if wall is None or wall <= 0:
        return []
    most, per_item = most_workers(cores), loader.examples_per_item
    held = f" of {per_item:,.3g} examples" if per_item != 1 else ""
    collate = " (with its share of collate)" if loader.collate_wall_s_per_batch else ""
    return [
        LimitTerm(
            LimitBound.PARALLEL_STAGE,
            most * per_item / wall,
            f"{most} workers ÷ {wall * 1e3:.3g} ms wall per item{held}{collate}",
            stage_label=loader.item_function,
        )
    ]


def _explanation(
    binding: LimitTerm, loader: LoaderReport, rate: float, *, step_costs_more: bool = False
) -> str:
    """Why `binding` binds and what lifts it; `step_costs_more`: the step spends more of the
    cores per example than the items do, so a cheaper item is not what lifts a CPU bound."""
    if binding.bound_by is LimitBound.PARALLEL_STAGE:
        more = "more workers than a search tries (num_workers in SEARCH_SPACE)"
        lift = f"{more[0].upper()}{more[1:]} would lift it while the cores have room."
        if loader.items_wait:
            item = f"`{loader.item_function}`" if loader.item_function else "Each item"
            lift = (
                f"{item} spends most of its wall time waiting; items that wait less (batched "
                f"reads, a local cache) would lift it, or {more}."
            )
        return (
            f"The workers bind: {binding.detail}, the most a search tries here, each loading "
            f"one item at a time. {lift}"
        )
    if binding.bound_by is LimitBound.CPU and step_costs_more:
        return (
            f"The cores bind: {binding.detail}, most of it the train step's. More workers only "
            "queue for them; a cheaper step, or more cores, would lift it."
        )
    if binding.bound_by is LimitBound.CPU and loader.collate_dominates:
        return (
            f"The cores bind: {binding.detail}, most of it the collate call's "
            f"(`{loader.collate_function}`). More workers only queue for them; a cheaper "
            "collate (vectorised, or its work moved where it runs once) would lift it."
        )
    if binding.bound_by is LimitBound.CPU:
        return (
            f"The cores bind: {binding.detail}. More workers only queue for them; make each "
            "item cheaper (decode less, cache decoded items) to lift it."
        )
    workers = loader.workers_estimate
    keep = "worker keeps" if workers == 1 else "workers keep"
    items = rate / loader.examples_per_item
    reach = f" About {workers} {keep} {items:,.0f} items/s in flight." if workers else ""
    return f"The train step binds: {binding.detail}; the loader can keep up with it.{reach}"


def rate_finding(result: ProfileResult, loader: LoaderReport) -> Finding | None:
    """The DataLoader against the step, in the DataLoader's words: its wait, its supply against
    the step's demand, then its items and the workers that would keep up; None when compute
    bounds training. It answers the core's question of the input's rates (`topic`), so the
    core's tf.data words for it are not made."""
    if result.verdict is Verdict.COMPUTE_BOUND:
        return None
    wait = f"Steps wait for the DataLoader {result.input_wait_fraction:.0%} of the time"
    alone, compute = result.pipeline_only, result.compute_only
    if alone is not None and compute is not None:
        wait += (
            f": alone it delivers {alone.examples_per_sec:,.0f} examples/s, the step alone "
            f"could take {compute.examples_per_sec:,.0f}"
        )
    e2e = result.end_to_end
    level, advice, share = Level.FIX, _items_advice(loader), result.input_wait_fraction
    cost = result.restarts
    if cost is not None and cost.cost_told and cost.dominates:
        # The wait is mostly where a pass starts: the restarts finding has that fix, and more
        # workers only make each start dearer; the items' advice is for the wait between.
        share = cost.steady_wait_fraction
        between = (
            f"Most of it is spent where each pass starts again (the restarts finding); between "
            f"restarts steps wait {share:.0%}"
        )
        if share >= MODERATELY_INPUT_BOUND_AT:
            advice = f"{between}. {advice}"
        else:
            level, advice = Level.NOTE, f"{between}."
    return Finding(
        "loader-rates",
        level,
        f"{wait}.",
        advice,
        Evidence("end_to_end", e2e.steps),
        topic=INPUT_RATES,
        weight=share * 0.9,
        origin="torch",
    )


def _items_advice(loader: LoaderReport) -> str:
    if loader.wall_s_per_item is None or loader.cpu_s_per_item is None:
        return "More workers (num_workers) load items in parallel; `tfperf tune` sizes them."
    what = _load_words(loader)
    search = "`tfperf tune` searches num_workers, prefetch_factor and persistent_workers"
    estimate = loader.workers_estimate
    if not loader.items_wait:
        # Computing items: what workers gain depends on the cores the step leaves free and
        # on passing each batch between processes, which only a measurement tells.
        return (
            f"{what}: it is CPU work, so workers gain only as far as cores are free beside the "
            f"train step, less what passing each batch between processes costs; {search} "
            "and measures whether they pay here."
        )
    sentence = (
        f"{what}: it waits on something other than the CPU, so workers beyond the cores help."
    )
    if estimate is not None and estimate != loader.workers:
        one = estimate == 1
        sentence += (
            f" About {estimate} worker{'' if one else 's'} "
            f"reach{'es' if one else ''} the most these items and the cores allow "
            f"(num_workers={loader.workers} now); {search}."
        )
    return sentence


def _load_words(loader: LoaderReport) -> str:
    """What loading costs: each item, or, where the collate call's CPU outweighs the items'
    and nothing waits, each batch's collate with the items beside it."""
    assert loader.wall_s_per_item is not None and loader.cpu_s_per_item is not None
    where = f" ({loader.item_where})" if loader.item_where else ""
    wall, cpu = loader.wall_s_per_item * 1e3, loader.cpu_s_per_item * 1e3
    item = f"`{loader.item_function}`{where}"
    if loader.items_wait or not loader.collate_dominates:
        return f"Each item of {item} takes {wall:.3g} ms, {cpu:.3g} ms of it CPU"
    collate_wall = (loader.collate_wall_s_per_batch or 0.0) * 1e3
    collate_cpu = (loader.collate_cpu_s_per_batch or 0.0) * 1e3
    place = f" ({loader.collate_where})" if loader.collate_where else ""
    return (
        f"Each batch's `{loader.collate_function}`{place} takes {collate_wall:.3g} ms, "
        f"{collate_cpu:.3g} ms of it CPU, for {loader.items_per_batch} items of {item} at "
        f"{wall:.3g} ms each"
    )
