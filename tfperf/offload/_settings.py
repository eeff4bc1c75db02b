"""How `tfperf offload` measures: a closed, frozen record the CLI fills and the framework reads."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class OffloadSettings:
    """What to measure and for how long.

    Attributes:
        seconds: measured window of each rate, after warm-up, in seconds.
        warmup_s: seconds after the first batch that each rate leaves out (buffers fill).
        max_cores: the most cores a pinned measurement uses; None: every core of the host.
        max_workers: the most worker processes the verify starts; None: as many as the host
            has cores for (`host cores // cores_per_worker`).
        model_examples_per_sec: the rate the model consumes; None: time the file's model step.
        network_gbps: bandwidth between workers and trainer, gigabits/s; None: not bounded.
        compression: tf.data service compression for the verify: "AUTO" (snappy) or "NONE".
        timeout_s: the longest tfperf waits for a process to start or a batch to arrive.
        port: the local dispatcher's port; 0: a free one the OS picks.
    """

    seconds: float = 1.0
    warmup_s: float = 0.5
    max_cores: int | None = None
    max_workers: int | None = None
    model_examples_per_sec: float | None = None
    network_gbps: float | None = None
    compression: str = "AUTO"
    timeout_s: float = 60.0
    port: int = 0

    def __post_init__(self) -> None:
        if self.seconds <= 0 or self.warmup_s < 0 or self.timeout_s <= 0:
            raise ValueError(
                "`seconds > 0`, `warmup_s >= 0` and `timeout_s > 0` must hold, but got "
                f"(seconds={self.seconds}, warmup_s={self.warmup_s}, "
                f"timeout_s={self.timeout_s})"
            )
        if self.compression not in ("AUTO", "NONE"):
            raise ValueError(
                f"`compression` must be 'AUTO' or 'NONE', but got {self.compression!r}"
            )
