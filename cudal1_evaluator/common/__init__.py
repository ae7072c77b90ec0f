"""Torch-side pieces the trusted children and the worker share: harness, timers, comparison."""
