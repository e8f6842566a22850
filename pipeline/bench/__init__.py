"""Benchmarks and previews that run before (or beside) the science: the per-device memory fit of every run."""
