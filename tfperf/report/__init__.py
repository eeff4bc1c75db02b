"""Renderers: they read saved results and return text, never touching a live profiler."""
