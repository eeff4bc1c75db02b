"""Benchmarks: real-time measurements, reported as ratios measured side by side in one run.

`python -m benchmarks` (`make bench`) tunes six pipeline files with `tfperf tune` and measures
each one's baseline, AUTOTUNE and tuned configurations side by side, then writes RESULTS.md:

    image_decode.py ... in_memory.py   the pipelines, one bottleneck each (tfperf pipeline files)
    suite.py     which pipelines, their steps and budgets; the full and smoke settings
    measure.py   tuning and measuring with tfperf's own machinery (child-process trials)
    record.py    the run's figures as JSON-ready dataclasses, and their statistics
    goals.py     the goals of the benchmark, checked, with a reason for every miss
    render.py    RESULTS.md from a record (pure)
    command.py   the command line
    overhead.py  the profiler's own overhead (`python -m benchmarks.overhead`)
"""
