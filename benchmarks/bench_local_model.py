"""Speed of the embedded local model: convergent's overhead and a 5-cycle run.

1. Throughput: the same chat request (same messages, sampling and token count) sent
   through ``LocalModel.request`` and as a direct HTTP POST to the same llama.cpp
   server, interleaved; generated tokens per wall-clock second, median of N rounds.
   The prompt cache is off so both sides process the whole prompt every time.
2. A run of exactly 5 cycles with the built-in tools: a verifier that never passes
   keeps the loop going until ``max_cycles=5``, so the figure does not depend on
   when the model decides it is done.
3. With ``--protocols``: the tool-call protocols compared on eight small tasks with
   the built-in tools (native ``tools`` with the shipped ChatML template, the generic
   structured protocol with a name enum, and the embedded model's tightened one).

Run: python benchmarks/bench_local_model.py [--rounds N] [--tokens N] [--threads N]
                                            [--protocols]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from convergent import (
    Agent,
    Limits,
    Model,
    ModelSettings,
    StopPolicy,
    Verification,
    calculator,
    file_tools,
)
from convergent.messages import UserMessage
from convergent.models import StructuredToolCalling
from convergent.models.local import LocalModel
from convergent.models.openai import OpenAIChatModel

PROMPT = "Write a short paragraph about rivers and why people settle near them."


async def throughput(model: LocalModel, rounds: int, tokens: int) -> dict[str, Any]:
    extra_body = {"ignore_eos": True, "cache_prompt": False}
    settings = ModelSettings(temperature=0.0, max_tokens=tokens, extra={"extra_body": extra_body})
    messages = [UserMessage(content=PROMPT)]
    assert model.base_url is not None
    body = OpenAIChatModel("local", base_url="http://unused/v1", api_key="x").build_request(
        messages, (), settings
    )
    body.pop("extra_body")
    body.update(extra_body)
    ours: list[float] = []
    direct: list[float] = []
    server_side: list[float] = []
    async with httpx.AsyncClient(base_url=model.base_url, timeout=600.0) as http:
        for _ in range(rounds):
            started = time.perf_counter()
            reply = await model.request(messages, (), settings)
            ours.append(reply.usage.output_tokens / (time.perf_counter() - started))

            started = time.perf_counter()
            raw = (await http.post("/v1/chat/completions", json=body)).json()
            direct.append(raw["usage"]["completion_tokens"] / (time.perf_counter() - started))
            server_side.append(raw["timings"]["predicted_per_second"])
    return {
        "through_convergent": statistics.median(ours),
        "direct_http": statistics.median(direct),
        "server_generation": statistics.median(server_side),
    }


async def five_cycles(model: LocalModel) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "notes.txt").write_text("The launch code is 4721.\n")
        agent = Agent(
            model,
            [calculator, *file_tools(folder)],
            limits=Limits(max_cycles=5),
            policy=StopPolicy(max_repeated_calls=10),
            verifier=lambda answer: Verification(False, "check it again with a tool"),
        )
        started = time.perf_counter()
        result = await agent.run("What is 17 * 23?")
        wall = time.perf_counter() - started
    return {
        "wall": wall,
        "cycles": result.cycles,
        "stop_reason": result.stop_reason.value,
        "tool_calls": len(result.tool_calls),
        "output_tokens": result.usage.output_tokens,
        "input_tokens": result.usage.input_tokens,
    }


TASKS = [
    ("What is 17 * 23?", "calculator"),
    ("Read the file notes.txt and tell me the launch code.", "read_file"),
    ("List the files in the current directory.", "list_dir"),
    ("Compute (12 + 30) / 7.", "calculator"),
    ("What does the file fruit.txt say?", "read_file"),
    ("What is the square root of 144?", "calculator"),
    ("Which files are in the folder data?", "list_dir"),
    ("Show me the contents of data/answer.txt.", "read_file"),
]


async def protocol_row(label: str, model: Model, folder: str) -> tuple[str, ...]:
    tools = [calculator, *file_tools(folder)]
    right = calls = ok = completed = cycles = 0
    started = time.perf_counter()
    for task, expected in TASKS:
        agent = Agent(model, tools, limits=Limits(max_cycles=5))
        result = await agent.run(task)
        cycles += result.cycles
        completed += result.stop_reason.value == "completed"
        right += bool(result.tool_calls) and result.tool_calls[0].name == expected
        calls += len(result.tool_calls)
        ok += sum(record.ok for record in result.tool_calls)
    n = len(TASKS)
    return (
        label,
        f"{right}/{n}",
        f"{ok}/{calls}",
        f"{completed}/{n}",
        f"{cycles / n:.1f}",
        f"{(time.perf_counter() - started) / n:.1f} s",
    )


async def protocols(threads: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "notes.txt").write_text("The launch code is 4721.\n")
        (root / "fruit.txt").write_text("apples: 3, pears: 5\n")
        (root / "data").mkdir()
        (root / "data" / "answer.txt").write_text("42\n")
        rows = []
        async with LocalModel(protocol="native", threads=threads) as native:
            rows.append(await protocol_row("native tools + shipped template", native, folder))
        async with LocalModel(threads=threads) as tight:
            assert tight.base_url is not None
            generic = StructuredToolCalling(
                OpenAIChatModel("local", base_url=f"{tight.base_url}/v1", api_key="x"),
                name_enum=True,
            )
            settings = ModelSettings(temperature=0.0, max_tokens=256)
            generic_agent_model = _WithSettings(generic, settings)
            rows.append(await protocol_row("structured, name enum", generic_agent_model, folder))
            rows.append(await protocol_row("structured, tightened (default)", tight, folder))
            await generic.aclose()
    header = ("protocol", "right 1st tool", "calls ok", "completed", "cycles", "time/task")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))


class _WithSettings(Model):
    """Applies the embedded model's defaults (temperature 0, 256 tokens) to another model."""

    def __init__(self, inner: Model, settings: ModelSettings) -> None:
        self.inner, self.settings = inner, settings

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(self, messages: Any, tools: Any, settings: Any = None) -> Any:
        return await self.inner.request(messages, tools, self.settings)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--protocols", action="store_true", help="also compare protocols")
    args = parser.parse_args()

    model = LocalModel(threads=args.threads, max_tokens=128)
    started = time.perf_counter()
    await model.start()
    startup = time.perf_counter() - started
    try:
        speed = await throughput(model, args.rounds, args.tokens)
        run = await five_cycles(model)
    finally:
        await model.aclose()

    ratio = speed["through_convergent"] / speed["direct_http"]
    rows = [
        ("server start (load + health)", f"{startup:.2f} s"),
        (
            f"tokens/s through convergent (median of {args.rounds})",
            f"{speed['through_convergent']:.1f}",
        ),
        ("tokens/s direct HTTP, same request", f"{speed['direct_http']:.1f}"),
        ("convergent / direct", f"{ratio:.1%} (target >= 90%)"),
        ("llama.cpp generation tokens/s (server timing)", f"{speed['server_generation']:.1f}"),
        (f"{run['cycles']}-cycle run wall time", f"{run['wall']:.2f} s"),
        ("  per cycle", f"{run['wall'] / max(run['cycles'], 1):.2f} s"),
        ("  stop reason / tool calls", f"{run['stop_reason']} / {run['tool_calls']}"),
        ("  tokens in / out", f"{run['input_tokens']} / {run['output_tokens']}"),
    ]
    width = max(len(label) for label, _ in rows)
    print(f"embedded model: {model.name}, threads={args.threads}, {args.tokens} tokens/request")
    for label, value in rows:
        print(f"{label:<{width}}  {value}")
    if args.protocols:
        print()
        await protocols(args.threads)


if __name__ == "__main__":
    asyncio.run(main())
