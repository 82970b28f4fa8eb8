"""``convergent run --output-schema``: a run completes only on an answer valid under it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.cli.test_runs import cli

from convergent.testing import call, write_script

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "integer"}},
    "required": ["total"],
    "additionalProperties": False,
}


@pytest.fixture
def schema_file(tmp_path: Path) -> Path:
    path = tmp_path / "answer.schema.json"
    path.write_text(json.dumps(SCHEMA))
    return path


def run_json(tmp_path: Path, *args: str) -> tuple[int, dict[str, Any]]:
    proc = cli("run", "add 1 and 1", *args, "--json", cwd=tmp_path)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_an_invalid_answer_goes_back_and_a_valid_one_completes(
    tmp_path: Path, schema_file: Path
) -> None:
    model = write_script(
        tmp_path / "s.json", call("calculator", expression="1+1"), "the total is 2", '{"total": 2}'
    )
    code, data = run_json(
        tmp_path, "--model", model, "--output-schema", str(schema_file), "--run-id", "t1"
    )
    assert code == 0
    assert data["stop_reason"] == "completed" and data["cycles"] == 3
    assert data["output_data"] == {"total": 2}
    listed = json.loads(cli("runs", "--json", cwd=tmp_path).stdout)
    assert [(r["run_id"], r["output_data"]) for r in listed] == [("t1", {"total": 2})]


def test_without_a_schema_there_is_no_output_data(tmp_path: Path) -> None:
    code, data = run_json(tmp_path, "--model", write_script(tmp_path / "s.json", '{"total": 2}'))
    assert code == 0 and data["stop_reason"] == "completed"
    assert data["output_data"] is None


def test_a_resumed_run_keeps_its_schema(tmp_path: Path, schema_file: Path) -> None:
    first = write_script(tmp_path / "a.json", "two", "still two")
    code, data = run_json(
        tmp_path,
        "--model",
        first,
        "--output-schema",
        str(schema_file),
        "--run-id",
        "t2",
        "--max-cycles",
        "2",
        "--no-final-answer",
    )
    assert code == 1
    assert data["stop_reason"] == "max_cycles" and data["output_data"] is None
    second = write_script(tmp_path / "b.json", '{"total": "2"}', '{"total": 2}')
    resumed = cli("resume", "t2", "--model", second, "--max-cycles", "4", "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    data = json.loads(resumed.stdout)
    assert data["stop_reason"] == "completed" and data["cycles"] == 4
    assert data["output_data"] == {"total": 2}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read output schema"),
        ("{not json", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"type": 12}', "invalid output schema: 12 is not valid under any of the given schemas"),
    ],
)
def test_a_bad_schema_file_is_refused_in_one_line(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    model = write_script(tmp_path / "s.json", "x")
    proc = cli("run", "x", "--model", model, "--output-schema", str(path), cwd=tmp_path)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
