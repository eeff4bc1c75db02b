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
        label: its input, for "a {label} pipeline": "tf.data", "PyTorch DataLoader".
        script_stop: where a zero-change run of a training script stops to measure ("runs its
            script up to model.fit").
        first_work: the first work its input does per element, where a stuck input usually
            blocks ("map or read").
    """

    name: str
    pipeline: str
    sites_found_while: str
    oom_error: str
    oom_marks: tuple[str, ...]
    label: str
    script_stop: str
    first_work: str
