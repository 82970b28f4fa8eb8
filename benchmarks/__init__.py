"""Benchmarks and evidence scripts; ``benchmarks.replay`` is importable for its tests."""
