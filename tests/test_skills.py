from __future__ import annotations

from pathlib import Path

import pytest

from convergent import Agent, ToolArgumentsError, UserError
from convergent.skills import Skills, parse_skill
from convergent.testing import call, scripted


def make_skill(root: Path, name: str, description: str, body: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n{body}\n"
    )
    return folder


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    pdf = make_skill(root, "pdf-forms", "Fill PDF forms.", "Secret body: see forms/guide.md")
    (pdf / "forms").mkdir()
    (pdf / "forms" / "guide.md").write_text("step 1: open the form")
    (tmp_path / "secret.txt").write_text("top secret")
    (pdf / "escape.md").symlink_to(tmp_path / "secret.txt")
    (pdf / "inner.md").symlink_to(pdf / "forms" / "guide.md")
    make_skill(root, "csv", "Clean CSV files.", "Use commas.")
    return root


def test_only_name_and_description_reach_the_system_prompt(skills_root: Path) -> None:
    skills = Skills.discover(skills_root)
    prompt = skills.system_prompt("base")
    assert prompt.startswith("base\n\n")
    assert "- pdf-forms: Fill PDF forms." in prompt and "- csv: Clean CSV files." in prompt
    assert "Secret body" not in prompt and "Use commas" not in prompt


async def test_load_skill_returns_body_and_file_list(skills_root: Path) -> None:
    tools = {t.name: t for t in Skills.discover(skills_root).tools()}
    text = await tools["load_skill"].call({"name": "pdf-forms"})
    assert text.startswith("Secret body: see forms/guide.md")
    assert "- forms/guide.md" in text and "- inner.md" in text
    assert "escape.md" not in text
    with pytest.raises(ToolArgumentsError, match="available skills: csv, pdf-forms"):
        await tools["load_skill"].call({"name": "nope"})


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("../csv/SKILL.md", "'..' is not allowed"),
        ("forms/../../csv/SKILL.md", "'..' is not allowed"),
        ("/etc/passwd", "relative to the skill folder"),
        ("escape.md", "leads outside the skill"),
        ("missing.md", "has no file"),
        ("forms", "has no file"),
        ("", "relative to the skill folder"),
    ],
)
async def test_read_skill_file_is_confined(skills_root: Path, path: str, error: str) -> None:
    tools = {t.name: t for t in Skills.discover(skills_root).tools()}
    with pytest.raises(ToolArgumentsError, match=error):
        await tools["read_skill_file"].call({"name": "pdf-forms", "path": path})


async def test_read_skill_file_reads_linked_files(skills_root: Path) -> None:
    tools = {t.name: t for t in Skills.discover(skills_root).tools()}
    for path in ("forms/guide.md", "inner.md"):
        text = await tools["read_skill_file"].call({"name": "pdf-forms", "path": path})
        assert text == "step 1: open the form"


async def test_skills_in_an_agent_run(skills_root: Path) -> None:
    skills = Skills.discover(skills_root)
    model = scripted(call("load_skill", name="csv"), "done")
    agent = Agent(model, skills.tools(), system_prompt=skills.system_prompt("sys"))
    result = await agent.run("clean data.csv")
    assert result.tool_calls[0].result == "Use commas."
    first_request = model.requests[0][0]
    assert "Use commas" not in first_request[0].content


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no front matter", "must start with '---'"),
        ("---\nname: Bad Name\ndescription: d\n---\n", "name must be lowercase"),
        ("---\nname: ok\n---\n", "description must be a non-empty string"),
        ("---\n[unclosed\n---\n", "not valid YAML"),
    ],
)
def test_invalid_skill_files(tmp_path: Path, text: str, error: str) -> None:
    (tmp_path / "SKILL.md").write_text(text)
    with pytest.raises(UserError, match=error):
        parse_skill(tmp_path)


def test_duplicate_names_and_missing_folders(tmp_path: Path) -> None:
    make_skill(tmp_path / "a", "same", "one", "x")
    make_skill(tmp_path / "b", "same", "two", "y")
    with pytest.raises(UserError, match="two skills are named 'same'"):
        Skills.discover(tmp_path / "a", tmp_path / "b")
    with pytest.raises(UserError, match="skills folder not found"):
        Skills.discover(tmp_path / "none")
