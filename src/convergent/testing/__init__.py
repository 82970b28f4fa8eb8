"""Helpers for testing code that runs agents, without a real model.

A test writes the model's side of the conversation with `call`, `step` and `answer`,
and hands the responses to `scripted` for a `ScriptedModel` that replays them in order.
`ChatServer` (in `convergent.testing.chat_server`) is a real HTTP server on loopback
that answers like OpenAI's or Anthropic's API, for testing the provider clients.

Example:
    >>> from convergent import Agent, calculator
    >>> from convergent.testing import answer, call, scripted, step
    >>> model = scripted(step(call("calculator", expression="2+2")), answer("4"))
    >>> result = Agent(model, tools=[calculator]).run_sync("What is 2+2?")
    >>> result.output
    '4'
"""

from convergent.testing._script import answer, call, scripted, step, write_script

__all__ = ["answer", "call", "scripted", "step", "write_script"]
