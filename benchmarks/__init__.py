"""Benchmarks: real-time measurements, reported as ratios measured side by side in one run.

`python -m benchmarks` (`make bench`) tunes the suite's pipeline files with `tfperf tune` and
measures each one's baseline, reference (AUTOTUNE, or PyTorch's rule) and tuned configurations
side by side, runs every other benchmark below, then writes RESULTS.md from one JSON record:

    image_decode.py ... torch_decode.py   the pipelines, one bottleneck each
    suite.py     which pipelines, their steps and budgets; the full and smoke settings
    measure.py   tuning and measuring with tfperf's own machinery (child-process trials)
    record.py    the run's figures as JSON-ready dataclasses, and their statistics
    goals.py     the goals of the benchmark, checked, with a reason for every miss
    render.py    RESULTS.md from a record (pure; render_*.py hold its larger sections)
    command.py   the command line
    answer.py    the time to an answer: each tune's time split, and profile against tune
    overhead.py  the profiler's own overhead (`python -m benchmarks.overhead`)
    zero_change.py, torch_script.py   a plain file and a PyTorch script tuned and patched
    emulated_accelerator.py, offload.py, generated.py   the emulated step, tf.data service
                 offload, and the known-truth family, each runnable on its own
"""
