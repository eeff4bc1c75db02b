"""The words a framework gives the sentences tfperf says about its pipelines.

Each `Framework` declares one `Words` (`Framework.words`); a report that has only a stored
result gets them through the stored framework name (`tfperf.frameworks.get(name).words`), which
imports no framework.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Words:
    """A framework in a person's words.

    Attributes:
        name: the framework itself: "TensorFlow", "PyTorch".
        pipeline: the calls a pipeline is written in: "tf.data", "DataLoader".
        sites_found_while: what ran while tfperf found a file's call sites ("dataset was
            built", "script ran").
        oom_error: the exception the framework raises when device memory runs out
            ("ResourceExhaustedError").
        oom_marks: text that marks the line of an error message saying so ("OOM").
    """

    name: str
    pipeline: str
    sites_found_while: str
    oom_error: str
    oom_marks: tuple[str, ...]
