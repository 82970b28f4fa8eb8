"""Benchmarks and evidence scripts; `replay` and `gate_calibration` are imported by tests."""
