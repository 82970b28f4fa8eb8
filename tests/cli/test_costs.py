"""Costs on the command line: ``--price``, ``--max-cost``, cost in ``--json`` and ``runs``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from chat_stub import ChatStub
from convergent import Usage
from convergent.messages import ModelResponse
from convergent.testing import answer, call, step, write_script

from .test_run import run_cli

PRICE = "1,4"
"""$1 per million input tokens, $4 per million output tokens."""


def priced(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * 1 + output_tokens * 4) / 1e6


def stored_spec(folder: Path, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(folder / ".convergent" / "runs.db") as db:
        (stored,) = db.execute("SELECT recipe FROM runs WHERE run_id = ?", (run_id,)).fetchone()
    data: dict[str, Any] = json.loads(stored)
    return data


def test_a_cost_limit_refuses_a_model_without_a_price(tmp_path: Path) -> None:
    for model in ("openai:my-own-model", "openai:gpt-4o-mini"):
        # on a server of one's own, even a known model name has no price
        proc = run_cli(
            "run",
            "x",
            "--model",
            model,
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--max-cost",
            "0.5",
            cwd=tmp_path,
        )
        assert proc.returncode == 2 and proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert f"max_cost needs a price for {model}" in lines[0]
        assert "--price IN,OUT" in lines[0]
    listed = run_cli("runs", cwd=tmp_path)
    assert listed.stdout.startswith("no runs in"), listed.stdout  # none was started


def test_a_bad_price_is_one_line(tmp_path: Path) -> None:
    proc = run_cli(
        "run",
        "x",
        "--model",
        write_script(tmp_path / "script.json", "hi"),
        "--price",
        "1",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--price must be IN,OUT" in lines[0], proc.stderr


def calc(n: int, tokens: tuple[int, int]) -> ModelResponse:
    usage = Usage(input_tokens=tokens[0], output_tokens=tokens[1])
    return step(call("calculator", expression=f"{n}*{n}"), usage=usage)


def test_a_price_is_used_shown_stored_and_kept_by_a_resume(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json",
        calc(1, (1000, 100)),
        calc(2, (1500, 100)),
        answer("4", usage=Usage(input_tokens=2000, output_tokens=10)),
    )
    first = run_cli(
        "run", "x", "--model", model, "--price", PRICE, "--max-cycles", "1",
        "--no-final-answer", "--json", "--run-id", "priced", cwd=tmp_path,
    )  # fmt: skip
    assert first.returncode == 1, first.stderr
    usage = json.loads(first.stdout)["usage"]
    assert usage["cost"] == priced(1000, 100) and usage["currency"] == "USD"
    assert stored_spec(tmp_path, "priced")["price"] == [1.0, 4.0]

    resumed = run_cli("resume", "priced", "--more-cycles", "5", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    usage = json.loads(resumed.stdout)["usage"]
    assert usage["cost"] == priced(1000, 100) + priced(1500, 100) + priced(2000, 10)

    listed = run_cli("runs", cwd=tmp_path)
    header, row = listed.stdout.splitlines()[:2]
    assert header.split()[:4] == ["id", "status", "cycles", "cost"]
    assert row.split()[:4] == ["priced", "completed", "3", "$0.00534"]
    (summary,) = json.loads(run_cli("runs", "--json", cwd=tmp_path).stdout)
    assert summary["cost"] == usage["cost"] and summary["currency"] == "USD"


def test_a_run_without_a_price_shows_no_cost(tmp_path: Path) -> None:
    model = write_script(
        tmp_path / "script.json", answer("4", usage=Usage(input_tokens=20, output_tokens=1))
    )
    proc = run_cli("run", "x", "--model", model, "--json", "--run-id", "free", cwd=tmp_path)
    assert json.loads(proc.stdout)["usage"]["cost"] == 0.0
    row = run_cli("runs", cwd=tmp_path).stdout.splitlines()[1]
    assert row.split()[:4] == ["free", "completed", "1", "-"]


def metered(n: int, body: dict[str, Any]) -> bytes:
    """A server whose every prompt is 400 tokens longer than the last; the final answer
    (no tools) writes as many tokens as ``max_tokens`` allows."""
    prompt = 400 * n
    if body.get("tools"):
        output = 60
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{n}",
                    "type": "function",
                    "function": {
                        "name": "calculator",
                        "arguments": json.dumps({"expression": f"{n}+1"}),
                    },
                }
            ],
        }
        finish = "tool_calls"
    else:
        output = body.get("max_tokens") or 4096
        message = {
            "role": "assistant",
            "content": "best so far: " + " ".join(f"w{i}" for i in range(output)),
        }
        finish = "length"
    usage = {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output}
    reply = {
        "id": f"c{n}",
        "object": "chat.completion",
        "created": 0,
        "model": "metered",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }
    return json.dumps(reply).encode()


def test_a_priced_run_stops_on_its_cost_with_the_answer_inside_the_budget(
    tmp_path: Path,
) -> None:
    budget = 0.05
    with ChatStub(metered) as stub:
        proc = run_cli(
            "run", "count", "--model", "openai:metered", "--base-url", f"{stub.url}/v1",
            "--price", PRICE, "--max-cost", str(budget), "--max-cycles", "100", "--json",
            cwd=tmp_path,
        )  # fmt: skip
        requests = list(stub.requests)
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data["stop_reason"] == "budget_exhausted"
    assert data["output_after_stop"] and data["output"].startswith("best so far")
    # the cost is the server's token counts at the given price, the final answer's too
    final = requests[-1]
    assert "tools" not in final and final["max_tokens"] >= 32
    cycles = len(requests) - 1
    assert data["cycles"] == cycles > 5
    expected = sum(priced(400 * n, 60) for n in range(1, cycles + 1))
    expected += priced(400 * len(requests), final["max_tokens"])
    assert abs(data["usage"]["cost"] - expected) < 1e-12
    assert data["usage"]["cost"] <= budget
