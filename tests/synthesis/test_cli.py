from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_runner import Ran, invoke
from convergent.cli import main
from convergent.testing import write_script

from .conftest import SEED_RECORDS, SEED_THEMES, themes_json


def _run(exe: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [exe, "synthesize", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )


def _synthesize(*args: str, cwd: Path) -> Ran:
    return invoke("synthesize", *args, cwd=cwd, env={"NO_COLOR": "1"})


@pytest.fixture
def insights_file(tmp_path: Path) -> Path:
    path = tmp_path / "insights.json"
    path.write_text(json.dumps(SEED_RECORDS), encoding="utf-8")
    return path


@pytest.mark.slow
def test_insights_mode_offline_end_to_end(
    convergent_exe: str, insights_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    first = _run(
        convergent_exe, "Expand?", "--insights", str(insights_file), "--out", str(out), cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("# Synthesis: Expand?\n")
    assert "(score 7.2, 2 archetypes: optimist, pragmatist)" in first.stdout
    report = yaml.safe_load((out / "synthesis.yaml").read_text())
    assert [c["score"] for c in report["convergent_insights"]] == [7.2]
    assert [d["archetype"] for d in report["divergent_insights"]] == [
        "critic",
        "analyst",
        "innovator",
    ]
    assert (out / "synthesis.md").read_text() == first.stdout
    state = yaml.safe_load((out / "workflow-state.yaml").read_text())
    assert state["stage_3"]["grouping_method"] == "jaccard_fallback"
    # deterministic: a second run prints the same report
    second = _run(convergent_exe, "Expand?", "--insights", str(insights_file), cwd=tmp_path)
    assert second.stdout == first.stdout


def test_insights_mode_json_and_yaml_file(insights_file: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.yaml"
    result = _synthesize(
        "--insights",
        str(insights_file),
        "--json",
        "--yaml",
        str(target),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    assert data["grouping"]["method"] == "jaccard_fallback"
    assert [c["score"] for c in data["convergent_insights"]] == [7.2]
    assert yaml.safe_load(target.read_text())["convergent_insights"] == data["convergent_insights"]
    assert not (tmp_path / "workflow-state.yaml").exists()


def test_insights_mode_with_a_scripted_grouping_model(insights_file: Path, tmp_path: Path) -> None:
    script = write_script(tmp_path / "script.json", themes_json(SEED_THEMES))
    result = _synthesize(
        "--insights",
        str(insights_file),
        "--model",
        script,
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["grouping"]["method"] == "llm"
    assert data["convergent_insights"][0]["theme"] == "Growth opportunity"


def test_perspectives_end_to_end_with_a_scripted_model(tmp_path: Path) -> None:
    # every reply is the same insight JSON: a fine answer and extraction for each
    # perspective, but not a grouping, so grouping falls back after one retry
    reply = json.dumps({"key_insight": "Open the shop.", "confidence": 4, "evidence": ["demand"]})
    script = write_script(tmp_path / "script.json", *[reply] * 6)
    result = _synthesize(
        "Open a second shop?",
        "--model",
        script,
        "--archetypes",
        "optimist,critic",
        "--retry-delay",
        "0",
        "--out",
        "out",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["grouping"]["trigger"] == "invalid_json"
    assert data["grouping"]["attempts"] == 2
    assert data["convergent_insights"][0]["contributing_archetypes"] == ["optimist", "critic"]
    assert data["convergent_insights"][0]["score"] == 6.0
    state = yaml.safe_load((tmp_path / "out" / "workflow-state.yaml").read_text())
    assert state["stage_3"]["grouping_method"] == "jaccard_fallback"
    assert [a["outcome"] for a in state["stage_3"]["llm_attempts"]] == ["invalid_json"] * 2


@pytest.mark.parametrize(
    ("content", "args", "message"),
    [
        (None, [], "error: insights file not found: "),
        ("[{", [], "error: insights file "),
        ('{"archetype": "critic"}', [], "must be a JSON list of insight records"),
        (
            '[{"archetype": "critic", "key_insight": "x"}]',
            [],
            "record 0: confidence: Field required",
        ),
        (
            json.dumps(SEED_RECORDS),
            ["--archetypes", "optimist,wizard"],
            "error: unknown archetype 'wizard'",
        ),
        (
            json.dumps(SEED_RECORDS),
            ["--out", "o", "--yaml", "r.yaml"],
            "error: use either --out DIR or --yaml FILE",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    content: str | None,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "insights.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(SystemExit) as info:
        main(["synthesize", "--insights", str(path), *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1


def test_missing_file_through_the_console_script(convergent_exe: str, tmp_path: Path) -> None:
    result = _run(convergent_exe, "--insights", "nope.json", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "error: insights file not found: nope.json\n"


def test_prompt_is_required_without_insights(tmp_path: Path) -> None:
    result = _synthesize(cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: PROMPT is required unless --insights FILE is given"
