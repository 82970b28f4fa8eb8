"""The loopback chat server of `convergent.testing`, under the name these tests know."""

from convergent.testing.chat_server import (
    SSE,
    anthropic_stream,
    completion,
    openai_stream,
)
from convergent.testing.chat_server import ChatServer as ChatStub

__all__ = ["SSE", "ChatStub", "anthropic_stream", "completion", "openai_stream"]
