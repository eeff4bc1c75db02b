"""Which files are training scripts, decided from their syntax before any of them runs."""

from __future__ import annotations

import ast
import textwrap

import pytest

from tfperf.pipeline._contract import is_script


def script(source: str) -> bool:
    return is_script(ast.parse(textwrap.dedent(source)))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            """
            def make_model():
                ...
            def get_dataset():
                ...
            model = make_model()
            model.fit(get_dataset(), epochs=2)
            """,
            True,
            id="own-make_model-and-fit-at-top-level",
        ),
        pytest.param(
            """
            def make_dataset(knobs):
                ...
            def make_model(knobs):
                ...
            make_model(None).fit(make_dataset(None))
            """,
            True,
            id="contract-but-fit-runs-on-import",
        ),
        pytest.param(
            """
            def make_model():
                ...
            if __name__ == "__main__":
                make_model().fit(load())
            """,
            True,
            id="helpers-and-a-main-block",
        ),
        pytest.param(
            """
            def train(model, x, y):
                with tf.GradientTape() as t:
                    loss = tf.reduce_mean(tf.square(y - model(x)))
                dw, db = t.gradient(loss, [model.w, model.b])
                model.w.assign_sub(0.1 * dw)
            for xb, yb in dataset:
                train(model, xb, yb)
            """,
            True,
            id="variables-updated-by-hand-from-a-tape",
        ),
        pytest.param(
            """
            slope = np.gradient(curve)
            def make_dataset():
                ...
            def make_model():
                ...
            """,
            False,
            id="numpy-gradient-is-not-training",
        ),
        pytest.param(
            """
            def make_dataset():
                ...
            def make_model():
                ...
            if __name__ == "__main__":
                make_model().fit(make_dataset())
            """,
            False,
            id="pipeline-file-with-a-demo-main-block",
        ),
        pytest.param(
            """
            def make_dataset(knobs):
                ...
            def mak_model(knobs):
                ...
            """,
            False,
            id="broken-pipeline-file-keeps-its-message",
        ),
        pytest.param(
            """
            def make_dataset():
                ...
            def make_model():
                model = build()
                model.fit(x)  # inside a function: does not run on import
                return model
            """,
            False,
            id="fit-inside-the-contract",
        ),
        pytest.param(
            """
            @tf.function
            def train_step(x, y):
                with tf.GradientTape() as tape:
                    loss = loss_fn(y, model(x))
                opt.apply_gradients(zip(tape.gradient(loss, weights), weights))
            for x, y in ds:
                train_step(x, y)
            """,
            True,
            id="custom-loop-at-the-top-level",
        ),
        pytest.param(
            """
            for x, y in ds:
                model.train_on_batch(x, y)
            """,
            True,
            id="train_on_batch-loop",
        ),
        pytest.param(
            """
            def make_dataset():
                ...
            def make_train_step():
                def step(batch):
                    opt.apply_gradients(grads(batch))
                return step
            """,
            False,
            id="a-pipeline-file-s-own-step-applies-gradients",
        ),
    ],
)
def test_a_file_is_a_script_by_its_syntax(source, expected):
    assert script(source) is expected
