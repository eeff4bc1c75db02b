"""Importing TensorFlow without its start-up log lines burying tfperf's output."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def silenced_stderr() -> Iterator[None]:
    """Sends file descriptor 2 to a temporary file for the block; replays it if the block fails.

    TensorFlow 2.21 writes its oneDNN and CUDA notices from C++ before absl logging starts, so
    `TF_CPP_MIN_LOG_LEVEL` cannot hide them; redirecting the descriptor is the only way.
    """
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and Keras and lists devices (which logs too) with stderr silenced."""
    with silenced_stderr():
        import keras  # noqa: F401
        import tensorflow as tf

        tf.config.list_physical_devices()
