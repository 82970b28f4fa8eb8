"""`MCPServer`: how to reach one MCP tool server, and the ``mcpServers`` JSON format.

The format is the one Claude Desktop (``claude_desktop_config.json``) and Claude Code
(``.mcp.json``) read::

    {"mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
        "docs": {"type": "http", "url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}
    }}

``${VAR}`` and ``${VAR:-default}`` in a command, its arguments, ``env``, ``url`` and
``headers`` are expanded from the environment when the server starts, so a run's stored
agent spec keeps the reference, not the secret; a literal ``env`` value is stored as a
reference to the variable of its own name (`stored_mcp_config`). An entry with
``"disabled": true`` is skipped, as Claude Desktop skips it. Keys of convergent's own
may be added to an entry: ``timeout`` (seconds one tool call may take, default 60),
``prefix`` (put before the server's tool names, to tell apart two servers with the same
tools) and ``effects`` (what a call of each named tool does: ``read``, ``idempotent``,
``write`` or ``undeclared``, over what the server's annotations say). Other keys are
ignored, so a configuration written for another client can be used as is. On the
command line, ``--mcp-effect [SERVER:]TOOL=EFFECT`` adds to a server's ``effects``
(`declare_effects`).

This module needs nothing beyond the standard library; only starting a server needs
the ``mcp`` extra.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from convergent._json import UnusableJson, load_json
from convergent.effects import Effect
from convergent.exceptions import UserError

__all__ = [
    "MCPServer",
    "declare_effects",
    "expand_env",
    "load_mcp_config",
    "mcp_config",
    "parse_mcp_servers",
    "server_from_command",
    "stored_mcp_config",
]

_HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamableHttp"})
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,31}")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_EFFECT_NAMES = ", ".join(effect.value for effect in Effect)
"""The effects a tool may be declared with, as an error lists them."""
_RUNNERS = frozenset({"uvx", "npx", "pipx", "bunx", "pnpx", "node", "deno", "bun", "uv", "docker"})


def expand_env(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with ``${VAR}`` and ``${VAR:-default}`` replaced from the environment.

    Raises:
        UserError: For a variable that is not set and has no default.
    """
    environ = os.environ if environ is None else environ

    def value(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise UserError(f"environment variable {name} is not set (used as ${{{name}}})")

    return _VARIABLE.sub(value, text)


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPServer:
    """One MCP tool server: a command run over stdio, or a streamable HTTP endpoint.

    Build one with `MCPServer.stdio` or `MCPServer.http`, or read them from an
    ``mcpServers`` file with `load_mcp_config`.

    Raises:
        UserError: For a server that names neither or both of a command and a URL, or
            an invalid name, timeout or prefix.
    """

    name: str
    """The server's name: in error messages and in its tools' source (``mcp:NAME``)."""
    command: str | None = None
    """The executable of a stdio server."""
    args: tuple[str, ...] = ()
    """Its command-line arguments."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables set for it, over a minimal inherited set (``HOME``, ``PATH``,
    ``SHELL``, ``TERM``...): nothing else of this process's environment reaches it."""
    cwd: str | None = None
    """Its working folder (default: the current one)."""
    url: str | None = None
    """The endpoint of a streamable HTTP server."""
    headers: dict[str, str] = field(default_factory=dict)
    """HTTP headers sent with every request (``Authorization``...)."""
    timeout: float | None = 60.0
    """Seconds one call of its tools may take before it fails; None: no limit."""
    startup_timeout: float = 30.0
    """Seconds it may take to start and list its tools."""
    prefix: str | None = None
    """Put before its tool names (``PREFIX_TOOL``), to avoid clashes between servers."""
    effects: dict[str, Effect] = field(default_factory=dict)
    """What a call of each named tool does (an `Effect`, or its value: ``"write"``...),
    by the name the server lists, over what its annotations declare: for a server
    whose tools declare nothing, or wrongly. Each name must be one of its tools."""

    def __post_init__(self) -> None:
        if not self.name.strip() or any(ord(c) < 32 for c in self.name):
            raise UserError(f"invalid MCP server name {self.name!r}")
        if (self.command is None) == (self.url is None):
            raise UserError(f"MCP server {self.name!r} needs either a command or a url")
        if self.command is not None and not self.command.strip():
            raise UserError(f"MCP server {self.name!r}: the command is empty")
        if self.url is not None and not re.match(r"(?i)https?://|\$\{", self.url):
            raise UserError(f"MCP server {self.name!r}: url must start with http:// or https://")
        if self.timeout is not None and not self.timeout > 0:
            raise UserError(f"MCP server {self.name!r}: timeout must be > 0 seconds")
        if not self.startup_timeout > 0:
            raise UserError(f"MCP server {self.name!r}: startup_timeout must be > 0 seconds")
        if self.prefix is not None and not _PREFIX.fullmatch(self.prefix):
            raise UserError(
                f"MCP server {self.name!r}: prefix must be a letter or '_' followed by up to "
                f"31 letters, digits, '_' or '-', got {self.prefix!r}"
            )
        object.__setattr__(
            self, "effects", _effects(self.effects, f"MCP server {self.name!r}: effects")
        )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` for a command, ``http`` for a URL."""
        return "stdio" if self.command is not None else "http"

    @property
    def source(self) -> str:
        """The source recorded for its tools: ``mcp:NAME``."""
        return f"mcp:{self.name}"

    @classmethod
    def stdio(
        cls,
        name: str,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        timeout: float | None = 60.0,
        prefix: str | None = None,
        effects: Mapping[str, Effect | str] | None = None,
    ) -> MCPServer:
        """A server started as ``command args...``, speaking MCP on its stdin and stdout.

        Args:
            name: The server's name.
            command: The executable.
            args: Its arguments.
            env: Environment variables set for it.
            cwd: Its working folder.
            timeout: Seconds per tool call; None for no limit.
            prefix: Put before its tool names.
            effects: What a call of each named tool does, over its annotations.
        """
        return cls(
            name=name,
            command=command,
            args=tuple(args),
            env=dict(env or {}),
            cwd=str(cwd) if cwd is not None else None,
            timeout=timeout,
            prefix=prefix,
            effects=dict(effects or {}),  # type: ignore[arg-type]  # values checked on init
        )

    @classmethod
    def http(
        cls,
        name: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = 60.0,
        prefix: str | None = None,
        effects: Mapping[str, Effect | str] | None = None,
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url``.

        Args:
            name: The server's name.
            url: Its endpoint (often ending in ``/mcp``).
            headers: HTTP headers sent with every request.
            timeout: Seconds per tool call; None for no limit.
            prefix: Put before its tool names.
            effects: What a call of each named tool does, over its annotations.
        """
        return cls(
            name=name,
            url=url,
            headers=dict(headers or {}),
            timeout=timeout,
            prefix=prefix,
            effects=dict(effects or {}),  # type: ignore[arg-type]  # values checked on init
        )

    def to_config(self) -> dict[str, Any]:
        """This server as an entry of the ``mcpServers`` format (`parse_mcp_servers` reads it)."""
        entry: dict[str, Any]
        if self.command is not None:
            entry = {"command": self.command, "args": list(self.args)}
            if self.env:
                entry["env"] = dict(self.env)
            if self.cwd is not None:
                entry["cwd"] = self.cwd
        else:
            entry = {"type": "http", "url": self.url}
            if self.headers:
                entry["headers"] = dict(self.headers)
        if self.timeout != 60.0:
            entry["timeout"] = self.timeout
        if self.startup_timeout != 30.0:
            entry["startup_timeout"] = self.startup_timeout
        if self.prefix is not None:
            entry["prefix"] = self.prefix
        if self.effects:
            entry["effects"] = {name: effect.value for name, effect in self.effects.items()}
        return entry


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise UserError(f"{what} must be a list of strings")
    return tuple(value)


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UserError(f"{what} must be an object of strings")
    result: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise UserError(f"{what}.{key} must be a string")
        result[str(key)] = str(item)
    return result


def _effects(value: Any, what: str) -> dict[str, Effect]:
    """Tool names and their effects, from an `Effect` or its value (``"write"``) each."""
    if not isinstance(value, Mapping):
        raise UserError(f"{what} must be an object of tool names and effects")
    effects: dict[str, Effect] = {}
    for name, effect in value.items():
        try:
            effects[str(name)] = Effect(effect)
        except ValueError:
            raise UserError(
                f"{what}.{name} must be one of {_EFFECT_NAMES}, got {effect!r}"
            ) from None
    return effects


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{what} must be a number of seconds")
    return float(value)


def _disabled(name: str, entry: Any, origin: str) -> bool:
    """Whether an entry says ``"disabled": true`` (Claude Desktop's "do not start it")."""
    if not isinstance(entry, dict) or "disabled" not in entry:
        return False
    if not isinstance(entry["disabled"], bool):
        raise UserError(f"{origin}: mcpServers.{name}.disabled must be true or false")
    return entry["disabled"]


def _server(name: str, entry: Any, origin: str) -> MCPServer:
    where = f"{origin}: mcpServers.{name}"
    if not isinstance(entry, dict):
        raise UserError(f"{where} must be an object")
    kind = entry.get("type")
    if kind == "sse":
        raise UserError(f"{where}: the sse transport is not supported; use streamable http")
    if kind is not None and kind != "stdio" and kind not in _HTTP_TYPES:
        raise UserError(f"{where}: unknown type {kind!r} (use stdio or http)")
    options: dict[str, Any] = {
        "timeout": _seconds(entry.get("timeout", 60.0), f"{where}.timeout"),
        "prefix": entry.get("prefix"),
        "effects": _effects(entry.get("effects", {}), f"{where}.effects"),
    }
    if "startup_timeout" in entry:
        options["startup_timeout"] = _seconds(entry["startup_timeout"], f"{where}.startup_timeout")
    if options["prefix"] is not None and not isinstance(options["prefix"], str):
        raise UserError(f"{where}.prefix must be a string")
    try:
        if kind in _HTTP_TYPES or (kind is None and "url" in entry and "command" not in entry):
            url = entry.get("url")
            if not isinstance(url, str):
                raise UserError(f"{where} needs a url (a string)")
            headers = _string_map(entry.get("headers", {}), f"{where}.headers")
            return MCPServer(name=name, url=url, headers=headers, **options)
        command = entry.get("command")
        if not isinstance(command, str):
            raise UserError(f"{where} needs a command (a string) or a url")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise UserError(f"{where}.cwd must be a string")
        return MCPServer(
            name=name,
            command=command,
            args=_strings(entry.get("args", []), f"{where}.args"),
            env=_string_map(entry.get("env", {}), f"{where}.env"),
            cwd=cwd,
            **options,
        )
    except UserError as exc:
        message = str(exc)
        raise UserError(message if message.startswith(origin) else f"{origin}: {message}") from None


def parse_mcp_servers(data: Any, *, origin: str = "MCP configuration") -> list[MCPServer]:
    """The servers of an ``mcpServers`` document (the whole file, or just the mapping).

    Entries with ``"disabled": true`` are left out.

    Args:
        data: ``{"mcpServers": {NAME: ENTRY, ...}}`` or ``{NAME: ENTRY, ...}``.
        origin: Where it comes from, for error messages (a file name).

    Raises:
        UserError: For anything that is not a valid server entry, naming it.
    """
    if isinstance(data, dict) and "mcpServers" in data:
        data = data["mcpServers"]
    if not isinstance(data, dict):
        raise UserError(f"{origin}: expected an object with an mcpServers object")
    return [
        _server(str(name), entry, origin)
        for name, entry in data.items()
        if not _disabled(str(name), entry, origin)
    ]


def load_mcp_config(path: str | Path) -> list[MCPServer]:
    """The servers of an ``mcpServers`` JSON file (Claude Desktop's or Claude Code's).

    Raises:
        UserError: If the file cannot be read, is not JSON, or has an invalid entry.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"MCP configuration file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise UserError(f"cannot read MCP configuration {path}: {reason}") from None
    try:
        data = load_json(text)
    except UnusableJson as exc:
        raise UserError(f"{path}: {exc}") from None
    if not isinstance(data, dict) or "mcpServers" not in data:
        raise UserError(f"{path}: no mcpServers object")
    servers = parse_mcp_servers(data, origin=str(path))
    if not servers:
        entries = data["mcpServers"]
        if isinstance(entries, dict) and entries:
            raise UserError(f"{path}: every server in mcpServers is disabled")
        raise UserError(f"{path}: mcpServers is empty")
    return servers


def mcp_config(servers: Sequence[MCPServer]) -> dict[str, dict[str, Any]]:
    """The ``mcpServers`` mapping of ``servers`` (what an `AgentSpec` stores).

    Raises:
        UserError: If two servers have the same name.
    """
    config: dict[str, dict[str, Any]] = {}
    for server in servers:
        if server.name in config:
            raise UserError(f"two MCP servers are named {server.name!r}")
        config[server.name] = server.to_config()
    return config


def _reference(name: str, value: str) -> str:
    """How an ``env`` value is stored: a reference as written, a literal as ``${NAME}``."""
    if _VARIABLE.search(value):
        return value
    return "${" + (re.sub(r"[^A-Za-z0-9_]", "_", name) or "_") + "}"


def stored_mcp_config(config: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """An ``mcpServers`` mapping as a run's agent spec stores it: no literal ``env`` value.

    Each literal value becomes a reference to the variable of the same name
    (``"TOKEN": "abc"`` is stored as ``"TOKEN": "${TOKEN}"``; characters a variable name
    cannot have become ``_``), so that a secret given in a configuration file is not
    written to the run store. A resumed run reads those variables from its environment.
    """
    stored: dict[str, dict[str, Any]] = {}
    for name, entry in config.items():
        stored[name] = dict(entry)
        env = entry.get("env")
        if isinstance(env, Mapping):
            stored[name]["env"] = {
                key: _reference(str(key), str(value)) for key, value in env.items()
            }
    return stored


def _derived_name(words: Sequence[str]) -> str:
    """A short name for a server from its command line (``uvx mcp-server-time`` -> that)."""
    head = Path(words[0]).name
    rest = list(words[1:])
    candidate = head
    if head in _RUNNERS or re.fullmatch(r"python[0-9.]*", head):
        while rest:
            word = rest.pop(0)
            if word == "-m" and rest:
                candidate = rest[0]
                break
            if word in ("run", "exec", "x", "tool"):
                continue
            if not word.startswith("-"):
                candidate = Path(word).name
                break
    candidate = re.sub(r"@[^/@]*$", "", candidate.rsplit("/", 1)[-1]) or head
    candidate = re.sub(r"\.(py|js|mjs|ts|sh)$", "", candidate)
    return re.sub(r"[^A-Za-z0-9_.-]", "-", candidate)[:64] or "mcp"


def server_from_command(line: str, *, taken: Sequence[str] = ()) -> MCPServer:
    """A stdio server from one command line (``convergent run --mcp "uvx mcp-server-time"``).

    Its name comes from the command (``mcp-server-time``; ``python -m pkg`` gives
    ``pkg``), with ``-2``, ``-3``... added when ``taken`` already has it.

    Raises:
        UserError: For an empty or badly quoted command line.
    """
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UserError(f"--mcp {line!r}: {exc}") from None
    if not words:
        raise UserError("--mcp needs a command")
    name = base = _derived_name(words)
    number = 1
    while name in taken:
        number += 1
        name = f"{base}-{number}"
    return MCPServer.stdio(name, words[0], words[1:])


def declare_effects(servers: Sequence[MCPServer], declarations: Sequence[str]) -> list[MCPServer]:
    """``servers`` with each ``[SERVER:]TOOL=EFFECT`` declaration added to its server's effects.

    A declaration without ``SERVER`` is for the only server given. A declaration
    overrides what the server's ``effects`` said of the tool; whether the server
    offers the tool is checked when it starts, as for its own ``effects``.

    Raises:
        UserError: For a malformed declaration, an unknown effect or server, or a
            declaration without a server when there are several.
    """
    by_name = {server.name: dict(server.effects) for server in servers}
    for text in declarations:
        target, sep, value = text.partition("=")
        named, colon, tool = target.rpartition(":")
        if not sep or not tool.strip():
            raise UserError(f"--mcp-effect must be [SERVER:]TOOL=EFFECT, got {text!r}")
        try:
            effect = Effect(value.strip())
        except ValueError:
            raise UserError(
                f"--mcp-effect {text!r}: the effect must be one of {_EFFECT_NAMES}"
            ) from None
        if colon:
            if named not in by_name:
                given = ", ".join(by_name) or "none"
                raise UserError(f"--mcp-effect {text!r}: no MCP server {named!r} (given: {given})")
        elif len(by_name) == 1:
            (named,) = by_name
        else:
            given = ", ".join(by_name) or "none"
            raise UserError(
                f"--mcp-effect {text!r}: name its server, SERVER:TOOL=EFFECT (given: {given})"
            )
        by_name[named][tool.strip()] = effect
    return [replace(server, effects=by_name[server.name]) for server in servers]
