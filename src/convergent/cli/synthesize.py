"""``convergent synthesize PROMPT``: several perspectives, one ranked synthesis.

With ``--insights FILE.json`` the perspectives are skipped and the given Step 1
records are validated, grouped and scored; without ``--model`` that mode uses the
Jaccard grouping and is fully offline and deterministic.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markdown import Markdown

from convergent.cli._app import app
from convergent.cli._options import BaseUrlOption, JsonOption, ModelOption
from convergent.exceptions import UserError
from convergent.models.base import Model, ModelSettings
from convergent.models.registry import default_model_spec, model_from_string
from convergent.synthesis.archetypes import Archetype, parse_archetypes
from convergent.synthesis.insights import load_insights
from convergent.synthesis.pipeline import synthesize, synthesize_insights
from convergent.synthesis.report import SynthesisReport
from convergent.synthesis.state import STATE_FILE_NAME

__all__ = ["synthesize_command"]

REPORT_YAML = "synthesis.yaml"
"""File name of the YAML report inside ``--out``."""
REPORT_MARKDOWN = "synthesis.md"
"""File name of the Markdown report inside ``--out``."""


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None


def _settings(max_tokens: int | None, temperature: float | None) -> ModelSettings | None:
    if max_tokens is not None and max_tokens < 1:
        raise UserError(f"--max-tokens must be >= 1, got {max_tokens}")
    if max_tokens is None and temperature is None:
        return None
    return ModelSettings(max_tokens=max_tokens, temperature=temperature)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Job:
    """One synthesize invocation, after option parsing."""

    prompt: str | None
    model: Model | None
    insights: Path | None
    archetypes: tuple[Archetype, ...] | None
    settings: ModelSettings | None
    latency_limit: float
    retry_delay: float
    state_path: Path | None
    perspective_timeout: float


async def _given(job: _Job, model: Model | None) -> SynthesisReport:
    assert job.insights is not None
    return await synthesize_insights(
        load_insights(job.insights),
        model,
        prompt=job.prompt,
        archetypes=job.archetypes,
        settings=job.settings,
        latency_limit=job.latency_limit,
        retry_delay=job.retry_delay,
        state_path=job.state_path,
    )


async def _run(job: _Job) -> SynthesisReport:
    if job.model is None:
        return await _given(job, None)
    async with job.model:
        if job.insights is not None:
            return await _given(job, job.model)
        assert job.prompt is not None
        return await synthesize(
            job.prompt,
            job.model,
            archetypes=job.archetypes,
            perspective_timeout=job.perspective_timeout,
            settings=job.settings,
            latency_limit=job.latency_limit,
            retry_delay=job.retry_delay,
            state_path=job.state_path,
        )


def _show(report: SynthesisReport) -> None:
    markdown = report.to_markdown()
    if sys.stdout.isatty():
        Console(highlight=False).print(Markdown(markdown))
    else:
        sys.stdout.write(markdown)


@app.command("synthesize")
def synthesize_command(
    prompt: Annotated[
        str | None,
        typer.Argument(help="The question every perspective answers (optional with --insights)."),
    ] = None,
    model: ModelOption = None,
    base_url: BaseUrlOption = None,
    insights: Annotated[
        Path | None,
        typer.Option(help="Skip the perspectives: a JSON list of Step 1 insight records."),
    ] = None,
    archetypes: Annotated[
        str | None,
        typer.Option(help="Comma-separated archetypes; custom ones as name=stance."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help=f"Write {REPORT_YAML}, {REPORT_MARKDOWN} and {STATE_FILE_NAME} here."),
    ] = None,
    yaml_file: Annotated[
        Path | None, typer.Option("--yaml", help="Write the YAML report to this file.")
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(
            help=f"Write the workflow state here (default with --out: DIR/{STATE_FILE_NAME})."
        ),
    ] = None,
    json_output: JsonOption = False,
    timeout: Annotated[float, typer.Option(help="Seconds per perspective.")] = 300.0,
    grouping_timeout: Annotated[
        float, typer.Option(help="Seconds one grouping response may take before the fallback.")
    ] = 30.0,
    retry_delay: Annotated[float, typer.Option(help="Seconds before the grouping retry.")] = 5.0,
    max_tokens: Annotated[int | None, typer.Option(help="Max tokens per model reply.")] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
) -> None:
    """Ask several perspectives, group their insights by theme, rank by convergence."""
    if out is not None and yaml_file is not None:
        raise UserError("use either --out DIR or --yaml FILE, not both")
    for name, value in (
        ("--timeout", timeout),
        ("--grouping-timeout", grouping_timeout),
        ("--retry-delay", retry_delay),
    ):
        if value < 0 or (value == 0 and name != "--retry-delay"):
            raise UserError(f"{name} must be > 0, got {value:g}")
    if insights is None and not (prompt and prompt.strip()):
        raise UserError("PROMPT is required unless --insights FILE is given")
    chosen = parse_archetypes(archetypes) if archetypes is not None else None
    backend: Model | None = None
    if model is not None or insights is None:
        backend = model_from_string(model or default_model_spec(), base_url=base_url)
    job = _Job(
        prompt=prompt,
        model=backend,
        insights=insights,
        archetypes=chosen,
        settings=_settings(max_tokens, temperature),
        latency_limit=grouping_timeout,
        retry_delay=retry_delay,
        state_path=state or (out / STATE_FILE_NAME if out is not None else None),
        perspective_timeout=timeout,
    )
    report = asyncio.run(_run(job))
    if out is not None:
        _write(out / REPORT_YAML, report.to_yaml())
        _write(out / REPORT_MARKDOWN, report.to_markdown())
    if yaml_file is not None:
        _write(yaml_file, report.to_yaml())
    if json_output:
        print(json.dumps(report.to_json_dict(), ensure_ascii=False))
    else:
        _show(report)
