"""What `tfperf offload` measured and concluded, as one record that round-trips through JSON.

Every key of the saved JSON is a field here; `OffloadResult.to_dict()` writes them and
`from_dict` reads them back, so a saved result renders again without TensorFlow.
"""

from __future__ import annotations

import dataclasses
import json
from enum import Enum
from pathlib import Path
from typing import Any

from tfperf.errors import ResultFileError

#: Bumped when a key changes meaning; a reader refuses a newer format it cannot read.
FORMAT = 1


class Binding(str, Enum):
    """What limits the rate at which the service feeds the model."""

    MODEL = "model"  # one worker already outruns the model: the model binds, not the input
    WORKERS = "workers"  # more workers lift it: `workers_needed` of them feed the model
    TRAINER = "trainer"  # the trainer cannot read (decompress) batches as fast as the model eats
    NETWORK = "network"  # the batches the model eats do not fit through `--network-gbps`


@dataclasses.dataclass(frozen=True)
class CoreRate:
    """The pipeline up to the cut, alone in a process pinned to `cores` CPU cores."""

    cores: int
    examples_per_sec: float
    batches_per_sec: float


@dataclasses.dataclass(frozen=True)
class ServiceCeiling:
    """The trainer reading one cached batch through a local dispatcher and worker.

    `compression` is tf.data service's (`"AUTO"`: snappy; `"NONE"`: off); the rate is the most
    the trainer process can take in through the service, whatever the workers do.
    """

    compression: str
    examples_per_sec: float
    batches_per_sec: float


@dataclasses.dataclass(frozen=True)
class VerifyPoint:
    """The real pipeline through a real local service with `workers` worker processes."""

    workers: int
    cores_per_worker: int
    examples_per_sec: float


@dataclasses.dataclass(frozen=True)
class OffloadResult:
    """How many tf.data service workers of `cores_per_worker` cores feed the model.

    Attributes:
        pipeline: the pipeline file measured.
        cut: the stage after which the pipeline moves to the workers (its label).
        batch_examples: examples in one batch at the cut.
        model_examples_per_sec: what the model consumes (its step alone), examples/s.
        host_cores: CPU cores this host lets tfperf use.
        core_rates: the cut pipeline's rate pinned to 1, 2, ... cores.
        bytes_per_batch_raw: one batch at the cut, uncompressed.
        bytes_per_batch_compressed: the same batch as the service compresses it.
        ceilings: the trainer's ceiling reading through the service, compression on and off.
        verify: the real pipeline through a real local service with 1..K workers.
        cores_per_worker: the cores each worker gets (the most examples/s per core).
        predicted_per_worker_examples_per_sec: the pinned rate at `cores_per_worker` cores.
        per_worker_examples_per_sec: the fitted rate of one worker through the service.
        efficiency: η, what k workers deliver over k times one worker's rate (fitted).
        workers_needed: workers that feed `model_examples_per_sec`.
        trainer_ceiling_examples_per_sec: the ceiling with the compression used.
        network_gbps: the bandwidth assumed between workers and trainer; None: not bounded.
        network_ceiling_examples_per_sec: examples/s that bandwidth carries; None: unbounded.
        binds: what limits the fed rate.
        compression: the compression the verify ran with.
        fault: why the measurement stopped early; None when it ran to the end.
    """

    pipeline: str
    cut: str
    batch_examples: int
    model_examples_per_sec: float
    host_cores: int
    core_rates: tuple[CoreRate, ...]
    bytes_per_batch_raw: int
    bytes_per_batch_compressed: int
    ceilings: tuple[ServiceCeiling, ...]
    verify: tuple[VerifyPoint, ...]
    cores_per_worker: int
    predicted_per_worker_examples_per_sec: float
    per_worker_examples_per_sec: float | None
    efficiency: float | None
    workers_needed: int | None
    trainer_ceiling_examples_per_sec: float | None
    network_gbps: float | None
    network_ceiling_examples_per_sec: float | None
    binds: Binding | None
    compression: str
    fault: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["binds"] = None if self.binds is None else self.binds.value
        data["format"] = FORMAT
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> OffloadResult:
        """Reads `to_dict()`'s output back.

        Raises:
            ResultFileError: a key is missing or the format is newer than this tfperf reads.
        """
        if data.get("format", FORMAT) > FORMAT:
            raise ResultFileError(
                f"the offload result has format {data['format']}, newer than this tfperf "
                f"reads ({FORMAT}); upgrade tfperf to read it"
            )
        values = {key: value for key, value in data.items() if key != "format"}
        try:
            values["core_rates"] = tuple(CoreRate(**item) for item in data["core_rates"])
            values["ceilings"] = tuple(ServiceCeiling(**item) for item in data["ceilings"])
            values["verify"] = tuple(VerifyPoint(**item) for item in data["verify"])
            values["binds"] = None if data["binds"] is None else Binding(data["binds"])
            return cls(**values)
        except (KeyError, TypeError, ValueError) as error:
            raise ResultFileError(f"not an offload result: {error}") from error

    def save(self, path: Path) -> Path:
        """Writes the result as JSON, atomically; returns the path."""
        from tfperf.outputs import json_text, write_text

        return write_text(path, json_text(self.to_dict()) + "\n", "--json")

    @classmethod
    def load(cls, path: Path) -> OffloadResult:
        try:
            return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError) as error:
            raise ResultFileError(f"{path}: cannot read an offload result: {error}") from error
