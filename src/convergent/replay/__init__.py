"""Replay recorded agent runs through the loop: what convergent would have done to them.

Readers turn recordings (Claude Code transcripts, OTLP GenAI traces, the OpenAI Agents
SDK's trace export, plain message lists, τ-bench, τ²-bench, mini-swe-agent, SWE-agent
and BFCL results) into `Trajectory` records. Every agent turn is then replayed through
`convergent.Agent.run`: a `convergent.ScriptedModel` plays the recorded replies and each
tool answers with its recorded result, so whatever policy the installed convergent has
is what is measured. Each run is judged (`RunVerdict`): where the loop stopped it, why,
whether the recording proves a loop there, and what the stop saves. `calibrate` searches
the policy's thresholds for the ones that cut no successful run and save the most in
failed ones. What a reader could not read or had to guess is counted, never dropped
silently; `Declarations` say what the recordings do not (which tools read, write or
wait, which results are mistakes). See docs/replay.md.
"""

from __future__ import annotations

from convergent.replay._calibrate import KNOBS, Calibration, Knob, Point, available_knobs
from convergent.replay._declarations import Declarations, declared, load_declarations
from convergent.replay._html import html_page
from convergent.replay._readers import FORMATS, detect_format, read_runs
from convergent.replay._recording import (
    GAPS,
    Malformed,
    RecordedCall,
    RecordedReply,
    Skipped,
    Trajectory,
)
from convergent.replay._replayer import RunReplay, TurnReplay, replay_run
from convergent.replay._report import CorpusFigures, ReplayReport
from convergent.replay._run import calibrate, replay
from convergent.replay._verdict import CallLine, LoopFate, RunVerdict, Stop, judge

__all__ = [
    "FORMATS",
    "GAPS",
    "KNOBS",
    "Calibration",
    "CallLine",
    "CorpusFigures",
    "Declarations",
    "Knob",
    "LoopFate",
    "Malformed",
    "Point",
    "RecordedCall",
    "RecordedReply",
    "ReplayReport",
    "RunReplay",
    "RunVerdict",
    "Skipped",
    "Stop",
    "Trajectory",
    "TurnReplay",
    "available_knobs",
    "calibrate",
    "declared",
    "detect_format",
    "html_page",
    "judge",
    "load_declarations",
    "read_runs",
    "replay",
    "replay_run",
]
