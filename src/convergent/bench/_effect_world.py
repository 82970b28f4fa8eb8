"""More tools of the world: writes, undeclared polls, a shell, a picky code base.

Writes that must not repeat, polls of tools that declare nothing, a shell, and a code
base whose linter refuses most patches:

- ``issue_voucher`` (a write: a new voucher id each call), ``update_profile`` (a write:
  the same confirmation each call) and ``book_flight`` (a write that fails: the fare is
  sold out);
- ``deployment_status`` (declares nothing, as a user's ``@tool`` usually does: queued,
  running, then succeeded) and ``shell`` (declares nothing: ``sleep N`` takes N seconds
  on the world's clock, ``gh run view ID`` says ``in_progress`` until the CI run is done);
- ``apply_patch`` (a write: the linter refuses every patch but the right one) and
  ``search_code`` (a read that fails for a symbol the code base does not have).

Each is built by `effect_tools` for one world: `convergent.bench._world.World`, which
offers them beside its own tools, as far as `EffectWorld` says what they use of it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Protocol

from convergent.exceptions import ToolError
from convergent.tools import Tool, tool

__all__ = [
    "CI_RUNS",
    "DEPLOYMENTS",
    "FIXES",
    "SYMBOLS",
    "EffectWorld",
    "WorldClock",
    "effect_tools",
]


class WorldClock(Protocol):
    """The world's time, as these tools move and read it."""

    @property
    def seconds(self) -> float:
        """Seconds since the world began."""

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass."""


class EffectWorld(Protocol):
    """What these tools use of the world they act on."""

    @property
    def clock(self) -> WorldClock:
        """The world's time."""

    fixes: Counter[str]
    polls: Counter[str]
    payments: int

    def enter(self, tool: str, effect: str) -> None:
        """A call of ``tool`` reached the world."""

    def done(self, effect: str, text: str) -> str:
        """The call succeeded with ``text``."""


DEPLOYMENTS = ("web-7", "api-3", "worker-2", "docs-9")
"""Deployments: each says ``queued``, then ``running`` twice, then ``succeeded``."""
CI_RUNS = {"4211": 20.0, "4212": 25.0, "4213": 30.0, "4214": 35.0}
"""CI runs and the seconds each takes from its first poll."""
FIXES = {
    "src/parser.py": "guard the empty token list",
    "src/ledger.py": "round the total once",
    "src/importer.py": "skip the header row",
    "src/sync.py": "retry on a timeout",
}
"""The one patch of each file the linter accepts (and that fixes its tests)."""
SYMBOLS = {"parse_tokens": "src/parser.py", "post_entry": "src/ledger.py"}
"""Where the code base defines each symbol ``search_code`` can find."""


def effect_tools(world: EffectWorld) -> dict[str, Callable[[], Tool]]:
    """The factories of this module's tools, bound to ``world``."""
    return {
        "issue_voucher": lambda: _voucher(world),
        "update_profile": lambda: _profile(world),
        "book_flight": lambda: _booking(world),
        "deployment_status": lambda: _deployment(world),
        "shell": lambda: _shell(world),
        "apply_patch": lambda: _patch(world),
        "search_code": lambda: _search(world),
    }


def _voucher(world: EffectWorld) -> Tool:
    @tool(name="issue_voucher", read_only=False)
    def issue_voucher(customer: str, amount: int) -> str:
        """Issue a voucher to a customer.

        Args:
            customer: The customer's id.
            amount: Its value in USD.
        """
        world.enter("issue_voucher", f"voucher:{customer}:{amount}")
        world.payments += 1
        number = 7000 + world.payments
        return world.done(f"voucher:{customer}:{amount}", f"voucher V-{number} of ${amount} issued")

    return issue_voucher


def _profile(world: EffectWorld) -> Tool:
    @tool(name="update_profile", read_only=False)
    def update_profile(user: str, email: str) -> str:
        """Change a user's e-mail address.

        Args:
            user: The user's id.
            email: The new address.
        """
        world.enter("update_profile", f"profile:{user}")
        return world.done(f"profile:{user}", f"profile of {user} updated")

    return update_profile


def _booking(world: EffectWorld) -> Tool:
    @tool(name="book_flight", read_only=False)
    def book_flight(flight: str) -> str:
        """Book a seat on a flight.

        Args:
            flight: The flight number.
        """
        world.enter("book_flight", f"book:{flight}")
        raise ToolError(f"{flight}: the fare class is sold out")

    return book_flight


def _deployment(world: EffectWorld) -> Tool:
    @tool(name="deployment_status")
    def deployment_status(deployment: str) -> str:
        """The state of a deployment.

        Args:
            deployment: Its name, e.g. "web-7".
        """
        effect = f"deploy:{deployment}"
        world.enter("deployment_status", effect)
        if deployment not in DEPLOYMENTS:
            raise ToolError(f"no deployment {deployment!r}")
        world.polls[effect] += 1
        state = ("queued", "running", "running", "succeeded")[min(world.polls[effect], 4) - 1]
        return world.done(effect, f"{deployment}: {state}")

    return deployment_status


def _shell(world: EffectWorld) -> Tool:
    started: dict[str, float] = {}

    @tool(name="shell")
    def shell(command: str) -> str:
        """Run a shell command.

        Args:
            command: The command line.
        """
        words = command.split()
        if words[:1] == ["sleep"] and len(words) == 2:
            world.enter("shell", "sleep")
            world.clock.advance(float(words[1]))
            return world.done("sleep", "")
        if words[:3] == ["gh", "run", "view"] and len(words) == 4 and words[3] in CI_RUNS:
            run = words[3]
            effect = f"ci:{run}"
            world.enter("shell", effect)
            first = started.setdefault(run, world.clock.seconds)
            if world.clock.seconds - first >= CI_RUNS[run]:
                return world.done(effect, f"run {run}: completed, conclusion: success")
            return world.done(effect, f"run {run}: in_progress")
        world.enter("shell", "shell")
        raise ToolError(f"{words[0] if words else command}: command not found")

    return shell


def _patch(world: EffectWorld) -> Tool:
    @tool(name="apply_patch", read_only=False)
    def apply_patch(path: str, patch: str) -> str:
        """Apply a patch to a source file; the linter checks it first.

        Args:
            path: The file.
            patch: The change, in a few words.
        """
        effect = f"patch:{path}"
        world.enter("apply_patch", effect)
        if FIXES.get(path) != patch:
            raise ToolError(f"lint: {path}:12:5: E999 SyntaxError: the patch was not applied")
        suite = path.removeprefix("src/").removesuffix(".py")
        world.fixes[suite] += 99  # the right patch fixes every failing test
        return world.done(effect, f"patched {path}")

    return apply_patch


def _search(world: EffectWorld) -> Tool:
    @tool(name="search_code", read_only=True)
    def search_code(symbol: str) -> str:
        """Find where a symbol is defined.

        Args:
            symbol: A function or class name.
        """
        effect = f"search:{symbol}"
        world.enter("search_code", effect)
        if symbol not in SYMBOLS:
            raise ToolError(f"no definition of {symbol!r} found")
        return world.done(effect, f"{symbol} is defined in {SYMBOLS[symbol]}")

    return search_code
