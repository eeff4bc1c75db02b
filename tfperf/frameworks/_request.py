"""What one profile is asked to do: every option of `Framework.profile`, in one closed record.

The CLI, a trial's worker and the library build a `ProfileRequest`; the framework's profile
(`tfperf.measure.drive`) reads it. Its plain values, `ProfileOptions`, are what crosses a
process boundary: a trial's request (`tfperf.trials.TrialRequest`) extends them, and the trial's
child adds the callbacks. A framework declares the fields it honours (`Framework.honours`), and
a field it does not honour, set to anything but its default, is refused by name (`refused`)
rather than dropped.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tfperf.frameworks._devices import StrategyKind

if TYPE_CHECKING:
    from tfperf.results.discovery import Discovery


#: The key of a field's metadata that holds its `tfperf profile` flag.
FLAG = "flag"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileOptions:
    """How long and how to measure: the plain values of a `ProfileRequest`, JSON-able.

    Attributes:
        steps: measured steps per phase; tf.data raises it to ten times the batches its
            prefetch buffers hold (`tfperf.measure._window`), which a shorter window overstates.
        min_seconds: each phase's measured window lasts at least this long.
        warmup: warm-up steps per phase; None detects the end of warm-up from the step times.
        analyse_stages: after the three phases, measure every stage of the input alone and
            name the limiting one; off for tuning trials, where nobody reads those figures.
            An input with no stage graph (a `DataLoader`) has no stages to measure.
        stage_seconds: measured window per stage in that analysis.
        epoch_steps: steps (batches) in one real epoch, by which the cost of the input's
            restarts is weighed; None takes the input's own length, else one pass.
        strategy: train under this `tf.distribute` strategy; None takes the file's own, if any.
        budget_s: the time budget the measurement is sized to (start-up not counted): each
            phase and the stage analysis end after their share of it; None: no budget.
        step_time_s: emulate the accelerator: each step sleeps this long instead of training
            (`tfperf.measure.emulated.EmulatedStep`), and no model is built.
        end_to_end_only: measure the end-to-end phase alone, as the tuner's re-measurement
            does: it ranks configurations by that phase's examples/s and reads no other.
        compute_known: leave out the compute-only phase, as the tuner does for a trial whose
            training setting an earlier trial of the same tuner timed the model alone under:
            the model on cached batches runs alike whatever the input's knobs.
    """

    steps: int = dataclasses.field(default=100, metadata={FLAG: "--steps"})
    min_seconds: float = dataclasses.field(default=0.0, metadata={FLAG: "--min-seconds"})
    warmup: int | None = dataclasses.field(default=None, metadata={FLAG: "--warmup"})
    analyse_stages: bool = dataclasses.field(default=False, metadata={FLAG: "--no-stages"})
    stage_seconds: float = 0.5
    epoch_steps: int | None = dataclasses.field(default=None, metadata={FLAG: "--epoch-steps"})
    strategy: StrategyKind | None = dataclasses.field(default=None, metadata={FLAG: "--strategy"})
    budget_s: float | None = dataclasses.field(default=None, metadata={FLAG: "--budget"})
    step_time_s: float | None = dataclasses.field(default=None, metadata={FLAG: "--step-time"})
    end_to_end_only: bool = False
    compute_known: bool = False

    @property
    def measures_pipeline(self) -> bool:
        """Whether the pipeline-only phase runs."""
        return not self.end_to_end_only

    @property
    def measures_compute(self) -> bool:
        """Whether the compute-only phase runs."""
        return not (self.end_to_end_only or self.compute_known)

    def options(self) -> dict[str, Any]:
        """These values by name, without the fields a subclass adds (a trial's pipeline)."""
        return {
            field.name: getattr(self, field.name) for field in dataclasses.fields(ProfileOptions)
        }


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileRequest(ProfileOptions):
    """How to profile one pipeline under its knobs: its `ProfileOptions` and the callbacks and
    permissions of the process that runs it.

    `probes` and `progress` are typed loosely only because their types live in packages
    above this interface (`tfperf.probes`, `tfperf.measure`).

    Attributes:
        owns_process: tfperf runs this process (the CLI, a trial child), so the framework may
            set process-wide state such as GPU memory growth; a permission, not a demand.
        probes: the `tfperf.probes.Probe`s sampled; None: host memory and CPU, and NVML GPUs.
        progress: called with each step's `tfperf.measure.Progress`.
        on_discovery: for a plain file or a script, called with the call sites found, before
            the measurement's figures are made.
    """

    owns_process: bool = False
    probes: Sequence[Any] | None = None
    progress: Callable[[Any], None] | None = None
    on_discovery: Callable[[Discovery], None] | None = None

    def refused(self, honours: frozenset[str]) -> list[str]:
        """The fields set to other than their default that are not in `honours`, each named
        with its `tfperf profile` flag ("strategy (--strategy)") where it has one."""
        return [
            f"{field.name} ({field.metadata[FLAG]})" if FLAG in field.metadata else field.name
            for field in dataclasses.fields(self)
            if field.name not in honours and getattr(self, field.name) != field.default
        ]

    def discovered(self, discovery: Discovery | None) -> None:
        """Hands `discovery` to `on_discovery`, where there are both."""
        if discovery is not None and self.on_discovery is not None:
            self.on_discovery(discovery)


#: The fields every framework honours: the driver (`tfperf.measure.drive`) applies them.
DRIVEN = frozenset(
    {"steps", "min_seconds", "warmup", "owns_process", "probes", "progress", "on_discovery"}
    | {"budget_s", "end_to_end_only", "compute_known"}
)
