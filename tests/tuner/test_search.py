"""The tuner's search space: machine-sized defaults, overrides, fixes, and Optuna round trips."""

from __future__ import annotations

import dataclasses

import optuna
import pytest

from tfperf.errors import KnobError
from tfperf.hardware import Machine
from tfperf.knobs import (
    AUTOTUNE,
    Choices,
    Fixed,
    IntRange,
    Knobs,
    Precision,
    framework_knobs,
    parse_search_space,
)
from tfperf.knobs.choices import ProcessingMode, ServiceCompression, TargetWorkers
from tfperf.tuner._search import (
    autotune_knobs,
    build_space,
    default_space,
    describe_space,
    reference_params,
    suggest_knobs,
)

A = AUTOTUNE
F32, BF16, F16 = Precision.FLOAT32, Precision.MIXED_BFLOAT16, Precision.MIXED_FLOAT16


def machine(cpus: int = 2, *, gpus: tuple[str, ...] = (), bf16: bool = False) -> Machine:
    return Machine(
        cpu_count=cpus,
        total_ram_bytes=16 * 2**30,
        available_ram_bytes=8 * 2**30,
        gpu_names=gpus,
        cpu_bf16=bf16,
    )


def file_space(raw):
    return parse_search_space(raw, source="pipeline.py: SEARCH_SPACE")


def contains(domain, value) -> bool:
    if isinstance(domain, Fixed):
        return domain.value == value
    if isinstance(domain, Choices):
        return any(type(c) is type(value) and c == value for c in domain.values)
    return isinstance(value, int) and domain.low <= value <= domain.high


def run_study(
    space, base: Knobs, references: list[Knobs], trials: int, storage: str | None = None
) -> list[Knobs]:
    """Runs `trials` trials, the first ones enqueued from `references`; returns their knobs."""
    study = optuna.create_study(storage=storage, sampler=optuna.samplers.TPESampler(seed=0))
    for knobs in references:
        study.enqueue_trial(reference_params(knobs, space))
    seen: list[Knobs] = []

    def objective(trial):
        knobs = suggest_knobs(trial, space, base)
        seen.append(knobs)
        return float(knobs.batch_size)

    study.optimize(objective, n_trials=trials)
    return seen


def test_default_space_for_a_two_core_cpu_machine():
    baseline = Knobs(batch_size=64, shuffle_buffer=1000, num_parallel_calls=1, prefetch=0)
    assert default_space(baseline, machine(2)) == {
        "batch_size": Choices((32, 64, 128, 256)),
        "shuffle_buffer": Choices((250, 500, 1000, 2000, 4000)),
        "num_parallel_calls": Choices((1, 2, 4, 8, A)),
        "cycle_length": Choices((1, 2, 4, 8, A)),
        "num_parallel_reads": Choices((1, 2, 4, 8, A)),
        "prefetch": Choices((0, 1, 2, 4, 8, A)),
        "mixed_precision": Fixed(F32),
        "deterministic": Choices((None, False)),
        "private_threadpool_size": Choices((None, 2, 4)),
        # Without a strategy the strategy knobs are not searched (see the test below).
        "auto_shard_policy": Fixed(None),
        "fetch_to_device": Fixed(None),
        "per_replica_buffer_size": Fixed(None),
        # Without a GPU, memory growth has nothing to act on.
        "gpu_memory_growth": Fixed(None),
        # Without --service the service knobs are not searched (see the test below).
        "service": Fixed(None),
        "service_processing_mode": Fixed(None),
        "service_compression": Fixed(None),
        "service_max_outstanding_requests": Fixed(None),
        "service_target_workers": Fixed(None),
        "service_job_name": Fixed(None),
    }


def test_service_knobs_are_searched_only_through_a_service():
    space = default_space(Knobs(service="grpc://localhost:5050"), machine(2))
    assert space["service"] == Fixed("grpc://localhost:5050")
    assert space["service_compression"] == Choices((None, ServiceCompression.NONE))
    assert space["service_max_outstanding_requests"] == Choices((None, 1, 4, 16))
    assert space["service_processing_mode"] == Choices((None, ProcessingMode.DISTRIBUTED_EPOCH))
    assert space["service_target_workers"] == Choices((None, TargetWorkers.ANY))
    assert space["service_job_name"] == Fixed(None)


def test_strategy_knobs_are_searched_only_under_a_strategy():
    space = default_space(Knobs(), machine(2), distributed=True)

    assert space["fetch_to_device"] == Choices((None, False))
    assert space["per_replica_buffer_size"] == Choices((None, 2, 4))
    # One input worker on one machine: auto-sharding never acts, so it is not searched.
    assert space["auto_shard_policy"] == Fixed(None)


def test_gpu_memory_growth_is_searched_only_with_a_gpu():
    assert default_space(Knobs(), machine(2, gpus=("H100",)))["gpu_memory_growth"] == Choices(
        (None, False)
    )
    assert default_space(Knobs(), machine(2))["gpu_memory_growth"] == Fixed(None)
    # A baseline that sets growth keeps its value in the domain.
    space = default_space(Knobs(gpu_memory_growth=True), machine(2, gpus=("H100",)))
    assert space["gpu_memory_growth"] == Choices((None, False, True))


@pytest.mark.parametrize(
    ("cpus", "parallelism", "threads"),
    [
        (1, (1, 2, 4, 8, A), (None, 1, 2)),
        (6, (1, 2, 4, 6, 8, 16, A), (None, 6, 12)),
        (16, (1, 2, 4, 8, 16, 32, 64, A), (None, 16, 32)),
    ],
)
def test_parallelism_ranges_scale_with_the_core_count(cpus, parallelism, threads):
    space = default_space(Knobs(), machine(cpus))
    for name in ("num_parallel_calls", "num_parallel_reads", "cycle_length"):
        assert space[name] == Choices(parallelism)
    assert space["private_threadpool_size"] == Choices(threads)


@pytest.mark.parametrize(
    ("hardware", "expected"),
    [
        (machine(), Fixed(F32)),
        (machine(bf16=True), Choices((F32, BF16))),
        (machine(gpus=("Tesla T4",)), Choices((F32, BF16, F16))),
    ],
)
def test_precisions_follow_the_hardware(hardware, expected):
    assert default_space(Knobs(), hardware)["mixed_precision"] == expected


@pytest.mark.parametrize("hardware", [machine(), machine(bf16=True), machine(16, bf16=True)])
def test_no_mixed_float16_without_a_gpu(hardware):
    space = build_space(Knobs(), hardware, {}, {})
    assert not contains(space["mixed_precision"], F16)


ODD_BASELINE = Knobs(
    batch_size=48,
    shuffle_buffer=1,
    num_parallel_calls=3,
    cycle_length=A,
    num_parallel_reads=100,
    prefetch=3,
    mixed_precision=F16,
    deterministic=True,
    private_threadpool_size=5,
)


@pytest.mark.parametrize("baseline", [Knobs(), Knobs(batch_size=1, prefetch=0), ODD_BASELINE])
@pytest.mark.parametrize("hardware", [machine(1), machine(4, bf16=True), machine(gpus=("A100",))])
def test_every_default_domain_contains_the_baseline(baseline, hardware):
    space = default_space(baseline, hardware)
    assert set(space) == set(framework_knobs("tensorflow"))
    for name, domain in space.items():
        assert contains(domain, getattr(baseline, name)), name


def test_baseline_values_are_inserted_in_order():
    space = default_space(ODD_BASELINE, machine(2))
    assert space["num_parallel_calls"] == Choices((1, 2, 3, 4, 8, A))
    assert space["num_parallel_reads"] == Choices((1, 2, 4, 8, 100, A))
    assert space["prefetch"] == Choices((0, 1, 2, 3, 4, 8, A))
    assert space["shuffle_buffer"] == Choices((1, 2, 4))
    assert space["batch_size"] == Choices((24, 48, 96, 192))
    assert space["mixed_precision"] == Choices((F32, F16))
    assert space["deterministic"] == Choices((None, False, True))
    assert space["private_threadpool_size"] == Choices((None, 2, 4, 5))


def test_search_space_entries_replace_defaults_and_fixes_win():
    baseline = Knobs(batch_size=64)
    user = file_space({"batch_size": [64, 128], "prefetch": 2, "shuffle_buffer": [512, 1024]})
    space = build_space(baseline, machine(), user, {"shuffle_buffer": 4096, "cycle_length": 8})

    assert space["batch_size"] == Choices((64, 128))
    assert space["prefetch"] == Fixed(2)
    assert space["shuffle_buffer"] == Fixed(4096)
    assert space["cycle_length"] == Fixed(8)
    assert space["num_parallel_calls"] == default_space(baseline, machine())["num_parallel_calls"]


def test_fixes_are_validated_and_normalised():
    space = build_space(Knobs(), machine(), {}, {"num_parallel_calls": "AUTOTUNE"})
    assert space["num_parallel_calls"] == Fixed(A)
    space = build_space(Knobs(), machine(), {}, {"mixed_precision": "mixed_bfloat16"})
    assert space["mixed_precision"] == Fixed(BF16)
    with pytest.raises(KnobError, match=r"^--fix: knob 'batch_size' must be an integer >= 1"):
        build_space(Knobs(), machine(), {}, {"batch_size": 0})
    with pytest.raises(KnobError, match=r"--fix: unknown knob name 'batch'\. Valid names"):
        build_space(Knobs(), machine(), {}, {"batch": 64})


def test_user_choices_gain_the_baseline_and_autotune():
    baseline = Knobs(batch_size=64, num_parallel_calls=3, prefetch=0)
    user = file_space({"batch_size": [128, 32], "num_parallel_calls": [1, 2, 4], "prefetch": [1]})
    space = build_space(baseline, machine(), user, {})

    assert space["batch_size"] == Choices((128, 32, 64))  # the user's order is kept
    assert space["num_parallel_calls"] == Choices((1, 2, 3, 4, A))
    assert space["prefetch"] == Fixed(1)  # fixed by the file: not widened


def test_user_ranges_widen_or_become_choices():
    baseline = Knobs(batch_size=64, shuffle_buffer=100_000, num_parallel_calls=4)
    user = file_space(
        {
            "batch_size": {"low": 128, "high": 512, "log": True},
            "shuffle_buffer": {"low": 1000, "high": 10_000},
            "num_parallel_calls": {"low": 2, "high": 12},
            "private_threadpool_size": {"low": 3, "high": 20},
        }
    )
    space = build_space(baseline, machine(), user, {})

    assert space["batch_size"] == IntRange(64, 512, log=True)
    assert space["shuffle_buffer"] == IntRange(1000, 100_000)
    assert space["num_parallel_calls"] == Choices((2, 4, 8, 12, A))
    assert space["private_threadpool_size"] == Choices((3, 4, 8, 16, 20, None))


def test_a_parallelism_range_holding_the_baseline_keeps_it_as_a_choice():
    user = file_space({"prefetch": {"low": 1, "high": 6}})
    space = build_space(Knobs(prefetch=3), machine(), user, {})
    assert space["prefetch"] == Choices((1, 2, 3, 4, 6, A))


def test_a_range_already_holding_the_baseline_is_kept():
    user = file_space({"batch_size": {"low": 16, "high": 256, "log": True}})
    space = build_space(Knobs(batch_size=64), machine(), user, {})
    assert space["batch_size"] == IntRange(16, 256, log=True)


@pytest.mark.parametrize(
    "hardware", [machine(1), machine(6, bf16=True), machine(8, gpus=("A100", "A100"))]
)
@pytest.mark.parametrize("baseline", [Knobs(), ODD_BASELINE])
def test_every_built_domain_holds_both_references(baseline, hardware):
    user = file_space({"prefetch": {"low": 1, "high": 4}, "cycle_length": [2, 4]})
    space = build_space(baseline, hardware, user, {})
    for knobs in (baseline, autotune_knobs(baseline)):
        for name, domain in space.items():
            assert contains(domain, getattr(knobs, name)), (name, knobs)


def test_autotune_knobs_touch_only_parallelism_and_prefetch():
    assert autotune_knobs(ODD_BASELINE) == dataclasses.replace(
        ODD_BASELINE, num_parallel_calls=A, cycle_length=A, num_parallel_reads=A, prefetch=A
    )


@pytest.mark.parametrize("baseline", [Knobs(), Knobs(batch_size=64, prefetch=0), ODD_BASELINE])
def test_enqueued_references_come_back_exactly_from_optuna(baseline):
    hardware = machine(4, gpus=("Tesla T4",))
    user = file_space({"batch_size": {"low": 16, "high": 128}, "num_parallel_reads": [2, 4]})
    space = build_space(baseline, hardware, user, {"shuffle_buffer": 512})
    references = [baseline.replace(shuffle_buffer=512), autotune_knobs(baseline)]
    references[1] = references[1].replace(shuffle_buffer=512)

    seen = run_study(space, baseline, [baseline, autotune_knobs(baseline)], trials=12)

    assert seen[:2] == references
    for knobs in seen:
        assert knobs.shuffle_buffer == 512
        for name, domain in space.items():
            assert contains(domain, getattr(knobs, name)), (name, knobs)


def test_references_survive_a_sqlite_storage(tmp_path):
    # The tuner's studies live in SQLite, where enqueued params pass through JSON.
    baseline = ODD_BASELINE
    space = build_space(baseline, machine(2, gpus=("Tesla T4",)), {}, {})
    references = [baseline, autotune_knobs(baseline)]

    seen = run_study(space, baseline, references, 3, storage=f"sqlite:///{tmp_path}/s.db")

    assert seen[:2] == references


def test_suggested_precision_is_an_enum_and_absent_knobs_keep_the_base():
    base = Knobs(batch_size=96, deterministic=True)
    space = {"mixed_precision": Choices((F32, F16)), "prefetch": IntRange(0, 8)}
    study = optuna.create_study()
    study.enqueue_trial({"mixed_precision": "mixed_float16", "prefetch": 5})

    knobs = suggest_knobs(study.ask(), space, base)

    assert knobs == base.replace(mixed_precision=F16, prefetch=5)
    assert isinstance(knobs.mixed_precision, Precision)


def test_reference_params_are_plain_and_skip_fixed_knobs():
    space = {
        "mixed_precision": Choices((F32, BF16)),
        "deterministic": Choices((None, False)),
        "batch_size": IntRange(16, 128),
        "prefetch": Fixed(2),
    }
    params = reference_params(Knobs(batch_size=64, mixed_precision=BF16), space)
    assert params == {"mixed_precision": "mixed_bfloat16", "deterministic": None, "batch_size": 64}


@pytest.mark.parametrize(
    ("space", "knobs"),
    [
        ({"batch_size": Choices((32, 64))}, Knobs(batch_size=128)),
        ({"prefetch": IntRange(0, 8)}, Knobs(prefetch=A)),
        ({"deterministic": Choices((None, True))}, Knobs(deterministic=False)),
    ],
)
def test_reference_params_refuse_values_outside_the_domain(space, knobs):
    with pytest.raises(KnobError, match="is outside its search domain"):
        reference_params(knobs, space)


def test_describe_space_lists_knobs_in_declaration_order():
    space = {
        "prefetch": Choices((0, 2, A)),
        "batch_size": IntRange(16, 256, log=True),
        "mixed_precision": Fixed(BF16),
        "deterministic": Choices((None, False)),
    }
    assert describe_space(space) == [
        "batch_size       16 to 256, log scale",
        "prefetch         0, 2, AUTOTUNE (3 choices)",
        "mixed_precision  mixed_bfloat16 (fixed)",
        "deterministic    None, False (2 choices)",
    ]


# --- call sites of a plain file or script ------------------------------------------------------

MAP, BATCH = "map@p.py:4.num_parallel_calls", "batch@p.py:5.batch_size"
SHUFFLE, PREFETCH = "shuffle@p.py:5.buffer_size", "prefetch@p.py:6.buffer_size"


def test_each_site_gets_a_domain_by_what_its_argument_controls():
    sites = {MAP: None, BATCH: 32, SHUFFLE: 100, PREFETCH: 1}
    space = default_space(Knobs(sites=sites), machine(cpus=2))
    assert space[MAP] == Choices((1, 2, 4, 8, A, None))
    assert space[BATCH] == Choices((16, 32, 64, 128))
    assert space[SHUFFLE] == Choices((25, 50, 100, 200, 400))
    assert space[PREFETCH] == Choices((0, 1, 2, 4, 8, A))


def test_sites_round_trip_through_optuna_with_both_references():
    baseline = Knobs(sites={MAP: 1, BATCH: 32})
    space = build_space(baseline, machine(), {}, {})
    autotune = autotune_knobs(baseline)
    assert autotune.sites == {MAP: A, BATCH: 32}  # parallelism goes to AUTOTUNE, batch stays
    seen = run_study(space, baseline, [baseline, autotune], trials=6)
    assert seen[:2] == [baseline, autotune]
    assert all(set(knobs.sites) == {MAP, BATCH} for knobs in seen)
    assert len({knobs.sites[MAP] for knobs in seen}) > 2


def test_a_site_can_be_fixed_and_an_unknown_site_is_named():
    baseline = Knobs(sites={MAP: 1})
    assert build_space(baseline, machine(), {}, {MAP: "AUTOTUNE"})[MAP] == Fixed(A)
    with pytest.raises(KnobError, match=r"--fix: no call site 'map@p\.py:9\.num_parallel_calls'"):
        build_space(baseline, machine(), {}, {"map@p.py:9.num_parallel_calls": 2})


def test_describe_space_lists_sites_after_knobs():
    lines = describe_space({"prefetch": Fixed(2), BATCH: Choices((16, 32))})
    assert lines == ["prefetch                 2 (fixed)", f"{BATCH}  16, 32 (2 choices)"]
