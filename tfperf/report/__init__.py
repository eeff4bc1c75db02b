"""Renderers: they read saved results and return text, never touching a live profiler."""

from __future__ import annotations

from tfperf.report._answer import render_answer
from tfperf.report._gpu_memory import gpu_memory_text
from tfperf.report._html import (
    default_profile_path,
    default_study_path,
    render_profile_html,
    render_study_html,
    write_html,
)
from tfperf.report._offload import render_offload_html, render_offload_text
from tfperf.report._study_data import load_snapshot
from tfperf.report._text import render_summary
from tfperf.report._tune_text import render_tune_summary

__all__ = [
    "default_profile_path",
    "default_study_path",
    "gpu_memory_text",
    "load_snapshot",
    "render_answer",
    "render_offload_html",
    "render_offload_text",
    "render_profile_html",
    "render_study_html",
    "render_summary",
    "render_tune_summary",
    "write_html",
]
