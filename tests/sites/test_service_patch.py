"""The zero-change patch writes the `distribute()` call a `--service` study read through."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tfperf.sites import Anchor, additions_between, make_patch

PLAIN = """
import tensorflow as tf

def make_dataset():
    ds = tf.data.Dataset.range(8).map(lambda x: x * 2).batch(2)
    return ds.prefetch(1)
"""


def test_the_distribute_arguments_leave_out_tf_datas_defaults():
    after = {"service": "grpc://dispatcher:5050", "service_compression": "none"}
    added = additions_between({}, after, None)
    assert added.service == (
        "processing_mode='parallel_epochs', service='grpc://dispatcher:5050', compression=None"
    )
    assert additions_between({}, {"service": None}, None).service is None
    chosen = {**after, "service_target_workers": "any", "service_max_outstanding_requests": 4}
    assert "max_outstanding_requests=4, target_workers='ANY'" in str(
        additions_between({}, chosen, None).service
    )


def test_the_patch_reads_the_dataset_through_the_service_and_prefetches_after_it(tmp_path):
    (tmp_path / "pipeline.py").write_text(textwrap.dedent(PLAIN).lstrip(), encoding="utf-8")
    added = additions_between({}, {"service": "grpc://dispatcher:5050"}, None)
    patch = make_patch(tmp_path, [], Anchor.parse("pipeline.py:3", script=False), added)
    described = "\n".join(patch.describe())
    assert (
        "distribute(processing_mode='parallel_epochs', service='grpc://dispatcher:5050') "
        "added at the end of the pipeline"
    ) in described
    files = dict(patch.files)
    source = files["pipeline.py"].decode("utf-8")
    assert (
        "    return ds.prefetch(1).apply(tf.data.experimental.service.distribute("
        "processing_mode='parallel_epochs', service='grpc://dispatcher:5050'))"
        ".prefetch(tf.data.AUTOTUNE)\n"
    ) in source
    ast.parse(source)
    assert Path(tmp_path / "pipeline.py").read_text(encoding="utf-8").count("distribute") == 0
