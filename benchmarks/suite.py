"""The benchmark pipelines and the settings of a full and a smoke run.

Each pipeline's `steps` is sized so that its baseline's end-to-end phase lasts 1-3 seconds
on a quiet 2-core machine (larger batches take longer per step): a trial is then about 8 s,
a third of it TensorFlow's start in a fresh process. A full run makes about 60 such runs per
pipeline (1 to prepare, 20 trials, up to 27 in tfperf's re-measurement of three finalists
and six references, 3 to 9 in its confirmation, 9 final), so the nine pipelines, the
zero-change run, the repeatability check and the overhead benchmark take about 75 minutes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

BENCHMARKS_DIR = Path(__file__).resolve().parent


class SuiteError(ValueError):
    """A run was asked for something the suite does not have."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """One benchmark pipeline.

    `steps`: measured steps per phase in every trial and every final measurement.
    `ram_budget_bytes`: host RAM one trial may use; None leaves tfperf's default (60% of the
    RAM available when the study starts). `expectation` says, before any number, what should
    limit the tuned configuration: the report prints it beside the figures. `beyond_autotune`
    marks pipelines whose gain lies in knobs AUTOTUNE cannot set (thread pool, batch size,
    precision, shuffle buffer): there tuned must beat AUTOTUNE by more than the noise.
    `autotune_goal`: a larger tuned/AUTOTUNE goal where the gain is known to be large.
    """

    name: str
    bottleneck: str
    expectation: str
    steps: int
    beyond_autotune: bool = False
    ram_budget_bytes: int | None = None
    trial_timeout_s: float = 300.0
    autotune_goal: float | None = None

    @property
    def path(self) -> Path:
        return BENCHMARKS_DIR / f"{self.name}.py"


SUITE: tuple[Spec, ...] = (
    Spec(
        name="image_decode",
        bottleneck="CPU-bound map: JPEG decode, random crop, flip, resize",
        expectation=(
            "Parallel map calls and prefetch help until both cores are busy; the model's step "
            "then competes with decoding for the same two cores, so end to end stays below "
            "either ceiling (see the shared-CPU bound)."
        ),
        steps=30,
    ),
    Spec(
        name="remote_storage",
        bottleneck="latency-bound reads: a blocking 2-4 ms fetch per record",
        expectation=(
            "Useful parallelism is set by latency, not cores. AUTOTUNE runs parallel calls on "
            "tf.data's shared pool (one thread per core), so it cannot exceed about 2 fetches "
            "in flight here. tfperf's model sees the fetch block (wall time far above CPU "
            "time) and sizes a private pool and the parallel calls by Little's law (~2-4 ms "
            "times the model's rate: tens of threads), so tuned should run at 5x AUTOTUNE or "
            "more, up to the model's compute-only rate or the CPU the fetches still use."
        ),
        steps=25,
        beyond_autotune=True,
        autotune_goal=5.0,
    ),
    Spec(
        name="small_files",
        bottleneck="2,000 small GZIP TFRecord files through interleave",
        expectation=(
            "Parallel interleave (cycle_length, parallel reads) and a parallel parse use both "
            "cores; the per-step cost of a cheap model makes batch size matter too."
        ),
        steps=200,
    ),
    Spec(
        name="text_classify",
        bottleneck="tf.strings tokenisation per line, padded_batch",
        expectation=(
            "The per-line string ops are CPU-bound like image decoding: parallel calls help "
            "until the two cores are shared with the model's step."
        ),
        steps=120,
    ),
    Spec(
        name="compute_bound",
        bottleneck="compute-bound: cheap input, a wide MLP",
        expectation=(
            "Input knobs cannot help; a larger batch and mixed_bfloat16 can (tfperf searches "
            "bf16 only on a CPU with native bf16 units, AVX512-BF16 or AMX), and AUTOTUNE "
            "touches neither."
        ),
        steps=30,
        beyond_autotune=True,
    ),
    Spec(
        name="in_memory",
        bottleneck="whole array in RAM, float32 shuffle buffer, under a 3.25 GiB RAM budget",
        expectation=(
            "A parallel augment map and a larger batch (or bf16) speed it up; AUTOTUNE can "
            "only do the first. The shuffle buffer holds float32 copies, about 600 MB at the "
            "baseline's 12,500 elements: 4x that buffer is far over the budget and 2x lands "
            "at its edge (3.2-3.3 GiB measured in development), so such trials are stopped "
            "and recorded as infeasible, and the tuned configuration must stay within the "
            "budget. AUTOTUNE's buffers and threads take about 0.5 GB more than the baseline."
        ),
        steps=40,
        beyond_autotune=True,
        ram_budget_bytes=int(3.25 * 2**30),
    ),
    Spec(
        name="finite_shuffle",
        bottleneck="restart-bound: a finite dataset refilling a shuffle buffer that holds it all",
        expectation=(
            "Each epoch (32 steps) restarts the dataset, and the first step waits ~2 s while "
            "shuffle(2048) refills through a 1 ms-per-example map; between restarts steps "
            "barely wait. The profile reports the restart cost apart (seconds per restart, the "
            "stage that refills, the wait weighed by the real epoch) and advises repeat() "
            "before shuffle or a smaller buffer, never prefetch; parallel map calls shorten "
            "each refill, a smaller shuffle buffer shortens it further."
        ),
        steps=60,
    ),
    Spec(
        name="torch_blocking",
        bottleneck="PyTorch DataLoader, latency-bound items: a blocking 2-4 ms read each",
        expectation=(
            "The reference beside the baseline is PyTorch's rule (num_workers = cores): two "
            "reads in flight on 2 cores. Each item waits far longer than it computes, so "
            "tfperf's estimate sizes the workers by Little's law (tens of them) and keeps them "
            "across epochs; tuned should run at 3x PyTorch's rule or more, up to the step's "
            "rate alone or the CPU the items and the step still use."
        ),
        steps=25,
        autotune_goal=3.0,
    ),
    Spec(
        name="torch_decode",
        bottleneck="PyTorch DataLoader, CPU-bound items: decompress and blur each image",
        expectation=(
            "The reference beside the baseline is PyTorch's rule (num_workers = cores), close "
            "to right for items that compute: workers help until the two cores are busy, and "
            "the step then competes with them. tuned should match the rule (1.0x) or beat it "
            "with fewer trainer threads or deeper prefetch."
        ),
        steps=25,
    ),
)

#: The pipeline a smoke run measures: its trials sleep rather than compute, so a loaded
#: machine slows the smoke test little, and its data (12 MB) is quick to write.
SMOKE_PIPELINE = "remote_storage"


@dataclasses.dataclass(frozen=True)
class Settings:
    """How much a run measures. `steps` None keeps each pipeline's own."""

    trials: int = 20
    steps: int | None = None
    #: Each phase measures at least this long (`tfperf tune --min-seconds`), in the study and
    #: in the final figures alike, so both measure a fast configuration the same way.
    min_seconds: float = 1.0
    warmup: int | None = None
    repeats: int = 3
    finalists: int = 3
    rounds: int = 3
    cv_repeats: int = 5
    overhead: bool = True
    #: The benchmarks beyond the suite's pipelines, each minutes long in its own processes: the
    #: emulated accelerator step, offload, the PyTorch script, the known-truth family and the
    #: quickstart's profile against its tune.
    extras: bool = True
    overhead_steps: int = 150
    overhead_repeats: int = 7
    seed: int | None = 0
    smoke: bool = False

    def __post_init__(self) -> None:
        for name in ("trials", "repeats", "finalists", "rounds", "cv_repeats"):
            if getattr(self, name) < 1:
                raise SuiteError(f"`{name} >= 1` must hold, but got {name}={getattr(self, name)}")
        if self.steps is not None and self.steps < 1:
            raise SuiteError(f"`steps >= 1` must hold, but got steps={self.steps}")

    def steps_for(self, spec: Spec) -> int:
        return self.steps if self.steps is not None else spec.steps


#: A smoke run: one pipeline, the two reference trials only, every figure once; it proves the
#: runner works end to end, and its numbers mean nothing.
SMOKE = Settings(
    trials=2,
    steps=3,
    min_seconds=0.0,
    warmup=1,
    repeats=1,
    finalists=1,
    rounds=1,
    cv_repeats=2,
    overhead_steps=20,
    overhead_repeats=1,
    extras=False,
    smoke=True,
)


def select(names: Sequence[str] | None) -> list[Spec]:
    """The specs named, in suite order; all of them for None.

    Raises:
        SuiteError: a name is not a benchmark pipeline.
    """
    if not names:
        return list(SUITE)
    known = {spec.name: spec for spec in SUITE}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise SuiteError(
            f"no benchmark pipeline named {', '.join(map(repr, unknown))}; "
            f"choose from {', '.join(known)}."
        )
    return [spec for spec in SUITE if spec.name in names]
