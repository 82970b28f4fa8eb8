"""The SDK clients of every run share one set of TLS settings: certificates load once.

Each ``run_sync`` runs its own event loop, so a model builds a new SDK client for each;
loading the certificate authorities took about 20 ms of CPU per client.
"""

from __future__ import annotations

import shutil
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path

import certifi
import pytest

from convergent import Agent, AnthropicModel, Model, OpenAIChatModel, StopReason
from convergent.testing.chat_server import ChatServer

EXCHANGES = Path(__file__).parent / "models" / "exchanges"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    openai = (EXCHANGES / "openai_answer.json").read_bytes()
    anthropic = (EXCHANGES / "anthropic_answer.json").read_bytes()
    with ChatServer(lambda n, body: openai, routes={"POST /v1/messages": lambda r: anthropic}) as s:
        yield s


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The file of each loading of certificate authorities into a TLS context, from now on."""
    seen: list[object] = []
    original = ssl.SSLContext.load_verify_locations

    def counted(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        seen.append(args[0] if args else kwargs.get("cafile"))
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    return seen


PROVIDERS: dict[str, Callable[[str], Model]] = {
    "openai": lambda url: OpenAIChatModel("stub", base_url=f"{url}/v1", api_key="k"),
    "anthropic": lambda url: AnthropicModel("claude-sonnet-5-5", base_url=url, api_key="k"),
}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_runs_in_new_event_loops_load_the_certificates_once(
    provider: str,
    server: ChatServer,
    loads: list[object],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Three runs, three event loops, two models: one loading (of the file that
    ``SSL_CERT_FILE`` names, as httpx reads it; one no other test names)."""
    authorities = tmp_path / "authorities.pem"
    shutil.copy(certifi.where(), authorities)
    monkeypatch.setenv("SSL_CERT_FILE", str(authorities))
    make = PROVIDERS[provider]
    model = make(server.url)
    results = [Agent(model).run_sync("one"), Agent(make(server.url)).run_sync("two")]
    results += [Agent(model).run_sync("three")]
    assert [r.stop_reason for r in results] == [StopReason.COMPLETED] * 3
    assert loads == [str(authorities)]
