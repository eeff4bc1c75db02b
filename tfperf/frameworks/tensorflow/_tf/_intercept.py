"""Wrapping tf.data's tunable calls for a block, and reading the stack AutoGraph runs under.

`intercept(wrap)` replaces `Dataset.map`, `interleave`, `batch`, ... and the readers'
`__init__` (every call with a tunable argument in `METHODS`) by `wrap(method, original)`,
and restores them when the block ends, also when it raises. Each attribute is looked up
through the class's MRO, so a method tf.data moves to a base class is still found; one the
class did not define itself is removed again, not copied onto it. Not thread-safe: the
wrapped methods are process-wide.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

from tfperf.frameworks.tensorflow._tf._methods import METHODS, Method

#: Builds the stand-in for one call from its record and the original function.
Wrap = Callable[[Method, Callable[..., Any]], Callable[..., Any]]


def intercepted() -> tuple[Method, ...]:
    """The calls `intercept` wraps: those with an argument tfperf tunes."""
    return tuple(method for method in METHODS if method.arguments)


def patch_target(method: Method) -> tuple[type, str]:
    """The class and attribute that implement `method`: `(DatasetV2, "map")`, or a reader's
    class and `__init__`.

    Raises:
        AttributeError: this TensorFlow has no such reader class.
    """
    from tensorflow.python.data.ops import dataset_ops, readers

    if method.reader is not None:
        return getattr(readers, method.reader), "__init__"
    return dataset_ops.DatasetV2, method.name


@contextlib.contextmanager
def intercept(wrap: Wrap) -> Iterator[None]:
    """Replaces each intercepted tf.data call by `wrap(method, original)` for the block.

    Raises:
        AttributeError: a call's implementation is missing from this TensorFlow (nothing is
            patched then).
    """
    targets = [(method, *patch_target(method)) for method in intercepted()]
    originals = [inspect.getattr_static(owner, attribute) for _, owner, attribute in targets]
    with contextlib.ExitStack() as stack:
        for (method, owner, attribute), original in zip(targets, originals, strict=True):
            stack.enter_context(patched(owner, attribute, wrap(method, original)))
        yield


def patch_target_v1(method: Method) -> tuple[type, str] | None:
    """The `tf.compat.v1.data` class and attribute of `method`, None where v1 has none of its own.

    `tf.compat.v1.data.Dataset` (`DatasetV1`) defines its own `map`, `batch`, ... that wrap
    the v2 call in a `DatasetV1Adapter` from inside tf.data (or, for `map`, skip it), and
    `tf.compat.v1.data.TFRecordDataset` is `TFRecordDatasetV1`, whose `__init__` builds the
    v2 reader: the user's call is made on these.
    """
    from tensorflow.python.data.ops import dataset_ops, readers

    if method.reader is not None:
        owner = getattr(readers, method.reader.removesuffix("V2") + "V1", None)
        return (owner, "__init__") if owner is not None else None
    if method.name in vars(dataset_ops.DatasetV1):
        return dataset_ops.DatasetV1, method.name
    return None


@contextlib.contextmanager
def intercept_v1(wrap: Wrap) -> Iterator[None]:
    """As `intercept`, for the `tf.compat.v1.data` entry points of the intercepted calls.

    A v1 call runs the v2 one from inside tf.data, where a wrapper of it sees tf.data's own
    frame: wrap both, and the user's call is seen once, at the v1 entry point.
    """
    targets = [
        (method, *target)
        for method in intercepted()
        if (target := patch_target_v1(method)) is not None
    ]
    originals = [inspect.getattr_static(owner, attribute) for _, owner, attribute in targets]
    with contextlib.ExitStack() as stack:
        for (method, owner, attribute), original in zip(targets, originals, strict=True):
            stack.enter_context(patched(owner, attribute, wrap(method, original)))
        yield


@contextlib.contextmanager
def patched(owner: type, attribute: str, value: Any) -> Iterator[None]:
    """Sets `owner.attribute` to `value` for the block, and undoes it, also when it raises.

    The original is looked up through the MRO; where `owner` only inherited it, the attribute
    is removed again afterwards rather than copied onto the class.

    Raises:
        AttributeError: `owner` has no such attribute (nothing is patched then).
    """
    own = attribute in vars(owner)
    original = inspect.getattr_static(owner, attribute)
    setattr(owner, attribute, value)
    try:
        yield
    finally:
        if own:
            setattr(owner, attribute, original)
        else:
            delattr(owner, attribute)


def traced_stack() -> list[tuple[str, int]]:
    """(file, line) of each frame on the stack, outermost first, with the frames of code
    AutoGraph generated mapped back to the lines they came from (no columns).

    Raises:
        ImportError, AttributeError: TensorFlow moved its private stack module.
    """
    from tensorflow.python.util import tf_stack

    return [(str(frame.filename), int(frame.lineno)) for frame in tf_stack.extract_stack()]
