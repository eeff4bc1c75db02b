"""GPU memory advice as a report shows it: the limit per process, the code, how many fit.

The figures come from `ProfileResult.gpu_memory_advice()` (derived from the measured GPUs);
this module only words them for the terminal. The HTML report draws the same advice in
templates/_profile.html.j2. Nothing is shown when no GPU was measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfperf.results import ProfileResult


HEADING = "GPU memory per process (to share one GPU between processes or models):"


def gpu_memory_text(result: ProfileResult) -> str:
    """The advice for every measured GPU, with code to copy; "" when no GPU was measured.

    Example:
        >>> print(gpu_memory_text(result))  # doctest: +SKIP
        GPU memory per process (to share one GPU between processes or models):
          GPU 0: TensorFlow's allocator peak was 2 GiB; a memory_limit of 2560 MiB ...
    """
    lines = [
        line
        for gpu in result.gpu_memory_advice()
        for line in (gpu.describe(), gpu.code_intro(), *(f"  {c}" for c in gpu.code().splitlines()))
    ]
    return "\n".join([HEADING, *(f"  {line}" for line in lines)]) if lines else ""
