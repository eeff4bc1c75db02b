"""The default answer of `tfperf profile` on a plain Keras script: short, and the same findings
in the terminal, the JSON and the HTML page."""

from __future__ import annotations

import json
import textwrap

import pytest

from tfperf.cli.main import main

KERAS_SCRIPT = """
import keras
import numpy as np
import tensorflow as tf


def decode(x, y):
    for _ in range(20):
        x = tf.sin(x) + 1.0
    return x, y


if __name__ == "__main__":
    x = np.random.rand(512, 32).astype("float32")
    y = np.random.rand(512, 1).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).map(decode).batch(16)
    model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(ds, epochs=2)
"""


@pytest.mark.tf
def test_a_keras_script_gets_a_short_answer_and_the_html_carries_every_finding(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(KERAS_SCRIPT).lstrip(), encoding="utf-8")
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    status = main(
        [
            "profile",
            str(script),
            "--steps",
            "10",
            "--warmup",
            "2",
            "--min-seconds",
            "0",
            "--budget",
            "30",
            "--quiet",
            f"--json={json_path}",
            f"--html={html_path}",
        ]
    )
    out, err = capsys.readouterr()
    assert status == 0, err
    answer = out[: out.index("Result JSON:")]
    assert answer.startswith("Verdict: ")
    assert len([line for line in answer.splitlines() if line.strip()]) <= 20
    assert "More: --verbose" in answer and "Call sites: " in answer
    findings = json.loads(json_path.read_text())["findings"]
    assert findings, "a profile always says something"
    html = html_path.read_text(encoding="utf-8")
    for finding in findings:
        assert f'data-rule="{finding["rule"]}"' in html
    shown = [f for f in findings if f"] {f['text']}" in answer]
    assert 1 <= len(shown) <= 3
