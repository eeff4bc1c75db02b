"""Benchmarks: real-time measurements, reported as ratios measured side by side in one run."""
