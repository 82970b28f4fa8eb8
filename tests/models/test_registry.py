from __future__ import annotations

from pathlib import Path

import pytest

from convergent import AnthropicModel, OpenAIChatModel, ScriptedModel, UserError, model_from_string
from convergent.models.registry import default_model_spec


def test_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "s.json"
    script.write_text('["hi"]')
    assert isinstance(model_from_string(f"scripted:{script}"), ScriptedModel)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert isinstance(model_from_string("openai:gpt-4o-mini"), OpenAIChatModel)
    assert isinstance(model_from_string("anthropic:claude-haiku-5-5"), AnthropicModel)


@pytest.mark.parametrize("spec", ["gpt-4", "foo:bar", "openai:", "anthropic:", "scripted:"])
def test_bad_specs(spec: str) -> None:
    with pytest.raises(UserError):
        model_from_string(spec)


def test_default_prefers_configured_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_model_spec() == "local"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert default_model_spec().startswith("anthropic:")
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert default_model_spec().startswith("openai:")
