"""The exceptions convergent raises, all under one base.

```
ConvergentError
├── UserError                 a caller's mistake: bad configuration, bad input, misuse
│   ├── ScriptExhaustedError  a ScriptedModel was asked for more responses than it holds
│   ├── ToolDefinitionError   a function cannot be turned into a tool
│   ├── StateFileError        a coordinator state file that cannot be used (coordinator)
│   ├── HookInputError        the hook's stdin is not what Claude Code sends (coordinator)
│   ├── UnusableYaml          a YAML file that is not YAML, too deep, or repeats a key
│   ├── FormatMismatch        a recorded run that does not fit its format (replay)
│   └── NotExpressible        an adapter asked for what its host framework cannot do
├── ModelError                the model backend failed (after its own retries)
│   ├── ModelHTTPError        ... with an HTTP status from the provider
│   └── RequestTimedOut       ... or gave no complete reply within the request's time
├── ModelBehaviorError        the model produced something that cannot be used or fed back
├── ToolArgumentsError        a call's arguments do not fit the tool (the model's mistake)
├── ToolError                 raised by a tool to report a failure in its own words
├── NeedsUserInput            raised by a tool that must ask the user but has no channel
│   └── AskTimedOut           ... or asked and got no reply in time (gate)
├── StorageError              the run store cannot be read or written
├── UnusableJson              text from a file, a provider or a model that is not JSON
├── RolledOver                Agent.run hands its state over to continue in a new process
├── ClassifiedOutcome         a tool call already run and classified elsewhere (a worker)
├── ChildSpent                a child run that did not end, with what it had spent
├── Unchecked                 a value a bounded schema check could not finish checking
├── StoppedBeforeRequest      an Agents SDK run stopped where no hook of the SDK could end it
└── PolicyAdapted             a warning, not raised: an adapter fitted the policy to its host
```

Classes defined elsewhere: ``StateFileError`` and ``HookInputError`` in
`convergent.coordinator`, ``AskTimedOut`` in `convergent.gate`, ``NotExpressible`` and
the ``PolicyAdapted`` warning (a ``UserWarning`` too) in `convergent.adapters`,
``StoppedBeforeRequest`` in `convergent.adapters.openai_agents` (`run` catches it);
``UnusableJson``, ``UnusableYaml``, ``RolledOver``, ``ClassifiedOutcome``,
``ChildSpent``, ``Unchecked`` and ``RequestTimedOut`` in the machinery (``_json``,
``_yaml``, ``_cycle``, ``_executor``, ``_agent_tool``, ``_bounded_schema``,
``models._deadline``), where each is caught and turned into a result or an error of its
layer: only ``RolledOver`` leaves `Agent.run`, for a Temporal workflow's
continue-as-new. ``FormatMismatch`` is the replay's readers' (`convergent.replay`): a run
that raises it is reported as malformed and skipped. Private helpers of single modules
derive from the class they stand for, or from the base. ``ToolArgumentsError`` and
``UnusableJson`` are also ``ValueError``s.

Tool failures and model mistakes inside a run do not escape `Agent.run`: they become
tool results or a typed `StopReason`. What escapes is a caller's mistake.
"""

from __future__ import annotations

__all__ = [
    "ConvergentError",
    "ModelBehaviorError",
    "ModelError",
    "ModelHTTPError",
    "NeedsUserInput",
    "ScriptExhaustedError",
    "StorageError",
    "ToolArgumentsError",
    "ToolDefinitionError",
    "ToolError",
    "UserError",
]


class ConvergentError(Exception):
    """Base of every exception raised by convergent."""


class UserError(ConvergentError):
    """The caller used the library or the CLI wrongly; the message says how."""


class ScriptExhaustedError(UserError):
    """A `ScriptedModel` received a request after its last scripted response."""


class ToolDefinitionError(UserError):
    """A function could not be turned into a tool (for example, an untyped parameter)."""


class ModelError(ConvergentError):
    """The model backend failed: network, server error, or an unusable reply after retries."""


class ModelHTTPError(ModelError):
    """The provider answered with an HTTP error status."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"HTTP {status_code}: {message}")
        self.status_code = status_code


class ModelBehaviorError(ConvergentError):
    """The model's output broke the protocol in a way that cannot be sent back to it."""


class ToolArgumentsError(ConvergentError, ValueError):
    """A call's arguments do not fit the tool: the model's mistake, sent back to it.

    Tools raise it too when an argument is well-typed but unusable (an expression that
    does not parse, a path outside the workspace); the loop then treats the call as
    ``invalid``, not as a tool failure.
    """


class ToolError(ConvergentError):
    """Raise inside a tool to report a failure; the message becomes the error result.

    Args:
        message: What went wrong, in the tool's words.
        fatal: The failure cannot be recovered from by the model (a lost credential, a
            full disk): the run stops ``tool_error`` at once instead of feeding it back.
    """

    def __init__(self, message: str = "", *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class NeedsUserInput(ConvergentError):
    """A tool needs an answer from the user and no channel can deliver one now.

    The run then ends with the resumable ``needs_user`` stop reason, carrying the question.
    """

    def __init__(self, question: str) -> None:
        super().__init__(question)
        self.question = question


class StorageError(ConvergentError):
    """The run store cannot be read or written: disk full, read-only, locked or damaged."""
