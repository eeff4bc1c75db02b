"""AUTOTUNE's graph of a running pipeline (tf.data calls it a model), read from a live iterator.

tf.data keeps, inside every iterator with autotuning on, a model of the pipeline whose nodes
hold the tuned parameters (`parallelism`, `buffer_size`, ...). TensorFlow exposes it as
`tf.data.experimental.get_model_proto(iterator)` (documented from TF 2.17): a `ModelProto`
whose parameters carry both the optimizer's current guess (`value`) and the value the running
iterator uses (`state_value`). Its node names are tf.data's op names, which `METHODS` maps to
stage kinds (`node_kinds`).
"""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class AutotuneParameter:
    """One parameter of a node in tf.data's model, as read from the `ModelProto`."""

    name: str
    value: float
    state_value: float
    tunable: bool


@dataclasses.dataclass(frozen=True)
class AutotuneNode:
    """One node on the main path of tf.data's model, output first."""

    name: str
    parameters: tuple[AutotuneParameter, ...]


def autotune_nodes(iterator: Any) -> list[AutotuneNode]:
    """The main path of the iterator's tf.data model, from the output to the source.

    Raises:
        AttributeError: this TensorFlow has no `tf.data.experimental.get_model_proto`.
        tf.errors.NotFoundError: autotuning is off, so the iterator keeps no model.
    """
    import tensorflow as tf

    proto = tf.data.experimental.get_model_proto(iterator)
    nodes, key, seen = [], proto.output, set()
    while key in proto.nodes and key not in seen:
        seen.add(key)
        node = proto.nodes[key]
        if node.name != "Root":
            parameters = tuple(
                AutotuneParameter(p.name, p.value, p.state_value, p.tunable)
                for p in node.parameters
            )
            nodes.append(AutotuneNode(node.name, parameters))
        # An interleave's first input is its input dataset; the others are the datasets it is
        # reading from, which are not stages of the user's chain.
        key = node.inputs[0] if node.inputs else -1
    return nodes
