"""Replay recorded agent runs through the loop and measure which of them it would stop.

Each corpus format has a reader (`benchmarks.replay.readers`) that turns a file into
`Trajectory` records: the agent's turns, each a list of recorded replies with their tool
calls and results, plus the run's success label. `benchmarks.replay.replayer` plays every
turn through `Agent.run`, `benchmarks.replay.loops` says objectively where a recording
repeats itself with nothing changing, and `benchmarks.replay.report` counts and words it.
"""
